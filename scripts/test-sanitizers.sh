#!/usr/bin/env bash
# The protocol's, scheduler's and agent's tests and the integration tests
# (real processes) under AddressSanitizer and UndefinedBehaviorSanitizer, in a
# Debug build in build-asan/. Not part of scripts/test.sh (it doubles the
# build); run it after changing the broker, the agent or the launcher.
# Needs what scripts/install-deps.sh installs. Exit status: the first failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSWEPT_SANITIZE=address,undefined >/dev/null
cmake --build build-asan --target swept common_tests scheduler_tests agent_tests integration_tests
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in common_tests scheduler_tests agent_tests integration_tests; do
  echo "== $t (ASan+UBSan)"
  build-asan/bin/$t
done
