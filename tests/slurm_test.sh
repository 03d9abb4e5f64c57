#!/usr/bin/env bash
# A real one-node Slurm cluster from Debian's packages (issue 14): munged,
# slurmctld and slurmd started by this test as root in a temporary directory
# (no systemd), four fake GPUs as gres devices (character devices like
# /dev/null, named nvidia0..3). A keyed swept scheduler runs beside it, and
# deploy/slurm/swept-agent.sbatch - the recipe as shipped - is submitted twice
# with sbatch (two GPUs each). Checks:
#   1. each agent registers offering exactly its job's two GPUs, and every
#      trial's CUDA_VISIBLE_DEVICES lies inside its agent's allocation
#      (as `scontrol show job -d` reports it);
#   2. the drain: a running job's time limit is brought within the recipe's
#      --signal=USR1@300, so Slurm itself sends the signal; the agents
#      checkpoint their trials (SIGTERM), hand them back, exit 0 (job
#      COMPLETED), and the trials (max_retries 0) are requeued at no cost and
#      finish on a third agent job.
#
# usage: tests/slurm_test.sh SWEPT_BINARY SOURCE_DIR
# Needs root. Installs slurm-wlm and munge when missing (apt-get); exit 77
# (CTest: skipped) with a message only when they cannot be installed or the
# user is not root. Every daemon and job is stopped on exit, failures included.
set -euo pipefail
swept=$(readlink -f "$1")
src=$(readlink -f "$2")
trial=$src/tests/trial.sh
skip() { echo "SKIP: $*" >&2; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "a one-node Slurm cluster needs root (slurmd, munged); CI runs this as root"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null ||
   ! command -v sbatch >/dev/null; then
  echo "slurm test: installing slurm-wlm and munge" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      slurm-wlm munge; } >/dev/null 2>&1 ||
    skip "slurm-wlm and munge are not installed and 'apt-get install slurm-wlm munge' failed; run scripts/install-deps.sh"
fi

tmp=$(mktemp -d /tmp/swept-slurm-XXXXXX)
chmod 755 "$tmp"
pids=()
jobs_submitted=()
export SLURM_CONF=$tmp/slurm.conf
cleanup() {
  if ((${#jobs_submitted[@]})); then
    scancel "${jobs_submitted[@]}" 2>/dev/null || true
    # slurmd ends the jobs' steps (their agents stop their trials) before it goes.
    local deadline=$((SECONDS + 20))
    while [[ -n $(squeue -h 2>/dev/null) ]] && ((SECONDS < deadline)); do sleep 0.2; done
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/munged.pid"; do
    [[ -s $f ]] && kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/log/*.log "$tmp"/*.log; do [[ -f $f ]] && { echo "== $f" >&2; tail -25 "$f" >&2; }; done
  exit 1
}
source "$(dirname "$0")/shell_lib.sh"  # wait_for, sql
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ---- the cluster ------------------------------------------------------------
mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/log" "$tmp/dev" "$tmp/keys" "$tmp/auth/agents" \
  "$tmp/auth/clients" "$tmp/shared" "$tmp/work"
chmod 700 "$tmp/munge"
head -c 1024 /dev/urandom >"$tmp/munge/munge.key"
chmod 400 "$tmp/munge/munge.key"
munged --force --socket="$tmp/munge/munge.sock" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" --seed-file="$tmp/munge/seed" ||
  fail "munged did not start"
for i in 0 1 2 3; do mknod "$tmp/dev/nvidia$i" c 1 3; done  # fake GPUs: /dev/null's device number
host=$(hostname -s)
cat >"$tmp/slurm.conf" <<EOF
ClusterName=swept-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.sock
CredType=cred/munge
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
GresTypes=gpu
MinJobAge=600
KillWait=5
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 Gres=gpu:4 State=UNKNOWN
PartitionName=swept Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
echo "NodeName=$host Name=gpu File=$tmp/dev/nvidia[0-3]" >"$tmp/gres.conf"
slurmctld -i -f "$tmp/slurm.conf" || fail "slurmctld did not start"
slurmd -f "$tmp/slurm.conf" || fail "slurmd did not start"
wait_for 30 'sinfo -h -o %T 2>/dev/null | grep -q idle' || fail "the node did not become idle: $(sinfo 2>&1)"
echo "slurm test: one-node cluster up (node $host, 4 fake GPUs)"

# ---- the scheduler and keys -------------------------------------------------
for k in scheduler slurm-agent client; do "$swept" keygen --out "$tmp/keys/$k" >/dev/null; done
cp "$tmp/keys/slurm-agent.pub" "$tmp/auth/agents/"
echo 8 >"$tmp/auth/agents/slurm-agent.max"  # the recipe's shared key: a pool (docs/protocol.md)
cp "$tmp/keys/client.pub" "$tmp/auth/clients/"
"$swept" scheduler --bind "tcp://127.0.0.1:$(free_port)" --db "$tmp/swept.db" --heartbeat-ms 200 --liveness 5 \
  --endpoint-file "$tmp/ep" --key "$tmp/keys/scheduler.key" --authorized "$tmp/auth" >"$tmp/scheduler.log" 2>&1 &
pids+=($!)
wait_for 20 '[[ -s $tmp/ep ]]' || fail "the scheduler did not start"
endpoint=$(cat "$tmp/ep")
client=(--scheduler "$endpoint" --key "$tmp/keys/client.key" --scheduler-pub "$tmp/keys/scheduler.pub")

# The recipe as shipped; the command line only fits it to this small node
# (one CPU per job, a 10-minute limit) and points it at the test's files.
export PATH=$(dirname "$swept"):$PATH
submit_agent() {
  (cd "$tmp" && sbatch --parsable --cpus-per-task=1 --time=10 \
    --export="ALL,SWEPT_SCHEDULER=$endpoint,SWEPT_KEYS_DIR=$tmp/keys,SWEPT_WORKDIR=$tmp/work" \
    "$src/deploy/slurm/swept-agent.sbatch")
}
# The GPU indices Slurm gave job $1 ("0,1"), from `scontrol show job -d`.
job_gpus() {
  scontrol show job -d "$1" | grep -o 'IDX:[0-9,-]*' | head -1 | cut -d: -f2 |
    python3 -c 'import sys
out = []
for part in sys.stdin.read().strip().split(","):
    a, _, b = part.partition("-")
    out += range(int(a), int(b or a) + 1)
print(",".join(map(str, out)))'
}
job_state() { scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z]*' | cut -d= -f2; }

job_a=$(submit_agent) || fail "sbatch refused the recipe"
jobs_submitted+=("$job_a")
job_b=$(submit_agent) || fail "sbatch refused the recipe"
jobs_submitted+=("$job_b")
wait_for 60 '[[ $(sql "SELECT COUNT(*) FROM agents WHERE state='"'alive'"'") == 2 ]]' ||
  fail "the two agent jobs did not register (job states: $(job_state "$job_a") $(job_state "$job_b"))"
echo "slurm test: agent jobs $job_a and $job_b registered"

# ---- 1. each agent offers exactly its allocation ----------------------------
for j in "$job_a" "$job_b"; do
  gpus=$(job_gpus "$j")
  [[ $gpus =~ ^[0-9]+,[0-9]+$ ]] || fail "job $j: no two-GPU allocation in scontrol ($gpus)"
  offered=$(sql "SELECT group_concat(idx, ',') FROM (SELECT g.idx FROM agent_gpus g JOIN agents a ON a.name=g.agent
                 WHERE a.name LIKE 'slurm-$j-%' ORDER BY g.idx)")
  [[ $offered == "$gpus" ]] || fail "agent of job $j offers GPUs '$offered', but Slurm gave it '$gpus'"
done

cat >"$tmp/gpus.json" <<EOF
{"name": "slurm-gpus", "method": "grid", "metric": {"name": "loss", "goal": "minimize"},
 "resources": {"gpus": 1}, "command": ["$trial", "\${args}"],
 "parameters": {"mode": {"value": "normal"}, "secs": {"value": 0.5}, "x": {"values": [1, 2, 3, 4, 5, 6, 7, 8]}}}
EOF
sweep1=$("$swept" submit "$tmp/gpus.json" "${client[@]}") || fail "submit failed"
"$swept" wait "$sweep1" "${client[@]}" --timeout-s 120 >/dev/null 2>&1 || fail "sweep $sweep1 did not complete"
[[ $(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$sweep1 AND state='completed'") == 8 ]] ||
  fail "not every GPU trial completed"
while IFS='|' read -r id agent cvd; do
  j=${agent#slurm-}
  j=${j%%-*}
  [[ ",$(job_gpus "$j")," == *",$cvd,"* ]] ||
    fail "trial $id ran on $agent with CUDA_VISIBLE_DEVICES=$cvd, outside job $j's GPUs $(job_gpus "$j")"
done < <(sql "SELECT id, agent, json_extract(env, '\$.CUDA_VISIBLE_DEVICES') FROM trials WHERE sweep_id=$sweep1")
[[ $(sql "SELECT COUNT(DISTINCT agent) FROM trials WHERE sweep_id=$sweep1") == 2 ]] ||
  fail "the GPU trials did not use both agents"
echo "slurm test: 8 GPU trials ran inside their agents' allocations"

# ---- 2. the drain, signalled by Slurm before the time limit -----------------
cat >"$tmp/drain.json" <<EOF
{"name": "slurm-drain", "method": "grid", "max_retries": 0, "metric": {"name": "loss", "goal": "minimize"},
 "resources": {"gpus": 2}, "command": ["$trial", "\${args}"],
 "parameters": {"mode": {"value": "checkpoint"}, "dir": {"value": "$tmp/shared"}, "finish_on": {"value": 2},
                "secs": {"value": 600}, "x": {"values": [1, 2]}}}
EOF
sweep2=$("$swept" submit "$tmp/drain.json" "${client[@]}") || fail "submit failed"
ids=$(sql "SELECT group_concat(id, ' ') FROM trials WHERE sweep_id=$sweep2")
wait_for 60 'n=0; for i in $ids; do [[ -e $tmp/shared/ready-$i-1 ]] && n=$((n+1)); done; ((n == 2))' ||
  fail "the two checkpointing trials did not start"
# A 4-minute limit leaves less than the recipe's 300 s: slurmctld sends
# SIGUSR1 to each job's step at its next check.
scontrol update JobId="$job_a" TimeLimit=4
scontrol update JobId="$job_b" TimeLimit=4
wait_for 120 '[[ $(job_state "$job_a") == COMPLETED && $(job_state "$job_b") == COMPLETED ]]' ||
  fail "the agent jobs did not end COMPLETED after the drain signal ($(job_state "$job_a"), $(job_state "$job_b"))"
for j in "$job_a" "$job_b"; do
  scontrol show job "$j" | grep -q 'ExitCode=0:0' || fail "job $j: $(scontrol show job "$j" | grep -o 'ExitCode=[^ ]*')"
  grep -q draining "$tmp/swept-agent-$j.log" || fail "job $j's agent did not log a drain"
done
for i in $ids; do
  [[ -e $tmp/shared/ckpt-$i ]] || fail "trial $i did not checkpoint (no SIGTERM reached it)"
done
wait_for 20 '[[ $(sql "SELECT COUNT(*) FROM trials WHERE sweep_id='"$sweep2"' AND state='"'queued'"'") == 2 ]]' ||
  fail "the drained trials were not requeued: $(sql "SELECT id, state, reason FROM trials WHERE sweep_id=$sweep2")"
[[ $(sql "SELECT COUNT(*) FROM attempts a JOIN trials t ON t.id=a.trial_id WHERE t.sweep_id=$sweep2
          AND a.state='queued' AND a.reason LIKE 'requeued (costs no retry)%draining%'") == 2 ]] ||
  fail "the drained attempts are not recorded as requeued at no cost"
echo "slurm test: Slurm's USR1 drained both agents; trials checkpointed and requeued (max_retries 0)"

job_c=$(submit_agent) || fail "sbatch refused the recipe"
jobs_submitted+=("$job_c")
"$swept" wait "$sweep2" "${client[@]}" --timeout-s 120 >/dev/null 2>&1 || fail "sweep $sweep2 did not complete after the drain"
[[ $(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$sweep2 AND state='completed' AND attempts=2
          AND agent LIKE 'slurm-$job_c-%'") == 2 ]] ||
  fail "the drained trials did not finish on the third job: $(sql "SELECT id, state, attempts, agent FROM trials WHERE sweep_id=$sweep2")"
echo "PASS: a one-node Slurm cluster ran the sbatch recipe: allocations honoured, drain on Slurm's signal"
