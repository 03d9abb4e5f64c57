#!/usr/bin/env bash
# Population-based training across two hosts (issue 29): a keyed scheduler in
# one network namespace, two one-slot agents in two others (veth pairs,
# tests/netns_lib.sh), each with a work folder of its own, run a population
# of 2 members of tests/pbt_trial.sh. With one slot per agent the two members
# run one on each host, so every exploit's checkpoint, or the winner's own,
# is on the other host when the next segment starts there: the agent must
# pull it through the scheduler (CHECKPOINT_PULL / CHECKPOINT_PART, over the
# CURVE-authenticated connections), verify it and start from it. Checked: an
# exploit crossed hosts, its recipient resumed from the donor's interval step
# with the donor's lr doubled, both agents logged the transfer's size and
# time, the series are continuous and the lineage is stored.
#
# Then a lost donor: the same sweep, the better member's host fast and the
# other's slow (tests/pbt_trial.sh's PBT_DELAY_FILE), so the better member
# waits at the interval while the other still runs; its agent is SIGKILLed
# then. When the round runs, the checkpoint it holds (the donor's, or the
# winner's own) is wanted on the surviving host: the pull waits (the
# scheduler does not answer a pull whose holder is not connected) until the
# agent is restarted, then completes, verified, and the sweep completes with
# continuous series.
#
# usage: tests/pbt_netns_test.sh SWEPT
# Needs root, iproute2, sqlite3. Exit 77 (CTest: skipped) only when
# namespaces cannot be created. Namespaces and processes are removed on
# every exit, failures included.
set -euo pipefail
swept=$1
here=$(cd "$(dirname "$0")" && pwd)
tag=$$
ns_s=swpb-s-$tag ns_a1=swpb-a1-$tag ns_a2=swpb-a2-$tag
made=()
cleanup_more() { netns_remove_all; }
source "$here/shell_lib.sh"  # wait_for, sql, process_test_setup, fail
process_test_setup
source "$here/netns_lib.sh"  # netns_remove_all (cleanup), netns_join

if ! command -v ip >/dev/null || ! ip netns add "$ns_s" 2>"$tmp/netns.err"; then
  echo "SKIP: this machine refuses to create network namespaces ($(cat "$tmp/netns.err" 2>/dev/null || echo 'no ip command'));" \
       "run as root with iproute2 to test across namespaces" >&2
  exit 77
fi
made+=("$ns_s")
ip -n "$ns_s" link set lo up
netns_join "$ns_s" "$ns_a1" "pb1-$tag" 10.78.1
netns_join "$ns_s" "$ns_a2" "pb2-$tag" 10.78.2

cd "$tmp"
for k in scheduler a1 a2 client; do "$swept" keygen --out "$tmp/$k" >/dev/null; done
mkdir -p auth/agents auth/clients
cp a1.pub a2.pub auth/agents/
cp client.pub auth/clients/
keyed() { echo --key "$tmp/$1.key" --scheduler-pub "$tmp/scheduler.pub"; }

ip netns exec "$ns_s" "$swept" scheduler --bind 'tcp://0.0.0.0:*' --db "$tmp/swept.db" --heartbeat-ms 100 \
  --liveness 5 --endpoint-file "$tmp/ep" --key scheduler.key --authorized auth >"$tmp/scheduler.log" 2>&1 &
pids+=($!)
wait_for 20 '[ -s "$tmp/ep" ]' || fail "the scheduler did not start"
port=$(sed 's/.*://' "$tmp/ep")

export PBT_LEDGER=$tmp/ledger  # tests/pbt_trial.sh's, through the agents' environment
# start_agent N: host-N's agent, one slot, its own work folder. `ip netns
# exec` execs swept, so $! is the agent itself (the lost phase kills it).
agent_pid=()
start_agent() {
  local n=$1 ns=$ns_a1
  [ "$n" = 2 ] && ns=$ns_a2
  # shellcheck disable=SC2046
  PBT_DELAY_FILE=$tmp/delay-host-$n ip netns exec "$ns" "$swept" agent --scheduler "tcp://10.78.$n.1:$port" --name "host-$n" --gpus none --slots 1 \
    --workdir "$tmp/work-host-$n" --heartbeat-ms 100 --liveness 5 --reconnect-min-ms 100 --reconnect-max-ms 400 \
    --stop-grace-ms 2000 $(keyed "a$n") >>"$tmp/agent-host-$n.log" 2>&1 &
  agent_pid[$n]=$!
  pids+=($!)
}
start_agent 1
start_agent 2
wait_for 30 '[ "$(sql "SELECT COUNT(*) FROM agents WHERE state='"'alive'"'")" = 2 ]' ||
  fail "the agents did not register: $(sql "SELECT name, state FROM agents" 2>&1)"

# sweep_file NAME PROGRAM: a population of 2 (one exploit a round), lr
# doubled at each exploit, 3 segments of 10 steps.
sweep_file() {
  printf '%s\n' '{"method": "pbt", "metric": {"name": "q", "goal": "maximize"}, "seed": 5, "max_retries": 3,' \
    " \"command\": [\"$2\", \"\${args}\"]," \
    ' "parameters": {"lr": {"values": [0.1, 0.3]}, "steps": {"value": 30}},' \
    ' "pbt": {"population": 2, "interval": 10, "max_steps": 30, "resample_probability": 0, "perturb": [2],' \
    '         "hyperparam_mutations": {"lr": {"min": 0.01, "max": 10}}}}' >"$tmp/$1"
}
submit() {
  # shellcheck disable=SC2046
  ip netns exec "$ns_s" "$swept" submit "$1" --scheduler "tcp://127.0.0.1:$port" $(keyed client) ||
    fail "could not submit $1"
}
wait_completed() {
  local id=$1  # read by wait_for's eval (bash's scoping), where $1 is wait_for's own
  wait_for "$2" '[ "$(sql "SELECT state FROM sweeps WHERE id=$id")" = completed ]' ||
    fail "sweep $id did not complete: $(sql "SELECT id, state, attempts, reason FROM trials WHERE sweep_id=$id" 2>&1)"
}
# continuous SWEEP: each member has q once at every step 1 .. 30.
continuous() {
  [ "$(sql "SELECT COUNT(*) FROM metrics m JOIN trials t ON t.id = m.trial_id
            WHERE t.sweep_id=$1 AND m.name='q' AND m.step BETWEEN 1 AND 30")" = 60 ] ||
    fail "sweep $1: expected 2 x 30 points of q: $(sql "SELECT trial_id, COUNT(*), MIN(step), MAX(step) FROM metrics GROUP BY trial_id")"
}

# ---- the exploits cross hosts ----
sweep_file pbt.json "$here/pbt_trial.sh"
sweep=$(submit pbt.json)
wait_completed "$sweep" 120
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$sweep AND state='completed'")" = 2 ] ||
  fail "not both members completed: $(sql "SELECT id, state, reason FROM trials")"
[ "$(sql "SELECT COUNT(*) FROM pbt_lineage l JOIN trials t ON t.id = l.trial_id
          WHERE t.sweep_id=$sweep AND l.round IN (1, 2) AND l.donor_trial_id IS NOT NULL")" = 2 ] ||
  fail "expected one exploit per round: $(sql "SELECT * FROM pbt_lineage")"
crossed=0
while IFS='|' read -r member round donor donor_segment donor_host host; do
  donor_lr=$(sql "SELECT json_extract(params, '\$.lr') FROM pbt_lineage WHERE trial_id=$donor AND round<$round
                  ORDER BY round DESC LIMIT 1")
  segment=$((round + 1))
  read -r _ _ start_step lr < <(awk -v t="$member" -v a="$segment" '$1 == t && $2 == a' "$tmp/ledger")
  [ "$start_step" = $((round * 10)) ] ||
    fail "trial $member segment $segment started at step $start_step, not $((round * 10))"
  awk -v a="$lr" -v b="$donor_lr" 'BEGIN { exit !(a - 2 * b < 1e-9 && 2 * b - a < 1e-9) }' ||
    fail "trial $member segment $segment ran with lr $lr, not twice trial $donor's $donor_lr"
  [ "$donor_host" = "$host" ] && continue
  crossed=$((crossed + 1))
  grep -q "trial $member attempt $segment: the checkpoint of trial $donor segment $donor_segment from agent $donor_host pulled and verified: 1 files, [0-9]* bytes in [0-9]* ms" \
    "$tmp/agent-$host.log" || fail "$host did not log the pull of trial $donor segment $donor_segment"
  grep -q "sent the checkpoint of trial $donor segment $donor_segment for trial $member attempt $segment: 1 files, [0-9]* bytes in [0-9]* ms" \
    "$tmp/agent-$donor_host.log" || fail "$donor_host did not log sending trial $donor segment $donor_segment"
done < <(sql "SELECT l.trial_id, l.round, l.donor_trial_id, l.donor_segment, d.agent, r.agent
              FROM pbt_lineage l JOIN trials t ON t.id = l.trial_id
              JOIN attempts d ON d.trial_id = l.donor_trial_id AND d.attempt = l.donor_segment
              JOIN attempts r ON r.trial_id = l.trial_id AND r.attempt = l.round + 1
              WHERE t.sweep_id=$sweep AND l.donor_trial_id IS NOT NULL")
[ "$crossed" -ge 1 ] || fail "no exploit crossed hosts: $(sql "SELECT trial_id, attempt, agent FROM attempts")"
continuous "$sweep"
echo "ok: $crossed of 2 exploits crossed hosts"

# ---- a lost donor: its agent dies while its checkpoint is wanted ----
echo 0.5 >"$tmp/delay-host-1"
echo 0.5 >"$tmp/delay-host-2"
lost=$(submit pbt.json)
wait_for 30 '[ "$(sql "SELECT COUNT(*) FROM attempts a JOIN trials t ON t.id = a.trial_id
                       WHERE t.sweep_id=$lost AND a.attempt=1")" = 2 ]' || fail "sweep $lost: its members did not start"
[ "$(sql "SELECT COUNT(DISTINCT json_extract(params, '\$.lr')) FROM trials WHERE sweep_id=$lost")" = 2 ] ||
  fail "the two members drew the same lr (seed 5 is meant to give 0.1 and 0.3): $(sql "SELECT id, params FROM trials")"
best=$(sql "SELECT id FROM trials WHERE sweep_id=$lost ORDER BY json_extract(params, '\$.lr') DESC LIMIT 1")
holder=$(sql "SELECT agent FROM attempts WHERE trial_id=$best AND attempt=1")
n=${holder#host-}
other=host-$((3 - n))
echo 0.01 >"$tmp/delay-$holder"  # the better member runs ahead to the interval and waits there
wait_for 30 '[ "$(sql "SELECT state FROM attempts WHERE trial_id=$best AND attempt=1")" = queued ]' ||
  fail "trial $best did not end its first segment at the interval"
kill -9 "${agent_pid[$n]}"
wait_for 20 '[ "$(sql "SELECT state FROM agents WHERE name='"'$holder'"'")" = lost ]' ||
  fail "the scheduler did not find $holder lost"
wait_for 60 'grep -q "pulling the checkpoint of trial $best segment 1 from agent $holder" "$tmp/agent-$other.log"' ||
  fail "$other never pulled trial $best's checkpoint from $holder"
wait_for 20 'grep -q "from agent $holder, which is not connected: the pull waits for it" "$tmp/scheduler.log"' ||
  fail "the scheduler did not hold the pull while $holder was away"
start_agent "$n"
wait_completed "$lost" 120
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$lost AND state='completed'")" = 2 ] ||
  fail "not both members completed: $(sql "SELECT id, state, reason FROM trials WHERE sweep_id=$lost")"
grep -q "the checkpoint of trial $best segment 1 from agent $holder pulled and verified" "$tmp/agent-$other.log" ||
  fail "$other did not log the pull once $holder was back"
continuous "$lost"
echo "ok: a pull waited for the donor's agent $holder, restarted, and completed"
