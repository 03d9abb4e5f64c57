#!/usr/bin/env bash
# CurveZMQ's cost on dispatch (issue 14): 1,000 trials of a command that does
# nothing, through a `swept scheduler` and one `swept agent --slots 4` over TCP
# on 127.0.0.1, without keys and with keys (--key/--authorized, the agent and
# the client keyed), each round against `xargs -P 4` running the same 1,000
# commands in the same run. Reports wall-time ratios: unkeyed/xargs,
# keyed/xargs (target <= 1.5) and keyed/unkeyed (CURVE's own cost).
# The timed span is `swept submit` to the end of `swept wait`; the agent is
# registered before it starts.
# Usage: bench/curve_bench.sh [BUILD_DIR] [REPEATS]   (median of REPEATS, default 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
repeats=${2:-3}
swept=$build/bin/swept
[[ -x $swept ]] || { echo "build swept first: cmake --build build --target swept" >&2; exit 2; }
tmp=$(mktemp -d)
work=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp" "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

cat > "$tmp/noop.json" <<'JSON'
{"method": "grid", "command": ["/bin/true", "${args}"], "parameters": {"x": {"min": 1, "max": 1000}}}
JSON
for k in scheduler agent client; do "$swept" keygen --out "$tmp/$k" >/dev/null; done
mkdir -p "$tmp/auth/agents" "$tmp/auth/clients"
cp "$tmp/agent.pub" "$tmp/auth/agents/"; cp "$tmp/client.pub" "$tmp/auth/clients/"

round() {  # $1: keyed|plain; prints the seconds from submit to the end of wait
  local mode=$1 db=$tmp/$1-$RANDOM.db sflags=() aflags=() cflags=()
  if [[ $mode == keyed ]]; then
    sflags=(--key "$tmp/scheduler.key" --authorized "$tmp/auth")
    aflags=(--key "$tmp/agent.key" --scheduler-pub "$tmp/scheduler.pub")
    cflags=(--key "$tmp/client.key" --scheduler-pub "$tmp/scheduler.pub")
  fi
  rm -f "$tmp/ep"
  "$swept" scheduler --bind 'tcp://127.0.0.1:*' --db "$db" --endpoint-file "$tmp/ep" "${sflags[@]}" \
    2>"$tmp/sched.log" & local sp=$!
  pids+=("$sp")
  for _ in $(seq 200); do [[ -s $tmp/ep ]] && break; sleep 0.05; done
  local ep; ep=$(cat "$tmp/ep")
  "$swept" agent --scheduler "$ep" --gpus none --slots 4 --name bench --workdir "$work/$mode-$RANDOM" "${aflags[@]}" \
    2>"$tmp/agent.log" & local ap=$!
  pids+=("$ap")
  for _ in $(seq 200); do "$swept" agents --scheduler "$ep" "${cflags[@]}" 2>/dev/null | grep -q bench && break; sleep 0.05; done
  local t0 t1 id
  t0=$(now)
  id=$("$swept" submit "$tmp/noop.json" --scheduler "$ep" "${cflags[@]}")
  "$swept" wait "$id" --scheduler "$ep" --poll-ms 20 "${cflags[@]}" >/dev/null 2>&1
  t1=$(now)
  kill "$ap" "$sp"; wait "$ap" "$sp" 2>/dev/null || true
  echo "$t1 - $t0" | bc -l
}

xargs_round() {
  local t0 t1
  t0=$(now)
  seq 1 1000 | sed 's/^/--x=/' | xargs -P 4 -n 1 /bin/true
  t1=$(now)
  echo "$t1 - $t0" | bc -l
}

p=() k=() x=()
for _ in $(seq "$repeats"); do
  p+=("$(round plain)"); x+=("$(xargs_round)"); k+=("$(round keyed)")
done
pm=$(printf '%s\n' "${p[@]}" | median); km=$(printf '%s\n' "${k[@]}" | median); xm=$(printf '%s\n' "${x[@]}" | median)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
printf '1,000 no-op trials, TCP agent --slots 4: unkeyed %.3f s, keyed %.3f s, xargs -P 4 %.3f s\n' "$pm" "$km" "$xm"
printf 'ratios: unkeyed/xargs %.2f, keyed/xargs %.2f (target <= 1.5), keyed/unkeyed %.2f\n' \
  "$(echo "$pm / $xm" | bc -l)" "$(echo "$km / $xm" | bc -l)" "$(echo "$km / $pm" | bc -l)"
