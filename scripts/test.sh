#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs every test:
# installs the dependencies, configures and builds swept in build/, and runs
# CTest (unit tests, integration tests with real processes, the parser's fuzz
# run, the dashboard's browser test). Idempotent. Exit status: CTest's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh
# Warnings are errors here (CI): the build must stay warning-free.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null
cmake --build build
ctest --test-dir build --output-on-failure --timeout 900 -j "$(nproc)"
