#!/usr/bin/env bash
# bench/trainer_gpu.sh: swept-train's CUDA backend against the PyTorch peer on
# the same GPU, in one run (issue 4's speed targets; results go to the
# "Trainer (GPU)" section of docs/benchmarks.md, with the device name).
#
# Measures, for both programs with the same models, batches and optimizers:
#   1. MLP 784-100-10 (sigmoid), SGD lr 0.5, batch 100: samples/s after warm-up
#   2. CNN (conv32-pool-conv64-pool-fc1024-fc10), Adam lr 1e-3, batch 128: samples/s,
#      in FP32 (the default) and with SWEPT_CUDA_TF32=1 (PyTorch's default for convolutions)
# and prints the ratios swept/PyTorch (targets: MLP >= 3, CNN >= 1.5); then
#   3. time to 99% MNIST test accuracy with the CNN, from process start (data
#      already on local disk), for swept-train: the wall time of the shortest
#      run (1, 2, 3 ... epochs) whose final test accuracy reaches 0.99.
#
# Usage: bench/trainer_gpu.sh [--data DIR] [--bin PATH/swept-train] [--steps N]
#        bench/trainer_gpu.sh --pack OUT.tgz   (on the build machine: see below)
#   DIR:   the four MNIST IDX files (default: data/mnist; --pack also takes their .gz)
#   PEER:  env var, path of torch_mnist.py (default: ../shared/bench/torch_mnist.py,
#          else shared/bench/torch_mnist.py beside the repository)
#   DEVICE: env var, cuda (default) or cpu (only to check this script itself)
# Output: one JSON line per measurement on stdout, a summary table on stderr.
#
# Needs an NVIDIA driver 580 or newer (the CUDA 13 runtime is linked statically;
# swept-train --version says so). trainer/cuda/README.md has the recipe.
#
# On a GPU machine that cannot build swept (the device tool's machines have
# nvcc and PyTorch but not OpenBLAS or Boost), --pack OUT.tgz bundles, on the
# build machine: swept-train and the CUDA test binary, the shared libraries
# they need that are not in glibc, gzipped MNIST, torch_mnist.py and this
# script. There: tar xzf OUT.tgz -C /tmp/sg && /tmp/sg/run.sh (run.sh puts
# lib/ and the PyTorch wheels' nvidia/*/lib folders, where cuBLAS 13, cuDNN 9
# and NCCL live, on LD_LIBRARY_PATH, runs the GPU tests, then this benchmark).
# docs/benchmarks.md ("Trainer (GPU)") gives the device-tool command.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DATA="$ROOT/data/mnist"
BIN="$ROOT/build/bin/swept-train"
STEPS=2000
MAX_EPOCHS_TO_99=4
DEVICE="${DEVICE:-cuda}"
PYTHON="${PYTHON:-python3}"
PACK=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pack) PACK="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --max-epochs) MAX_EPOCHS_TO_99="$2"; shift 2 ;;
    -h|--help) sed -n 2,35p "$0"; exit 0 ;;
    *) echo "trainer_gpu.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
PEER="${PEER:-}"
if [[ -z "$PEER" ]]; then
  for p in "$ROOT/../shared/bench/torch_mnist.py" "$ROOT/shared/bench/torch_mnist.py"; do
    [[ -f "$p" ]] && PEER="$p" && break
  done
fi
if [[ -n "$PACK" ]]; then
  TESTS="$(dirname "$BIN")/trainer_cuda_gpu_tests"
  for f in "$BIN" "$TESTS"; do
    [[ -x "$f" ]] || { echo "trainer_gpu.sh --pack: $f not found: build swept-train and trainer_cuda_gpu_tests" >&2; exit 2; }
  done
  STAGE="$(mktemp -d)"
  mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/mnist"
  cp "$BIN" "$TESTS" "$STAGE/bin/"
  cp "$0" "$STAGE/trainer_gpu.sh"
  # swept itself, for gpu_sweep.sh (a sweep run as a user runs it); its
  # libraries go to swlib/, used by swept alone (not by PyTorch's Python).
  SWEPT_BIN="$(dirname "$BIN")/swept"
  if [[ -x "$SWEPT_BIN" ]]; then
    mkdir -p "$STAGE/swlib"
    cp "$SWEPT_BIN" "$STAGE/bin/"
    cp "$ROOT/bench/gpu_sweep.sh" "$STAGE/gpu_sweep.sh"
    cp "$ROOT/bench/pbt_mnist.sh" "$STAGE/pbt_mnist.sh"
    ldd "$SWEPT_BIN" | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libresolv.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
        *) cp -L "$lib" "$STAGE/swlib/" ;;
      esac
    done
  else
    echo "trainer_gpu.sh --pack: no $SWEPT_BIN: the bundle will not run gpu_sweep.sh" >&2
  fi
  [[ -n "$PEER" && -f "$PEER" ]] && cp "$PEER" "$STAGE/torch_mnist.py"
  # Every shared library ldd resolves outside glibc's own set.
  ldd "$BIN" "$TESTS" | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      *) cp -L "$lib" "$STAGE/lib/" ;;
    esac
  done
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    if [[ -f "$DATA/$f" ]]; then gzip -9c "$DATA/$f" >"$STAGE/mnist/$f.gz"; else cp "$DATA/$f.gz" "$STAGE/mnist/"; fi
  done
  cat >"$STAGE/run.sh" <<'RUN'
#!/usr/bin/env bash
# Unpacked from bench/trainer_gpu.sh --pack: GPU tests, then the benchmark.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
WHEELS="$(python3 -c 'import glob, os, site
dirs = set()
for sp in site.getsitepackages():
    for f in glob.glob(os.path.join(sp, "nvidia", "**", "lib*.so*"), recursive=True):
        dirs.add(os.path.dirname(f))
print(":".join(sorted(dirs)))' 2>/dev/null)"
export LD_LIBRARY_PATH="$HERE/lib${WHEELS:+:$WHEELS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$HERE/mnist-raw"
for f in "$HERE"/mnist/*.gz; do gunzip -c "$f" >"$HERE/mnist-raw/$(basename "$f" .gz)"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
# swept-train links the CUDA 13 runtime statically: it needs the R580 driver or newer.
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
if [[ -n "$driver" && "${driver%%.*}" -lt 580 ]]; then
  echo "run.sh: NVIDIA driver $driver is older than 580, which swept-train's CUDA 13 runtime needs: update the driver"
  exit 4
fi
passed=0; failed=0; skipped=0; bench=0
# PBT_ONLY=1 (with PBT_MNIST) skips the tests, the benchmark and the sweeps.
if [[ -z "${PBT_ONLY:-}" ]]; then
echo "== GPU tests, one process per case as CTest runs them (exit 77 = skipped)"
export SWEPT_TRAIN_BIN="$HERE/bin/swept-train" SWEPT_TEST_SCRATCH=/tmp/swept-test-scratch
T="$HERE/bin/trainer_cuda_gpu_tests"
while IFS= read -r name; do
  "$T" --no-intro=true --no-version=true --test-case="${name//,/\\,}" >/tmp/case.txt 2>&1
  rc=$?
  case $rc in
    0) passed=$((passed + 1)); echo "PASSED  $name" ;;
    77) skipped=$((skipped + 1)); echo "SKIPPED $name: $(grep SKIPPED /tmp/case.txt | head -1)" ;;
    *) failed=$((failed + 1)); echo "FAILED  $name (exit $rc)"; cat /tmp/case.txt ;;
  esac
done < <("$T" --list-test-cases --no-intro=true --no-version=true | grep -v '^\[doctest\]' | grep -v '^====')
echo "gpu tests: $passed passed, $failed failed, $skipped skipped"
echo "== benchmark"
PEER="$HERE/torch_mnist.py" "$HERE/trainer_gpu.sh" --bin "$HERE/bin/swept-train" --data "$HERE/mnist-raw" "$@"
bench=$?
if [[ -x "$HERE/gpu_sweep.sh" ]]; then
  echo "== sweeps on the GPU"
  "$HERE/gpu_sweep.sh" "$HERE"
fi
fi
# PBT_MNIST="SEEDS MAX_STEPS" adds issue 29's PBT-against-ASHA benchmark on the
# GPU (PBT_PARALLEL searches at once, default 6).
if [[ -n "${PBT_MNIST:-}" && -x "$HERE/pbt_mnist.sh" ]]; then
  echo "== PBT against ASHA on MNIST (bench/pbt_mnist.sh $PBT_MNIST)"
  # shellcheck disable=SC2086
  SWEPT_DATA_DIR="$HERE/mnist-raw" DEVICE=cuda PARALLEL="${PBT_PARALLEL:-6}" \
    LD_LIBRARY_PATH="$HERE/swlib:$LD_LIBRARY_PATH" "$HERE/pbt_mnist.sh" "$HERE" $PBT_MNIST
fi
[[ $failed -eq 0 && $bench -eq 0 ]]
RUN
  chmod +x "$STAGE/run.sh"
  tar czf "$PACK" -C "$STAGE" .
  rm -rf "$STAGE"
  echo "trainer_gpu.sh: packed $(du -h "$PACK" | cut -f1) into $PACK" >&2
  exit 0
fi
[[ -x "$BIN" ]] || { echo "trainer_gpu.sh: $BIN not found: build swept-train first (cmake --build build --target swept-train)" >&2; exit 2; }
[[ -f "$DATA/train-images-idx3-ubyte" || -n "$PACK" ]] || { echo "trainer_gpu.sh: no MNIST in $DATA: run scripts/fetch-mnist.sh or pass --data DIR" >&2; exit 2; }
[[ -n "$PEER" && -f "$PEER" ]] || { echo "trainer_gpu.sh: torch_mnist.py not found: set PEER=path/to/torch_mnist.py" >&2; exit 2; }

DEVICE_NAME="$DEVICE"
if [[ "$DEVICE" == cuda ]] && command -v nvidia-smi >/dev/null; then
  DEVICE_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
LOG_EVERY=$(( STEPS / 4 > 0 ? STEPS / 4 : 1 ))

# swept-train's throughput: the median samples_per_sec of its log windows after
# the first (which holds start-up, cuDNN planning and graph capture).
swept_rate() {  # model, then swept-train flags
  local model="$1"; shift
  "$BIN" --device="$DEVICE" --data="$DATA" --model="$model" --max_steps="$STEPS" \
    --log_every="$LOG_EVERY" --val_fraction=0 "$@" >"$TMP/$model.jsonl" 2>"$TMP/$model.err" || {
      echo "trainer_gpu.sh: swept-train failed:" >&2; cat "$TMP/$model.err" >&2; exit 1; }
  "$PYTHON" - "$TMP/$model.jsonl" <<'PY'
import json, statistics, sys
rates = [json.loads(l)["samples_per_sec"] for l in open(sys.argv[1])
         if l.startswith("{") and "samples_per_sec" in l]
if len(rates) < 2:
    sys.exit("trainer_gpu.sh: swept-train printed fewer than two throughput lines")
print(statistics.median(rates[1:]))
PY
}

peer_rate() {  # model
  "$PYTHON" "$PEER" --device "$DEVICE" --data "$DATA" --model "$1" --steps "$STEPS" \
    >"$TMP/peer-$1.json" 2>"$TMP/peer-$1.err" || {
      echo "trainer_gpu.sh: the PyTorch peer failed:" >&2; cat "$TMP/peer-$1.err" >&2; exit 1; }
  "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_sec"])' "$TMP/peer-$1.json"
}

report() {  # name swept peer target
  "$PYTHON" - "$@" "$DEVICE_NAME" <<'PY'
import json, sys
name, swept, peer, target, device = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
ratio = swept / peer
print(json.dumps({"bench": name, "device": device, "swept_samples_per_sec": round(swept, 1),
                  "pytorch_samples_per_sec": round(peer, 1), "ratio": round(ratio, 3),
                  "target_ratio": target, "meets_target": ratio >= target}))
print(f"{name:<10} swept {swept:>12.0f}/s  pytorch {peer:>12.0f}/s  ratio {ratio:6.2f} (target {target})",
      file=sys.stderr)
PY
}

MLP_FLAGS=(--hidden=100 --optimizer=sgd --lr=0.5 --batch_size=100)
CNN_FLAGS=(--optimizer=adam --lr=0.001 --batch_size=128)
# Assignments, so that a failed run stops the script (set -e).
swept_mlp="$(swept_rate mlp "${MLP_FLAGS[@]}")"
peer_mlp="$(peer_rate mlp)"
report mlp_b100 "$swept_mlp" "$peer_mlp" 3.0
swept_cnn="$(swept_rate cnn "${CNN_FLAGS[@]}")"
peer_cnn="$(peer_rate cnn)"
report cnn_b128 "$swept_cnn" "$peer_cnn" 1.5
# PyTorch lets cuDNN use TF32 for convolutions by default; swept-train only
# with SWEPT_CUDA_TF32=1. Both rows are reported; the FP32 one is the default.
swept_cnn_tf32="$(SWEPT_CUDA_TF32=1 swept_rate cnn "${CNN_FLAGS[@]}")"
report cnn_b128_tf32 "$swept_cnn_tf32" "$peer_cnn" 1.5

# Time to 99% test accuracy with the CNN, from process start to exit.
for epochs in $(seq 1 "$MAX_EPOCHS_TO_99"); do
  start=$(date +%s.%N)
  "$BIN" --device="$DEVICE" --data="$DATA" --model=cnn "${CNN_FLAGS[@]}" --epochs="$epochs" \
    --log_every=100000 >"$TMP/to99.jsonl" 2>"$TMP/to99.err" || {
      echo "trainer_gpu.sh: swept-train failed:" >&2; cat "$TMP/to99.err" >&2; exit 1; }
  end=$(date +%s.%N)
  acc=$("$PYTHON" -c 'import json,sys
lines=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print([l for l in lines if l.get("final")][-1]["test_accuracy"])' "$TMP/to99.jsonl")
  wall=$("$PYTHON" -c "print(round($end - $start, 3))")
  echo "{\"bench\": \"cnn_time_to_99\", \"device\": \"$DEVICE_NAME\", \"epochs\": $epochs, \"test_accuracy\": $acc, \"wall_seconds_from_start\": $wall}"
  echo "cnn to 99%: $epochs epoch(s), test accuracy $acc, $wall s from process start" >&2
  if "$PYTHON" -c "import sys; sys.exit(0 if $acc >= 0.99 else 1)"; then break; fi
done
