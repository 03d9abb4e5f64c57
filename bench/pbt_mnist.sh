#!/usr/bin/env bash
# Issue 29, benchmark 2: population-based training against ASHA on MNIST with
# swept-train's CNN (SGD with momentum, batch 64, constant lr: PBT makes the
# schedule), on the same space (lr log-uniform 0.002-0.1, momentum 0.5-0.95)
# and the same step budget B = 4 x MAX_STEPS:
#   pbt   population 4, lr and momentum mutated every 100 steps, MAX_STEPS
#         steps per member, 4 members at once (`--slots 4`);
#   asha  random search with early_terminate {type: asha, min_resource: 100,
#         reduction_factor: 3}, one trial at a time (`--slots 1`), as many
#         trials as B holds at ASHA's expected ~300 steps a trial;
#   asha4 the same ASHA search with 4 trials at once (`--slots 4`): PBT's
#         concurrency, so that both pay for 4 models in flight.
# Both rank on val_accuracy; every trial also reports test_accuracy every 100
# steps (swept-train --test_every, for this measurement only). Measured: the
# total training steps, all members/trials together, until one first reports
# test accuracy >= 99.0 %: for PBT 4 x the step at which the first member
# gets there (the members advance together, interval by interval); for ASHA
# the steps of every trial before the first to get there (they ran one after
# another) plus its step; for asha4 the steps every trial had run at the
# moment (wall clock) the first reported test accuracy >= 99.0 %: each
# trial's command runs under bench/line_times.py, which stamps every line
# it prints with the time it came, and each trial counts with the last step
# it had printed by then (lines every 10 steps: --log_every 10, so a running
# trial is counted at most 9 steps short). Not reached within B: reported as "> B". Median of
# SEEDS seeds; target: PBT needs fewer steps. The steps a member runs past an
# interval before its SIGTERM lands (then replaced by its donor's checkpoint)
# are not counted; the log says how many segments there were.
# Needs MNIST (scripts/fetch-mnist.sh) and swept-train beside swept.
# Usage: bench/pbt_mnist.sh [BUILD_DIR] [SEEDS] [MAX_STEPS]   (defaults: build, 3, 3000)
#   BUILD_DIR holds bin/swept and bin/swept-train (a GPU bundle's folder works).
#   DEVICE=cuda: every trial trains on the GPU (swept-train --device=cuda), a
#     fifth of its memory each (resources.gpu_memory_fraction 0.2), so the four
#     members share one GPU; DEVICE=cpu (the default) runs them on CPU threads.
#   PARALLEL=N: run N searches at once (default 1). Only steps are measured, and
#     neither search's decisions depend on time (PBT's rounds wait for every
#     member; ASHA runs one trial at a time), so this changes the wall time only.
#   GPUS: passed to swept run --gpus with DEVICE=cuda (e.g. fake:1 to check the
#     script with the emulated CUDA build on a machine without a GPU).
#   SEARCHES: which to run (default "pbt asha asha4").
#   TARGET: the test accuracy to reach (default 0.99; a tiny run on a stand-in
#     data set sets it lower, tests/pbt_mnist_count_test.sh).
#   KEEP=DIR: keep each search's database, log and (asha4) time ledger in DIR.
#   FIRST_SEED: the first seed run (default 1; seeds FIRST_SEED..SEEDS, so a
#     run can add seeds to an earlier one).
#   PBT_INTERVAL: PBT's interval in steps (default 100, the measured setting;
#     MAX_STEPS must be a multiple of it). A longer one makes the exploit less
#     greedy: on a 100-step horizon a lower lr often wins the round and loses
#     the race to 99 % (docs/benchmarks.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[[ -d $build ]] || { echo "no build folder $build" >&2; exit 2; }
build=$(cd "$build" && pwd)  # the trials run in their own folders: an absolute path
seeds=${2:-3}
max_steps=${3:-3000}
swept=$build/bin/swept
train=$build/bin/swept-train
for b in "$swept" "$train"; do
  [[ -x $b ]] || { echo "build it first: cmake --build build --target swept swept-train ($b)" >&2; exit 2; }
done
data=${SWEPT_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/swept/mnist}
[[ -s $data/train-images-idx3-ubyte ]] || { echo "no MNIST in $data: run scripts/fetch-mnist.sh" >&2; exit 2; }
pbt_interval=${PBT_INTERVAL:-100}
[[ $pbt_interval =~ ^[1-9][0-9]*$ ]] || { echo "PBT_INTERVAL must be a positive integer, not $pbt_interval" >&2; exit 2; }
(( max_steps % pbt_interval == 0 )) || { echo "MAX_STEPS must be a multiple of the interval, $pbt_interval" >&2; exit 2; }
searches=${SEARCHES:-pbt asha asha4}
target=${TARGET:-0.99}
for s in $searches; do
  [[ $s == pbt || $s == asha || $s == asha4 ]] || { echo "SEARCHES holds pbt, asha and asha4, not $s" >&2; exit 2; }
done
python3 -c "import sys; t = float(sys.argv[1]); assert 0 < t <= 1" "$target" 2>/dev/null ||
  { echo "TARGET must be an accuracy above 0 and at most 1, not $target" >&2; exit 2; }
if [[ -n ${KEEP:-} ]]; then
  mkdir -p "$KEEP" && tmp=$(cd "$KEEP" && pwd)
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi
budget=$((4 * max_steps))
gpus_flag=--gpus=none
device=${DEVICE:-cpu}
parallel=${PARALLEL:-1}
[[ $device == cpu || $device == cuda ]] || { echo "DEVICE must be cpu or cuda, not $device" >&2; exit 2; }
[[ $parallel =~ ^[1-9][0-9]*$ ]] || { echo "PARALLEL must be a positive integer, not $parallel" >&2; exit 2; }
cores=$(nproc)
pbt_threads=$(( cores >= 8 ? cores / 4 : 1 ))
asha_threads=$(( cores > 8 ? 8 : cores ))
if (( parallel > 1 )); then  # the searches share the cores
  pbt_threads=$(( pbt_threads / parallel > 0 ? pbt_threads / parallel : 1 ))
  asha_threads=$(( asha_threads / parallel > 0 ? asha_threads / parallel : 1 ))
fi
if [[ $device == cuda ]]; then gpus_flag=${GPUS:+--gpus=$GPUS}; pbt_threads=2; asha_threads=2; fi

# Writes $tmp/NAME-SEED.json: the shared space and settings plus the search's own keys.
sweep_file() {  # $1 name, $2 seed, $3 search keys (JSON object), $4 threads per trial
  python3 - "$tmp/$1-$2.json" "$1" "$2" "$3" "$4" "$max_steps" "$train" "$data" "$device" "$root" "$tmp" <<'PY'
import json, sys
path, name, seed, keys, threads, max_steps, train, data, device, root, tmp = sys.argv[1:]
space = {"lr": {"distribution": "log_uniform_values", "min": 0.002, "max": 0.1},
         "momentum": {"min": 0.5, "max": 0.95}}
d = {"name": "pbt-mnist-" + name, "seed": int(seed), "metric": {"name": "val_accuracy", "goal": "maximize"},
     "command": [train, "--data=" + data, "${args}"],
     "parameters": dict(space, model={"value": "cnn"}, optimizer={"value": "momentum"},
                        schedule={"value": "constant"}, batch_size={"value": 64},
                        max_steps={"value": int(max_steps)}, eval_every={"value": 100},
                        test_every={"value": 100}, threads={"value": int(threads)}),
     "max_retries": 2}
if device == "cuda":
    d["parameters"]["device"] = {"value": "cuda"}
    d["resources"] = {"gpu_memory_fraction": 0.2}
d.update(json.loads(keys))
if d["method"] == "pbt":  # only PBT members checkpoint (into SWEPT_CHECKPOINT_DIR) and resume
    d["pbt"]["hyperparam_mutations"] = space
    d["command"].insert(1, "--resume")
if name == "asha4":  # every line stamped with its time (bench/line_times.py), a line every 10 steps
    d["command"] = [root + "/bench/line_times.py", f"{tmp}/{name}-{seed}.times"] + d["command"]
    d["parameters"]["log_every"] = {"value": 10}
json.dump(d, open(path, "w"), indent=1)
PY
}

# Prints "name seed steps segments" for one search.
run_search() {  # $1 name, $2 seed, $3 search keys, $4 slots, $5 threads per trial
  local name=$1 seed=$2 db=$tmp/$1-$2.db
  sweep_file "$name" "$seed" "$3" "$5"
  "$swept" run "$tmp/$name-$seed.json" --db "$db" --workdir "$tmp/work-$name-$seed" --slots "$4" \
    $gpus_flag --dashboard off --progress off >"$tmp/$name-$seed.log" 2>&1 || {
    local rc=$?
    # 7: the sweep ended with trials not completed (ASHA's early-stopped count as done).
    [[ $rc == 7 ]] || { echo "swept run of $name (seed $seed) failed ($rc): $(tail -n 5 "$tmp/$name-$seed.log")" >&2; exit 1; }
  }
  python3 - "$db" "$name" "$seed" "$budget" "$target" "$tmp/$name-$seed.times" <<'PY'
import json, sqlite3, sys
db, name, seed, budget, target, ledger = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
trials = [r[0] for r in con.execute("SELECT id FROM trials ORDER BY idx")]
last = dict(con.execute("SELECT trial_id, MAX(step) FROM metrics GROUP BY trial_id").fetchall())
hits = {}
for tid, step in con.execute(
        "SELECT trial_id, MIN(step) FROM metrics WHERE name = 'test_accuracy' AND value >= ? GROUP BY trial_id",
        (target,)):
    hits[tid] = step
attempts = con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] if con.execute(
    "SELECT name FROM sqlite_master WHERE name = 'attempts'").fetchone() else -1


def at_first_hit(path):
    """asha4: from the time ledger (bench/line_times.py), the moment a trial
    first printed test_accuracy >= target, as (time, trial, step), and each
    trial's last printed step at or before it; (None, {}) when none did."""
    lines = []
    try:
        raw_lines = open(path, encoding="utf-8", errors="replace").readlines()
    except FileNotFoundError:  # no trial printed a line
        raw_lines = []
    for raw in raw_lines:
        parts = raw.rstrip("\n").split(" ", 2)
        try:
            rec = json.loads(parts[2]) if len(parts) == 3 else None
            when, trial = float(parts[1]), int(parts[0])
        except ValueError:
            continue  # not a metrics line (a trial may print anything)
        if isinstance(rec, dict) and isinstance(rec.get("step"), int):
            lines.append((when, trial, rec))
    hit = min(((w, t, r["step"]) for w, t, r in lines if isinstance(r.get("test_accuracy"), (int, float))
               and r["test_accuracy"] >= target), default=None)
    done = {}
    if hit:
        for w, t, r in lines:
            if w <= hit[0]:
                done[t] = max(done.get(t, 0), r["step"])
    return hit, done


hit, done = None, {}
if name == "pbt":
    steps = len(trials) * min(hits.values()) if hits else None
elif name == "asha4":
    hit, done = at_first_hit(ledger)
    steps = sum(done.values()) if hit else None
else:
    steps, spent = None, 0
    for tid in trials:
        if tid in hits:
            steps = spent + hits[tid]
            break
        spent += last.get(tid, 0)
if steps is not None and steps > budget:
    steps = None
print(name, seed, steps if steps is not None else f">{budget}", attempts)
# What happened, for the reader (to stderr, which the caller collects): the
# best test accuracy any trial reached and where; for PBT the exploits and the
# parameters of its best member at the end; for ASHA the trial that got there
# (for asha4 also what every trial had run by then).
best = con.execute("SELECT trial_id, step, value FROM metrics WHERE name = 'test_accuracy' "
                   "ORDER BY value DESC, step LIMIT 1").fetchone()
detail = f"{name} seed {seed}: best test accuracy {best[2]:.4f} (trial {best[0]}, step {best[1]})" if best else \
    f"{name} seed {seed}: no test accuracy reported"
if name == "pbt" and con.execute("SELECT name FROM sqlite_master WHERE name = 'pbt_lineage'").fetchone():
    exploits = con.execute("SELECT COUNT(*) FROM pbt_lineage WHERE donor_trial_id IS NOT NULL").fetchone()[0]
    last = con.execute("SELECT params FROM pbt_lineage WHERE trial_id = ? ORDER BY round DESC LIMIT 1",
                       (best[0],)).fetchone() if best else None
    detail += f"; {exploits} exploits; its last parameters {last[0] if last else '?'}"
elif name == "asha4" and hit:
    params = con.execute("SELECT params FROM trials WHERE id = ?", (hit[1],)).fetchone()[0]
    detail += (f"; first to {target}: trial {hit[1]} at step {hit[2]}, {params}; every trial's steps then: " +
               ", ".join(f"{t}: {s}" for t, s in sorted(done.items())))
elif hits:
    first = min(hits, key=lambda t: trials.index(t))
    params = con.execute("SELECT params FROM trials WHERE id = ?", (first,)).fetchone()[0]
    detail += f"; first to {target}: trial {first} (number {trials.index(first) + 1}) at step {hits[first]}, {params}"
print(detail, file=sys.stderr)
PY
}

: >"$tmp/results"
: >"$tmp/details"
t0=$(date +%s)
asha_trials=$(( budget / 300 ))
# Each search appends its line to $tmp/results; up to $parallel run at once.
jobs_running() { jobs -rp | wc -l; }
for seed in $(seq "${FIRST_SEED:-1}" "$seeds"); do
  for name in $searches; do
    while (( $(jobs_running) >= parallel )); do wait -n || { cat "$tmp/details" >&2; exit 1; }; done
    asha_keys='{"method": "random", "run_cap": '"$asha_trials"',
        "early_terminate": {"type": "asha", "min_resource": 100, "reduction_factor": 3}}'
    if [[ $name == pbt ]]; then
      run_search pbt "$seed" '{"method": "pbt", "pbt": {"population": 4, "interval": '"$pbt_interval"', "max_steps": '"$max_steps"'}}' \
        4 "$pbt_threads" >>"$tmp/results" 2>>"$tmp/details" &
    elif [[ $name == asha ]]; then
      run_search asha "$seed" "$asha_keys" 1 "$asha_threads" >>"$tmp/results" 2>>"$tmp/details" &
    else  # asha4: 4 trials at once, each with PBT's member's threads
      run_search asha4 "$seed" "$asha_keys" 4 "$pbt_threads" >>"$tmp/results" 2>>"$tmp/details" &
    fi
  done
done
while (( $(jobs_running) > 0 )); do wait -n || { cat "$tmp/details" >&2; exit 1; }; done

echo "device: $device$( [[ $device == cuda ]] && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/ /'), searches at once: $parallel, wall $(( $(date +%s) - t0 )) s"
echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "MNIST CNN, budget $budget steps (4 x $max_steps), steps of all trials until one reports test accuracy >= $target:"
python3 - "$tmp/results" "$budget" <<'PY'
import statistics, sys
budget = int(sys.argv[2])
by = {}
for line in open(sys.argv[1]):
    name, seed, steps, attempts = line.split()
    by.setdefault(name, []).append((int(seed), steps, int(attempts)))
for runs in by.values():
    runs.sort()
def value(s):  # "not reached" sorts above every budget
    return float(s[1:]) + 1 if s.startswith(">") else float(s)
med = {}
for name in ("pbt", "asha", "asha4"):
    runs = by.get(name, [])
    if not runs:
        continue
    med[name] = statistics.median(value(s) for _, s, _ in runs)
    shown = f">{budget} (not reached)" if med[name] > budget else f"{med[name]:.0f}"
    print(f"  {name:5s}: " + ", ".join(f"seed {seed}: {s} ({a} attempts)" for seed, s, a in runs) + f"; median {shown}")
    if name == "pbt" and any(a <= 4 for _, _, a in runs):
        print("  warning: a PBT run had no more attempts than members: no exploit round happened "
              "(is method pbt's scheduler side in this swept?)")
for other, how in (("asha", "one at a time"), ("asha4", "4 at once")):
    if "pbt" not in med or other not in med:
        continue
    if med["pbt"] <= budget and med[other] <= budget:
        print(f"ratio pbt/{other}: {med['pbt'] / med[other]:.2f}")
    print(f"target (PBT fewer steps than ASHA, {how}):", "met" if med["pbt"] < med[other] else "NOT met")
PY
sort "$tmp/details" 2>/dev/null || true
