#!/usr/bin/env bash
# Scheduler benchmarks (issue 5), each against a peer in the same run:
#  (1) 1,000 trials of a command that does nothing through `swept run --slots 4`,
#      against `xargs -P 4` running the same 1,000 commands: ratio of wall times
#      (target <= 1.25). Run twice: trial directories where a user's would be,
#      in the project's tree (here: under BUILD_DIR), and on tmpfs (/dev/shm),
#      since each trial's three new inodes are what swept does and xargs does
#      not, and their price depends on the filesystem (docs/benchmarks.md).
#  (2) the scheduler's own cost per trial, dispatch to completion recorded:
#      CPU time of the broker's thread / trials (target < 1 ms).
#  (3) metric rows ingested per second into SQLite while 4 trials report
#      (target > 100,000): rows / time the store spent on METRICS batches,
#      against the same number of rows inserted by the sqlite3 shell in one
#      transaction into an identical table (the floor SQLite itself sets).
# Usage: bench/scheduler_bench.sh [BUILD_DIR] [REPEATS]   (median of REPEATS, default 3)
# SWEPT_BENCH_WORKDIRS="DIR ...": also run (1) with the trial directories
# under each DIR (another filesystem: a journaled ext4 mount, say).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
repeats=${2:-3}
swept=$build/bin/swept
[[ -x $swept ]] || { echo "build swept first: cmake --build build --target swept" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "needs the sqlite3 shell (apt-get install sqlite3)" >&2; exit 2; }
tmp=$(mktemp -d)
shm=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
tree=$(mktemp -d -p "$build" bench-scheduler.XXXXXX)
extras=()
trap 'rm -rf "$tmp" "$shm" "$tree" "${extras[@]}"' EXIT

now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
json() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

cat > "$tmp/noop.json" <<'JSON'
{"method": "grid", "command": ["/bin/true", "${args}"], "parameters": {"x": {"min": 1, "max": 1000}}}
JSON

noop_round() {  # $1: workdir parent; prints "swept_s xargs_s cpu_us_per_trial agent_cpu_us_per_trial"
  # A new directory each round, all removed at exit: deleting the previous
  # round's 3,000 inodes just before would make ext4 (without a journal, as
  # here) scan past them for every inode this round creates.
  local work db=$tmp/noop.db
  work=$(mktemp -d -p "$1")/w
  rm -f "$db" "$db-wal" "$db-shm"
  local t0 t1 t2 t3
  t0=$(now)
  "$swept" run "$tmp/noop.json" --db "$db" --slots 4 --workdir "$work" --progress off --dashboard off \
    --stats "$tmp/stats.json" >/dev/null 2>"$tmp/run.log" || { cat "$tmp/run.log" >&2; exit 1; }
  t1=$(now)
  t2=$(now)
  seq 1 1000 | sed 's/^/--x=/' | xargs -P 4 -n 1 /bin/true
  t3=$(now)
  local cpu trials agent
  cpu=$(json "$tmp/stats.json" loop_cpu_seconds)
  agent=$(json "$tmp/stats.json" agent_cpu_seconds)
  trials=$(json "$tmp/stats.json" trials_finished)
  [[ $trials == 1000 ]] || { echo "expected 1000 finished trials, got $trials" >&2; exit 1; }
  echo "$(echo "$t1 - $t0" | bc -l) $(echo "$t3 - $t2" | bc -l) $(echo "$cpu / $trials * 1000000" | bc -l)" \
    "$(echo "$agent / $trials * 1000000" | bc -l)"
}

report_noop() {  # $1: label, $2: workdir parent
  local s=() x=() c=() g=()
  for _ in $(seq "$repeats"); do
    read -r a b d e < <(noop_round "$2")
    s+=("$a"); x+=("$b"); c+=("$d"); g+=("$e")
  done
  local sm xm cm gm
  sm=$(printf '%s\n' "${s[@]}" | median); xm=$(printf '%s\n' "${x[@]}" | median); cm=$(printf '%s\n' "${c[@]}" | median)
  gm=$(printf '%s\n' "${g[@]}" | median)
  printf '(1) %-28s swept run %.3f s, xargs -P 4 %.3f s, ratio %.2f (target <= 1.25)\n' "$1" "$sm" "$xm" "$(echo "$sm / $xm" | bc -l)"
  printf '(2) %-28s scheduler CPU per trial %.0f us (target < 1000 us); the local agent'"'"'s loop %.0f us\n' "$1" "$cm" "$gm"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
report_noop "workdir on $(df --output=fstype "$tree" | tail -1 | xargs) (build dir):" "$tree"
report_noop "workdir on $(df --output=fstype "$shm" | tail -1 | xargs):" "$shm"
for parent in ${SWEPT_BENCH_WORKDIRS:-}; do
  extras+=("$(mktemp -d -p "$parent")")
  report_noop "workdir on $(df --output=fstype "$parent" | tail -1 | xargs) ($parent):" "${extras[-1]}"
done

# (3) metric ingestion: 4 trials x 100,000 lines x 2 metrics = 800,000 rows.
cat > "$tmp/metrics.json" <<'JSON'
{"method": "grid", "parameters": {"x": {"values": [1, 2, 3, 4]}},
 "command": ["/bin/sh", "-c", "awk 'BEGIN { for (i = 1; i <= 100000; i++) printf \"{\\\"step\\\": %d, \\\"loss\\\": %.6f, \\\"acc\\\": %.6f}\\n\", i, 1 / i, i / 100000 }'", "trial", "${args}"]}
JSON
rates=() peers=() e2e=()
for _ in $(seq "$repeats"); do
  db=$tmp/metrics.db
  rm -rf "$db" "$db-wal" "$db-shm" "$shm/m"
  "$swept" run "$tmp/metrics.json" --db "$db" --slots 4 --workdir "$shm/m" --progress off --dashboard off \
    --stats "$tmp/mstats.json" >/dev/null 2>"$tmp/mrun.log" || { cat "$tmp/mrun.log" >&2; exit 1; }
  rows=$(json "$tmp/mstats.json" metric_rows)
  stored=$(sqlite3 "$db" "SELECT COUNT(*) FROM metrics")
  [[ $rows == 800000 && $stored == 800000 ]] || { echo "expected 800000 rows, got $rows ($stored stored)" >&2; exit 1; }
  ingest=$(json "$tmp/mstats.json" ingest_seconds)
  wall=$(json "$tmp/mstats.json" wall_seconds)
  rates+=("$(echo "$rows / $ingest" | bc -l)")
  e2e+=("$(echo "$rows / $wall" | bc -l)")
  # The peer: the same rows straight into the same table by the sqlite3 shell.
  peer=$tmp/peer.db
  rm -f "$peer" "$peer-wal" "$peer-shm"
  p0=$(now)
  sqlite3 "$peer" >/dev/null <<'SQL'
PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
CREATE TABLE metrics (trial_id INTEGER NOT NULL, name TEXT NOT NULL, step INTEGER NOT NULL, value REAL NOT NULL,
                      PRIMARY KEY (trial_id, name, step)) WITHOUT ROWID;
BEGIN;
WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 100000),
     t(k) AS (VALUES (1), (2), (3), (4))
INSERT INTO metrics SELECT k, 'loss', n, 1.0 / n FROM t, i UNION ALL SELECT k, 'acc', n, n / 100000.0 FROM t, i;
COMMIT;
SQL
  p1=$(now)
  peers+=("$(echo "800000 / ($p1 - $p0)" | bc -l)")
done
rm=$(printf '%s\n' "${rates[@]}" | median); pm=$(printf '%s\n' "${peers[@]}" | median); em=$(printf '%s\n' "${e2e[@]}" | median)
printf '(3) metric rows/s stored by the scheduler %.0f (target > 100000); sqlite3 shell bulk insert %.0f; ratio %.2f; end to end (trial start to last row) %.0f rows/s\n' \
  "$rm" "$pm" "$(echo "$rm / $pm" | bc -l)" "$em"
