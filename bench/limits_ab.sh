#!/usr/bin/env bash
# Trial limits' cost (issue 26), as paired rounds for a machine that is not
# quiet: 1,000 trials of /bin/true through `swept run --slots 4` (trial
# directories on /dev/shm) with every limit off (SWEPT_AGENT_LIMITS=), the
# peer, then with the default limits (pids.max for every trial); the ratio
# of wall times per round. Needs root for the limits to be set at all.
# Usage: bench/limits_ab.sh [BUILD_DIR] [ROUNDS]   (default: build, 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
swept=${1:-$root/build}/bin/swept
rounds=${2:-3}
[[ -x $swept ]] || { echo "build swept first: cmake --build build --target swept" >&2; exit 2; }
tmp=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '{"method": "grid", "command": ["/bin/true", "${args}"], "parameters": {"x": {"min": 1, "max": 1000}}}' \
  > "$tmp/noop.json"
run() {  # $@: the environment to run under; prints the wall seconds
  rm -rf "$tmp/w" "$tmp"/db*
  local t0 t1
  t0=$(date +%s.%N)
  env "$@" "$swept" run "$tmp/noop.json" --db "$tmp/db" --slots 4 --workdir "$tmp/w" --progress off \
    --dashboard off >/dev/null 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
for r in $(seq 1 "$rounds"); do
  off=$(run SWEPT_AGENT_LIMITS=)
  on=$(run)
  printf 'round %d: limits off %.3f s, default limits %.3f s, ratio %.2f\n' "$r" "$off" "$on" "$(echo "$on / $off" | bc -l)"
done
