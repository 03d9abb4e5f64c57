#!/usr/bin/env bash
# Fuzzes the protocol decoder (common/protocol.cpp's decode: every message an
# agent or a client sends the scheduler) for a bounded time (CTest runs it as
# common.fuzz.protocol).
#
# usage: scripts/fuzz-protocol.sh [BUILD_DIR] [SECONDS]
# Configures a separate clang build in BUILD_DIR (default build/fuzz-protocol)
# with -DSWEPT_FUZZ=ON, builds only the libFuzzer target protocol_decoder_fuzz
# and runs it for SECONDS (default 30) with common/fuzz/corpus as seeds.
# Exit 0 when nothing crashed; otherwise libFuzzer's non-zero status, with
# the crashing input saved in BUILD_DIR/crashes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/fuzz-protocol}
seconds=${2:-30}

if ! command -v clang++ >/dev/null; then
  echo "fuzz-protocol: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  mkdir -p "$build"
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSWEPT_FUZZ=ON -DSWEPT_TESTS=OFF -DSWEPT_CUDA=OFF >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log" >&2; exit 2; }
fi
cmake --build "$build" --target protocol_decoder_fuzz -j 2

corpus=$build/corpus
mkdir -p "$corpus" "$build/crashes"
# libFuzzer adds what it finds to the first folder; the seeds stay read-only.
"$build/bin/protocol_decoder_fuzz" "$corpus" "$root/common/fuzz/corpus" \
  -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$build/crashes/" -print_final_stats=1
