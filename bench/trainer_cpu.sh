#!/usr/bin/env bash
# Training throughput of swept-train's CPU backend against the PyTorch peer
# (../shared/bench/torch_mnist.py, run by Debian's /usr/bin/python3) on the
# same machine in the same run, plus the machine's SGEMM rate as the yardstick
# for the CNN. Models, batches and optimizers match the peer exactly:
#   mlp: 784-100-10 sigmoid, plain SGD lr 0.5, batch 100
#   cnn: conv5x5x32-pool-conv5x5x64-pool-fc1024-fc10 (ReLU), Adam lr 1e-3, batch 128
# Throughput is samples/s over the timed steps after a warm-up (the peer's 10
# warm-up steps, then 2000 MLP / 50 CNN steps). The peer runs twice, with its
# default thread count and with as many threads as swept-train; ratios are
# taken against the FASTER of the two. Runs alternate (ours, peer, ours, peer,
# ...) ROUNDS times and each figure is the median, because this machine is
# shared: absolute numbers are noise, the ratio in one run is the result.
#
# Usage: bench/trainer_cpu.sh [DATA_DIR]   (default: $SWEPT_DATA_DIR, else data/mnist)
# Env:   BUILD_DIR (default build), THREADS (default: all cores), ROUNDS (default 3),
#        MODELS (default "mlp cnn")
# Prints a human summary (with every round's figures) and one JSON line per
# model on stdout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${1:-${SWEPT_DATA_DIR:-$root/data/mnist}}
build=${BUILD_DIR:-$root/build}
threads=${THREADS:-$(nproc)}
rounds=${ROUNDS:-3}
models=${MODELS:-mlp cnn}
peer=$root/../shared/bench/torch_mnist.py
trainer=$build/bin/swept-train

[[ -f $peer ]] || { echo "trainer_cpu: the PyTorch peer is missing at $peer" >&2; exit 2; }
[[ -f $data/train-images-idx3-ubyte ]] || {
  echo "trainer_cpu: no MNIST in $data: pass the folder, set SWEPT_DATA_DIR, or run scripts/fetch-mnist.sh" >&2
  exit 2
}
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "trainer_cpu: /usr/bin/python3 has no torch (apt-get install python3-torch)" >&2; exit 2; }
if [[ ! -x $trainer ]]; then
  cmake -S "$root" -B "$build" -G Ninja >/dev/null
  cmake --build "$build" --target swept-train -j 2 >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g++ -O2 -std=c++17 $(pkg-config --cflags openblas) "$root/bench/trainer_cpu_sgemm.cpp" \
  -o "$tmp/sgemm" $(pkg-config --libs openblas)

# samples/s of swept-train over the windows after the first (the warm-up).
ours() {  # model batch steps extra-args...
  local model=$1 batch=$2 steps=$3
  shift 3
  "$trainer" --data="$data" --model="$model" --batch_size="$batch" --max_steps=$((10 + steps)) \
    --log_every=10 --val_fraction=0 --threads="$threads" "$@" 2>/dev/null |
    python3 -c '
import json, sys
windows = [json.loads(l) for l in sys.stdin if "\"samples_per_sec\"" in l]
timed = windows[1:]
samples = sum(10 * '"$batch"' for _ in timed)
seconds = sum(10 * '"$batch"' / w["samples_per_sec"] for w in timed)
print(round(samples / seconds, 1))'
}
peer_sps() {  # model threads(0: default)
  /usr/bin/python3 "$peer" --data "$data" --model "$1" --threads "$2" 2>/dev/null |
    python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["samples_per_sec"])'
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

sgemm1=() sgemm_all=()
for _ in $(seq "$rounds"); do
  sgemm1+=("$("$tmp/sgemm" 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["gflops"])')")
  sgemm_all+=("$("$tmp/sgemm" "$threads" | python3 -c 'import json,sys; print(json.load(sys.stdin)["gflops"])')")
done
gemm_rate=$(median "${sgemm_all[@]}")
gemm_rate1=$(median "${sgemm1[@]}")

declare -A result rounds_of
for model in $models; do
  if [[ $model == mlp ]]; then
    args=(--activation=sigmoid --hidden=100 --optimizer=sgd --lr=0.5 --schedule=constant)
    batch=100 steps=2000
  else
    args=(--optimizer=adam --lr=0.001 --schedule=constant)
    batch=128 steps=50
  fi
  o=() p1=() pn=()
  for _ in $(seq "$rounds"); do
    o+=("$(ours "$model" "$batch" "$steps" "${args[@]}")")
    p1+=("$(peer_sps "$model" 0)")
    pn+=("$(peer_sps "$model" "$threads")")
  done
  result[$model]="$(median "${o[@]}") $(median "${p1[@]}") $(median "${pn[@]}")"
  rounds_of[$model]="$(IFS=,; echo "${o[*]}") $(IFS=,; echo "${p1[*]}") $(IFS=,; echo "${pn[*]}")"
done

load=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "machine: $cpu, $(nproc) cores; load average during the run: $load; $(date -u +%FT%TZ)"
echo "SGEMM (OpenBLAS, 2048^3): ${gemm_rate1} GFLOP/s on 1 thread, ${gemm_rate} GFLOP/s on $threads"
for model in $models; do
  read -r ours_sps peer1 peern <<<"${result[$model]}"
  read -r ours_all peer1_all peern_all <<<"${rounds_of[$model]}"
  python3 - "$model" "$ours_sps" "$peer1" "$peern" "$threads" "$gemm_rate" "$rounds" \
    "$ours_all" "$peer1_all" "$peern_all" <<'EOF'
import json, sys
model, ours, p1, pn, threads, gemm, rounds = sys.argv[1], *map(float, sys.argv[2:8])
per_round = [[float(v) for v in a.split(",")] for a in sys.argv[8:11]]
best_peer = max(p1, pn)
line = {"bench": "trainer_cpu", "model": model, "threads": int(threads), "rounds": int(rounds),
        "swept_samples_per_sec": ours, "torch_samples_per_sec_default_threads": p1,
        f"torch_samples_per_sec_{int(threads)}_threads": pn, "ratio_vs_best_torch": round(ours / best_peer, 2)}
text = f"{model}: swept-train {ours:.0f} samples/s, PyTorch {p1:.0f} (default threads) / {pn:.0f} ({int(threads)} threads): ratio {ours / best_peer:.2f}x"
if model == "cnn":
    gflops = ours * 83e6 / 1e9  # ~83 MFLOP per sample, forward and backward
    line["gflops"] = round(gflops, 1)
    line["share_of_sgemm_rate"] = round(gflops / gemm, 3)
    text += f"; {gflops:.1f} GFLOP/s = {100 * gflops / gemm:.0f}% of the machine's SGEMM rate"
line["per_round"] = {"swept": per_round[0], "torch_default_threads": per_round[1],
                     f"torch_{int(threads)}_threads": per_round[2]}
print(text)
print(f"  per round (run order): swept {per_round[0]}, PyTorch default {per_round[1]}, "
      f"PyTorch {int(threads)} threads {per_round[2]}")
print(json.dumps(line))
EOF
done
