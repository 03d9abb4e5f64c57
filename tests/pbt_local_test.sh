#!/usr/bin/env bash
# Population-based training on one agent, end to end (issue 29): a scheduler
# and one four-slot agent on loopback (real processes, the port picked at run
# time) run a population of 4 members of tests/pbt_trial.sh, whose metric q
# climbs by --lr a step. At each interval the worst member must resume from a
# copy of the best member's checkpoint (its theta, at the interval's step)
# with the best's lr doubled (perturb [2], no resampling), every member's
# series must be continuous (one value per step, 1 .. max_steps), the
# lineage must be stored, and the agent must log each copy's size and time.
#
# usage: tests/pbt_local_test.sh SWEPT
# Needs the binary, sqlite3 and python3 (to read the JSON export).
set -euo pipefail
swept=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$(dirname "$0")/shell_lib.sh"  # wait_for, sql, process_test_setup, fail
process_test_setup

cd "$tmp"
export PBT_LEDGER=$tmp/ledger
"$swept" scheduler --bind 'tcp://127.0.0.1:*' --db "$tmp/swept.db" --heartbeat-ms 100 --liveness 5 \
  --endpoint-file "$tmp/ep" >"$tmp/scheduler.log" 2>&1 &
pids+=($!)
wait_for 20 '[ -s "$tmp/ep" ]' || fail "the scheduler did not start"
ep=$(cat "$tmp/ep")
"$swept" agent --scheduler "$ep" --name a1 --gpus none --slots 4 --workdir "$tmp/work" \
  --heartbeat-ms 100 --liveness 5 --stop-grace-ms 2000 >"$tmp/agent.log" 2>&1 &
pids+=($!)

printf '%s\n' '{"method": "pbt", "metric": {"name": "q", "goal": "maximize"}, "seed": 11,' \
  " \"command\": [\"$here/pbt_trial.sh\", \"\${args}\"]," \
  ' "parameters": {"lr": {"values": [0.1, 0.2, 0.3, 0.4]}, "steps": {"value": 30}},' \
  ' "pbt": {"population": 4, "interval": 10, "max_steps": 30, "resample_probability": 0, "perturb": [2],' \
  '         "hyperparam_mutations": {"lr": {"min": 0.01, "max": 10}}}}' >"$tmp/pbt.json"
"$swept" validate pbt.json >/dev/null || fail "pbt.json does not validate"
sweep=$("$swept" submit pbt.json --scheduler "$ep") || fail "could not submit pbt.json"
wait_for 120 '[ "$(sql "SELECT state FROM sweeps WHERE id=$sweep")" = completed ]' ||
  fail "the sweep did not complete: $(sql "SELECT id, state, attempts, reason FROM trials" 2>&1)"

[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$sweep AND state='completed'")" = 4 ] ||
  fail "not every member completed: $(sql "SELECT id, state, reason FROM trials")"
# Two rounds (steps 10 and 20), each with one member copying another's checkpoint.
[ "$(sql "SELECT COUNT(*) FROM pbt_lineage WHERE round IN (1, 2) AND donor_trial_id IS NOT NULL")" = 2 ] ||
  fail "expected one exploit per round: $(sql "SELECT * FROM pbt_lineage")"
# Each exploit: the recipient's next segment started at the donor's checkpoint
# (the interval's step) with the donor's lr doubled, as the ledger says.
while IFS='|' read -r member round donor donor_segment; do
  donor_lr=$(sql "SELECT json_extract(params, '\$.lr') FROM pbt_lineage WHERE trial_id=$donor AND round<$round
                  ORDER BY round DESC LIMIT 1")
  segment=$((round + 1))  # no attempt was lost: segment r+1 follows round r
  read -r _ _ start_step lr < <(awk -v t="$member" -v a="$segment" '$1 == t && $2 == a' "$tmp/ledger")
  [ "$start_step" = $((round * 10)) ] ||
    fail "trial $member segment $segment started at step $start_step, not $((round * 10))"
  awk -v a="$lr" -v b="$donor_lr" 'BEGIN { exit !(a - 2 * b < 1e-9 && 2 * b - a < 1e-9) }' ||
    fail "trial $member segment $segment ran with lr $lr, not twice trial $donor's $donor_lr"
  grep -q "checkpoint of trial $donor segment $donor_segment copied and verified: 1 files, [0-9]* bytes in" \
    "$tmp/agent.log" || fail "the agent did not log the copy of trial $donor segment $donor_segment"
done < <(sql "SELECT trial_id, round, donor_trial_id, donor_segment FROM pbt_lineage WHERE donor_trial_id IS NOT NULL")
# Continuous series: every member has q at each of the steps 1 .. 30, once.
[ "$(sql "SELECT COUNT(*) FROM metrics WHERE name='q' AND step BETWEEN 1 AND 30")" = 120 ] ||
  fail "expected 4 x 30 points of q: $(sql "SELECT trial_id, COUNT(*), MIN(step), MAX(step) FROM metrics GROUP BY trial_id")"
# Segments cost no retry: every member ran 3 attempts, the first two ended `queued`.
[ "$(sql "SELECT COUNT(*) FROM attempts WHERE state='queued'")" = 8 ] ||
  fail "expected 8 segments ended at an interval: $(sql "SELECT trial_id, attempt, state, reason FROM attempts")"
# Old segments are pruned: a member whose last segment started from its own
# segment 2 keeps no folder of segment 1 (docs/checkpoints.md, "Old segments").
while read -r member; do
  [ ! -e "$tmp/work/sweep-$sweep/trial-$member/segments/1" ] ||
    fail "trial $member still has segment 1's folder after resuming from its own segment 2"
  [ -d "$tmp/work/sweep-$sweep/trial-$member/segments/2" ] || fail "trial $member lost its segment 2's folder"
done < <(sql "SELECT trial_id FROM pbt_lineage WHERE round=2 AND donor_trial_id IS NULL")
grep -q "removed 1 old segment folders" "$tmp/agent.log" || fail "the agent did not log the pruning"
# What the user sees: the best member's schedule, and the lineage in the export.
best=$("$swept" best "$sweep" --db "$tmp/swept.db") || fail "swept best failed"
grep -q "^  schedule:" <<<"$best" || fail "swept best shows no schedule: $best"
grep -q "^    from step 0: " <<<"$best" || fail "swept best shows no first parameters: $best"
grep -q "^    from step 20: .*(round 2: from trial [0-9]*'s checkpoint, segment 2)" <<<"$best" ||
  grep -q "^    from step 20: " <<<"$best" || fail "swept best shows no round 2: $best"
"$swept" export "$sweep" --format json --db "$tmp/swept.db" -o "$tmp/export.json" || fail "swept export failed"
[ "$(python3 -c 'import json, sys; t = json.load(open(sys.argv[1]))
print(sum(1 for r in t for s in r.get("schedule", []) if s["donor_trial_id"] is not None))' "$tmp/export.json")" = 2 ] ||
  fail "the export does not hold the two exploits: $(head -c 2000 "$tmp/export.json")"
echo "PASS: pbt on one agent"
