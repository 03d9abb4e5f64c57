#!/usr/bin/env bash
# bench/gpu_sweep.sh: swept run on a real GPU, as a user runs it. Part of the
# bundle that bench/trainer_gpu.sh --pack makes; its run.sh calls this after the
# GPU tests and the benchmark when the bundle holds bin/swept.
#
# Checks what no emulated build can: NVML finds the GPUs, whole-GPU trials get
# CUDA_VISIBLE_DEVICES, trials with gpu_memory_fraction share one GPU, and
# swept-train --device=cuda runs as a trial. Two sweeps (CNN on whole GPUs, MLP
# at 0.3 of a GPU), each must exit 0 with every trial completed.
#
# Usage: bench/gpu_sweep.sh BUNDLE_DIR   (bin/swept, bin/swept-train, mnist-raw/,
#        swlib/ with swept's libraries; LD_LIBRARY_PATH already set for the
#        trainer by run.sh). DEVICE=cpu GPUS=fake:1 checks the script on a machine
#        without a GPU (GPUS is passed to swept run --gpus).
set -uo pipefail
B="$(cd "${1:?usage: gpu_sweep.sh BUNDLE_DIR}" && pwd)"
DEVICE="${DEVICE:-cuda}"
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
cd "$W"
swept() { LD_LIBRARY_PATH="$B/swlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$B/bin/swept" "$@"; }
cat >whole.yaml <<Y
name: gpu-whole
method: grid
metric: {name: val_accuracy, goal: maximize}
parameters:
  model: {value: cnn}
  device: {value: $DEVICE}
  data: {value: $B/mnist-raw}
  optimizer: {value: adam}
  lr: {values: [0.001, 0.002]}
  epochs: {value: 1}
resources: {gpus: 1}
Y
cat >shared.yaml <<Y
name: gpu-shared
method: grid
metric: {name: val_accuracy, goal: maximize}
parameters:
  model: {value: mlp}
  device: {value: $DEVICE}
  data: {value: $B/mnist-raw}
  lr: {values: [0.1, 0.5, 1.0]}
  epochs: {value: 2}
resources: {gpu_memory_fraction: 0.3}
Y
failed=0
for s in whole shared; do
  echo "== swept run $s.yaml"
  start=$(date +%s.%N)
  LD_LIBRARY_PATH="$B/swlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 300 \
    "$B/bin/swept" run "$s.yaml" --db "$s.db" --dashboard off --progress lines ${GPUS:+--gpus "$GPUS"} -v 2>&1
  rc=$?
  echo "gpu_sweep: $s.yaml exit $rc, $(python3 -c "print(round($(date +%s.%N) - $start, 2))") s"
  swept trials 1 --db "$s.db"
  find swept-work -type f -name 'stderr*' | sort | while read -r f; do echo "-- $f"; tail -3 "$f"; done
  [[ $rc -eq 0 ]] || failed=$((failed + 1))
  rm -rf swept-work
done
echo "gpu sweeps: $((2 - failed)) passed, $failed failed"
[[ $failed -eq 0 ]]
