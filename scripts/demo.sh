#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs the main job: a
# local MNIST sweep with the built-in trainer, scheduler, agent and dashboard
# in one process (`swept run`). Idempotent. Results land in swept.db.
# Installs only what building and running need (install-deps.sh's build,
# runtime and data groups: no Slurm, browser, clang or test packages) and
# builds only the two programs it runs, with test.sh's flags
# (scripts/configure.sh), so that test.sh afterwards reuses every object.
# MNIST goes to $SWEPT_DATA_DIR, by default data/mnist in this checkout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh build runtime data
export SWEPT_DATA_DIR=${SWEPT_DATA_DIR:-$root/data/mnist}
scripts/fetch-mnist.sh
scripts/configure.sh build -DSWEPT_TESTS=OFF
cmake --build build --target swept swept-train
exec build/bin/swept run examples/mnist-grid.json --db swept.db "$@"
