#!/usr/bin/env bash
# Population-based training through a scheduler crash (issue 29): a scheduler
# and one four-slot agent on loopback run a population of 4 members of
# tests/pbt_trial.sh; once round 1 has run, the scheduler is SIGKILLed in
# mid-segment and started again on the same database and port. The restarted
# scheduler must rebuild the population from the store (members, their
# complete segments, the round being gathered), so that round 2 runs with
# every member, and the sweep completes as an uninterrupted one would: every
# member completed, one exploit in each of rounds 1 and 2, each segment
# starting where the lineage says, every series continuous.
#
# usage: tests/pbt_restart_test.sh SWEPT
# Needs the binary, sqlite3.
set -euo pipefail
swept=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$(dirname "$0")/shell_lib.sh"  # wait_for, sql, process_test_setup, fail
process_test_setup

cd "$tmp"
export PBT_LEDGER=$tmp/ledger
echo 0.05 >"$tmp/delay"  # 0.5 s a segment: the crash lands in mid-segment
export PBT_DELAY_FILE=$tmp/delay
start_scheduler 'tcp://127.0.0.1:*'
"$swept" agent --scheduler "$ep" --name a1 --gpus none --slots 4 --workdir "$tmp/work" \
  --heartbeat-ms 100 --liveness 5 --reconnect-min-ms 100 --reconnect-max-ms 400 --stop-grace-ms 2000 \
  >"$tmp/agent.log" 2>&1 &
pids+=($!)

printf '%s\n' '{"method": "pbt", "metric": {"name": "q", "goal": "maximize"}, "seed": 11,' \
  " \"command\": [\"$here/pbt_trial.sh\", \"\${args}\"]," \
  ' "parameters": {"lr": {"values": [0.1, 0.2, 0.3, 0.4]}, "steps": {"value": 30}},' \
  ' "pbt": {"population": 4, "interval": 10, "max_steps": 30, "resample_probability": 0, "perturb": [2],' \
  '         "hyperparam_mutations": {"lr": {"min": 0.01, "max": 10}}}}' >"$tmp/pbt.json"
sweep=$("$swept" submit pbt.json --scheduler "$ep") || fail "could not submit pbt.json"

# Round 1 has run (its lineage is stored): the members are in segment 2. Kill -9.
wait_for 60 '[ "$(sql "SELECT COUNT(*) FROM pbt_lineage WHERE round=1")" = 4 ]' || fail "round 1 did not run"
kill -9 "$scheduler_pid"
wait "$scheduler_pid" 2>/dev/null || true
: >"$tmp/ep"
start_scheduler "$ep"
wait_for 20 '[ -s "$tmp/ep" ]' || fail "the scheduler did not start again on $ep"
grep -q "pbt population rebuilt after the restart: 4 members, gathering round 2" "$tmp/scheduler.log" ||
  fail "the restarted scheduler did not rebuild the population"

wait_for 120 '[ "$(sql "SELECT state FROM sweeps WHERE id=$sweep")" = completed ]' ||
  fail "the sweep did not complete: $(sql "SELECT id, state, attempts, reason FROM trials" 2>&1)"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$sweep AND state='completed'")" = 4 ] ||
  fail "not every member completed: $(sql "SELECT id, state, reason FROM trials")"
[ "$(sql "SELECT COUNT(*) FROM pbt_lineage WHERE round=2")" = 4 ] ||
  fail "round 2 did not run with every member: $(sql "SELECT * FROM pbt_lineage")"
[ "$(sql "SELECT COUNT(*) FROM pbt_lineage WHERE round IN (1, 2) AND donor_trial_id IS NOT NULL")" = 2 ] ||
  fail "expected one exploit per round: $(sql "SELECT * FROM pbt_lineage")"
# Each member's segments start where its lineage says: segment r+1 at step r x 10.
while IFS='|' read -r member round; do
  read -r _ _ start_step _ < <(awk -v t="$member" -v a="$((round + 1))" '$1 == t && $2 == a' "$tmp/ledger" | tail -1)
  [ "$start_step" = $((round * 10)) ] ||
    fail "trial $member segment $((round + 1)) started at step ${start_step:-none}, not $((round * 10))"
done < <(sql "SELECT trial_id, round FROM pbt_lineage WHERE round IN (1, 2)")
[ "$(sql "SELECT COUNT(*) FROM metrics WHERE name='q' AND step BETWEEN 1 AND 30")" = 120 ] ||
  fail "expected 4 x 30 points of q: $(sql "SELECT trial_id, COUNT(*), MIN(step), MAX(step) FROM metrics GROUP BY trial_id")"
echo "PASS: pbt through a scheduler restart"
