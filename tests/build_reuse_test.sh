#!/usr/bin/env bash
# CTest build.reuse (issue 27): test.sh after demo.sh must compile only what
# the demo did not. Configures a scratch build folder as demo.sh does
# (scripts/configure.sh BUILD -DSWEPT_TESTS=OFF), then again as test.sh does
# (-DSWEPT_TESTS=ON), and requires ninja's command line for every step of
# swept and swept-train to be the same both times: a step whose command
# changes is recompiled. (It caught CMake's pkg-config quirk that changed
# every ZeroMQ unit's flags on a second configure: cmake/SweptBuildSpeed.cmake.)
# Configures only; builds nothing. Usage: tests/build_reuse_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$src/scripts/configure.sh" "$tmp/build" -DSWEPT_TESTS=OFF
ninja -C "$tmp/build" -t commands swept swept-train | sort >"$tmp/demo.txt"
"$src/scripts/configure.sh" "$tmp/build" -DSWEPT_TESTS=ON
ninja -C "$tmp/build" -t commands swept swept-train | sort >"$tmp/test.txt"
[[ $(wc -l <"$tmp/demo.txt") -gt 100 ]] || { echo "build_reuse_test: only $(wc -l <"$tmp/demo.txt") steps?" >&2; exit 1; }
if ! diff "$tmp/demo.txt" "$tmp/test.txt" >"$tmp/diff.txt"; then
  echo "build_reuse_test: FAIL: test.sh's configure changes these steps of demo.sh's build, which would be recompiled:" >&2
  head -20 "$tmp/diff.txt" >&2
  exit 1
fi
echo "build_reuse_test: ok: $(wc -l <"$tmp/demo.txt") steps of swept and swept-train keep their command line from demo.sh's configure to test.sh's"
