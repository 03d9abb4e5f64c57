#!/usr/bin/env bash
# Multi-host test over real network boundaries (issue 14): the scheduler in
# one network namespace, two agents in two others and a rogue in a fourth,
# each joined to the scheduler's namespace by a veth pair with addresses in
# 10.77.N.0/24. A keyed sweep runs over TCP; one agent's link is cut until the
# scheduler declares it lost, then restored; SQLite must then show every
# trial completed exactly once and no metric row twice. A rogue agent and a
# rogue client (no key, an unlisted key) get nothing done.
#
# usage: tests/netns_test.sh SWEPT_BINARY SOURCE_DIR
# Needs root and iproute2 (CI runs as root). Exit 77 (CTest: skipped) with a
# message only when namespaces cannot be created. Namespaces and processes
# are removed on every exit, failures included.
set -euo pipefail
swept=$1
src=$2
trial=$src/tests/trial.sh
tag=$$
ns_s=swept-s-$tag ns_a1=swept-a1-$tag ns_a2=swept-a2-$tag ns_r=swept-r-$tag
tmp=$(mktemp -d)
pids=()
made=()

cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  netns_remove_all  # whatever still runs in the namespaces: agents must not outlive the test
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do echo "== $f" >&2; tail -20 "$f" >&2; done
  exit 1
}
source "$(dirname "$0")/shell_lib.sh"  # wait_for, sql
source "$(dirname "$0")/netns_lib.sh"   # netns_remove_all (cleanup), netns_join

if ! command -v ip >/dev/null || ! ip netns add "$ns_s" 2>"$tmp/netns.err"; then
  echo "SKIP: this machine refuses to create network namespaces ($(cat "$tmp/netns.err" 2>/dev/null || echo 'no ip command'));" \
       "run as root with iproute2 to test across namespaces" >&2
  exit 77
fi
made+=("$ns_s")
ip -n "$ns_s" link set lo up
n=0
for ns in "$ns_a1" "$ns_a2" "$ns_r"; do
  n=$((n + 1))
  netns_join "$ns_s" "$ns" "sw$n-$tag" "10.77.$n"
done

cd "$tmp"
for k in scheduler a1 a2 client rogue; do "$swept" keygen --out "$tmp/$k" >/dev/null; done
mkdir -p auth/agents auth/clients
cp a1.pub a2.pub auth/agents/
cp client.pub auth/clients/

ip netns exec "$ns_s" "$swept" scheduler --bind 'tcp://0.0.0.0:*' --db "$tmp/swept.db" --heartbeat-ms 100 \
  --liveness 5 --endpoint-file "$tmp/ep" --key scheduler.key --authorized auth >"$tmp/scheduler.log" 2>&1 &
pids+=($!)
wait_for 20 '[ -s "$tmp/ep" ]' || fail "the scheduler did not start"
port=$(sed 's/.*://' "$tmp/ep")
keyed() { echo --key "$tmp/$1.key" --scheduler-pub "$tmp/scheduler.pub"; }
agent() {  # agent NS NUMBER NAME KEY
  # shellcheck disable=SC2046
  ip netns exec "$1" "$swept" agent --scheduler "tcp://10.77.$2.1:$port" --name "$3" --gpus none --slots 2 \
    --workdir "$tmp/work-$3" --heartbeat-ms 100 --liveness 5 --reconnect-min-ms 100 --reconnect-max-ms 400 \
    --stop-grace-ms 500 $([ -n "$4" ] && keyed "$4") >>"$tmp/agent-$3.log" 2>&1
}

agent "$ns_a1" 1 host-1 a1 & pids+=($!)
agent "$ns_a2" 2 host-2 a2 & pids+=($!)
wait_for 20 '[ "$(sql "SELECT COUNT(*) FROM agents WHERE state='"'alive'"'")" = 2 ]' || fail "the agents did not register: $(sql "SELECT name, state FROM agents" 2>&1)"

# Each attempt writes to a ledger every 50 ms while it runs: trial, attempt,
# host (from its working directory), time in ns. A killed attempt stops
# writing; the ledger shows when each attempt ran, and where.
cat >"$tmp/ledger-trial.sh" <<EOF
#!/bin/sh
host=\$(pwd | sed 's|.*/work-\([^/]*\)/.*|\1|')
"$trial" "\$@" &
child=\$!
trap 'kill -TERM \$child 2>/dev/null' TERM
while kill -0 \$child 2>/dev/null; do
  echo "\$SWEPT_TRIAL_ID \$SWEPT_ATTEMPT \$host \$(date +%s%N)" >>"$tmp/ledger"
  sleep 0.05
done
wait \$child
EOF
chmod +x "$tmp/ledger-trial.sh"
cat >"$tmp/sweep.json" <<EOF
{"method": "grid", "max_retries": 3, "metric": {"name": "loss", "goal": "minimize"},
 "command": ["$tmp/ledger-trial.sh", "\${args}"],
 "parameters": {"mode": {"value": "normal"}, "secs": {"value": 3}, "steps": {"values": [1, 2, 3, 4, 5, 6, 7, 8]}}}
EOF
# shellcheck disable=SC2046
sweep=$(ip netns exec "$ns_s" "$swept" submit sweep.json --scheduler "tcp://127.0.0.1:$port" $(keyed client)) ||
  fail "the keyed client could not submit"

# Rogues, from their own namespace: nothing gets in.
# shellcheck disable=SC2046
for key in "" rogue; do
  if ip netns exec "$ns_r" "$swept" submit sweep.json --scheduler "tcp://10.77.3.1:$port" \
      $([ -n "$key" ] && keyed "$key") >"$tmp/rogue-client.log" 2>&1; then
    fail "a rogue client (key '${key:-none}') submitted a sweep"
  fi
  # shellcheck disable=SC2046
  if timeout 30 ip netns exec "$ns_r" "$swept" agent --scheduler "tcp://10.77.3.1:$port" --name rogue --gpus none \
      --workdir "$tmp/work-rogue" $([ -n "$key" ] && keyed "$key") >>"$tmp/agent-rogue.log" 2>&1; then
    fail "a rogue agent (key '${key:-none}') was let in"
  fi
done
grep -q "refused this key" "$tmp/agent-rogue.log" || fail "the rogue agent was not told its key was refused"

# Cut host-1's link past liveness (the scheduler declares it lost) and past its
# lease (the scheduler requeues its trials, which host-1 has stopped), then restore it.
wait_for 20 '[ "$(sql "SELECT COUNT(*) FROM attempts WHERE agent='"'host-1'"' AND state='"'running'"'")" -gt 0 ]' ||
  fail "host-1 got no trial"
ip -n "$ns_a1" link set eth0 down
wait_for 30 '[ "$(sql "SELECT state FROM agents WHERE name='"'host-1'"'")" = lost ]' || fail "host-1 was not declared lost"
wait_for 30 '[ "$(sql "SELECT COUNT(*) FROM attempts WHERE agent='"'host-1'"' AND reason LIKE '"'%lease%'"'")" -gt 0 ]' ||
  fail "host-1's trials were not requeued once its lease was over"
ip -n "$ns_a1" link set eth0 up

# shellcheck disable=SC2046
ip netns exec "$ns_s" "$swept" wait "$sweep" --scheduler "tcp://127.0.0.1:$port" --poll-ms 100 $(keyed client) \
  >"$tmp/wait.log" 2>&1 || fail "the sweep did not complete: $(cat "$tmp/wait.log")"

# Every trial completed exactly once, every metric row once: 1+2+...+8 rows.
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$sweep AND state='completed'")" = 8 ] || fail "not every trial completed"
[ "$(sql "SELECT COUNT(*) FROM (SELECT trial_id FROM attempts WHERE state='completed' GROUP BY trial_id HAVING COUNT(*) > 1)")" = 0 ] ||
  fail "a trial completed twice"
[ "$(sql "SELECT COUNT(*) FROM metrics m JOIN trials t ON t.id = m.trial_id WHERE t.sweep_id=$sweep")" = 36 ] ||
  fail "metric rows: expected 36"
[ "$(sql "SELECT COUNT(*) FROM attempts WHERE agent NOT IN ('host-1', 'host-2')")" = 0 ] || fail "a rogue ran a trial"
# The ledger: no two attempts of one trial ran at the same time (their
# [first, last] intervals do not overlap), and all 8 trials ran.
grep -q " host-1 " "$tmp/ledger" && grep -q " host-2 " "$tmp/ledger" || fail "the ledger does not show both hosts"
overlaps=$(awk '{ k = $1 " " $2 " " $3; if (!(k in lo) || $4 < lo[k]) lo[k] = $4; if ($4 > hi[k]) hi[k] = $4 }
  END { for (a in lo) for (b in lo) { split(a, x, " "); split(b, y, " ");
          if (a < b && x[1] == y[1] && lo[a] <= hi[b] && lo[b] <= hi[a]) print "trial " x[1] ": " a " and " b } }' "$tmp/ledger")
[ -z "$overlaps" ] || fail "a trial ran on two hosts at once: $overlaps"
[ "$(awk '{print $1}' "$tmp/ledger" | sort -u | wc -l)" = 8 ] || fail "the ledger does not show 8 trials"
[ "$(sql "SELECT COUNT(*) FROM agents WHERE name='rogue'")" = 0 ] || fail "the rogue agent was registered"
wait_for 20 '[ "$(sql "SELECT state FROM agents WHERE name='"'host-1'"'")" = alive ]' || fail "host-1 did not come back"
echo "PASS: keyed sweep across 3 namespaces, host-1 cut past its lease and restored, no trial ran on two hosts at once (ledger: $(wc -l <"$tmp/ledger") lines), rogues refused"
