#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs the main job: a
# local MNIST sweep with the built-in trainer, scheduler, agent and dashboard
# in one process (`swept run`). Idempotent. Results land in swept.db.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh
scripts/fetch-mnist.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build
exec build/bin/swept run examples/mnist-grid.json --db swept.db "$@"
