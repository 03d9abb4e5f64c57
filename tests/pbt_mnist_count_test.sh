#!/usr/bin/env bash
# bench/pbt_mnist.sh's asha4 count on a tiny real run (issue 29): ASHA with 4
# trials at once and PBT (population 4) of swept-train's CNN, 300 steps a
# trial, on the MNIST stand-in (tests/mnist_like.py), to a test accuracy of
# 0.5 (which the stand-in reaches within 100 steps). The script's own counts
# are checked against what the store says, independently of how the script
# reads its time ledger:
#   - bench/line_times.py passed every line through: each trial's
#     test_accuracy steps in the ledger are those the store holds, and every
#     ASHA trial ended as it would have without it (completed or
#     early-stopped, none failed);
#   - the trial the script names first to the target reached it at the step
#     the store says, and its ledger line is the earliest at or above 0.5;
#   - every trial is counted with the last step it printed by that moment:
#     the step of its last ledger line no later than it (at most its final
#     step in the store), and one whose attempt had ended before it with
#     its final step; the total is their sum and at most the budget;
#   - the summary compares PBT with both the sequential and the 4-at-once
#     ASHA it ran (asha4 only here: "4 at once").
# Usage: tests/pbt_mnist_count_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=${1:?usage: pbt_mnist_count_test.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: pbt_mnist_count_test.sh SOURCE_DIR BUILD_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  cat "$tmp/out" >&2 || true
  exit 1
}

python3 "$src/tests/mnist_like.py" "$tmp/data"
SWEPT_DATA_DIR=$tmp/data SEARCHES="pbt asha4" TARGET=0.5 KEEP=$tmp/keep \
  timeout 300 bash "$src/bench/pbt_mnist.sh" "$build" 1 300 >"$tmp/out" 2>&1 || fail "bench/pbt_mnist.sh exited $?"
grep -q "target (PBT fewer steps than ASHA, 4 at once): " "$tmp/out" || fail "no comparison with asha4"
if grep -q "one at a time" "$tmp/out"; then fail "a comparison with the sequential ASHA, which did not run"; fi

python3 - "$tmp/keep" "$tmp/out" <<'PY' || fail "asha4's count does not agree with the store"
import json, re, sqlite3, sys
keep, out = sys.argv[1], open(sys.argv[2]).read()
m = re.search(r"asha4: seed 1: (\d+) \(", out)
assert m, "no asha4 count in the output"
counted = int(m.group(1))
m = re.search(r"first to 0.5: trial (\d+) at step (\d+), .*; every trial's steps then: (.*)", out)
assert m, "no asha4 detail line"
first, first_step = int(m.group(1)), int(m.group(2))
per_trial = {int(t): int(s) for t, s in (p.split(": ") for p in m.group(3).split(", "))}
con = sqlite3.connect(f"file:{keep}/asha4-1.db?mode=ro", uri=True)
states = [s for (s,) in con.execute("SELECT state FROM trials")]
assert len(states) == 4 and all(s in ("completed", "early_stopped") for s in states), states
ledger = []
for raw in open(f"{keep}/asha4-1.times"):
    trial, when, line = raw.rstrip("\n").split(" ", 2)
    try:
        rec = json.loads(line)
    except ValueError:
        continue
    if isinstance(rec, dict) and "step" in rec:
        ledger.append((float(when), int(trial), rec))
for (tid,) in con.execute("SELECT id FROM trials"):
    stored = [s for (s,) in con.execute(
        "SELECT step FROM metrics WHERE trial_id = ? AND name = 'test_accuracy' ORDER BY step", (tid,))]
    seen = sorted(r["step"] for _, t, r in ledger if t == tid and "test_accuracy" in r)
    assert stored == seen, (tid, stored, seen)
# The first to the target, as the store has it.
(db_first_step,) = con.execute("SELECT MIN(step) FROM metrics WHERE trial_id = ? AND name = 'test_accuracy' "
                               "AND value >= 0.5", (first,)).fetchone()
assert db_first_step == first_step, (first, db_first_step, first_step)
hits = [(w, t) for w, t, r in ledger if r.get("test_accuracy", -1) >= 0.5]
hit_time, hit_trial = min(hits)
assert hit_trial == first, (hit_trial, first)
# Each trial at that moment.
for (tid,) in con.execute("SELECT id FROM trials"):
    (final,) = con.execute("SELECT MAX(step) FROM metrics WHERE trial_id = ?", (tid,)).fetchone()
    printed = [r["step"] for w, t, r in ledger if t == tid and w <= hit_time]
    expected = max(printed) if printed else 0
    assert per_trial.get(tid, 0) == expected <= final, (tid, per_trial.get(tid), expected, final)
    (ended,) = con.execute("SELECT MAX(ended_at) FROM attempts WHERE trial_id = ?", (tid,)).fetchone()
    if ended is not None and ended < hit_time:
        assert expected == final, (tid, expected, final)
assert counted == sum(per_trial.values()) <= 1200, (counted, per_trial)
assert per_trial[first] == first_step
print(f"asha4 counted {counted} steps at trial {first}'s step {first_step}: {per_trial}")
PY
echo PASS
