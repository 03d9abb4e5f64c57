# Helpers shared by the shell tests that run swept as real processes
# (chaos_test.sh, netns_test.sh, slurm_test.sh, the pbt, gang and restart
# tests). Sourced, not run.

# wait_for SECONDS 'CONDITION': polls every 50 ms until the shell condition
# holds; the deadline only bounds a hang (the tests never sleep for an event).
# Returns 1 when the deadline passes first.
wait_for() {
  local deadline=$((SECONDS + $1))
  until eval "$2"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

# sql 'QUERY': runs QUERY on the test's database, $tmp/swept.db, waiting up
# to 5 s for a writer's lock (the scheduler writes while the test reads).
sql() { sqlite3 -cmd ".timeout 5000" "$tmp/swept.db" "$1"; }

# process_test_setup: what a test of real processes starts
# with: $tmp, a fresh folder removed at exit; $pids, the processes it starts,
# SIGKILLed at exit, then cleanup_more if the test defines it (namespaces,
# say); fail MESSAGE, which prints the tail of every log under
# $tmp and the trials' ledger ($tmp/ledger, if any), then exits 1 (unless the
# test defined a fail of its own before sourcing this file).
process_test_setup() {
  tmp=$(mktemp -d)
  pids=()
  trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
        if declare -F cleanup_more >/dev/null; then cleanup_more; fi
        rm -rf "$tmp"' EXIT
}
declare -F fail >/dev/null || fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do echo "== $f" >&2; tail -30 "$f" >&2; done
  [ -f "$tmp/ledger" ] && { echo "== ledger" >&2; sort -k5 "$tmp/ledger" >&2; }
  exit 1
}

# start_scheduler BIND: a scheduler on $tmp/swept.db with 100 ms heartbeats
# (liveness 5), its log appended to $tmp/scheduler.log, its pid in
# $scheduler_pid and $pids. The first start binds tcp://127.0.0.1:* and sets
# $ep from the endpoint file; a restart binds "$ep" again (the restart tests'
# `kill -9 "$scheduler_pid"; start_scheduler "$ep"`).
start_scheduler() {
  "$swept" scheduler --bind "$1" --db "$tmp/swept.db" --heartbeat-ms 100 --liveness 5 \
    --endpoint-file "$tmp/ep" >>"$tmp/scheduler.log" 2>&1 &
  scheduler_pid=$!
  pids+=($!)
  if [ -z "${ep:-}" ]; then
    wait_for 20 '[ -s "$tmp/ep" ]' || fail "the scheduler did not start"
    ep=$(cat "$tmp/ep")
  fi
}

# start_gang_agents PREFIX COUNT: COUNT two-slot agents PREFIX1..PREFIXCOUNT
# on $ep (no GPUs, 100 ms heartbeats, quick reconnects, 500 ms stop grace),
# each with 10 rendezvous ports of its own counted from one the kernel found
# free; returns once all COUNT are alive in the store.
start_gang_agents() {
  local prefix=$1 count=$2 n lo base
  base=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(min(s.getsockname()[1], 65000))')
  for n in $(seq 1 "$count"); do
    lo=$((base + 10 * (n - 1)))
    lo=$((lo > 65525 ? 1024 + n * 10 : lo))
    "$swept" agent --scheduler "$ep" --name "$prefix$n" --gpus none --slots 2 --workdir "$tmp/work-$prefix$n" \
      --rendezvous-ports "$lo-$((lo + 9))" --heartbeat-ms 100 --liveness 5 --reconnect-min-ms 100 \
      --reconnect-max-ms 400 --stop-grace-ms 500 >"$tmp/agent-$prefix$n.log" 2>&1 &
    pids+=($!)
  done
  wait_for 20 '[ "$(sql "SELECT COUNT(*) FROM agents WHERE state='"'alive'"'")" = "'"$count"'" ]' ||
    fail "the agents did not register: $(sql "SELECT name, state FROM agents" 2>&1)"
}
