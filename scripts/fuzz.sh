#!/usr/bin/env bash
# Runs one of swept's libFuzzer targets for a bounded time (CTest runs each as
# a `fuzz`-labelled test: sweeps.fuzz.parser, common.fuzz.protocol).
#
# usage: scripts/fuzz.sh TARGET BUILD_DIR SECONDS [SEED_DIR... ] [-libfuzzer_flag=...]
# Configures a separate clang build in BUILD_DIR with -DSWEPT_FUZZ=ON (one
# build serves every target), builds only TARGET, and runs it for SECONDS with
# BUILD_DIR/corpus-TARGET (where libFuzzer adds what it finds; the seed
# folders stay read-only) and the given seed folders and flags. Exit 0 when
# nothing crashed; otherwise libFuzzer's non-zero status, with the crashing
# input saved in BUILD_DIR/crashes-TARGET.
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: scripts/fuzz.sh TARGET BUILD_DIR SECONDS [SEEDS...] [FLAGS...]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
target=$1 build=$2 seconds=$3
shift 3

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  mkdir -p "$build"
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSWEPT_FUZZ=ON -DSWEPT_TESTS=OFF -DSWEPT_CUDA=OFF >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log" >&2; exit 2; }
fi
cmake --build "$build" --target "$target" -j 2

corpus=$build/corpus-$target
mkdir -p "$corpus" "$build/crashes-$target"
"$build/bin/$target" "$corpus" "$@" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build/crashes-$target/" -print_final_stats=1
