#!/usr/bin/env bash
# Parameter servers against the all-reduce (issue 30), on this machine:
# 4 worker processes (and 1 server for PS), MLP and CNN on MNIST, time to a
# validation accuracy (MLP 97.5 %, CNN 99.0 %) for
#   allreduce   WORLD_SIZE=4, Gloo (trainer/dist/process_group.h)
#   sync        --strategy=ps --ps_mode=sync
#   sync+1      --strategy=ps --ps_mode=sync --backup_workers=1
#   async       --strategy=ps --ps_mode=async
# twice: every worker at full speed, then worker 3 a straggler held to a
# quarter of a core: its cgroup's cpu.max "25000 100000" (cgroup v2), else
# cpu.cfs_quota_us 25000 of 100000 (cgroup v1's cpu controller), else (no
# writable cgroup) SIGSTOP/SIGCONT from this script, 30 ms stopped of every
# 40 ms. STRAGGLER_US sets the quota: where the workers get less than a core
# each (more processes than cores), a quarter of a core slows nobody, and a
# quarter of their share is the straggler the benchmark means. Worker 0 (the one that reports) is never the straggler. The time
# is from the start of the processes to worker 0's first validation line at
# or above the target (each line stamped by this script as it arrives); a
# run that has not got there after RUN_LIMIT seconds is stopped and
# reported as "> RUN_LIMIT". Then samples/s of async PS with 1 and with 2
# servers (--max_steps, the lines after the first).
#
# Usage: bench/ps.sh [DATA_DIR]   (default: $SWEPT_DATA_DIR, else data/mnist)
# Env:   BIN (swept-train; default build/bin/swept-train), THREADS (per
#        process; default nproc/5, at least 1), MODELS ("mlp cnn"), SCENARIOS
#        ("full straggler"), STRATEGIES ("allreduce sync sync+1 async"; set but
#        empty: none, e.g. SCENARIOS= for the servers' part alone),
#        RUN_LIMIT (seconds, default 90), STRAGGLER_US (cgroup quota per 100 ms, default 25000), SCALE_STEPS (default 300; 0 skips the
#        1-vs-2-server part), OUT (a file for the JSON lines; default stdout only)
# Prints one JSON line per run. Exit 2 when swept-train or the data is missing.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
DATA="${1:-${SWEPT_DATA_DIR:-$root/data/mnist}}"
BIN="${BIN:-$root/build/bin/swept-train}"
THREADS="${THREADS:-$(( $(nproc) / 5 > 0 ? $(nproc) / 5 : 1 ))}"
MODELS="${MODELS-mlp cnn}"
SCENARIOS="${SCENARIOS-full straggler}"
STRATEGIES="${STRATEGIES-allreduce sync sync+1 async}"
RUN_LIMIT="${RUN_LIMIT:-90}"
STRAGGLER_US="${STRAGGLER_US:-25000}"
SCALE_STEPS="${SCALE_STEPS:-300}"
OUT="${OUT:-/dev/null}"
[[ -x "$BIN" ]] || { echo "ps.sh: $BIN not found: build swept-train (cmake --build build --target swept-train) or set BIN" >&2; exit 2; }
[[ -f "$DATA/train-images-idx3-ubyte" ]] || { echo "ps.sh: no MNIST in $DATA: run swept-fetch-mnist, or pass the folder" >&2; exit 2; }
W="$(mktemp -d)"
CG=""
cleanup() {
  jobs -p | xargs -r kill 2>/dev/null
  [[ -n "$CG" && -d "$CG" ]] && rmdir "$CG" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT

# The straggler's limit: a cgroup of its own when one can be made here.
make_cgroup() {
  local v2=/sys/fs/cgroup v1=/sys/fs/cgroup/cpu
  if [[ -f $v2/cgroup.controllers ]] && grep -qw cpu $v2/cgroup.controllers && mkdir "$v2/swept-ps-$$" 2>/dev/null; then
    CG="$v2/swept-ps-$$"
    echo "$STRAGGLER_US 100000" >"$CG/cpu.max" 2>/dev/null && { STRAGGLE="cgroup v2 cpu.max $STRAGGLER_US/100000"; return; }
    rmdir "$CG"; CG=""
  fi
  if [[ -d $v1 ]] && mkdir "$v1/swept-ps-$$" 2>/dev/null; then
    CG="$v1/swept-ps-$$"
    echo 100000 >"$CG/cpu.cfs_period_us" && echo "$STRAGGLER_US" >"$CG/cpu.cfs_quota_us" &&
      { STRAGGLE="cgroup v1 cpu.cfs_quota_us $STRAGGLER_US/100000"; return; }
    rmdir "$CG"; CG=""
  fi
  STRAGGLE="SIGSTOP/SIGCONT 30 of 40 ms"
}
make_cgroup
slow_down() {  # pid
  if [[ -n "$CG" ]]; then echo "$1" >"$CG/cgroup.procs"; return; fi
  ( while kill -STOP "$1" 2>/dev/null; do sleep 0.03; kill -CONT "$1" 2>/dev/null || break; sleep 0.01; done ) &
}

# A port the kernel gives (python3), else a random high one.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 30000))
}

# Stamps each line with the time it arrived (bash's EPOCHREALTIME, no fork per line).
stamp() { local line; while IFS= read -r line; do echo "$EPOCHREALTIME $line"; done; }

model_args() {
  case $1 in
    mlp) echo "--model=mlp --epochs=8 --eval_every=55 --log_every=55" ;;  # batch 100: 550 steps an epoch
    cnn) echo "--model=cnn --epochs=3 --eval_every=86 --log_every=43" ;;  # batch 128: 429 steps an epoch
  esac
}
target_of() { [[ $1 == mlp ]] && echo 0.975 || echo 0.99; }

# One run: model, strategy, scenario. Starts 4 workers (+ 1 server), waits for
# the target or RUN_LIMIT, stops everything, prints the JSON line.
run_one() {
  local model=$1 strategy=$2 scenario=$3 target port pids=() args t0
  target=$(target_of "$model")
  args="--data=$DATA --threads=$THREADS $(model_args "$model")"
  local ps_args="" cluster="" env_of
  case $strategy in
    sync) ps_args="--strategy=ps --ps_mode=sync" ;;
    sync+1) ps_args="--strategy=ps --ps_mode=sync --backup_workers=1" ;;
    async) ps_args="--strategy=ps --ps_mode=async" ;;
  esac
  port=$(free_port)
  cluster="{\"worker\": [\"127.0.0.1:1\", \"127.0.0.1:2\", \"127.0.0.1:3\", \"127.0.0.1:4\"], \"ps\": [\"127.0.0.1:$port\"]}"
  t0=$EPOCHREALTIME
  if [[ -n $ps_args ]]; then
    TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"ps\", \"index\": 0}}" "$BIN" $args $ps_args \
      >/dev/null 2>"$W/ps.err" &
    pids+=($!)
  fi
  for w in 0 1 2 3; do
    if [[ -n $ps_args ]]; then
      TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": $w}}" "$BIN" $args $ps_args \
        > >(if [[ $w == 0 ]]; then stamp >"$W/lines"; else cat >/dev/null; fi) 2>"$W/w$w.err" &
    else
      WORLD_SIZE=4 RANK=$w LOCAL_RANK=$w LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$BIN" $args \
        > >(if [[ $w == 0 ]]; then stamp >"$W/lines"; else cat >/dev/null; fi) 2>"$W/w$w.err" &
    fi
    pids+=($!)
    [[ $w == 3 && $scenario == straggler ]] && slow_down $!
  done
  local tta="" best=0 deadline=$(( $(date +%s) + RUN_LIMIT ))
  while (( $(date +%s) < deadline )); do
    tta=$(awk -v t="$target" -v t0="$t0" '/val_accuracy/ { if (match($0, /"val_accuracy":[0-9.e-]+/)) { v = substr($0, RSTART + 15, RLENGTH - 15); if (v + 0 >= t + 0) { printf "%.2f", $1 - t0; exit } } }' "$W/lines" 2>/dev/null)
    [[ -n $tta ]] && break
    kill -0 "${pids[@]: -4:1}" 2>/dev/null || break  # worker 0 ended
    sleep 0.2
  done
  best=$(grep -o '"val_accuracy":[0-9.e-]*' "$W/lines" 2>/dev/null | cut -d: -f2 | sort -g | tail -1)
  local stale=$(grep -o '"staleness_mean":[0-9.e-]*,"staleness_max":[0-9]*,"gradients_dropped":[0-9]*' "$W/lines" | tail -1)
  # Every validation line as [seconds, accuracy]: the time to any other target.
  local curve=$(awk -v t0="$t0" '/val_accuracy/ { if (match($0, /"val_accuracy":[0-9.e-]+/)) { printf "%s[%.2f, %s]", sep, $1 - t0, substr($0, RSTART + 15, RLENGTH - 15); sep = ", " } }' "$W/lines")
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  local line="{\"model\": \"$model\", \"strategy\": \"$strategy\", \"scenario\": \"$scenario\", \"target\": $target, \"seconds_to_target\": ${tta:-null}, \"limit\": $RUN_LIMIT, \"best_val_accuracy\": ${best:-null}, \"threads\": $THREADS, \"straggler\": \"$([[ $scenario == straggler ]] && echo "$STRAGGLE")\"${stale:+, ${stale//\"/\"}}, \"val_curve\": [$curve]}"
  echo "$line" | tee -a "$OUT"
}

# Async PS samples/s with 1 and 2 servers: the mean of worker 0's lines after the first.
scale_one() {
  local model=$1 servers=$2 ps=() cluster pids=() i
  for ((i = 0; i < servers; i++)); do ps+=("\"127.0.0.1:$(free_port)\""); done
  cluster="{\"worker\": [\"127.0.0.1:1\", \"127.0.0.1:2\", \"127.0.0.1:3\", \"127.0.0.1:4\"], \"ps\": [$(IFS=,; echo "${ps[*]}")]}"
  local args="--data=$DATA --threads=$THREADS --model=$model --max_steps=$SCALE_STEPS --log_every=$((SCALE_STEPS / 6)) --strategy=ps --ps_mode=async"
  for ((i = 0; i < servers; i++)); do
    TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"ps\", \"index\": $i}}" "$BIN" $args >/dev/null 2>"$W/s$i.err" &
    pids+=($!)
  done
  for w in 1 2 3; do
    TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": $w}}" "$BIN" $args >/dev/null 2>"$W/w$w.err" &
    pids+=($!)
  done
  TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 0}}" timeout 600 "$BIN" $args >"$W/scale" 2>"$W/w0.err"
  wait "${pids[@]}" 2>/dev/null
  local sps=$(grep -o '"samples_per_sec":[0-9.e+-]*' "$W/scale" | cut -d: -f2 | tail -n +2 | awk '{s += $1; n++} END {if (n) printf "%.0f", s / n; else print "null"}')
  echo "{\"model\": \"$model\", \"servers\": $servers, \"async_samples_per_sec\": $sps, \"threads\": $THREADS, \"steps\": $SCALE_STEPS}" | tee -a "$OUT"
}

echo "# ps.sh: $(nproc) cores, THREADS=$THREADS per process, load $(cut -d' ' -f1-3 /proc/loadavg), straggler: $STRAGGLE, $(date -u +%FT%TZ)" | tee -a "$OUT"
for model in $MODELS; do
  for scenario in $SCENARIOS; do
    for strategy in $STRATEGIES; do run_one "$model" "$strategy" "$scenario"; done
  done
done
if (( SCALE_STEPS > 0 )); then
  for model in $MODELS; do for servers in 1 2; do scale_one "$model" "$servers"; done; done
fi
