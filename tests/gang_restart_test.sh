#!/usr/bin/env bash
# A multi-node trial through a scheduler crash between its nodes' ends: a
# scheduler and two two-slot agents on loopback (real processes) run a
# 2-node trial (max_retries 0) and, beside each node, a one-node "marker"
# trial. Node 1's rank exits 0 first; once the scheduler has processed that
# exit (the marker on the same agent, released after it and so reported after
# it on the same connection, is on record as completed), the scheduler is
# SIGKILLed and started again on the same database and port. Node 0's rank
# then exits 0: the trial must complete in the attempt it ran before. The scheduler
# keeps a node's end only in memory, so it acknowledges that node's exit
# (EXIT_ACK) only when the attempt ends: till then the agent keeps the exit
# and reports it on registering again. Acknowledged at once, as before, the
# exit was forgotten by the agent, and the restarted scheduler, finding
# node 1's agent without the trial, lost the attempt.
#
# Waits: deadline loops only (wait_for). usage: tests/gang_restart_test.sh SWEPT
# Needs the binary, sqlite3 and python3.
set -euo pipefail
swept=$1
source "$(dirname "$0")/shell_lib.sh"  # wait_for, sql, process_test_setup, fail
process_test_setup

cd "$tmp"
start_scheduler 'tcp://127.0.0.1:*'
start_gang_agents b 2

# Every process records its pid as procs/NAME (gang-ATTEMPT-RANK, or
# marker-AGENT), then waits (bounded) for release-NAME and exits 0. (An
# attempt whose node 0 found its rendezvous port taken by another program is
# requeued at no cost; its stopped rank's file stays.)
mkdir -p "$tmp/procs"
cat >"$tmp/wait.sh" <<EOF
#!/bin/sh
if [ -n "\${RANK:-}" ]; then name=gang-\$SWEPT_ATTEMPT-\$RANK; else name=marker-\$(pwd | sed 's|.*/work-\([^/]*\)/.*|\1|'); fi
echo \$\$ >"$tmp/procs/\$name"
i=0
until [ -e "$tmp/release-\$name" ]; do
  i=\$((i + 1))
  [ \$i -lt 2400 ] || exit 4
  sleep 0.05
done
EOF
chmod +x "$tmp/wait.sh"
cat >"$tmp/gang.json" <<EOF
{"method": "grid", "command": ["$tmp/wait.sh"], "parameters": {"x": {"value": 1}},
 "resources": {"nodes": 2}, "max_retries": 0}
EOF
cat >"$tmp/marker.json" <<EOF
{"method": "grid", "command": ["$tmp/wait.sh"], "parameters": {"x": {"values": [1, 2]}}, "max_retries": 0}
EOF
"$swept" submit gang.json --scheduler "$ep" >/dev/null 2>&1 || fail "could not submit gang.json"
wait_for 30 '[ "$(sql "SELECT COUNT(*) FROM trials WHERE state='"'running'"' AND started_at IS NOT NULL")" = 1 ]' ||
  fail "the 2-node trial did not start: $(sql "SELECT id, state, attempts, reason FROM trials")"
gang=$(sql "SELECT id FROM trials")
attempt=$(sql "SELECT attempts FROM trials WHERE id=$gang")
wait_for 30 '[ -s "$tmp/procs/gang-$attempt-0" ] && [ -s "$tmp/procs/gang-$attempt-1" ]' || fail "the 2-node trial's ranks did not start"
"$swept" submit marker.json --scheduler "$ep" >/dev/null 2>&1 || fail "could not submit marker.json"
wait_for 30 '[ -s "$tmp/procs/marker-b1" ] && [ -s "$tmp/procs/marker-b2" ]' ||
  fail "the marker trials did not start one on each agent: $(ls "$tmp/procs")"
node1=$(sql "SELECT json_extract(nodes, '\$[1].agent') FROM trials WHERE id=$gang")
[ -n "$node1" ] || fail "no node 1 on record for trial $gang"

# Node 1's rank exits 0; its agent has sent the exit (its journal says so)
# before the marker beside it ends, whose completion then shows that the
# scheduler has read node 1's exit.
touch "$tmp/release-gang-$attempt-1"
wait_for 30 'grep "^TRIAL_EXITED" "$tmp/work-$node1/.swept-exits-$node1" 2>/dev/null | grep -E "\"trial_id\":$gang[,}]" | grep -qE "\"attempt\":$attempt[,}]"' ||
  fail "node 1 ($node1) did not report its exit"
touch "$tmp/release-marker-$node1"
marker=$(sql "SELECT id FROM trials WHERE nodes IS NULL AND agent='$node1'")
wait_for 30 '[ "$(sql "SELECT state FROM trials WHERE id=$marker")" = completed ]' ||
  fail "the marker trial on $node1 did not complete: $(sql "SELECT id, state, agent FROM trials")"
[ "$(sql "SELECT state FROM trials WHERE id=$gang")" = running ] || fail "trial $gang is not running with node 0"
kill -9 "$scheduler_pid"
wait "$scheduler_pid" 2>/dev/null || true
: >"$tmp/ep"
start_scheduler "$ep"
wait_for 20 '[ -s "$tmp/ep" ]' || fail "the scheduler did not start again on $ep"

# Both agents back: node 0's rank ends, and the attempt completes.
wait_for 20 '[ "$(grep -c "agent b[12] registered" "$tmp/scheduler.log")" -ge 4 ]' || fail "the agents did not register again"
touch "$tmp/release-gang-$attempt-0" "$tmp/release-marker-b1" "$tmp/release-marker-b2"
wait_for 60 '[ "$(sql "SELECT COUNT(*) FROM sweeps WHERE state='"'completed'"'")" = 2 ]' ||
  fail "the sweeps did not complete: $(sql "SELECT id, state, attempts, reason FROM trials")"
[ "$(sql "SELECT state || ' ' || attempts FROM trials WHERE id=$gang")" = "completed $attempt" ] ||
  fail "the 2-node trial did not complete in attempt $attempt: $(sql "SELECT id, state, attempts, reason FROM trials")"
for f in "$tmp"/procs/*; do
  p=$(cat "$f")
  wait_for 10 '! kill -0 "$p" 2>/dev/null' || fail "process $(basename "$f") (pid $p) still runs"
done
echo "PASS: a 2-node trial whose node 1 had ended before a scheduler restart completed in its first attempt"
