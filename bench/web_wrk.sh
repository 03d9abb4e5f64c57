#!/usr/bin/env bash
# The dashboard's API under 50 concurrent keep-alive clients: `wrk -t2 -c50`
# against each main API call (docs/api.md) of `swept web`, over a database
# with a realistic large sweep (bench/web_gen.cpp), printing p50/p99 per
# endpoint. Issue 15, defect 9: the target is p99 below 100 ms.
#
#   bench/web_wrk.sh [BUILD_DIR]            (default: build)
#
# Environment:
#   DB=PATH          reuse this database instead of generating one
#   TRIALS=N         web_gen --trials (default 100000), METRIC_ROWS=N (default 10000000)
#   DURATION=10s     per endpoint and server
#   PEER_SWEPT=PATH  another `swept` binary (say, main's) measured the same way
#                    in the same run, on the same database: the table then
#                    gives its p99 too and the ratio ours/peer
#   WRITER=1         (default) a writer plays the scheduler: it commits a metric
#                    row every 100 ms into the database, so every answer the
#                    server may have kept goes stale 10 times a second;
#                    WRITER=0 measures a database nobody writes
#
# Needs wrk (Debian package `wrk`: apt-get install wrk) and curl. The server
# runs with a token, as on any shared host, and wrk sends it as a bearer
# header. Prints the machine's load average before and after: on a shared
# machine absolute latencies follow the load.
set -euo pipefail
build=${1:-build}
duration=${DURATION:-10s}
swept=$build/bin/swept
command -v wrk >/dev/null || { echo "web_wrk: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
command -v curl >/dev/null || { echo "web_wrk: curl is not installed" >&2; exit 2; }
[[ -x $swept && -x $build/bin/web_gen ]] ||
  { echo "web_wrk: build swept and web_gen first (cmake --build $build --target swept web_gen)" >&2; exit 2; }

scratch=$(mktemp -d /tmp/swept-web-wrk.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

db=${DB:-}
if [[ -z $db ]]; then
  db=$scratch/big.db
  echo "web_wrk: generating $db (web_gen --trials ${TRIALS:-100000} --metric-rows ${METRIC_ROWS:-10000000})" >&2
  "$build/bin/web_gen" --db "$db" --trials "${TRIALS:-100000}" --metric-rows "${METRIC_ROWS:-10000000}" >&2
fi

token=bench-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')

# Starts `$1 web` on a free port; sets $url and appends the pid to pids.
start_server() {
  local bin=$1 out=$scratch/web-$RANDOM.out
  "$bin" web --db "$db" --listen 127.0.0.1:0 --token "$token" >"$out" 2>"$out.err" &
  pids+=($!)
  url=
  for _ in $(seq 1 300); do  # up to 30 s for the address line
    url=$(sed -n 's/^swept web: serving \(http[^ ]*\).*/\1/p' "$out")
    [[ -n $url ]] && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || { cat "$out.err" >&2; echo "web_wrk: $bin web exited" >&2; exit 1; }
    sleep 0.1
  done
  echo "web_wrk: $bin web printed no address within 30 s" >&2
  exit 1
}

# wrk's --latency percentile line for $2 (50% or 99%) from output $1, in ms.
percentile_ms() {
  awk -v p="$2" '$1 == p { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 }
                           else if (v ~ /ms$/) { sub(/ms$/, "", v) }
                           else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 }
                           printf "%.1f", v }' <<<"$1"
}

# Runs wrk on path $2 of server $1; prints "p50 p99 req/s errors".
measure() {
  local out errors
  out=$(wrk -t2 -c50 -d"$duration" --latency -H "Authorization: Bearer $token" "$1${2#/}")
  # "Socket errors: connect 0, read 0, write 0, timeout 0" and "Non-2xx or 3xx responses: N".
  errors=$(awk '/Socket errors/ { gsub(",", ""); e += $4 + $6 + $8 + $10 }
                /Non-2xx or 3xx responses/ { e += $5 } END { print e + 0 }' <<<"$out")
  printf '%s %s %s %s\n' "$(percentile_ms "$out" 50%)" "$(percentile_ms "$out" 99%)" \
    "$(awk '/Requests\/sec/ { printf "%.0f", $2 }' <<<"$out")" "$errors"
}

if [[ ${WRITER:-1} != 0 ]]; then
  command -v sqlite3 >/dev/null || { echo "web_wrk: the writer needs the sqlite3 command (WRITER=0 to go without)" >&2; exit 2; }
  writer_trial=$(sqlite3 "$db" "SELECT MAX(id) FROM trials WHERE sweep_id = 1")
  (
    step=0
    while :; do
      sqlite3 "$db" "PRAGMA busy_timeout = 1000; INSERT OR REPLACE INTO metrics VALUES ($writer_trial, 'bench_writer', $step, $step.5);" \
        >/dev/null 2>&1 || true
      step=$((step + 1))
      sleep 0.1
    done
  ) &
  pids+=($!)
fi

start_server "$swept"
ours=$url
# The trials the dashboard would chart: the first page's first five of sweep 1.
ids=$(curl -sf -H "Authorization: Bearer $token" "${ours}api/sweeps/1/trials?limit=5" |
  grep -o '"id":[0-9]*' | cut -d: -f2 | paste -sd, -)
[[ -n $ids ]] || { echo "web_wrk: sweep 1 has no trials in $db" >&2; exit 1; }
paths=(
  "/api/info"
  "/api/sweeps"
  "/api/sweeps/1"
  "/api/sweeps/1/trials?limit=50"
  "/api/series?trials=$ids&metric=loss"
)
peer=
if [[ -n ${PEER_SWEPT:-} ]]; then
  start_server "$PEER_SWEPT"
  peer=$url
fi

echo "web_wrk: $(nproc) CPUs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "web_wrk: wrk -t2 -c50 -d$duration --latency per path; database $db ($(du -h "$db" | cut -f1));" \
  "writer: $([[ ${WRITER:-1} != 0 ]] && echo "a commit every 100 ms" || echo none)"
if [[ -n $peer ]]; then
  echo "| path | p50 ms | p99 ms | req/s | errors | peer p50 ms | peer p99 ms | peer req/s | p99 ours/peer |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
else
  echo "| path | p50 ms | p99 ms | req/s | errors |"
  echo "|---|---:|---:|---:|---:|"
fi
for path in "${paths[@]}"; do
  read -r p50 p99 rps err < <(measure "$ours" "$path")
  if [[ -n $peer ]]; then
    read -r q50 q99 qrps qerr < <(measure "$peer" "$path")
    ratio=$(awk -v a="$p99" -v b="$q99" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
    echo "| \`$path\` | $p50 | $p99 | $rps | $err | $q50 | $q99 | $qrps | $ratio |"
  else
    echo "| \`$path\` | $p50 | $p99 | $rps | $err |"
  fi
done
echo "web_wrk: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
