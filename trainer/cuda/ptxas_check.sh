#!/usr/bin/env bash
# Build-time check of the CUDA kernels (a CTest test, trainer/cuda/CMakeLists.txt):
# compiles kernels.cu for the GPU with nvcc -Xptxas -v and reads ptxas's
# report of every kernel: no register spills (spill stores and loads both 0)
# and a stack frame of at most MAX_STACK bytes. Fails if ptxas reports fewer
# kernels than the file has (so it cannot pass by reading nothing).
# Usage: ptxas_check.sh NVCC ARCH MIN_KERNELS MAX_STACK SOURCE -I... (nvcc flags)
set -euo pipefail
nvcc="$1" arch="$2" min_kernels="$3" max_stack="$4" source="$5"
shift 5
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$nvcc" -std=c++17 -arch="$arch" -Xptxas -v -c "$source" -o "$out/kernels.o" "$@" >"$out/log" 2>&1 || {
  cat "$out/log"; echo "ptxas_check: nvcc failed"; exit 1; }
awk -v min="$min_kernels" -v max_stack="$max_stack" '
  /Compiling entry function/ { kernels++ }
  /bytes stack frame/ {
    frames++
    stack = $1; stores = $5; loads = $9
    if (stores != 0 || loads != 0) { print "spills: " prev " " $0; bad = 1 }
    if (stack > max_stack) { print "stack frame over " max_stack " bytes: " prev " " $0; bad = 1 }
  }
  { prev = $0 }
  END {
    printf "ptxas_check: %d kernels compiled, %d function reports read\n", kernels, frames
    if (kernels < min) { print "ptxas_check: expected at least " min " kernels"; exit 1 }
    if (frames < kernels) { print "ptxas_check: a kernel without a stack/spill report"; exit 1 }
    exit bad
  }' "$out/log" || { cat "$out/log"; exit 1; }
