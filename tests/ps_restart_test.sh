#!/usr/bin/env bash
# Parameter servers through a scheduler crash (issue 30): a scheduler and
# six agents on loopback (real processes) run three trials with servers
# that, as TensorFlow's, never exit by themselves:
#  own     resources {nodes: 2, ps: 1, ps_nodes: true}: workers on two
#          agents, the server on a third;
#  shared  resources {nodes: 2, ps: 2}: a worker and a server on each of two
#          agents;
#  fail    resources {nodes: 2, ps: 1}: its server is SIGKILLed after the
#          restart, while its workers still run.
# Once every process runs, the scheduler is SIGKILLed; the workers of own and
# shared are then let go and exit 0 while it is down (their nodes' ends reach
# the restarted scheduler in REGISTER's finished list, or as HEARTBEAT
# workers_ended for a node whose server still runs). The scheduler starts
# again on the same database and port; it must adopt each trial whole, stop
# the servers once the workers have ended and complete own and shared in
# the attempt they ran before it, end fail's attempt (failed) when its
# server dies, and leave no process of any of them. Before schema 9 kept a gang's processes,
# the restarted scheduler forgot the servers and the trials never ended.
#
# Waits: deadline loops only (wait_for). usage: tests/ps_restart_test.sh SWEPT
# Needs the binary, sqlite3 and python3.
set -euo pipefail
swept=$1
source "$(dirname "$0")/shell_lib.sh"  # wait_for, sql, process_test_setup, fail
process_test_setup

cd "$tmp"
start_scheduler 'tcp://127.0.0.1:*'

# Each agent a range of 10 ports from one the kernel found free (the fake
# servers bind none; node 0's agent checks its rendezvous port).
start_gang_agents a 6

# Every process records its pid as procs/TRIAL-ATTEMPT-ROLE-INDEX (an
# attempt whose node 0 found its rendezvous port taken by another program is
# requeued at no cost, and its stopped processes' files stay). A worker
# waits (bounded) for $tmp/release-LAYOUT, prints a metric line from worker 0
# and exits 0; a server waits to be stopped.
mkdir -p "$tmp/procs"
cat >"$tmp/role.py" <<'PY'
import json, os, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
name = "%s-%s-%s-%d" % (os.environ["SWEPT_TRIAL_ID"], os.environ["SWEPT_ATTEMPT"], task["type"], task["index"])
with open(os.path.join(sys.argv[1], "procs", name), "w") as f:
    f.write(str(os.getpid()))
if task["type"] == "ps":
    time.sleep(600)
    sys.exit(3)
deadline = time.time() + 120
while not os.path.exists(os.path.join(sys.argv[1], "release-" + sys.argv[2])):
    if time.time() > deadline:
        sys.exit(4)
    time.sleep(0.02)
if task["index"] == 0:
    print(json.dumps({"done": 1}), flush=True)
PY
for layout in own shared fail; do
  case $layout in
    own) resources='{"nodes": 2, "ps": 1, "ps_nodes": true}' ;;
    shared) resources='{"nodes": 2, "ps": 2}' ;;
    fail) resources='{"nodes": 2, "ps": 1}' ;;
  esac
  cat >"$tmp/$layout.json" <<EOF
{"method": "grid", "command": ["/usr/bin/python3", "$tmp/role.py", "$tmp", "$layout"], "parameters": {"layout": {"value": "$layout"}},
 "resources": $resources, "max_retries": 0}
EOF
  "$swept" submit "$layout.json" --scheduler "$ep" >/dev/null || fail "could not submit $layout.json"
done

# The three trials run (node 0 started: no requeue for a port after that),
# and every process of their attempts: 2 workers and 1 server, 2 and 2, 2 and 1.
wait_for 60 '[ "$(sql "SELECT COUNT(*) FROM trials WHERE state='"'running'"' AND started_at IS NOT NULL")" = 3 ]' ||
  fail "the trials are not on record as started: $(sql "SELECT id, state, attempts, started_at FROM trials")"
current=$(sql "SELECT id || '-' || attempts FROM trials ORDER BY id")
running_now() {
  local n=0 c
  for c in $current; do n=$((n + $(ls "$tmp/procs" | grep -c "^$c-" || true))); done
  echo "$n"
}
wait_for 60 '[ "$(running_now)" = 10 ]' || fail "the trials' processes did not all start: $(ls "$tmp/procs")"
kill -9 "$scheduler_pid"
wait "$scheduler_pid" 2>/dev/null || true

# own's and shared's workers end while no scheduler runs; the servers go on.
touch "$tmp/release-own" "$tmp/release-shared"
fail_trial=$(sql "SELECT t.id FROM trials t JOIN sweeps s ON s.id = t.sweep_id WHERE s.spec LIKE '%\"fail\"%'")
[ -n "$fail_trial" ] || fail "no trial of fail.json"
fail_current=$(sql "SELECT id || '-' || attempts FROM trials WHERE id=$fail_trial")
for c in $current; do
  [ "$c" = "$fail_current" ] && continue
  for f in "$tmp/procs/$c"-worker-*; do
    p=$(cat "$f")
    wait_for 30 '! kill -0 "$p" 2>/dev/null' || fail "worker $(basename "$f") (pid $p) did not exit"
  done
done
for c in $current; do
  for f in "$tmp/procs/$c"-ps-*; do
    kill -0 "$(cat "$f")" 2>/dev/null || fail "server $(basename "$f") ended by itself"
  done
done

: >"$tmp/ep"
start_scheduler "$ep"
wait_for 20 '[ -s "$tmp/ep" ]' || fail "the scheduler did not start again on $ep"
wait_for 60 '[ "$(sql "SELECT COUNT(*) FROM trials WHERE state='"'completed'"'")" = 2 ]' ||
  fail "the trials did not complete after the restart: $(sql "SELECT id, state, attempts, reason FROM trials")"
# fail's server dies under the restarted scheduler: the attempt ends, failed (max_retries 0).
wait_for 20 '[ "$(sql "SELECT COUNT(*) FROM agents WHERE state='"'alive'"'")" = 6 ]' || fail "the agents did not come back"
kill -9 "$(cat "$tmp/procs/$fail_current-ps-0")"
wait_for 60 '[ "$(sql "SELECT state FROM trials WHERE id=$fail_trial")" = failed ]' ||
  fail "trial $fail_trial did not fail when its server died: $(sql "SELECT id, state, attempts, reason FROM trials")"
[ "$(sql "SELECT id || '-' || attempts FROM trials ORDER BY id")" = "$current" ] ||
  fail "a trial was run again (attempts before the restart: $current): $(sql "SELECT id, state, attempts, reason FROM trials")"
[ "$(sql "SELECT COUNT(*) FROM sweeps WHERE state='completed'")" = 3 ] ||
  fail "the sweeps did not complete: $(sql "SELECT id, state FROM sweeps")"
# Worker 0's metric line, once per trial.
[ "$(sql "SELECT COUNT(*) FROM metrics WHERE name='done'")" = 2 ] ||
  fail "worker 0's metric lines: $(sql "SELECT trial_id, name, value FROM metrics")"
# Every process of the three trials is gone: the servers (and fail's workers) were stopped, not left behind.
for f in "$tmp"/procs/*; do
  p=$(cat "$f")
  wait_for 10 '! kill -0 "$p" 2>/dev/null' || fail "process $(basename "$f") (pid $p) still runs after its trial completed"
done
echo "PASS: trials with parameter servers adopted whole by a restarted scheduler: servers stopped, two completed, one failed with its server"
