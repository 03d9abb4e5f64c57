#!/usr/bin/env bash
# The CUDA backend's kernels and its multi-replica paths under ThreadSanitizer,
# in the emulated build (build-tsan/, -DSWEPT_CUDA=EMULATED). Here a block's
# CUDA threads are OS threads meeting at a barrier for __syncthreads
# (-DSWEPT_CUDA_EMU_THREADS=ON), so a race between a block's threads (a
# missing __syncthreads, two threads writing one element) is a race TSan
# reports; the replica threads of the all-reduce tests run concurrently too.
# Runs the kernel-level GPU tests, the graph-capture test, the same-GPU
# all-reduce test and the NCCL abort test; the whole training runs are left
# out (too slow under TSan with an OS thread per CUDA thread).
# Not part of scripts/test.sh (a third build). About 7 minutes on 2 busy cores
# (2026-11-23: 6 min 39 s wall, most of it the build), no race found. Checked
# that it finds one: without block_sum's last __syncthreads, the softmax case
# reports a data race in block_sum.
# Exit status: the first failure (TSan's exit code 66 on a race).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# Only trainer/cuda, its emulation and its tests are instrumented
# (SWEPT_CUDA_EMU_SANITIZE: the CPU backend's ifunc resolvers cannot be).
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSWEPT_CUDA=EMULATED \
  -DSWEPT_CUDA_EMU_THREADS=ON -DSWEPT_CUDA_EMU_SANITIZE=thread -DSWEPT_SANITIZE= >/dev/null
cmake --build build-tsan --target trainer_cuda_gpu_tests swept-train
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
T=build-tsan/bin/trainer_cuda_gpu_tests
# Kernel-level cases, one process each as CTest runs them.
"$T" --list-test-cases --no-intro=true --no-version=true | grep '^trainer/cuda' |
  grep -v -e 'run (' -e 'follow 1 replica' -e 'end to end' -e 'missing cuDNN' | while IFS= read -r name; do
  echo "== $name"
  "$T" --no-intro=true --no-version=true --test-case="${name//,/\\,}"
done
