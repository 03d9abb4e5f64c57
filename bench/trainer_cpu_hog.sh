#!/usr/bin/env bash
# Throughput when another process takes a core: one CPU hog (a busy loop) runs
# beside swept-train and the PyTorch peer for the whole measurement. Issue 13:
# a two-thread swept-train must not fall below the single-thread peer's
# throughput under the hog. Measured for each model, in one run: swept-train
# with 2 threads and with 1 thread, the peer with 1 thread, each with the hog
# and (for reference) without it. Same settings as bench/trainer_cpu.sh (MLP:
# sigmoid, SGD lr 0.5, batch 100; CNN: Adam lr 1e-3, batch 128); samples/s
# after the warm-up; medians of ROUNDS alternating rounds. No OPENBLAS_* set.
#
# Usage: bench/trainer_cpu_hog.sh [DATA_DIR]   (default: $SWEPT_DATA_DIR, else data/mnist)
# Env:   BUILD_DIR (default build), ROUNDS (default 3), MODELS (default "mlp cnn")
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${1:-${SWEPT_DATA_DIR:-$root/data/mnist}}
build=${BUILD_DIR:-$root/build}
rounds=${ROUNDS:-3}
models=${MODELS:-mlp cnn}
peer=$root/../shared/bench/torch_mnist.py
trainer=$build/bin/swept-train

[[ -f $peer ]] || { echo "trainer_cpu_hog: the PyTorch peer is missing at $peer" >&2; exit 2; }
[[ -f $data/train-images-idx3-ubyte ]] || {
  echo "trainer_cpu_hog: no MNIST in $data: pass the folder, set SWEPT_DATA_DIR, or run scripts/fetch-mnist.sh" >&2
  exit 2
}
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "trainer_cpu_hog: /usr/bin/python3 has no torch (scripts/install-deps.sh --bench)" >&2; exit 2; }
if [[ ! -x $trainer ]]; then
  cmake -S "$root" -B "$build" -G Ninja >/dev/null
  cmake --build "$build" --target swept-train -j 2 >/dev/null
fi

hog_pid=
start_hog() { bash -c 'while :; do :; done' & hog_pid=$!; }
stop_hog() {
  if [[ -n $hog_pid ]]; then kill "$hog_pid" 2>/dev/null || true; wait "$hog_pid" 2>/dev/null || true; fi
  hog_pid=
}
trap stop_hog EXIT

ours() {  # model batch steps threads extra-args...
  local model=$1 batch=$2 steps=$3 threads=$4
  shift 4
  "$trainer" --data="$data" --model="$model" --batch_size="$batch" --max_steps=$((10 + steps)) \
    --log_every=10 --val_fraction=0 --threads="$threads" "$@" 2>/dev/null |
    python3 -c '
import json, sys
timed = [json.loads(l) for l in sys.stdin if "\"samples_per_sec\"" in l][1:]
print(round(sum(10 * '"$batch"' for _ in timed) / sum(10 * '"$batch"' / w["samples_per_sec"] for w in timed), 1))'
}
theirs() {  # model
  /usr/bin/python3 "$peer" --data "$data" --model "$1" --threads 1 2>/dev/null |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["samples_per_sec"])'
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A out
for model in $models; do
  if [[ $model == mlp ]]; then
    args=(--activation=sigmoid --hidden=100 --optimizer=sgd --lr=0.5 --schedule=constant) batch=100 steps=2000
  else
    args=(--optimizer=adam --lr=0.001 --schedule=constant) batch=128 steps=50
  fi
  for hog in with without; do
    o2=() o1=() p1=()
    for _ in $(seq "$rounds"); do
      [[ $hog == with ]] && start_hog
      o2+=("$(ours "$model" "$batch" "$steps" 2 "${args[@]}")")
      o1+=("$(ours "$model" "$batch" "$steps" 1 "${args[@]}")")
      p1+=("$(theirs "$model")")
      stop_hog
    done
    out[$model.$hog]="$(median "${o2[@]}") $(median "${o1[@]}") $(median "${p1[@]}") $(IFS=,; echo "${o2[*]}/${o1[*]}/${p1[*]}")"
  done
done

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores; load average after the run: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
echo "kernels: $("$trainer" --version | sed -n 's/^CPU kernels: //p')"
for model in $models; do
  python3 - "$model" ${out[$model.with]} ${out[$model.without]} <<'EOF2'
import json, sys
model = sys.argv[1]
w2, w1, wp, w_rounds, n2, n1, np_, n_rounds = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], float(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8]), sys.argv[9]
ok = w2 >= wp
print(f"{model}, with a CPU hog: swept-train 2 threads {w2:.0f} samples/s, 1 thread {w1:.0f}; PyTorch 1 thread {wp:.0f}: "
      f"2-thread swept / 1-thread PyTorch = {w2 / wp:.2f}x ({'met' if ok else 'NOT met'}: must be >= 1); "
      f"second thread {'gains' if w2 >= w1 else 'LOSES'} {abs(w2 / w1 - 1):.0%}")
print(f"{model}, no hog:        swept-train 2 threads {n2:.0f}, 1 thread {n1:.0f}; PyTorch 1 thread {np_:.0f}")
print(f"  per round (2 threads / 1 thread / PyTorch): with hog {w_rounds}; without {n_rounds}")
print(json.dumps({"bench": "trainer_cpu_hog", "model": model,
                  "with_hog": {"swept_2_threads": w2, "swept_1_thread": w1, "torch_1_thread": wp},
                  "without_hog": {"swept_2_threads": n2, "swept_1_thread": n1, "torch_1_thread": np_},
                  "ratio_2_thread_swept_vs_1_thread_torch_with_hog": round(w2 / wp, 2)}))
EOF2
done
