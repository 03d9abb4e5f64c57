#!/usr/bin/env bash
# Gang placement end to end (issue 25): a sweep of 2-node trials and a sweep
# of 1-node trials, submitted together to a scheduler with two one-slot
# agents on loopback (real processes, ports picked at run time). Every trial
# of both sweeps must complete within a bound (no gang waits for ever, none
# deadlocks with the one-node trials), each 2-node trial on the two agents,
# and a ledger the trials write must show that no agent ever ran two trials
# at once (a gang never takes a slot that a one-node trial holds). Then the
# 2-node sweep again under `swept run --local-agents 2`.
#
# usage: tests/multinode_gang_test.sh SWEPT
# Needs nothing but the binary, sqlite3 and python3 (for free ports).
set -euo pipefail
swept=$1
source "$(dirname "$0")/shell_lib.sh"  # wait_for, sql, process_test_setup, fail
process_test_setup

cd "$tmp"
"$swept" scheduler --bind 'tcp://127.0.0.1:*' --db "$tmp/swept.db" --heartbeat-ms 100 --liveness 5 \
  --endpoint-file "$tmp/ep" >"$tmp/scheduler.log" 2>&1 &
pids+=($!)
wait_for 20 '[ -s "$tmp/ep" ]' || fail "the scheduler did not start"
ep=$(cat "$tmp/ep")

# Each agent's rendezvous range is one port that was free when the test
# started (the trials here open no port, but node 0's agent checks that it
# can bind it; a port taken since is a host fault the scheduler retries).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
for n in 1 2; do
  p=$(free_port)
  "$swept" agent --scheduler "$ep" --name "a$n" --gpus none --slots 1 --workdir "$tmp/work-a$n" \
    --rendezvous-ports "$p-$p" --heartbeat-ms 100 --liveness 5 --stop-grace-ms 500 >"$tmp/agent-a$n.log" 2>&1 &
  pids+=($!)
done
wait_for 20 '[ "$(sql "SELECT COUNT(*) FROM agents WHERE state='"'alive'"'")" = 2 ]' ||
  fail "the agents did not register: $(sql "SELECT name, state FROM agents" 2>&1)"

# The trial: writes "trial attempt agent rank start_ns end_ns" to the ledger
# (the agent from its working directory), sleeps --secs, and prints one
# metric line from rank 0 (one-node trials have no RANK).
cat >"$tmp/ledger-trial.sh" <<EOF
#!/bin/sh
secs=0
for a in "\$@"; do case \$a in --secs=*) secs=\${a#*=} ;; esac; done
agent=\$(pwd | sed 's|.*/work-\([^/]*\)/.*|\1|')
start=\$(date +%s%N)
sleep "\$secs"
[ "\${RANK:-0}" = 0 ] && echo '{"loss": 1.5}'
echo "rank \${RANK:--} done" >&2
echo "\$SWEPT_TRIAL_ID \$SWEPT_ATTEMPT \$agent \${RANK:--} \$start \$(date +%s%N)" >>"$tmp/ledger"
EOF
chmod +x "$tmp/ledger-trial.sh"
cat >"$tmp/gang.json" <<EOF
{"method": "grid", "metric": {"name": "loss", "goal": "minimize"}, "resources": {"nodes": 2},
 "command": ["$tmp/ledger-trial.sh", "\${args}"],
 "parameters": {"secs": {"value": 0.5}, "i": {"values": [1, 2, 3]}}}
EOF
cat >"$tmp/single.json" <<EOF
{"method": "grid", "metric": {"name": "loss", "goal": "minimize"},
 "command": ["$tmp/ledger-trial.sh", "\${args}"],
 "parameters": {"secs": {"value": 0.5}, "i": {"values": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}}}
EOF
# Both at once: the one-node sweep first, so its trials hold the slots when
# the gangs arrive.
single=$("$swept" submit single.json --scheduler "$ep") || fail "could not submit single.json"
gang=$("$swept" submit gang.json --scheduler "$ep") || fail "could not submit gang.json"

for s in "$single" "$gang"; do
  timeout 90 "$swept" wait "$s" --scheduler "$ep" --poll-ms 100 >"$tmp/wait-$s.log" 2>&1 ||
    fail "sweep $s did not end within the bound: sweeps $(sql "SELECT id || ' ' || state FROM sweeps" | paste -sd,);" \
      "trials by sweep and state $(sql "SELECT sweep_id || ' ' || state || ' ' || COUNT(*) FROM trials GROUP BY sweep_id, state" | paste -sd,)"
done
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$single AND state='completed'")" = 12 ] ||
  fail "not all 12 one-node trials completed: $(sql "SELECT id, state, reason FROM trials WHERE sweep_id=$single")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$gang AND state='completed'")" = 3 ] ||
  fail "not all 3 two-node trials completed: $(sql "SELECT id, state, reason FROM trials WHERE sweep_id=$gang")"
# Each 2-node trial ran on both agents, once each, one rank each.
for t in $(sql "SELECT id FROM trials WHERE sweep_id=$gang"); do
  nodes=$(sql "SELECT json_extract(nodes, '\$[0].agent') || ' ' || json_extract(nodes, '\$[1].agent') FROM trials WHERE id=$t")
  [ "$nodes" = "a1 a2" ] || [ "$nodes" = "a2 a1" ] || fail "trial $t: nodes '$nodes', not one on each agent"
  ran=$(awk -v t="$t" '$1 == t { print $3 "/" $4 }' "$tmp/ledger" | sort | paste -sd' ')
  [ "$ran" = "a1/0 a2/1" ] || [ "$ran" = "a1/1 a2/0" ] || fail "trial $t: ranks ran as '$ran'"
done
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$single AND nodes IS NOT NULL")" = 0 ] ||
  fail "a one-node trial has nodes"
# One slot per agent: no two ledger intervals of one agent overlap.
overlaps=$(sort -k3,3 -k5,5n "$tmp/ledger" | awk '$3 == agent && $5 < end { print "agent " $3 ": trial " $1 " began before trial " prev " ended" }
  { if ($3 != agent) end = 0; agent = $3; if ($6 > end) { end = $6; prev = $1 } }')
[ -z "$overlaps" ] || fail "an agent ran two trials at once: $overlaps"
[ "$(wc -l <"$tmp/ledger")" = 18 ] || fail "the ledger has $(wc -l <"$tmp/ledger") lines, not 12 + 3 x 2"

# Issue 26: a gang never runs beside its own previous attempt. A third
# agent joins; a 2-node trial's first attempt sleeps until stopped, and
# node 1's agent is frozen (SIGSTOP, its lease keeper not) for good. The
# scheduler finds it silent and lets the attempt run on until the frozen
# agent's lease and margin are over (its keeper has SIGKILLed the rank by
# then); then it loses the attempt, stops node 0, and places the retry (on
# the two other agents) once node 0 has reported its rank stopped. Each rank holds a
# shared lock on its attempt's file while it runs; a rank of a later attempt
# that cannot take an earlier attempt's lock exclusively notes an overlap
# (the probes take turns on one more lock, so that two never collide).
p=$(free_port)
"$swept" agent --scheduler "$ep" --name a3 --gpus none --slots 1 --workdir "$tmp/work-a3" \
  --rendezvous-ports "$p-$p" --heartbeat-ms 100 --liveness 5 --stop-grace-ms 500 >"$tmp/agent-a3.log" 2>&1 &
pids+=($!)
declare -A agent_pid=([a1]=${pids[1]} [a2]=${pids[2]} [a3]=${pids[3]})
wait_for 20 '[ "$(sql "SELECT COUNT(*) FROM agents WHERE state='"'alive'"'")" = 3 ]' ||
  fail "the third agent did not register: $(sql "SELECT name, state FROM agents" 2>&1)"
cat >"$tmp/locked-trial.sh" <<EOF
#!/bin/sh
agent=\$(pwd | sed 's|.*/work-\([^/]*\)/.*|\1|')
exec 9>>"$tmp/lock-\$SWEPT_TRIAL_ID-\$SWEPT_ATTEMPT"
flock -s 9
a=1
while [ "\$a" -lt "\$SWEPT_ATTEMPT" ]; do
  flock "$tmp/probe" flock -n -x "$tmp/lock-\$SWEPT_TRIAL_ID-\$a" true ||
    echo "OVERLAP trial \$SWEPT_TRIAL_ID attempt \$SWEPT_ATTEMPT rank \$RANK on \$agent: attempt \$a still runs" >>"$tmp/frozen-ledger"
  a=\$((a + 1))
done
echo "start \$SWEPT_TRIAL_ID \$SWEPT_ATTEMPT \$agent \$RANK \$(date +%s%N)" >>"$tmp/frozen-ledger"
# The first attempt outlives a SIGTERM (as a rank stuck in a collective may): only SIGKILL ends it.
if [ "\$SWEPT_ATTEMPT" = 1 ]; then trap '' TERM; sleep 60; else sleep 0.5; fi
[ "\$RANK" = 0 ] && echo '{"loss": 1.5}'
echo "end \$SWEPT_TRIAL_ID \$SWEPT_ATTEMPT \$agent \$RANK \$(date +%s%N)" >>"$tmp/frozen-ledger"
EOF
chmod +x "$tmp/locked-trial.sh"
cat >"$tmp/frozen.json" <<EOF
{"method": "grid", "metric": {"name": "loss", "goal": "minimize"}, "resources": {"nodes": 2}, "max_retries": 2,
 "command": ["$tmp/locked-trial.sh"], "parameters": {"i": {"values": [1]}}}
EOF
frozen=$("$swept" submit frozen.json --scheduler "$ep") || fail "could not submit frozen.json"
wait_for 30 '[ "$(awk '"'"'$1 == "start" && $3 == 1'"'"' "$tmp/frozen-ledger" 2>/dev/null | wc -l)" = 2 ]' ||
  fail "attempt 1 did not start both ranks"
victim=$(awk '$1 == "start" && $5 == 1 { print $4 }' "$tmp/frozen-ledger")
kill -STOP "${agent_pid[$victim]}"
timeout 60 "$swept" wait "$frozen" --scheduler "$ep" --poll-ms 100 >"$tmp/wait-frozen.log" 2>&1 ||
  { kill -CONT "${agent_pid[$victim]}"; fail "the sweep with a frozen agent did not end within the bound"; }
kill -CONT "${agent_pid[$victim]}"
t=$(sql "SELECT id FROM trials WHERE sweep_id=$frozen")
[ "$(sql "SELECT state || ' ' || attempts FROM trials WHERE id=$t")" = "completed 2" ] ||
  fail "trial $t with a frozen node: $(sql "SELECT state, attempts, reason FROM trials WHERE id=$t")"
! grep -q OVERLAP "$tmp/frozen-ledger" || fail "a retry ran beside its previous attempt: $(grep OVERLAP "$tmp/frozen-ledger")"
[ "$(grep -c "^start $t 2 " "$tmp/frozen-ledger")" = 2 ] || fail "the retry did not run both ranks: $(cat "$tmp/frozen-ledger")"
! grep -q "^start $t 2 $victim " "$tmp/frozen-ledger" || fail "the retry ran on the frozen agent $victim"
grep -q "every rank is known stopped" "$tmp/scheduler.log" || fail "the scheduler did not say why the retry waited"

# Issue 26, a freeze shorter than the lease: a 2-node trial whose node's
# agent is SIGSTOPped until the scheduler has declared it lost, then
# SIGCONTed (before its lease is over), keeps running: the agent comes back
# with its rank, and the trial completes in its first attempt, each rank run
# once. Its own scheduler and agents, with a heartbeat long enough that the
# time between "declared lost" (2 s of silence) and the agent's lease stop
# (3.5 s) is well above this test's polling.
"$swept" scheduler --bind 'tcp://127.0.0.1:*' --db "$tmp/held.db" --heartbeat-ms 500 --liveness 4 \
  --endpoint-file "$tmp/ep-held" >"$tmp/scheduler-held.log" 2>&1 &
pids+=($!)
wait_for 20 '[ -s "$tmp/ep-held" ]' || fail "the second scheduler did not start"
ep_held=$(cat "$tmp/ep-held")
held_sql() { sqlite3 -cmd ".timeout 5000" "$tmp/held.db" "$1"; }
declare -A held_pid
for n in h1 h2; do
  p=$(free_port)
  "$swept" agent --scheduler "$ep_held" --name "$n" --gpus none --slots 1 --workdir "$tmp/work-$n" \
    --rendezvous-ports "$p-$p" --heartbeat-ms 500 --liveness 4 --stop-grace-ms 500 >"$tmp/agent-$n.log" 2>&1 &
  pids+=($!)
  held_pid[$n]=$!
done
wait_for 20 '[ "$(held_sql "SELECT COUNT(*) FROM agents WHERE state='"'alive'"'")" = 2 ]' ||
  fail "the agents h1, h2 did not register: $(held_sql "SELECT name, state FROM agents" 2>&1)"
# Each rank notes its start and end, and runs until the test lets it end (60 s at most).
cat >"$tmp/held-trial.sh" <<EOF
#!/bin/sh
agent=\$(pwd | sed 's|.*/work-\([^/]*\)/.*|\1|')
echo "start \$SWEPT_TRIAL_ID \$SWEPT_ATTEMPT \$agent \$RANK" >>"$tmp/held-ledger"
i=0
while [ ! -e "$tmp/held-go" ] && [ "\$i" -lt 1200 ]; do sleep 0.05; i=\$((i + 1)); done
[ "\$RANK" = 0 ] && echo '{"loss": 1.5}'
echo "end \$SWEPT_TRIAL_ID \$SWEPT_ATTEMPT \$agent \$RANK" >>"$tmp/held-ledger"
EOF
chmod +x "$tmp/held-trial.sh"
cat >"$tmp/held.json" <<EOF
{"method": "grid", "metric": {"name": "loss", "goal": "minimize"}, "resources": {"nodes": 2}, "max_retries": 2,
 "command": ["$tmp/held-trial.sh"], "parameters": {"i": {"values": [1]}}}
EOF
held=$("$swept" submit held.json --scheduler "$ep_held") || fail "could not submit held.json"
wait_for 30 '[ "$(grep -c "^start " "$tmp/held-ledger" 2>/dev/null)" = 2 ]' || fail "the held trial did not start both ranks"
victim=$(awk '$1 == "start" && $5 == 1 { print $4 }' "$tmp/held-ledger")
kill -STOP "${held_pid[$victim]}"
wait_for 20 'grep -q "agent $victim missed" "$tmp/scheduler-held.log"' ||
  { kill -CONT "${held_pid[$victim]}"; fail "the scheduler did not find agent $victim silent"; }
kill -CONT "${held_pid[$victim]}"
wait_for 20 '[ "$(grep -c "agent $victim registered" "$tmp/scheduler-held.log")" -ge 2 ]' ||
  fail "agent $victim did not register again after SIGCONT"
touch "$tmp/held-go"
timeout 60 "$swept" wait "$held" --scheduler "$ep_held" --poll-ms 100 >"$tmp/wait-held.log" 2>&1 ||
  fail "the sweep whose agent was frozen for a moment did not end within the bound"
t=$(held_sql "SELECT id FROM trials WHERE sweep_id=$held")
[ "$(held_sql "SELECT state || ' ' || attempts FROM trials WHERE id=$t")" = "completed 1" ] ||
  fail "trial $t, its node's agent frozen within its lease: $(held_sql "SELECT state, attempts, reason FROM trials WHERE id=$t");" \
    "attempts: $(held_sql "SELECT attempt || ' ' || state || ' ' || COALESCE(reason, '') FROM attempts" | paste -sd,)"
# The ledger: one start and one end per rank, all of attempt 1.
ran=$(awk '{ print $1 " " $2 " " $3 " " $5 }' "$tmp/held-ledger" | sort | paste -sd,)
[ "$ran" = "end $t 1 0,end $t 1 1,start $t 1 0,start $t 1 1" ] ||
  fail "trial $t: each rank should have run once, in attempt 1: $(cat "$tmp/held-ledger")"

# The same 2-node sweep under `swept run --local-agents 2 --slots 2`: two
# agents in the one process, one slot each, the ranks meeting on loopback.
timeout 90 "$swept" run gang.json --local-agents 2 --slots 2 --gpus none --db "$tmp/run.db" \
  --workdir "$tmp/run-work" --dashboard off --progress off >"$tmp/run.log" 2>&1 || fail "swept run --local-agents 2 failed"
run_sql() { sqlite3 -cmd ".timeout 5000" "$tmp/run.db" "$1"; }
[ "$(run_sql "SELECT COUNT(*) FROM trials WHERE state='completed'")" = 3 ] ||
  fail "swept run: not all 3 two-node trials completed: $(run_sql "SELECT id, state, reason FROM trials")"
for t in $(run_sql "SELECT id FROM trials"); do
  nodes=$(run_sql "SELECT json_extract(nodes, '\$[0].agent') || ' ' || json_extract(nodes, '\$[1].agent') FROM trials WHERE id=$t")
  [ "$nodes" = "local-1 local-2" ] || [ "$nodes" = "local-2 local-1" ] || fail "swept run: trial $t on '$nodes'"
  set -- $nodes
  for r in 0 1; do
    a=$1
    [ "$r" = 1 ] && a=$2
    grep -qs "rank $r done" "$tmp/run-work/$a/sweep-1/trial-$t/rank-$r.stderr.log" ||
      fail "swept run: trial $t: no rank $r log on $a ($(find "$tmp/run-work" -name 'rank-*' | paste -sd' '))"
  done
done
echo "PASS: 3 two-node and 12 one-node trials on two one-slot agents all completed, never two at once on an agent;" \
  "a 2-node trial whose node's agent was frozen ran again only after its lease, never beside its old rank;" \
  "one whose node's agent was frozen for less than its lease completed in its first attempt, each rank run once;" \
  "swept run --local-agents 2 ran the 2-node sweep"
