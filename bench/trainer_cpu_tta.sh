#!/usr/bin/env bash
# Time to accuracy on the CPU: wall time from process start to a known MNIST
# test accuracy of at least 99.0% with the CNN, swept-train (its defaults for
# --model=cnn, nothing else set but --data and --threads) against PyTorch with
# the same recipe (bench/trainer_cpu_tta_torch.py: same network, Adam, cosine
# learning rate, batch, epochs and 55000 training images) in the same run.
# The recipe's figures (epochs, lr, batch) are read from `swept-train --help`,
# so the peer follows whatever swept-train's defaults are. Each time is the
# wall time of the whole process (start-up, data loading, training, and, for
# swept-train, its per-epoch validation too) until it prints its test
# accuracy. The peer runs with its default thread count and with as many
# threads as swept-train; the ratio is taken against the faster of the two
# that reached 99.0%. No OPENBLAS_* variable is set.
#
# Usage: bench/trainer_cpu_tta.sh [DATA_DIR]   (default: $SWEPT_DATA_DIR, else data/mnist)
# Env:   BUILD_DIR (default build), THREADS (default: all cores), ROUNDS (default 1), SEED (default 0),
#        PEER_THREADS (default "0 THREADS": the peer's thread counts, 0 its default)
# Each result is also reported on stderr as it comes (a run takes minutes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${1:-${SWEPT_DATA_DIR:-$root/data/mnist}}
build=${BUILD_DIR:-$root/build}
threads=${THREADS:-$(nproc)}
rounds=${ROUNDS:-1}
seed=${SEED:-0}
peer_threads=${PEER_THREADS:-0 $threads}  # 0: PyTorch's default
trainer=$build/bin/swept-train
peer=$root/bench/trainer_cpu_tta_torch.py
target=0.99

[[ -f $data/train-images-idx3-ubyte ]] || {
  echo "trainer_cpu_tta: no MNIST in $data: pass the folder, set SWEPT_DATA_DIR, or run scripts/fetch-mnist.sh" >&2
  exit 2
}
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "trainer_cpu_tta: /usr/bin/python3 has no torch (scripts/install-deps.sh --bench)" >&2; exit 2; }
if [[ ! -x $trainer ]]; then
  cmake -S "$root" -B "$build" -G Ninja >/dev/null
  cmake --build "$build" --target swept-train -j 2 >/dev/null
fi

# The CNN recipe as swept-train's --help states its defaults.
help=$("$trainer" --help | tr -s ' \n' '  ')  # one line: the help wraps at 80 columns
default_of() { sed -n "s/.*--$1 arg (=\([^)]*\)).*/\1/p" <<<"$help" | head -1; }
epochs=$(sed -n 's/.*epochs to train (default: [0-9]* mlp, \([0-9]*\) cnn).*/\1/p' <<<"$help")
batch=$(sed -n 's/.*global batch size, split over replicas (default: [0-9]* mlp, \([0-9]*\) cnn).*/\1/p' <<<"$help")
lr=$(sed -n 's/.*learning rate > 0 (default:.* adam [0-9.e-]* mlp \/ \([0-9.e-]*\) cnn).*/\1/p' <<<"$help")
schedule=$(default_of schedule)
[[ -n $epochs && -n $batch && -n $lr && $schedule == cosine ]] || {
  echo "trainer_cpu_tta: cannot read the CNN recipe from swept-train --help (epochs '$epochs', batch '$batch', lr '$lr', schedule '$schedule')" >&2
  exit 1
}

now() { date +%s.%N; }
ours() {
  local t0 line
  t0=$(now)
  line=$("$trainer" --data="$data" --model=cnn --threads="$threads" --seed="$seed" 2>/dev/null | tail -1)
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["test_accuracy"], round(float(sys.argv[3])-float(sys.argv[2]),2))' \
    "$line" "$t0" "$(now)"
}
theirs() {  # threads (0: default)
  local t0 line
  t0=$(now)
  line=$(/usr/bin/python3 "$peer" --data "$data" --epochs "$epochs" --lr "$lr" --batch-size "$batch" --threads "$1" --seed "$seed" 2>/dev/null)
  python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["test_accuracy"], round(float(sys.argv[3])-float(sys.argv[2]),2), j["threads"])' \
    "$line" "$t0" "$(now)"
}

results=()
for _ in $(seq "$rounds"); do
  results+=("swept $(ours)")
  echo "trainer_cpu_tta: swept-train: ${results[-1]#swept } (test accuracy, seconds)" >&2
  for t in $peer_threads; do
    results+=("torch $(theirs "$t")")
    echo "trainer_cpu_tta: PyTorch --threads $t: ${results[-1]#torch } (test accuracy, seconds, threads)" >&2
  done
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores; load average after the run: $load; $(date -u +%FT%TZ)"
echo "recipe: CNN, Adam lr $lr, cosine schedule, batch $batch, $epochs epochs, seed $seed; swept-train on $threads threads ($("$trainer" --version | sed -n 's/^CPU kernels: //p'))"
printf '%s\n' "${results[@]}" | python3 -c '
import json, statistics, sys
target = float(sys.argv[1])
runs = {"swept": [], "torch": {}}
for line in sys.stdin:
    parts = line.split()
    if parts[0] == "swept":
        runs["swept"].append((float(parts[1]), float(parts[2])))
    else:
        runs["torch"].setdefault(int(parts[3]), []).append((float(parts[1]), float(parts[2])))
def summary(rs):
    return {"test_accuracy": [a for a, _ in rs], "seconds": [s for _, s in rs],
            "median_seconds": statistics.median(s for _, s in rs), "reached": all(a >= target for a, _ in rs)}
ours = summary(runs["swept"])
peers = {t: summary(rs) for t, rs in runs["torch"].items()}
def describe(name, r):
    note = "" if r["reached"] else "  (did NOT reach %.1f%%)" % (100 * target)
    return "%s: %.1f s, test accuracy %s%s" % (name, r["median_seconds"], r["test_accuracy"], note)
print(describe("swept-train", ours))
for t, p in sorted(peers.items()):
    print(describe("PyTorch, %d thread(s)" % t, p))
reached = [p["median_seconds"] for p in peers.values() if p["reached"]]
line = {"bench": "trainer_cpu_tta", "target_accuracy": target, "swept": ours, "torch": {str(t): p for t, p in peers.items()}}
if ours["reached"] and reached:
    line["speedup_vs_fastest_torch"] = round(min(reached) / ours["median_seconds"], 2)
    print("time to %.1f%%: swept-train %.2fx faster than the faster PyTorch" % (100 * target, min(reached) / ours["median_seconds"]))
print(json.dumps(line))
' "$target"
