#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs every test:
# installs the dependencies (install-deps.sh's build, runtime, data, test and
# cuda groups), configures and builds swept in build/, and runs
# CTest (unit tests, integration tests with real processes, the parser's fuzz
# run, the dashboard's browser test). Then builds the CUDA backend's own
# sources for the host in build-emu/ (-DSWEPT_CUDA=EMULATED: only swept-train
# and the CUDA tests) and runs its GPU test suite there, so the CUDA code is
# tested on every run without a GPU (trainer/cuda/README.md). Idempotent.
# Exit status: the first failing CTest's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh build runtime data test cuda
# demo.sh's flags (scripts/configure.sh: warnings are errors in both), so that
# after demo.sh only the tests are compiled here.
scripts/configure.sh build -DSWEPT_TESTS=ON
cmake --build build
status=0
ctest --test-dir build --output-on-failure --timeout 900 -j "$(nproc)" || status=$?

echo "== the CUDA backend, emulated on the host (build-emu/): ctest -R '^trainer/cuda' (the GPU suite, label gpu, and the CUDA unit tests)"
# Its own flags: its trainer objects differ from build/'s (SWEPT_HAVE_CUDA and
# the emulation's), so there is nothing worth sharing with build/.
cmake -S . -B build-emu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSWEPT_CUDA=EMULATED >/dev/null
cmake --build build-emu --target swept-train trainer_cuda_gpu_tests trainer_cuda_tests
ctest --test-dir build-emu -R '^trainer/cuda' --output-on-failure --timeout 900 -j "$(nproc)" || \
  { rc=$?; [[ $status -ne 0 ]] || status=$rc; }
exit "$status"
