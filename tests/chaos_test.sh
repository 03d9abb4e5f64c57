#!/usr/bin/env bash
# The chaos test (issue 15, "Bar to hold"): a keyed scheduler in one network
# namespace and three agents in three others (veth pairs, 10.78.N.0/24) run a
# sweep of a few hundred short trials while the test does to them what an
# operator's bad day does, each fault triggered by an event (a count read
# from SQLite, a line of the ledger), never by a fixed sleep:
#   1. a second scheduler is started on the same database: it must be refused,
#      naming the holder, and leave the lock and the running one alone;
#   2. the scheduler is SIGKILLed while trials run, and restarted on the same
#      database (its stale lock must not block it);
#   3. host-3's work directory (a small tmpfs) is filled up: its launches
#      fail and it must be quarantined, no trial failing for it; the space is
#      freed later and the quarantine must lift;
#   4. host-1 is SIGKILLed while it runs a long trial, then restarted;
#   5. host-2 is SIGSTOPped while it runs a long trial, past its lease (its
#      lease keeper must stop that trial) and past the scheduler's requeue
#      margin, but within the report window (docs/protocol.md, "Leases"):
#      that trial must still be held for host-2's report when host-2 is
#      SIGCONTed, and is requeued once host-2 reports it stopped; what ended
#      there meanwhile is reported, not run again;
#   6. host-3's link is cut while it runs a long trial, until its lease has
#      run out and that trial ran again elsewhere, then restored.
# Each starts at a share of the trials completed (5 % to 45 %), so that
# work is left for the agents back from it. The HOLD LINE keeps that work in
# hand however slow the faults' checks are on a loaded machine (CI once saw
# the sweep end while phase 6 waited for host-3 to run a trial): a trial
# whose index is at or above the number in $tmp/hold waits, ticking, until
# the line passes it or for at most $hold_max ticks (so that a held trial
# never keeps a slot from a requeued one for long). The line is at half the
# sweep until the last fault is in place, then at its end.
# Long trials (7 s) outlast the lease (3 s); the others take 0.2-1 s.
#
# Every execution of the trial program appends to one LEDGER (O_APPEND, one
# line per write): `start`, a `tick` every 0.1 s, `term` on SIGTERM and `end`
# when it finishes, each with trial id, attempt, host, pid and CLOCK_REALTIME.
# Each execution also holds a lock (flock) on its trial's file for as long
# as any of its processes lives, taken before `start`: an execution that
# finds it held writes `overlap`.
# After the sweep, agents and scheduler are stopped and the test checks:
#   - SQLite: every trial completed, exactly one completed attempt each, no
#     attempt left running, no trial ever failed; every trial has exactly its
#     6 metric rows, all of them from the attempt recorded as completed;
#   - the ledger: no `overlap`; NO two executions of one trial overlap in
#     time (an execution that was killed lasts until its last tick); NO
#     trial runs to its `end` twice: the completed attempt ran to `end`
#     exactly once, on the agent the store names, and no other execution of
#     the trial reached `end`, with one exception that docs/protocol.md
#     ("Partitions") names: an execution that ended on host-3 while its link
#     was cut, whose report could not arrive before the scheduler requeued
#     it (such re-runs are counted and printed); every execution is an
#     attempt the store knows, on that attempt's agent;
#   - during the sweep: each agent back from a fault gets work again;
#   - no process is left: no trial (its marker in /proc), no agent, no
#     scheduler, nothing in the namespaces.
# usage: tests/chaos_test.sh SWEPT_BINARY
# Environment: SWEPT_CHAOS_TRIALS (default 240), SWEPT_CHAOS_SKIP (a comma
# list of phases to leave out: second, disk, kill, stop, scheduler, cut),
# SWEPT_CHAOS_KEEP (a directory to copy the logs, ledger and database to),
# SWEPT_CHAOS_STORM (seconds of random agent SIGSTOPs and SIGKILLs after the
# phases, see phase 7; default 0).
# Needs root and iproute2 (CI runs as root). Exit 77 (CTest: skipped) with a
# message only when namespaces cannot be created. Processes, namespaces, the
# tmpfs and the temporary directory are removed on every exit, failures
# included.
# Conditions are strings wait_for evaluates; key flags split on purpose.
# shellcheck disable=SC2016,SC2046
set -euo pipefail
swept=$1
trials=${SWEPT_CHAOS_TRIALS:-240}
skip=",${SWEPT_CHAOS_SKIP:-},"
tag=$$
ns_s=swch-s-$tag
ns=("" "swch-1-$tag" "swch-2-$tag" "swch-3-$tag")
tmp=$(mktemp -d /tmp/swept-chaos.XXXXXX)
full=$tmp/full  # host-3's work directory's file system (a tmpfs)
hb_ms=300
long=70         # ticks of 0.1 s of a long trial
hold_max=100    # ticks of 0.1 s a trial past the hold line waits at most
pids=()         # every swept process the test started
made=()         # namespaces made
mounted=0
apid=(0 0 0 0)
spid=0

cleanup() {
  local p n
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
  netns_remove_all
  ((mounted == 0)) || umount -l "$full" 2>/dev/null || true
  if [ -n "${SWEPT_CHAOS_KEEP:-}" ]; then
    mkdir -p "$SWEPT_CHAOS_KEEP"
    cp -a "$tmp"/*.log "$tmp"/ledger "$tmp"/faults "$tmp"/swept.db* "$SWEPT_CHAOS_KEEP"/ 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

phase=setup
fail() {
  echo "FAIL ($phase): $*" >&2
  local f
  for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "== $f (last 25 lines)" >&2; tail -25 "$f" >&2; }; done
  exit 1
}
say() { echo "chaos [$SECONDS s, $(date -u +%T.%N | cut -c1-12)] $*"; }
source "$(dirname "$0")/shell_lib.sh"  # wait_for, sql
source "$(dirname "$0")/netns_lib.sh"   # netns_remove_all (cleanup), netns_join
now() { date +%s.%N; }
# fault NAME T0: records that fault NAME lasted from T0 until now (for the
# report of an overlap: which fault it came with).
fault() { echo "$1 $2 $(now)" >>"$tmp/faults"; }
skipped() { [[ $skip == *",$1,"* ]]; }
alive() { kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

if ! command -v ip >/dev/null || ! ip netns add "$ns_s" 2>"$tmp/netns.err"; then
  echo "SKIP: this machine refuses to create network namespaces ($(cat "$tmp/netns.err" 2>/dev/null || echo 'no ip command'));" \
       "run as root with iproute2 to run the chaos test" >&2
  exit 77
fi
made+=("$ns_s")
command -v sqlite3 >/dev/null || fail "the sqlite3 command is missing (scripts/install-deps.sh installs it)"
ip -n "$ns_s" link set lo up
for n in 1 2 3; do netns_join "$ns_s" "${ns[$n]}" "ch$n-$tag" "10.78.$n"; done
mkdir -p "$full"
mount -t tmpfs -o size=80m swept-chaos "$full" || fail "cannot mount a tmpfs for host-3's work directory"
mounted=1
workdir=("" "$tmp/work-host-1" "$tmp/work-host-2" "$full/work-host-3")

cd "$tmp"
for k in scheduler a1 a2 a3 client; do "$swept" keygen --out "$tmp/$k" >/dev/null; done
mkdir -p auth/agents auth/clients
cp a1.pub a2.pub a3.pub auth/agents/
cp client.pub auth/clients/
keyed() { echo --key "$tmp/$1.key" --scheduler-pub "$tmp/scheduler.pub"; }

# Heartbeat 300 ms, liveness 5: an agent is lost after 1.5 s of silence, its
# lease is 3 s and the scheduler requeues its trials 3.6 s after its last
# message (docs/protocol.md, "Leases"). Shorter would be quicker, but on a
# loaded machine a scheduler starved of CPU for a second or two declares
# every agent lost: still correct, only slower.
start_scheduler() {  # start_scheduler BIND
  rm -f "$tmp/ep"
  ip netns exec "$ns_s" "$swept" scheduler --bind "$1" --db "$tmp/swept.db" --heartbeat-ms $hb_ms --liveness 5 \
    --endpoint-file "$tmp/ep" --key scheduler.key --authorized auth >>"$tmp/scheduler.log" 2>&1 &
  spid=$!
  pids+=("$spid")
  wait_for 30 '[ -s "$tmp/ep" ]' || fail "the scheduler did not start"
}
start_scheduler 'tcp://0.0.0.0:*'
port=$(sed 's/.*://' "$tmp/ep")
client() { ip netns exec "$ns_s" "$swept" "$@" --scheduler "tcp://127.0.0.1:$port" $(keyed client); }

start_agent() {  # start_agent N
  local n=$1
  # A simple command sent to the background is exec'd by its subshell, and
  # ip netns exec execs swept: $! is the agent itself.
  ip netns exec "${ns[$n]}" "$swept" agent --scheduler "tcp://10.78.$n.1:$port" --name "host-$n" --gpus none \
    --slots 3 --workdir "${workdir[$n]}" --heartbeat-ms $hb_ms --liveness 5 --reconnect-min-ms 100 \
    --reconnect-max-ms 400 --stop-grace-ms 300 $(keyed "a$n") >>"$tmp/agent-$n.log" 2>&1 &
  apid[n]=$!
  pids+=("${apid[$n]}")
  wait_for 10 '[ "$(readlink "/proc/${apid[$n]}/exe" 2>/dev/null)" = "$(readlink -f "$swept")" ]' ||
    fail "host-$n: pid ${apid[$n]} is not the swept agent"
}
for n in 1 2 3; do start_agent $n; done
wait_for 30 '[ "$(sql "SELECT COUNT(*) FROM agents WHERE state='"'alive'"'")" = 3 ]' ||
  fail "the agents did not register: $(sql "SELECT name, state FROM agents" 2>&1)"

# The trial program. Trial i runs $long ticks of 0.1 s when i % 10 == 5
# (longer than the lease), else 2 + i % 9; it prints 3 metric lines (steps 1, 2, 3:
# loss = i + step / 10, and its attempt number). SWEPT_CHAOS_MARK marks
# every process it starts, for the scan for leftovers.
mkdir -p "$tmp/locks"
cat >"$tmp/chaos-trial.sh" <<EOF
#!/bin/bash
LC_ALL=C
export SWEPT_CHAOS_MARK=$tag
i=-1
for a in "\$@"; do case \$a in --i=*) i=\${a#--i=} ;; esac; done
host=\${PWD#*/work-}
host=\${host%%/*}
if (( i % 10 == 5 )); then ticks=$long; else ticks=\$(( 2 + i % 9 )); fi
line() { printf '%s %s %s %s %s %s %s\n' "\$1" "\$SWEPT_TRIAL_ID" "\$SWEPT_ATTEMPT" "\$host" "\$\$" "\$EPOCHREALTIME" "\$ticks" >>"$tmp/ledger"; }
metric() { printf '{"step": %d, "loss": %d.%d, "attempt": %d}\n' "\$1" "\$i" "\$1" "\$SWEPT_ATTEMPT"; }
trap 'line term; exit 143' TERM
# The trial's lock, held by every process of this execution (they inherit
# descriptor 9) until the last one ends.
exec 9>>"$tmp/locks/\$SWEPT_TRIAL_ID"
flock -n 9 || line overlap
line start
metric 1
for (( h = 0; h < $hold_max && i >= \$(cat "$tmp/hold"); h++ )); do
  sleep 0.1
  line tick
done
for (( t = 1; t <= ticks; t++ )); do
  sleep 0.1
  line tick
  (( t == ticks / 2 )) && metric 2
done
metric 3
line end
exit 0
EOF
chmod +x "$tmp/chaos-trial.sh"
echo $((trials / 2)) >"$tmp/hold"
release() { echo "$trials" >"$tmp/hold"; }
values=$(seq -s, 0 $((trials - 1)))
cat >"$tmp/sweep.json" <<EOF
{"name": "chaos", "method": "grid", "max_retries": 100, "metric": {"name": "loss", "goal": "minimize"},
 "command": ["$tmp/chaos-trial.sh", "\${args}"],
 "parameters": {"i": {"values": [$values]}}}
EOF
sweep=$(client submit sweep.json) || fail "the sweep was not submitted"
say "sweep $sweep: $trials trials on host-1, host-2, host-3 (scheduler pid $spid)"

completed() { sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$sweep AND state='completed'"; }
at_least() { [ "$(completed)" -ge "$1" ]; }
# A long trial whose execution on host-N started at most 1 s ago, from the
# ledger: prints "TRIAL ATTEMPT" of the newest, or nothing.
fresh_long_on() {
  [ -f "$tmp/ledger" ] || return 0
  awk -v h="host-$1" -v now="$(date +%s.%N)" \
    -v long="$long" '$1 == "start" && $4 == h && $7 == long && now - $6 < 1 { t = $2 " " $3 } END { if (t != "") print t }' "$tmp/ledger"
}
# pick N: sets `picked` to "TRIAL ATTEMPT" of a trial running on host-N,
# read once: a long one that started at most 1 s ago (it runs on well past
# the lease); when none came within 40 s (the grid gave that host no long
# trial), any trial running there (the scheduler requeues it at the lease's
# end all the same, not knowing whether it ended meanwhile).
picked=""
pick() {
  victim=$1 picked=""
  wait_for 40 'picked=$(fresh_long_on "$victim"); [ -n "$picked" ]' && return 0
  wait_for 60 'picked=$(sql "SELECT trial_id, attempt FROM attempts WHERE agent='"'host-$victim'"' AND state='"'running'"' LIMIT 1" | tr "|" " "); [ -n "$picked" ]'
}
# back_to_work N T: host-N must start a trial after time T (it came back
# from a fault healthy, so it must get work again).
started_after() { awk -v h="host-$1" -v t="$2" '$1 == "start" && $4 == h && $6 > t { f = 1 } END { exit !f }' "$tmp/ledger"; }
back_to_work() {
  # shellcheck disable=SC2034
  local n=$1 t=$2  # read by the condition wait_for evaluates
  wait_for 60 'started_after "$n" "$t"' ||
    fail "host-$n started no trial within 60 s of coming back: $(sql "SELECT name, state, quarantine FROM agents WHERE name='host-$n'")"
}
# Whether the ledger shows trial $1 started again with an attempt above $2.
restarted() { [ -f "$tmp/ledger" ] && awk -v t="$1" -v a="$2" '$1 == "start" && $2 == t && $3 > a { f = 1 } END { exit !f }' "$tmp/ledger"; }
attempt_state() { sql "SELECT state FROM attempts WHERE trial_id=$1 AND attempt=$2"; }

# 1. A second scheduler on the same database: refused, naming the holder.
if ! skipped second; then
  phase="second scheduler"
  wait_for 120 'at_least $((trials / 20))' || fail "$((trials / 20)) trials did not complete"
  before=$(cat "$tmp/swept.db.lock")
  case $before in "pid $spid "*) ;; *) fail "the lock file does not name the scheduler (pid $spid): '$before'" ;; esac
  rc=0
  ip netns exec "$ns_s" timeout 30 "$swept" scheduler --bind 'tcp://0.0.0.0:*' --db "$tmp/swept.db" \
    --heartbeat-ms $hb_ms --liveness 5 --key scheduler.key --authorized auth >"$tmp/second.out" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "a second scheduler on the same database exited $rc, not 1 (refused): $(cat "$tmp/second.out")"
  grep -q "in use by a scheduler: pid $spid " "$tmp/second.out" ||
    fail "the second scheduler's refusal does not name the holder (pid $spid): $(cat "$tmp/second.out")"
  [ "$(cat "$tmp/swept.db.lock")" = "$before" ] || fail "the refused scheduler changed the lock file"
  alive "$spid" || fail "the first scheduler died when the second was refused"
  n0=$(completed)
  wait_for 60 'at_least $((n0 + 5))' || fail "no progress after the second scheduler was refused"
  say "second scheduler refused: $(head -1 "$tmp/second.out")"
fi

# 2. The scheduler SIGKILLed while trials run, restarted on the same database.
if ! skipped scheduler; then
  phase="scheduler SIGKILL"
  wait_for 120 'at_least $((trials / 10))' || fail "$((trials / 10)) trials did not complete"
  wait_for 60 '[ "$(sql "SELECT COUNT(DISTINCT agent) FROM attempts WHERE state='"'running'"'")" -ge 2 ]' ||
    fail "trials were not running on two agents"
  # shellcheck disable=SC2034  # read by wait_for
  old=$spid
  t0=$(now)
  kill -9 "$spid"
  wait_for 10 '! alive "$old"' || fail "the scheduler did not die of SIGKILL"
  n0=$(completed)
  say "scheduler SIGKILLed at $n0 completed; restarting it on the same database and port"
  start_scheduler "tcp://0.0.0.0:$port"
  wait_for 60 'at_least $((n0 + 10))' || fail "no progress after the scheduler restart"
  fault "SIGKILL-scheduler" "$t0"
  t1=$(now)
  for n in 1 2 3; do back_to_work $n "$t1"; done
  say "scheduler restarted (pid $spid)"
fi

# 3. host-3's disk fills up once it has completed a trial: quarantined.
if ! skipped disk; then
  phase="full disk"
  wait_for 120 'at_least $((trials * 3 / 20))' || fail "$((trials * 3 / 20)) trials did not complete"
  wait_for 60 '[ "$(sql "SELECT COUNT(*) FROM attempts WHERE agent='"'host-3'"' AND state='"'completed'"'")" -gt 0 ]' ||
    fail "host-3 completed no trial"
  disk_t0=$(now)
  dd if=/dev/zero of="$full/filler" bs=64k 2>/dev/null || true
  dd if=/dev/zero of="$full/filler2" bs=4k 2>/dev/null || true
  say "host-3's work directory is full ($(df --output=avail -B1 "$full" | tail -1) bytes left)"
  wait_for 30 '[ -n "$(sql "SELECT quarantine FROM agents WHERE name='"'host-3'"'")" ]' ||
    fail "host-3 was not quarantined with a full disk: $(sql "SELECT name, state, quarantine FROM agents")"
  say "host-3 quarantined: $(sql "SELECT quarantine FROM agents WHERE name='host-3'")"
  n0=$(completed)
  wait_for 60 'at_least $((n0 + 10))' || fail "no progress while host-3 was quarantined"
  [ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$sweep AND state='failed'")" = 0 ] ||
    fail "trials failed for host-3's full disk: $(sql "SELECT id, reason FROM trials WHERE state='failed' LIMIT 5")"
fi

# 4. host-1 SIGKILLed while a long trial runs there, then restarted.
if ! skipped kill; then
  phase="agent SIGKILL"
  wait_for 120 'at_least $((trials / 4))' || fail "$((trials / 4)) trials did not complete"
  pick 1 || fail "host-1 ran no trial ($(completed) of $trials completed, hold line $(cat "$tmp/hold"), agents: $(sql "SELECT name, state, quarantine FROM agents" | tr "\n" " "))"
  read -r k_trial k_attempt <<<"$picked"
  t0=$(now)
  kill -9 "${apid[1]}"
  wait_for 10 '! alive "${apid[1]}"' || fail "host-1 did not die of SIGKILL"
  say "host-1 SIGKILLed while running trial $k_trial attempt $k_attempt"
  start_agent 1
  wait_for 60 '[ "$(attempt_state "$k_trial" "$k_attempt")" != running ]' ||
    fail "trial $k_trial attempt $k_attempt of the killed host-1 is still recorded running"
  fault "SIGKILL-host-1" "$t0"
  back_to_work 1 "$(now)"
  say "host-1 restarted; trial $k_trial attempt $k_attempt: $(attempt_state "$k_trial" "$k_attempt")"
fi

# host-3 gets its space back: the quarantine lifts.
if ! skipped disk; then
  phase="disk freed"
  rm -f "$full/filler" "$full/filler2"
  wait_for 30 '[ -z "$(sql "SELECT quarantine FROM agents WHERE name='"'host-3'"'")" ]' ||
    fail "host-3's quarantine did not lift once its disk had space: $(sql "SELECT quarantine FROM agents WHERE name='host-3'")"
  fault "full-disk-host-3" "$disk_t0"
  back_to_work 3 "$(now)"
  say "host-3's disk freed, quarantine lifted"
fi

# 5. host-2 SIGSTOPped while a long trial runs there, past its lease and
# the requeue margin, but not past the report window: held, then reported.
if ! skipped stop; then
  phase="agent SIGSTOP"
  wait_for 120 'at_least $((trials * 7 / 20))' || fail "$((trials * 7 / 20)) trials did not complete"
  pick 2 || fail "host-2 ran no trial ($(completed) of $trials completed, hold line $(cat "$tmp/hold"), agents: $(sql "SELECT name, state, quarantine FROM agents" | tr "\n" " "))"
  read -r s_trial s_attempt <<<"$picked"
  t0=$(now)
  kill -STOP "${apid[2]}"
  say "host-2 SIGSTOPped while running trial $s_trial attempt $s_attempt"
  wait_for 30 '[ "$(sql "SELECT state FROM agents WHERE name='"'host-2'"'")" = lost ]' || fail "host-2 was not declared lost"
  # The keeper's SIGTERM reaches the trial (it writes `term`), or the trial
  # ended by itself before the lease did.
  wait_for 30 'awk -v t="$s_trial" -v a="$s_attempt" '"'"'($1 == "term" || $1 == "end") && $2 == t && $3 == a { f = 1 } END { exit !f }'"'"' "$tmp/ledger"' ||
    fail "trial $s_trial attempt $s_attempt ran on while host-2 was frozen past its lease: the lease keeper did not stop it"
  # The scheduler says when host-2's lease and margin are over: from then on
  # it holds host-2's trials only for their report.
  wait_for 30 'grep -q "agent host-2.s lease is over" "$tmp/scheduler.log"' ||
    fail "the scheduler did not say that host-2's lease was over"
  [ "$(attempt_state "$s_trial" "$s_attempt")" = running ] ||
    fail "trial $s_trial attempt $s_attempt was requeued ($(attempt_state "$s_trial" "$s_attempt")) before host-2's report window closed"
  kill -CONT "${apid[2]}"
  wait_for 30 '[ "$(sql "SELECT state FROM agents WHERE name='"'host-2'"'")" = alive ]' || fail "host-2 did not come back"
  fault "SIGSTOP-host-2" "$t0"  # until it is back: what it does on waking counts
  wait_for 30 '[ "$(attempt_state "$s_trial" "$s_attempt")" != running ]' ||
    fail "trial $s_trial attempt $s_attempt is still recorded running after host-2 came back"
  back_to_work 2 "$(now)"
  say "host-2 SIGCONTed; trial $s_trial attempt $s_attempt: $(attempt_state "$s_trial" "$s_attempt")"
fi

# 6. host-3's link cut while a long trial runs there, past its lease.
if ! skipped cut; then
  phase="link cut"
  wait_for 120 'at_least $((trials * 9 / 20))' || fail "$((trials * 9 / 20)) trials did not complete"
  pick 3 || fail "host-3 ran no trial ($(completed) of $trials completed, hold line $(cat "$tmp/hold"), agents: $(sql "SELECT name, state, quarantine FROM agents" | tr "\n" " "))"
  read -r c_trial c_attempt <<<"$picked"
  t0=$(now)
  ip -n "${ns[3]}" link set eth0 down
  release
  say "host-3's link cut while running trial $c_trial attempt $c_attempt ($(completed) completed)"
  wait_for 30 '[ "$(sql "SELECT state FROM agents WHERE name='"'host-3'"'")" = lost ]' || fail "host-3 was not declared lost"
  wait_for 30 '[ "$(attempt_state "$c_trial" "$c_attempt")" != running ]' ||
    fail "trial $c_trial attempt $c_attempt was not requeued once host-3's lease was over"
  wait_for 60 'restarted "$c_trial" "$c_attempt"' || fail "trial $c_trial did not start again while host-3 was cut off"
  ip -n "${ns[3]}" link set eth0 up
  wait_for 30 '[ "$(sql "SELECT state FROM agents WHERE name='"'host-3'"'")" = alive ]' || fail "host-3 did not come back"
  fault "link-cut-host-3" "$t0"
  # The hold line was released at the cut, so on a loaded machine host-1 and
  # host-2 may have taken every trial left by the time host-3 is back: then
  # there is nothing to give it, and that is no fault of its own. It must
  # start one whenever a trial waits in the queue.
  t1=$(now)
  wait_for 60 'started_after 3 "$t1" || [ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$sweep AND state='"'queued'"'")" = 0 ]' ||
    fail "host-3 started no trial within 60 s of coming back, while trials waited: $(sql "SELECT name, state, quarantine FROM agents WHERE name='host-3'")"
  started_after 3 "$t1" || say "host-3 back with no trial left in the queue for it"
  say "host-3's link restored; trial $c_trial attempt $c_attempt: $(attempt_state "$c_trial" "$c_attempt")"
fi

# 7. Only with SWEPT_CHAOS_STORM=SECONDS (0 by default, so not in CI): the
# storm issue 26 was found with. For that long, while trials remain, one agent
# at a time, drawn at random, is SIGSTOPped for 1 to 4.9 s (inside the report
# window: the scheduler requeues at 3 s lease + 0.63 s margin + 3 s) or
# SIGKILLed and restarted, and the next fault waits until that agent is back
# in contact (it starts a trial again, or 30 s pass): two freezes back to back
# would make one silence longer than the window, when trials that ended in it
# may run again (docs/protocol.md, "Partitions"). Those durations are the
# faults themselves, drawn at random, not waits for anything to settle; the
# checks below are the same.
storm=${SWEPT_CHAOS_STORM:-0}
if ((storm > 0)); then
  phase="storm"
  release
  storm_end=$((SECONDS + storm)) stops=0 kills=0
  while ((SECONDS < storm_end)) && [ "$(completed)" -lt "$trials" ]; do
    n=$((RANDOM % 3 + 1))
    t0=$(now)
    if ((RANDOM % 2)); then
      kill -STOP "${apid[$n]}"
      sleep "$((RANDOM % 4 + 1)).$((RANDOM % 10))"
      kill -CONT "${apid[$n]}"
      fault "storm-SIGSTOP-host-$n" "$t0"
      stops=$((stops + 1))
    else
      kill -9 "${apid[$n]}"
      wait_for 10 '! alive "${apid[$n]}"' || fail "host-$n did not die of SIGKILL"
      start_agent "$n"
      fault "storm-SIGKILL-host-$n" "$t0"
      kills=$((kills + 1))
    fi
    t1=$(now)
    wait_for 30 'started_after "$n" "$t1" || [ "$(completed)" -ge "$trials" ]' || true
  done
  say "storm over: $stops SIGSTOPs and $kills SIGKILLs with restarts ($(completed) of $trials completed)"
fi

phase="sweep end"
release
rc=0
timeout $((300 + trials / 2)) ip netns exec "$ns_s" "$swept" wait "$sweep" --scheduler "tcp://127.0.0.1:$port" --poll-ms 200 \
  $(keyed client) >"$tmp/wait.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "swept wait exited $rc: $(tail -5 "$tmp/wait.log")"
say "sweep complete"

# Stop everything the way an operator does; each must exit by itself.
phase="shutdown"
for n in 1 2 3; do kill -TERM "${apid[$n]}"; done
for n in 1 2 3; do
  wait_for 30 '! alive "${apid[$n]}"' || fail "host-$n did not exit on SIGTERM"
done
kill -TERM "$spid"
wait_for 30 '! alive "$spid"' || fail "the scheduler did not exit on SIGTERM"
left=""
for p in "${pids[@]}"; do alive "$p" && left="$left $p"; done
[ -z "$left" ] || fail "swept processes left alive:$left"
# Nothing of any trial is left: no process carries the trial's marker or
# runs its script, and the namespaces are empty.
phase="leftovers"
left=""
for d in /proc/[0-9]*; do
  if tr '\0' '\n' 2>/dev/null <"$d/environ" | grep -qx "SWEPT_CHAOS_MARK=$tag" ||
     tr '\0' ' ' 2>/dev/null <"$d/cmdline" | grep -qF "$tmp/chaos-trial.sh"; then
    left="$left ${d#/proc/}($(tr '\0' ' ' 2>/dev/null <"$d/cmdline"))"
  fi
done
[ -z "$left" ] || fail "trial processes left alive:$left"
for n in "${made[@]}"; do
  [ -z "$(ip netns pids "$n")" ] || fail "processes left in namespace $n: $(ip netns pids "$n" | tr '\n' ' ')"
done

phase="checks"
touch "$tmp/faults"
python3 - "$tmp/swept.db" "$tmp/ledger" "$sweep" "$trials" "$tmp/faults" <<'EOF' || fail "the records do not hold (above)"
import collections, json, sqlite3, sys

db_path, ledger_path, sweep, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
faults = [(f[0], float(f[1]), float(f[2])) for f in (l.split() for l in open(sys.argv[5])) if len(f) == 3]
def during(lo, hi):  # the faults whose window meets [lo, hi]
    names = [n for n, a, b in faults if a <= hi and lo <= b]
    return "during " + ", ".join(names) if names else "during no fault"
db = sqlite3.connect("file:" + db_path + "?mode=ro", uri=True)
problems = []
def bad(msg):
    problems.append(msg)

# --- SQLite: every trial completed exactly once.
trials = {}  # trial id -> (idx, i, state, attempts, agent)
for tid, idx, params, state, attempts, agent in db.execute(
        "SELECT id, idx, params, state, attempts, agent FROM trials WHERE sweep_id = ?", (sweep,)):
    trials[tid] = (idx, json.loads(params)["i"], state, attempts, agent)
idxs = sorted(t[0] for t in trials.values())
if idxs != list(range(total)):
    bad(f"trial indexes are not 0..{total - 1} once each: {len(idxs)} rows")
for tid, (idx, i, state, attempts, agent) in sorted(trials.items()):
    if state != "completed":
        bad(f"trial {tid} (i={i}) ended {state}")
history = collections.defaultdict(dict)  # trial id -> attempt -> (agent, state, reason)
for tid, attempt, agent, state, reason in db.execute(
        "SELECT a.trial_id, a.attempt, a.agent, a.state, a.reason FROM attempts a JOIN trials t ON t.id = a.trial_id "
        "WHERE t.sweep_id = ?", (sweep,)):
    history[tid][attempt] = (agent, state, reason or "")
winner = {}  # trial id -> (attempt, agent) of its one completed attempt
for tid, (idx, i, state, attempts, agent) in trials.items():
    h = history[tid]
    done = [a for a, (_, st, _) in h.items() if st == "completed"]
    if len(done) != 1:
        bad(f"trial {tid}: {len(done)} completed attempts in its history {sorted(h.items())}")
        continue
    winner[tid] = (done[0], h[done[0]][0])
    if sorted(h) != list(range(1, max(h) + 1)) or max(h) != attempts:
        bad(f"trial {tid}: attempts column {attempts}, history {sorted(h)}")
    if agent != h[done[0]][0]:
        bad(f"trial {tid}: trial row names agent {agent}, its completed attempt {h[done[0]][0]}")
    for a, (ag, st, reason) in h.items():
        if st in ("running", "failed"):
            bad(f"trial {tid} attempt {a} on {ag}: {st} ({reason})")
# --- SQLite: metric rows, none doubled, all from the completed attempt.
rows = collections.defaultdict(list)
for tid, name, step, value in db.execute(
        "SELECT m.trial_id, m.name, m.step, m.value FROM metrics m JOIN trials t ON t.id = m.trial_id "
        "WHERE t.sweep_id = ?", (sweep,)):
    rows[tid].append((name, step, value))
for tid, (idx, i, state, attempts, agent) in trials.items():
    got = rows.get(tid, [])
    keys = [(n, s) for n, s, _ in got]
    if len(keys) != len(set(keys)):
        bad(f"trial {tid}: a metric row doubled: {sorted(got)}")
    if tid not in winner:
        continue
    want = sorted([("attempt", s, float(winner[tid][0])) for s in (1, 2, 3)] +
                  [("loss", s, float(f"{i}.{s}")) for s in (1, 2, 3)])
    if sorted(got) != want:
        bad(f"trial {tid} (i={i}, completed attempt {winner[tid][0]}): metric rows {sorted(got)}, expected {want}")
# --- The ledger.
execs = {}  # (trial, attempt, host, pid) -> [first time, last time, ended, termed, ticks]
for n, line in enumerate(open(ledger_path), 1):
    f = line.split()
    if len(f) != 7 or f[0] not in ("start", "tick", "term", "end", "overlap"):
        bad(f"ledger line {n} is garbled: {line!r}")
        continue
    if f[0] == "overlap":
        bad(f"trial {f[1]} attempt {f[2]} on {f[3]} (pid {f[4]}) found its trial's lock held by another execution")
    key = (int(f[1]), int(f[2]), f[3], int(f[4]))
    t = float(f[5])
    e = execs.setdefault(key, [t, t, False, False, int(f[6])])
    e[0], e[1] = min(e[0], t), max(e[1], t)
    e[2] |= f[0] == "end"
    e[3] |= f[0] == "term"
by_trial = collections.defaultdict(list)
for key, e in execs.items():
    by_trial[key[0]].append((key, e))
reruns = 0
for tid in trials:
    ex = by_trial.get(tid, [])
    for (t, a, host, pid), e in ex:
        known = history[tid].get(a)
        if known is None or known[0] != host:
            bad(f"trial {tid}: attempt {a} ran on {host} (pid {pid}) but the store has {known}")
    if tid not in winner:
        continue
    wa, wh = winner[tid]
    ended = [(k, e) for k, e in ex if e[2]]
    won = [k for k, e in ended if k[1] == wa and k[2] == wh]
    if len(won) != 1:
        bad(f"trial {tid}: its completed attempt {wa} on {wh} reached its end {len(won)} times in the ledger")
    for k, e in ended:
        if k[1] == wa:
            continue
        if history[tid][k[1]][1] == "completed":
            bad(f"trial {tid}: attempt {k[1]} also recorded completed")
        # The one documented exception (docs/protocol.md, "Partitions"): it
        # ended on a host whose link was cut, and could not say so in time.
        if any(n == "link-cut-" + k[2] and a <= e[1] <= b for n, a, b in faults):
            reruns += 1
        else:
            bad(f"trial {tid} ran to its end twice: attempt {k[1]} on {k[2]} (pid {k[3]}) ended at {e[1]:.3f} "
                f"({during(e[0], e[1])}), and its completed attempt {wa} on {wh}; store: {sorted(history[tid].items())}")
    ex.sort(key=lambda kv: kv[1][0])
    for x in range(len(ex)):
        for y in range(x + 1, len(ex)):
            (ka, ea), (kb, eb) = ex[x], ex[y]
            if ea[0] <= eb[1] and eb[0] <= ea[1]:
                bad(f"trial {tid} ran twice at once: attempt {ka[1]} on {ka[2]} (pid {ka[3]}) from {ea[0]:.3f} to "
                    f"{ea[1]:.3f}{' (end)' if ea[2] else ''} and attempt {kb[1]} on {kb[2]} (pid {kb[3]}) from "
                    f"{eb[0]:.3f} to {eb[1]:.3f} ({during(max(ea[0], eb[0]), min(ea[1], eb[1]))}); "
                    f"store: {sorted(history[tid].items())}")
for p in problems[:40]:
    print("  " + p)
if problems:
    print(f"{len(problems)} problems")
    sys.exit(1)
attempts_total = sum(len(h) for h in history.values())
lost = sum(1 for h in history.values() for a in h.values() if a[1] == "lost")
free = sum(1 for h in history.values() for a in h.values() if a[1] == "queued")
print(f"records hold: {total} trials completed once, {attempts_total} attempts ({lost} lost, {free} requeued at "
      f"no cost), {len(execs)} executions in the ledger, none at once; {reruns} ran again after ending on "
      f"host-3 while its link was cut (docs/protocol.md, \"Partitions\"), none otherwise")
EOF
say "PASS"
