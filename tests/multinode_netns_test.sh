#!/usr/bin/env bash
# Multi-node trials across real network boundaries (issue 25): the scheduler
# in one network namespace, two one-slot agents in two others, each joined to
# the scheduler's by a veth pair (10.79.N.0/24). The scheduler's namespace
# forwards between the two links and each agent's default route goes
# through it, so the agents' hosts reach each other as two machines on a
# routed network would; each agent advertises its own eth0 address
# (--advertise-addr), and the ranks of a trial meet at node 0's.
#
# usage: tests/multinode_netns_test.sh MODE SWEPT SWEPT_TRAIN SOURCE_DIR
#   train   two 2-node trials of swept-train (synthetic MNIST-shaped data)
#   ddp     a 2-node trial of tests/ddp_trial.py (PyTorch DDP over Gloo)
#   kill      a 2-node DDP trial whose node-1 agent is SIGKILLed mid-trial,
#             with the default heartbeats: the other rank ends, the attempt
#             is lost (not failed) and the trial is retried and completed
#             once the agent is back
#   rankfail  2-node DDP trials whose rank 1 exits 1: at its third step
#             (rank 0's collective fails too), and before joining the group
#             (rank 0 waits in the rendezvous, unaware, until the scheduler
#             stops it); the trials fail on their first attempt, not retried
# Each mode checks that every trial's two nodes are on the two hosts, each
# rank's logs on its own host, and no trial process left on either host.
# Needs root and iproute2. Exit 77 (CTest: skipped) only when namespaces
# cannot be created; without Debian's python3-torch the ddp, kill and rankfail modes
# fail, saying to install it. Namespaces and processes are removed on every
# exit, failures included.
set -euo pipefail
mode=$1
swept=$2
train=$3
src=$4
py=/usr/bin/python3  # Debian's python3-torch is for Debian's python, not another on PATH
tag=$$
ns_s=swmn-s-$tag ns_a1=swmn-a1-$tag ns_a2=swmn-a2-$tag
tmp=$(mktemp -d)
pids=()
made=()

cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  netns_remove_all
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "FAIL ($mode): $*" >&2
  for f in "$tmp"/*.log; do echo "== $f" >&2; tail -20 "$f" >&2; done
  for f in $(find "$tmp" -name 'rank-*.log' 2>/dev/null | sort); do echo "== $f" >&2; tail -8 "$f" >&2; done
  exit 1
}
source "$(dirname "$0")/shell_lib.sh"  # wait_for, sql
source "$(dirname "$0")/netns_lib.sh"   # netns_remove_all (cleanup), netns_join

case $mode in
  train | ddp | kill | rankfail) ;;
  *) echo "usage: $0 train|ddp|kill|rankfail SWEPT SWEPT_TRAIN SOURCE_DIR" >&2; exit 2 ;;
esac
if [ "$mode" != train ] && ! "$py" -c 'import torch.distributed, torch.nn.parallel' 2>"$tmp/torch.err"; then
  echo "FAIL ($mode): $py cannot import torch ($(tail -1 "$tmp/torch.err")): install Debian's python3-torch" \
       "(apt-get install python3-torch), the PyTorch of Debian's /usr/bin/python3" >&2
  exit 1
fi
if ! command -v ip >/dev/null || ! ip netns add "$ns_s" 2>"$tmp/netns.err"; then
  echo "SKIP: this machine refuses to create network namespaces ($(cat "$tmp/netns.err" 2>/dev/null || echo 'no ip command'));" \
       "run as root with iproute2 to test across namespaces" >&2
  exit 77
fi
made+=("$ns_s")
ip -n "$ns_s" link set lo up
netns_join "$ns_s" "$ns_a1" "mn1-$tag" 10.79.1
netns_join "$ns_s" "$ns_a2" "mn2-$tag" 10.79.2
# host-1 and host-2 reach each other through the scheduler's namespace.
ip netns exec "$ns_s" sysctl -qw net.ipv4.ip_forward=1
ip -n "$ns_a1" route add default via 10.79.1.1
ip -n "$ns_a2" route add default via 10.79.2.1

cd "$tmp"
for k in scheduler a1 a2 client; do "$swept" keygen --out "$tmp/$k" >/dev/null; done
mkdir -p auth/agents auth/clients
cp a1.pub a2.pub auth/agents/
cp client.pub auth/clients/
keyed() { echo --key "$tmp/$1.key" --scheduler-pub "$tmp/scheduler.pub"; }

# Heartbeats: 100 ms to keep the test short, but the kill mode keeps the
# defaults (1 s, liveness 5): a lost agent is then noticed seconds after the
# surviving rank's collective has failed on the closed connection, as on a
# real cluster, and the attempt must still be lost and retried, not failed.
hb=(--heartbeat-ms 100 --liveness 5)
[ "$mode" = kill ] && hb=(--heartbeat-ms 1000 --liveness 5)
ip netns exec "$ns_s" "$swept" scheduler --bind 'tcp://0.0.0.0:*' --db "$tmp/swept.db" "${hb[@]}" \
  --endpoint-file "$tmp/ep" --key scheduler.key --authorized auth >"$tmp/scheduler.log" 2>&1 &
pids+=($!)
wait_for 20 '[ -s "$tmp/ep" ]' || fail "the scheduler did not start"
port=$(sed 's/.*://' "$tmp/ep")

# start_agent N: host-N's agent, one slot, advertising its own eth0 address.
# `ip netns exec` execs swept, so $! is the agent itself (the kill mode
# SIGKILLs it). Rendezvous ports: the default range, free in a namespace of
# its own.
agent_pid=()
start_agent() {
  local n=$1 ns=$ns_a1
  [ "$n" = 2 ] && ns=$ns_a2
  # shellcheck disable=SC2046
  ip netns exec "$ns" "$swept" agent --scheduler "tcp://10.79.$n.1:$port" --name "host-$n" --gpus none --slots 1 \
    --workdir "$tmp/work-host-$n" --advertise-addr "10.79.$n.2" "${hb[@]}" \
    --reconnect-min-ms 100 --reconnect-max-ms 400 --stop-grace-ms 500 $(keyed "a$n") >>"$tmp/agent-host-$n.log" 2>&1 &
  agent_pid[$n]=$!
  pids+=($!)
}
start_agent 1
start_agent 2
wait_for 30 '[ "$(sql "SELECT COUNT(*) FROM agents WHERE state='"'alive'"'")" = 2 ]' ||
  fail "the agents did not register: $(sql "SELECT name, state FROM agents" 2>&1)"

# submit FILE: prints the new sweep's id.
submit() {
  # shellcheck disable=SC2046
  ip netns exec "$ns_s" "$swept" submit "$1" --scheduler "tcp://127.0.0.1:$port" $(keyed client) ||
    fail "could not submit $1"
}
# wait_sweep ID SECONDS: until the sweep has ended (any way), at most SECONDS.
wait_sweep() {
  # shellcheck disable=SC2046
  timeout "$2" ip netns exec "$ns_s" "$swept" wait "$1" --scheduler "tcp://127.0.0.1:$port" --poll-ms 100 \
    $(keyed client) >"$tmp/wait-$1.log" 2>&1 || true
  [ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$1 AND state IN ('queued', 'running')")" = 0 ] ||
    fail "sweep $1 did not end within $2 s: $(sql "SELECT id, state, attempts, reason FROM trials WHERE sweep_id=$1")"
}
# trial_processes NS: the processes in host NS that are not the agent's own
# (the agent is `swept`, its lease keeper `swept-keeper`; a trial here is python3,
# swept-train or sh, and nothing else runs in a namespace of its own).
trial_processes() {
  local p
  for p in $(ip netns pids "$1"); do
    case $(cat "/proc/$p/comm" 2>/dev/null || echo gone) in
      swept | swept-keeper | gone) ;;
      *) echo "$p" ;;
    esac
  done
}
# check_nodes TRIAL: its two nodes are host-1 and host-2 (either order) in
# the store, each rank's logs are in the trial's directory on its node's
# host and not on the other, and only node 0's rank printed metric lines.
# check_nodes TRIAL partial: rank 0 may have left no log (it was stopped
# before it printed). Sets d0 and d1, the trial's directories on node 0's
# and node 1's hosts.
check_nodes() {
  local t=$1 sweep n0 n1
  sweep=$(sql "SELECT sweep_id FROM trials WHERE id=$t")
  n0=$(sql "SELECT json_extract(nodes, '\$[0].agent') FROM trials WHERE id=$t")
  n1=$(sql "SELECT json_extract(nodes, '\$[1].agent') FROM trials WHERE id=$t")
  [ "$(sql "SELECT json_array_length(nodes) FROM trials WHERE id=$t")" = 2 ] ||
    fail "trial $t: expected 2 nodes, the store has: $(sql "SELECT nodes FROM trials WHERE id=$t")"
  [ "$n0 $n1" = "host-1 host-2" ] || [ "$n0 $n1" = "host-2 host-1" ] ||
    fail "trial $t: nodes '$n0' and '$n1', not one on each host"
  [ "$(sql "SELECT agent FROM trials WHERE id=$t")" = "$n0" ] || fail "trial $t: trials.agent is not node 0's"
  d0=$tmp/work-$n0/sweep-$sweep/trial-$t d1=$tmp/work-$n1/sweep-$sweep/trial-$t
  # Both ranks log to stderr; rank 1 prints nothing on stdout (an empty
  # stream leaves no file, and so does a rank stopped before it printed:
  # with a second argument, only rank 1's log is required).
  local required=("$d0/rank-0.stderr.log" "$d1/rank-1.stderr.log")
  [ -n "${2:-}" ] && required=("$d1/rank-1.stderr.log")
  for f in "${required[@]}"; do
    [ -f "$f" ] || fail "trial $t: no $f ($(find "$tmp"/work-* -name 'rank-*' | tr '\n' ' '))"
  done
  if [ -e "$d0/rank-1.stderr.log" ] || [ -e "$d1/rank-0.stderr.log" ]; then fail "trial $t: a rank's log is on the wrong host"; fi
  if grep -qs '"loss"' "$d1/rank-1.stdout.log"; then fail "trial $t: rank 1 printed metric lines"; fi
}

case $mode in
train)
  # A learnable stand-in for MNIST (class k lights row 2k+4), so the test
  # needs no download; the trainer's own tests hold its numbers on MNIST.
  mkdir -p "$tmp/mnist"
  "$py" - "$tmp/mnist" <<'EOF'
import random, struct, sys
def write(path, dims, data):
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 8, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data))
rng = random.Random(7)
for name, n in (("train", 1200), ("t10k", 200)):
    labels = [rng.randrange(10) for _ in range(n)]
    images = bytearray(rng.randrange(60) for _ in range(n * 784))
    for i, k in enumerate(labels):
        for x in range(4, 24):
            images[i * 784 + (2 * k + 4) * 28 + x] = 200 + rng.randrange(56)
    write(f"{sys.argv[1]}/{name}-images-idx3-ubyte", (n, 28, 28), images)
    write(f"{sys.argv[1]}/{name}-labels-idx1-ubyte", (n,), labels)
EOF
  cat >"$tmp/train.json" <<EOF
{"method": "grid", "metric": {"name": "loss", "goal": "minimize"}, "resources": {"nodes": 2},
 "command": ["$train", "\${args}"],
 "parameters": {"data": {"value": "$tmp/mnist"}, "max_steps": {"value": 30}, "batch_size": {"value": 64},
                "log_every": {"value": 5}, "threads": {"value": 1}, "lr": {"values": [0.05, 0.1]}}}
EOF
  sweep=$(submit train.json)
  wait_sweep "$sweep" 90
  [ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$sweep AND state='completed'")" = 2 ] ||
    fail "not both swept-train trials completed: $(sql "SELECT id, state, reason FROM trials WHERE sweep_id=$sweep")"
  for t in $(sql "SELECT id FROM trials WHERE sweep_id=$sweep"); do
    check_nodes "$t"
    [ "$(grep -c '"loss"' "$d0/rank-0.stdout.log")" -ge 1 ] || fail "trial $t: rank 0 printed no loss line"
    [ "$(sql "SELECT COUNT(*) FROM metrics WHERE trial_id=$t AND name='loss'")" -ge 1 ] ||
      fail "trial $t: no loss in the store"
  done
  ;;
ddp)
  cat >"$tmp/ddp.json" <<EOF
{"method": "grid", "metric": {"name": "loss", "goal": "minimize"}, "resources": {"nodes": 2},
 "command": ["$py", "$src/tests/ddp_trial.py", "\${args}"],
 "parameters": {"steps": {"value": 10}}}
EOF
  sweep=$(submit ddp.json)
  wait_sweep "$sweep" 100
  t=$(sql "SELECT id FROM trials WHERE sweep_id=$sweep")
  [ "$(sql "SELECT state FROM trials WHERE id=$t")" = completed ] ||
    fail "the DDP trial did not complete: $(sql "SELECT state, reason FROM trials WHERE id=$t")"
  check_nodes "$t"
  n0=$(sql "SELECT agent FROM trials WHERE id=$t")
  # Every rank was told node 0's advertised address and its own interface,
  # joined the group there, and ended with the replicas equal.
  for log in "$d0/rank-0.stderr.log" "$d1/rank-1.stderr.log"; do
    grep -q "\"MASTER_ADDR\": \"10.79.${n0#host-}.2\"" "$log" || fail "$log: MASTER_ADDR is not $n0's address"
    grep -q '"GLOO_SOCKET_IFNAME": "eth0"' "$log" || fail "$log: GLOO_SOCKET_IFNAME is not eth0"
    grep -q '"WORLD_SIZE": "2"' "$log" || fail "$log: WORLD_SIZE is not 2"
    grep -q 'done, replicas equal' "$log" || fail "$log: the rank did not finish with equal replicas"
  done
  [ "$(grep -c '"loss"' "$d0/rank-0.stdout.log")" = 10 ] || fail "rank 0 did not print 10 loss lines"
  [ "$(sql "SELECT COUNT(*) FROM metrics WHERE trial_id=$t AND name='loss'")" = 10 ] || fail "the store has not 10 losses"
  ;;
kill)
  # Node 1's agent SIGKILLed while the trial runs (its ranks die with it,
  # PR_SET_PDEATHSIG): the rank on the other host ends (its collective fails
  # on the closed connection, or the scheduler stops it), the attempt is
  # lost, not failed, since its cause is the lost node, and the trial runs
  # again, to completion, once the killed agent is back.
  cat >"$tmp/kill.json" <<EOF
{"method": "grid", "metric": {"name": "loss", "goal": "minimize"}, "resources": {"nodes": 2}, "max_retries": 1,
 "command": ["$py", "$src/tests/ddp_trial.py", "\${args}"],
 "parameters": {"steps": {"value": 40}, "step_ms": {"value": 250}}}
EOF
  sweep=$(submit kill.json)
  t=$(sql "SELECT id FROM trials WHERE sweep_id=$sweep")
  wait_for 60 '[ "$(sql "SELECT COUNT(*) FROM metrics WHERE trial_id=$t")" -ge 2 ]' ||
    fail "the DDP trial did not get going: $(sql "SELECT state, reason FROM trials WHERE id=$t")"
  victim=$(sql "SELECT json_extract(nodes, '\$[1].agent') FROM trials WHERE id=$t")
  survivor=host-1 victim_ns=$ns_a2 survivor_ns=$ns_a1
  [ "$victim" = host-1 ] && survivor=host-2 victim_ns=$ns_a1 survivor_ns=$ns_a2
  [ -n "$(trial_processes "$survivor_ns")" ] || fail "no rank runs on $survivor"
  kill -9 "${agent_pid[${victim#host-}]}"
  # The bound is a deadline on the event (liveness 5 x 1 s, then 500 ms of
  # grace, on a loaded machine), not a measurement.
  wait_for 20 '[ -z "$(trial_processes "$survivor_ns")" ]' ||
    fail "the rank on $survivor still runs after $victim was killed: $(ps -o pid,args -p "$(trial_processes "$survivor_ns" | paste -sd,)")"
  wait_for 20 '[ -z "$(trial_processes "$victim_ns")" ]' || fail "the rank on $victim outlived its agent"
  wait_for 20 '[ "$(sql "SELECT state FROM attempts WHERE trial_id=$t AND attempt=1")" = lost ]' ||
    fail "attempt 1 is not lost: $(sql "SELECT state, reason FROM attempts WHERE trial_id=$t")"
  start_agent "${victim#host-}"
  wait_sweep "$sweep" 100
  [ "$(sql "SELECT state || ' ' || attempts FROM trials WHERE id=$t")" = "completed 2" ] ||
    fail "the trial did not complete on its second attempt: $(sql "SELECT attempt, state, reason FROM attempts WHERE trial_id=$t")"
  check_nodes "$t"
  ;;
rankfail)
  # Rank 1 exits 1 at its third step (rank 0's next collective fails on the
  # closed connection), or before joining the group (rank 0 waits in the
  # rendezvous for 120 s unless the scheduler stops it): either way the
  # attempt fails as one, on node 1's exit, and a failure is not retried.
  cat >"$tmp/fail.json" <<EOF
{"method": "grid", "metric": {"name": "loss", "goal": "minimize"}, "resources": {"nodes": 2}, "max_retries": 1,
 "command": ["$py", "$src/tests/ddp_trial.py", "\${args}"],
 "parameters": {"steps": {"value": 400}, "step_ms": {"value": 250}, "fail_rank": {"value": 1},
                "fail_step": {"values": [3, 0]}, "timeout_s": {"value": 120}}}
EOF
  sweep=$(submit fail.json)
  wait_sweep "$sweep" 80
  for t in $(sql "SELECT id FROM trials WHERE sweep_id=$sweep"); do
    [ "$(sql "SELECT state || ' ' || attempts FROM trials WHERE id=$t")" = "failed 1" ] ||
      fail "trial $t, whose rank 1 exits 1, did not fail on its first attempt: $(sql "SELECT attempt, state, reason FROM attempts WHERE trial_id=$t")"
    check_nodes "$t" partial
    grep -q 'rank 1 fails .*as asked' "$d1/rank-1.stderr.log" || fail "trial $t: rank 1 did not fail as asked"
    if grep -qs 'done' "$d0/rank-0.stderr.log"; then fail "trial $t: rank 0 ran to its end"; fi
    sql "SELECT reason FROM trials WHERE id=$t" | grep -q '^node 1 ' ||
      fail "trial $t: the reason does not name node 1: $(sql "SELECT reason FROM trials WHERE id=$t")"
  done
  ;;
esac

# Nothing of any trial is left on either host.
for ns in "$ns_a1" "$ns_a2"; do
  wait_for 20 '[ -z "$(trial_processes "$ns")" ]' || fail "processes left in $ns: $(trial_processes "$ns" | tr '\n' ' ')"
done
echo "PASS ($mode): 2-node trials across two namespaced hosts, one rank on each"
