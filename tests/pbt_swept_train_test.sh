#!/usr/bin/env bash
# Population-based training with swept-train as the member (issue 29), end to
# end through `swept run`: 2 members of a small MLP on a generated MNIST-like
# data set (written here as IDX files), exploit/explore every 5 steps up to
# 15, the lr doubled at each explore (perturb [2], no resampling). Checks
# what the trainer side promises: each segment stops with its checkpoint
# exactly at the interval (SWEPT_PBT_STOP_STEP), the copied member resumes
# from the donor's checkpoint with the new lr and logs the change, and every
# member's series is continuous (val_accuracy at 5, 10 and 15, loss lines at
# every step). Waits: `swept run` itself, bounded by `timeout`.
# Usage: tests/pbt_swept_train_test.sh SWEPT SWEPT_TRAIN
set -euo pipefail
swept=${1:?usage: pbt_swept_train_test.sh SWEPT SWEPT_TRAIN}
train=${2:?usage: pbt_swept_train_test.sh SWEPT SWEPT_TRAIN}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  tail -n 20 "$tmp/run.log" >&2 || true
  exit 1
}

# A learnable stand-in for MNIST (as trainer/test_util.h makes it): class k
# lights row 2k+4 over noise. 600 training and 100 test images.
python3 "$(dirname "$0")/mnist_like.py" "$tmp/data"

cat >"$tmp/pbt.json" <<JSON
{"method": "pbt", "seed": 3, "metric": {"name": "val_accuracy", "goal": "maximize"},
 "command": ["$train", "--resume", "--data=$tmp/data", "\${args}"],
 "parameters": {"lr": {"values": [0.01, 0.3]}, "optimizer": {"value": "momentum"}, "schedule": {"value": "constant"},
                "hidden": {"value": 16}, "batch_size": {"value": 20}, "max_steps": {"value": 15},
                "eval_every": {"value": 5}, "log_every": {"value": 1}, "threads": {"value": 1}},
 "pbt": {"population": 2, "interval": 5, "max_steps": 15, "resample_probability": 0, "perturb": [2],
         "hyperparam_mutations": {"lr": {"min": 0.001, "max": 10}}}}
JSON
timeout 240 "$swept" run "$tmp/pbt.json" --db "$tmp/swept.db" --workdir "$tmp/work" --slots 2 --gpus none \
  --dashboard off --progress off >"$tmp/run.log" 2>&1 || fail "swept run exited $?"

python3 - "$tmp/swept.db" "$tmp/work" <<'PY' || fail "the population's records are not what swept-train promises"
import glob, json, os, sqlite3, sys
db, work = sys.argv[1], sys.argv[2]
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
trials = [r[0] for r in con.execute("SELECT id FROM trials ORDER BY id")]
assert len(trials) == 2, trials
for t in trials:
    val = [s for (s,) in con.execute("SELECT step FROM metrics WHERE trial_id = ? AND name = 'val_accuracy' ORDER BY step", (t,))]
    loss = [s for (s,) in con.execute("SELECT step FROM metrics WHERE trial_id = ? AND name = 'loss' ORDER BY step", (t,))]
    assert val == [5, 10, 15], (t, val)
    assert loss == list(range(1, 16)), (t, loss)
    # Every segment that ended at an interval left its checkpoint at exactly that step.
    for seg in sorted(glob.glob(os.path.join(work, "sweep-*", f"trial-{t}", "segments", "*"))):
        steps = sorted(int(f[5:17]) for f in os.listdir(seg) if f.startswith("ckpt-"))
        assert steps and all(s % 5 == 0 for s in steps), (seg, steps)
copies = con.execute("SELECT trial_id, round, from_step, donor_trial_id, params FROM pbt_lineage "
                     "WHERE donor_trial_id IS NOT NULL").fetchall()
assert copies, "no member copied another's checkpoint"
for trial, rnd, step, donor, params in copies:
    assert step == 5 * rnd, (trial, rnd, step)
    lr = json.loads(params)["lr"]
    err = open(glob.glob(os.path.join(work, "sweep-*", f"trial-{trial}", "stderr.log"))[0]).read()
    assert f"at step {step}" in err and "hyperparameters changed on resume: lr " in err, err[-2000:]
    assert f"-> {lr}" in err or f"-> {json.dumps(lr)}" in err, (lr, err[-2000:])
print(f"{len(copies)} exploit(s); series continuous; checkpoints at the intervals")
PY
echo PASS
