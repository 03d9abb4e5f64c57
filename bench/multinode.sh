#!/usr/bin/env bash
# Multi-node benchmarks (issue 25), each against its peer in the same run, on
# two hosts made of network namespaces on this machine (A and B, joined by one
# veth pair, tests/netns_lib.sh):
#  (1) train: swept-train on 2 nodes (one process per namespace, torchrun's
#      environment set by hand: WORLD_SIZE=2, RANK, MASTER_ADDR = A's address,
#      MASTER_PORT, GLOO_SOCKET_IFNAME) against PyTorch DDP on the gloo backend
#      on 2 nodes (bench/torch_ddp_mnist.py, the models of
#      ../shared/bench/torch_mnist.py), same global batch and optimizer:
#        mlp: 784-100-10 sigmoid, SGD lr 0.5, global batch 100
#        cnn: conv5x5x32-pool-conv5x5x64-pool-fc1024-fc10 (ReLU), Adam lr 1e-3, global batch 128
#      Global samples/s (swept-train: its windows after the first, the warm-up;
#      the peer: --steps after 10 warm-up steps). Target: swept >= 2x DDP.
#  (2) allreduce: the bus bandwidth (nccl-tests: busbw = algbw * 2(n-1)/n) of
#      swept-train's cross-process all-reduce alone (allreduce_bench, the same
#      ProcessGroup) for 1-64 MB between A and B, against iperf3's TCP
#      throughput A<-B on the same veth (one stream, 5 s; also --bidir, whose
#      per-direction figure is what a ring all-reduce's two directions share).
#      Also torch.distributed.all_reduce on gloo (bench/torch_allreduce.py),
#      timed alike, to tell Gloo's share from swept's. Target: busbw >= 80%
#      of iperf3 (one way) from 4 MB up.
#  (3) gang: scheduler CPU per trial (`swept run --stats`: loop_cpu_seconds /
#      trials) for 1,000 two-node no-op trials (/bin/true) on 8 agents
#      (`swept run --local-agents 8 --slots 8`) against 1,000 one-node trials
#      on the same 8 agents. Target: two-node within 2x of one-node. Also
#      the loop's turns and the messages it read per trial, and how many
#      one-node trials went out as successors (START_TRIAL `after`): the
#      turns, with their commits and wake-ups, are where two-node trials pay
#      more than twice (docs/benchmarks.md, "Multi-node", 2026-11-28 01:00
#      and 01:59). Also each round's own two-node / one-node ratio.
#      PEER_SWEPT=path (another build's swept, say main's) runs it too, in
#      the same rounds, alternated with this build's: its ratio, and this
#      build's CPU per trial against it, paired round by round.
# The machine is shared: every part runs its two sides alternately, ROUNDS
# times, and reports medians (and every round), with the load average.
#
# Usage: bench/multinode.sh [DATA_DIR]   (default: $SWEPT_DATA_DIR, else data/mnist)
# Env:   BUILD_DIR (default build), ROUNDS (default 3), PARTS (default
#        "train allreduce gang"), MODELS (default "mlp cnn"), THREADS (per
#        process, both sides; default nproc/2, so the two hosts share the
#        cores without oversubscribing them), MLP_STEPS (500), CNN_STEPS (50),
#        RANK_TIMEOUT (seconds a rank may run, default 900)
# Needs: root (network namespaces), iproute2, iperf3, /usr/bin/python3 with
# torch (gloo), MNIST, and the binaries swept-train, allreduce_bench, swept.
# PARTS=gang alone needs only swept (no namespaces, no root).
# Exit 2 when something it needs is missing (the message says what to do).
# Prints a summary line per figure, then one JSON line per part.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${1:-${SWEPT_DATA_DIR:-$root/data/mnist}}
build=${BUILD_DIR:-$root/build}
rounds=${ROUNDS:-3}
parts=${PARTS:-train allreduce gang}
models=${MODELS:-mlp cnn}
threads=${THREADS:-$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))}
peer_models=$root/../shared/bench/torch_mnist.py
ddp=$root/bench/torch_ddp_mnist.py

need() { echo "multinode: $*" >&2; exit 2; }
wants() { [[ " $parts " == *" $1 "* ]]; }
for part in $parts; do
  [[ $part == train || $part == allreduce || $part == gang ]] ||
    need "PARTS names '$part': the parts are train, allreduce and gang"
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || need "ROUNDS must be a whole number >= 1, not '$rounds'"

# --- Everything checked before anything starts.
hosts=false  # whether a part runs on the two namespaced hosts
if wants train || wants allreduce; then hosts=true; fi
if $hosts; then
  [[ $(id -u) == 0 ]] || need "needs root to make network namespaces (run it as root, or under sudo; PARTS=gang needs neither)"
  command -v ip >/dev/null || need "needs iproute2's ip (apt-get install iproute2)"
fi
if wants train; then
  [[ -f $peer_models ]] || need "the PyTorch peer's models are missing at $peer_models"
  [[ -f $data/train-images-idx3-ubyte && -f $data/train-labels-idx1-ubyte ]] ||
    need "no MNIST in $data: pass the folder, set SWEPT_DATA_DIR, or run scripts/fetch-mnist.sh"
  /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' 2>/dev/null ||
    need "/usr/bin/python3 has no torch with gloo (apt-get install python3-torch)"
  [[ -x $build/bin/swept-train ]] || need "build swept-train first: cmake --build $build --target swept-train"
fi
if wants allreduce; then
  command -v iperf3 >/dev/null || need "needs iperf3 for the link's TCP throughput (apt-get install iperf3)"
  [[ -x $build/bin/allreduce_bench ]] || need "build allreduce_bench first: cmake --build $build --target allreduce_bench"
fi
if wants gang; then
  [[ -x $build/bin/swept ]] || need "build swept first: cmake --build $build --target swept"
  [[ -z ${PEER_SWEPT:-} || -x ${PEER_SWEPT:-} ]] || need "PEER_SWEPT=$PEER_SWEPT is not an executable: name another build's swept"
fi

tmp=$(mktemp -d)
made=()
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  # Ranks started inside a command substitution are not in pids: whatever
  # still runs in our two namespaces was started by this script.
  for ns in "${made[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=tests/netns_lib.sh
source "$root/tests/netns_lib.sh"
A=swept-mn-a-$$ B=swept-mn-b-$$ net=10.250.$((RANDOM % 250)) ifa=mnpeer0
if $hosts; then
  ip netns add "$A" || need "cannot make a network namespace (ip netns add): root in a container may also need CAP_SYS_ADMIN"
  made+=("$A")
  ip -n "$A" link set lo up
  netns_join "$A" "$B" "$ifa" "$net"  # A: $ifa $net.1, B: eth0 $net.2
fi
addr_a=$net.1
port=29500
next_port() { port=$((port + 1)); }

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# Runs "$@" as rank 0 in A and rank 1 in B with torchrun's environment; rank
# 0's stdout goes to $tmp/out0, each rank's stderr to $tmp/err<rank>. A rank
# that hangs (its peer died before the rendezvous, say) is killed after
# RANK_TIMEOUT seconds (default 900) and the benchmark fails.
two_ranks() {
  next_port
  local base=(WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=$addr_a MASTER_PORT=$port)
  ip netns exec "$A" env "${base[@]}" RANK=0 GROUP_RANK=0 GLOO_SOCKET_IFNAME=$ifa \
    timeout "${RANK_TIMEOUT:-900}" "$@" >"$tmp/out0" 2>"$tmp/err0" &
  local p0=$!
  ip netns exec "$B" env "${base[@]}" RANK=1 GROUP_RANK=1 GLOO_SOCKET_IFNAME=eth0 \
    timeout "${RANK_TIMEOUT:-900}" "$@" >/dev/null 2>"$tmp/err1" &
  local p1=$!
  pids=("$p0" "$p1")
  local rc=0
  wait "$p0" || rc=$?
  wait "$p1" || rc=$((rc ? rc : $?))
  pids=()
  if ((rc != 0)); then
    echo "multinode: a rank of '$*' failed (exit $rc):" >&2
    tail -n 5 "$tmp/err0" "$tmp/err1" >&2
    exit 1
  fi
}

where="no namespaces (PARTS=gang)"
$hosts && where="network namespaces $A ($addr_a) and $B ($net.2) on one veth pair"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores;" \
  "hosts: $where; $(date -u +%FT%TZ); load at start $(load)"

# --- (1) swept-train against PyTorch DDP, 2 nodes.
ours_sps() {  # model global-batch steps log-every args...
  local model=$1 batch=$2 steps=$3 every=$4
  shift 4
  two_ranks "$build/bin/swept-train" --data="$data" --model="$model" --batch_size="$batch" \
    --max_steps=$((every + steps)) --log_every="$every" --val_fraction=0 --threads="$threads" "$@"
  python3 -c '
import json, sys
windows = [json.loads(l) for l in open(sys.argv[1]) if "\"samples_per_sec\"" in l][1:]
samples = int(sys.argv[2]) * int(sys.argv[3])
print(round(samples * len(windows) / sum(samples / w["samples_per_sec"] for w in windows), 1))' \
    "$tmp/out0" "$batch" "$every"
}
peer_sps() {  # model steps
  two_ranks /usr/bin/python3 "$ddp" --peer "$peer_models" --data "$data" --model "$1" --steps "$2" --threads "$threads"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_sec"])' "$tmp/out0"
}
if wants train; then
  for model in $models; do
    if [[ $model == mlp ]]; then
      args=(--activation=sigmoid --hidden=100 --optimizer=sgd --lr=0.5 --schedule=constant) batch=100 steps=${MLP_STEPS:-500}
      every=50
    else
      args=(--optimizer=adam --lr=0.001 --schedule=constant) batch=128 steps=${CNN_STEPS:-50}
      every=10
    fi
    o=() p=() loads=()
    for _ in $(seq "$rounds"); do
      o+=("$(ours_sps "$model" "$batch" "$steps" "$every" "${args[@]}")")
      p+=("$(peer_sps "$model" "$steps")")
      loads+=("$(cut -d' ' -f1 /proc/loadavg)")
    done
    om=$(median "${o[@]}") pm=$(median "${p[@]}")
    ratio=$(python3 -c "print(round($om / $pm, 2))")
    met=$(python3 -c "print('met' if $om / $pm >= 2 else 'NOT met')")
    echo "(1) $model, 2 nodes x $threads threads, global batch $batch: swept-train $om samples/s, PyTorch DDP (gloo)" \
      "$pm: ratio ${ratio}x (target >= 2x: $met); rounds: swept ${o[*]}, DDP ${p[*]}; 1-min load ${loads[*]}"
    echo "{\"bench\": \"multinode_train\", \"model\": \"$model\", \"nodes\": 2, \"threads_per_node\": $threads," \
      "\"global_batch\": $batch, \"steps\": $steps, \"rounds\": $rounds, \"swept_samples_per_sec\": $om," \
      "\"ddp_samples_per_sec\": $pm, \"ratio\": $ratio, \"swept_rounds\": [$(IFS=,; echo "${o[*]}")]," \
      "\"ddp_rounds\": [$(IFS=,; echo "${p[*]}")], \"load1\": [$(IFS=,; echo "${loads[*]}")]}"
  done
fi

# --- (2) the all-reduce's bus bandwidth against iperf3 on the same link.
iperf() {  # extra iperf3 flags; prints Gbit/s received by A (and, --bidir, by B) per direction
  next_port
  ip netns exec "$A" iperf3 -s -1 -B "$addr_a" -p "$port" >/dev/null 2>&1 &
  local server=$!
  pids=("$server")
  local deadline=$((SECONDS + 10))
  until ip netns exec "$A" ss -ltnH "sport = :$port" | grep -q .; do
    ((SECONDS < deadline)) || { echo "multinode: iperf3's server did not listen within 10 s" >&2; exit 1; }
    sleep 0.05
  done
  ip netns exec "$B" iperf3 -c "$addr_a" -p "$port" -t 5 -J "$@" >"$tmp/iperf.json"
  wait "$server" || true
  pids=()
  python3 -c '
import json, sys
end = json.load(open(sys.argv[1]))["end"]
rates = [end["sum_received"]["bits_per_second"]]
if "sum_received_bidir_reverse" in end:
    rates.append(end["sum_received_bidir_reverse"]["bits_per_second"])
print(round(sum(rates) / len(rates) / 1e9, 3))' "$tmp/iperf.json"
}
if wants allreduce; then
  uni=() bidir=() loads=()
  : >"$tmp/allreduce.jsonl"
  for _ in $(seq "$rounds"); do
    uni+=("$(iperf)")
    two_ranks "$build/bin/allreduce_bench" --min_mb 1 --max_mb 64
    cat "$tmp/out0" >>"$tmp/allreduce.jsonl"
    two_ranks /usr/bin/python3 "$root/bench/torch_allreduce.py" --max-mb 64
    cat "$tmp/out0" >>"$tmp/allreduce.jsonl"
    bidir+=("$(iperf --bidir)")
    loads+=("$(cut -d' ' -f1 /proc/loadavg)")
  done
  um=$(median "${uni[@]}") bm=$(median "${bidir[@]}")
  echo "(2) iperf3 TCP on the veth: $um Gbit/s one way (rounds ${uni[*]}), $bm Gbit/s per direction both ways" \
    "(rounds ${bidir[*]}); 1-min load ${loads[*]}"
  python3 - "$tmp/allreduce.jsonl" "$um" "$bm" "$rounds" "${loads[*]}" <<'EOF'
import collections, json, statistics, sys
path, uni, bidir, rounds, loads = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
by_size, torch_by_size = collections.defaultdict(list), collections.defaultdict(list)
for line in open(path):
    r = json.loads(line)
    (torch_by_size if r.get("peer") == "torch-gloo" else by_size)[r["bytes"]].append(r)
rows, met = [], True
for size in sorted(by_size):
    busbw = statistics.median(r["busbw_gbit_s"] for r in by_size[size])
    us = statistics.median(r["us_per_op"] for r in by_size[size])
    share = busbw / uni
    torch_busbw = statistics.median(r["busbw_gbit_s"] for r in torch_by_size[size])
    if size >= 4 << 20 and share < 0.8:
        met = False
    rows.append({"mb": size >> 20, "us_per_op": us, "busbw_gbit_s": round(busbw, 3),
                 "share_of_iperf3": round(share, 3), "share_of_iperf3_bidir": round(busbw / bidir, 3),
                 "busbw_rounds": [r["busbw_gbit_s"] for r in by_size[size]],
                 "torch_gloo_busbw_gbit_s": round(torch_busbw, 3),
                 "torch_gloo_busbw_rounds": [r["busbw_gbit_s"] for r in torch_by_size[size]]})
    print(f"    {size >> 20:3d} MB: {us / 1000:8.2f} ms per all-reduce, busbw {busbw:6.2f} Gbit/s = "
          f"{100 * share:3.0f}% of iperf3 one way, {100 * busbw / bidir:3.0f}% of iperf3 per direction both ways; "
          f"torch.distributed (gloo) {torch_busbw:6.2f} Gbit/s")
print(f"(2) target busbw >= 80% of iperf3 (one way) from 4 MB up: {'met' if met else 'NOT met'}")
print(json.dumps({"bench": "multinode_allreduce", "ranks": 2, "rounds": rounds, "iperf3_gbit_s": uni,
                  "iperf3_bidir_per_direction_gbit_s": bidir, "sizes": rows,
                  "load1": [float(x) for x in loads.split()]}))
EOF
fi

# --- (3) gang placement: scheduler CPU per trial, two-node against one-node trials.
gang_round() {  # nodes [swept]; prints "cpu_us_per_trial wall_s turns_per_trial messages_per_trial successors"
  local db=$tmp/gang.db work
  work=$(mktemp -d -p "$tmp")
  rm -f "$db" "$db-wal" "$db-shm"
  printf '{"method": "grid", "command": ["/bin/true", "${args}"], "parameters": {"x": {"min": 1, "max": 1000}},
 "resources": {"nodes": %d}}\n' "$1" >"$tmp/gang.json"
  local t0
  t0=$(date +%s.%N)
  "${2:-$build/bin/swept}" run "$tmp/gang.json" --db "$db" --local-agents 8 --slots 8 --workdir "$work/w" --progress off \
    --dashboard off --stats "$tmp/stats.json" >/dev/null 2>"$tmp/run.log" || { tail -n 20 "$tmp/run.log" >&2; exit 1; }
  local wall
  wall=$(python3 -c "import sys; print(round($(date +%s.%N) - $t0, 2))")
  rm -rf "$work"
  python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
if s["trials_finished"] != 1000:
    sys.exit("multinode: expected 1000 finished trials, got %d" % s["trials_finished"])
n = s["trials_finished"]
print(round(s["loop_cpu_seconds"] / n * 1e6, 1), sys.argv[2], round(s["turns"] / n, 2), round(s["messages_in"] / n, 2),
      s["successors"])' "$tmp/stats.json" "$wall"
}
if wants gang; then
  one=() two=() w1=() w2=() t1=() t2=() m1=() m2=() s1=() p1=() p2=() loads=()
  for _ in $(seq "$rounds"); do
    r=$(gang_round 1); read -r c w t m su <<<"$r"; one+=("$c") w1+=("$w") t1+=("$t") m1+=("$m") s1+=("$su")
    r=$(gang_round 2); read -r c w t m su <<<"$r"; two+=("$c") w2+=("$w") t2+=("$t") m2+=("$m")
    if [[ -n ${PEER_SWEPT:-} ]]; then
      r=$(gang_round 1 "$PEER_SWEPT"); read -r c _ <<<"$r"; p1+=("$c")
      r=$(gang_round 2 "$PEER_SWEPT"); read -r c _ <<<"$r"; p2+=("$c")
    fi
    loads+=("$(cut -d' ' -f1 /proc/loadavg)")
  done
  om=$(median "${one[@]}") tm=$(median "${two[@]}")
  ratio=$(python3 -c "print(round($tm / $om, 2))")
  met=$(python3 -c "print('met' if $tm / $om <= 2 else 'NOT met')")
  echo "(3) 1,000 no-op trials on 8 local agents: scheduler CPU per trial one-node $om us, two-node $tm us:" \
    "ratio ${ratio}x (target <= 2x: $met); rounds one-node ${one[*]} us (wall ${w1[*]} s), two-node ${two[*]} us" \
    "(wall ${w2[*]} s); 1-min load ${loads[*]}"
  # Under load the one-node side inflates more: the rounds' own ratios
  # (each round's two sides ran back to back) say more than the medians'.
  echo "(3) two-node / one-node by round: $(python3 -c '
import sys
r = sorted(b / a for a, b in zip(map(float, sys.argv[1].split()), map(float, sys.argv[2].split())))
print(" ".join(f"{x:.2f}" for x in r), "(median %.2fx)" % r[(len(r) - 1) // 2])' "${one[*]}" "${two[*]}")"
  echo "(3) per trial, medians: the loop's turns one-node $(median "${t1[@]}"), two-node $(median "${t2[@]}");" \
    "messages read one-node $(median "${m1[@]}"), two-node $(median "${m2[@]}"); one-node trials sent as successors" \
    "$(median "${s1[@]}") of 1000"
  if [[ -n ${PEER_SWEPT:-} ]]; then
    python3 - "${one[*]}" "${two[*]}" "${p1[*]}" "${p2[*]}" "$PEER_SWEPT" <<'EOF'
import sys
one, two, p1, p2 = ([float(x) for x in a.split()] for a in sys.argv[1:5])
def m(v):  # as median() above: the lower middle of an even count
    return round(sorted(v)[(len(v) - 1) // 2], 3)
print(f"(3) PEER_SWEPT {sys.argv[5]}: one-node {m(p1)} us, two-node {m(p2)} us: ratio {m(p2) / m(p1):.2f}x "
      f"(by round, median {m([b / a for a, b in zip(p1, p2)]):.2f}x); "
      f"this build / the peer, paired by round: one-node {m([a / b for a, b in zip(one, p1)]):.3f}, "
      f"two-node {m([a / b for a, b in zip(two, p2)]):.3f}; rounds one-node {p1}, two-node {p2}")
EOF
  fi
  echo "{\"bench\": \"multinode_gang\", \"agents\": 8, \"trials\": 1000, \"rounds\": $rounds," \
    "\"one_node_cpu_us_per_trial\": $om, \"two_node_cpu_us_per_trial\": $tm, \"ratio\": $ratio," \
    "\"one_node_rounds\": [$(IFS=,; echo "${one[*]}")], \"two_node_rounds\": [$(IFS=,; echo "${two[*]}")]," \
    "\"one_node_turns_per_trial\": [$(IFS=,; echo "${t1[*]}")], \"two_node_turns_per_trial\": [$(IFS=,; echo "${t2[*]}")]," \
    "\"one_node_successors\": [$(IFS=,; echo "${s1[*]}")]," \
    "\"load1\": [$(IFS=,; echo "${loads[*]}")]}"
fi
echo "load at end $(load)"
