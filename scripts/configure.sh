#!/usr/bin/env bash
# The one configuration that demo.sh and test.sh give build/ (and test.sh
# build-emu/): Release, warnings as errors, Ninja. Both scripts take their
# flags from here, so that test.sh after demo.sh finds demo's objects up to
# date and compiles only what the demo did not (the tests); SWEPT_TESTS
# changes which targets exist, never how an object is compiled.
# Usage: scripts/configure.sh BUILD_DIR [-DVAR=VALUE...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[[ $# -ge 1 ]] || { echo "usage: scripts/configure.sh BUILD_DIR [-DVAR=VALUE...]" >&2; exit 2; }
dir=$1
shift
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_COMPILE_WARNING_AS_ERROR=ON "$@" >/dev/null
