# Shared by the tests that build hosts out of network namespaces
# (netns_test.sh, multinode_netns_test.sh, chaos_test.sh). Sourced, not run;
# it only defines functions, so a test may source it before its first exit.

# netns_remove_all: the caller's cleanup, on every exit: kills (SIGKILL)
# every process still running in a namespace of the caller's `made` array,
# whoever started it ($! of `cmd &` is often a subshell, not the process),
# then deletes the namespaces.
netns_remove_all() {
  local ns p
  for ns in "${made[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  done
  for ns in "${made[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}

# netns_join SCHED_NS NS IFACE NET: makes namespace NS (appended to the
# caller's `made` array, which its cleanup deletes) and joins it to SCHED_NS
# by a veth pair: IFACE in SCHED_NS with NET.1/24, eth0 in NS with NET.2/24.
# Both ends and NS's loopback are brought up.
netns_join() {
  local sched=$1 ns=$2 iface=$3 net=$4
  ip netns add "$ns"
  made+=("$ns")
  ip link add "$iface" netns "$sched" type veth peer name eth0 netns "$ns"
  ip -n "$sched" addr add "$net.1/24" dev "$iface"
  ip -n "$sched" link set "$iface" up
  ip -n "$ns" addr add "$net.2/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
}
