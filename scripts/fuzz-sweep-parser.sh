#!/usr/bin/env bash
# Fuzzes the sweep parser, both readers (JSON and YAML), for a bounded time
# (CTest runs it as sweeps.fuzz.parser).
#
# usage: scripts/fuzz-sweep-parser.sh [BUILD_DIR] [SECONDS]
# Configures a separate clang build in BUILD_DIR (default build/fuzz) with
# -DSWEPT_FUZZ=ON, builds only the libFuzzer target sweep_parser_fuzz, and runs
# it for SECONDS (default 30) with examples/ (JSON and YAML) and
# sweeps/testdata/yaml/ as seed corpus and sweeps/fuzz/sweep.dict as dictionary. Exit 0 when nothing crashed; otherwise
# libFuzzer's non-zero status, with the crashing input saved in BUILD_DIR/crashes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/fuzz}
seconds=${2:-30}

if ! command -v clang++ >/dev/null; then
  echo "fuzz-sweep-parser: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSWEPT_FUZZ=ON -DSWEPT_TESTS=OFF -DSWEPT_CUDA=OFF >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log" >&2; exit 2; }
fi
cmake --build "$build" --target sweep_parser_fuzz -j 2

corpus=$build/corpus
mkdir -p "$corpus" "$build/crashes"
# libFuzzer adds what it finds to the first folder; examples stay read-only.
"$build/bin/sweep_parser_fuzz" "$corpus" "$root/examples" "$root/sweeps/testdata/yaml" "$root/sweeps/testdata/yaml/bad" \
  -dict="$root/sweeps/fuzz/sweep.dict" \
  -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build/crashes/" -print_final_stats=1
