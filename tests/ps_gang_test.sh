#!/usr/bin/env bash
# Parameter servers as multi-node trials (issue 30), end to end through
# `swept run --local-agents N` (real agents and processes, the ranks meeting
# on loopback). One mode per CTest test:
#
#  tfconfig  a trial program on each role parses TF_CONFIG with Python's json
#            and checks the cluster (every worker and server, host:port, the
#            same in every process) and its task against SWEPT_ROLE,
#            SWEPT_ROLE_INDEX and RANK; its servers never exit by themselves
#            (as TensorFlow's do not), so the trial completes only because
#            swept stops them once the workers have ended. Twice: servers
#            round-robin on the workers' nodes, and on nodes of their own
#            (resources.ps_nodes). Metric lines come from worker 0 only.
#  sweep     a sweep over ps_mode, backup_workers and lr with
#            swept-train --strategy=ps (an MLP, a few steps, a generated data
#            set), 2 workers' nodes and 1 server: every trial completes, with
#            worker 0's staleness metrics and the server's own logs.
#  killps    swept-train's server SIGKILLed mid-trial: the attempt ends (the
#            trial fails, max_retries 0) and no process of it is left.
#
# Waits: `swept run` itself, bounded by `timeout`; events by deadline loops.
# usage: tests/ps_gang_test.sh MODE SWEPT SWEPT_TRAIN
set -euo pipefail
mode=${1:?usage: ps_gang_test.sh tfconfig|sweep|killps SWEPT SWEPT_TRAIN}
swept=${2:?usage: ps_gang_test.sh MODE SWEPT SWEPT_TRAIN}
train=${3:?usage: ps_gang_test.sh MODE SWEPT SWEPT_TRAIN}
train=$(cd "$(dirname "$train")" && pwd)/$(basename "$train")  # the trials run in their own directories
tmp=$(mktemp -d)
run_pid=
cleanup() {
  [ -n "$run_pid" ] && kill -9 "$run_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "== $f" >&2; tail -n 30 "$f" >&2; }; done
  find "$tmp/work" -name '*.log' 2>/dev/null | while read -r f; do echo "== $f" >&2; tail -n 5 "$f" >&2; done
  exit 1
}
source "$(dirname "$0")/shell_lib.sh"  # wait_for
db_sql() { sqlite3 -cmd ".timeout 5000" "$tmp/$1.db" "$2"; }

# The ports the trials' processes get: 40 from one the kernel found free, so
# that tests running at once (each its own swept run) do not share them.
base=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(min(s.getsockname()[1], 65000))')
# swept run NAME SWEEP_FILE AGENTS SLOTS: bounded, its database $tmp/NAME.db.
run_sweep() {
  timeout 180 "$swept" run "$2" --local-agents "$3" --slots "$4" --gpus none --db "$tmp/$1.db" \
    --workdir "$tmp/work/$1" --dashboard off --progress off --rendezvous-ports "$base-$((base + 39))" >"$tmp/$1.log" 2>&1
}

# ---- tfconfig ----------------------------------------------------------------
if [ "$mode" = tfconfig ]; then
  # A range that is no range is refused before anything starts.
  echo '{"method": "grid", "command": ["/bin/true"], "parameters": {"x": {"value": 1}}}' >"$tmp/bad-ports.json"
  rc=0
  "$swept" run "$tmp/bad-ports.json" --rendezvous-ports 40000-39000 --db "$tmp/bad.db" --workdir "$tmp/work/bad" \
    --dashboard off --progress off >"$tmp/bad-ports.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] && grep -q -- '--rendezvous-ports' "$tmp/bad-ports.out" ||
    fail "swept run --rendezvous-ports 40000-39000: exit $rc, $(cat "$tmp/bad-ports.out")"
  mkdir -p "$tmp/records"
  # Each process writes what it saw as one JSON record; a worker prints a
  # metric line with its index and exits 0; a server waits to be stopped.
  cat >"$tmp/role.py" <<'PY'
import json, os, sys, time
c = json.loads(os.environ["TF_CONFIG"])
assert sorted(c) == ["cluster", "task"], c
task = c["task"]
env = {k: os.environ.get(k) for k in ("SWEPT_ROLE", "SWEPT_ROLE_INDEX", "RANK", "WORLD_SIZE", "SWEPT_TRIAL_ID")}
name = "%s-%s-%d.json" % (env["SWEPT_TRIAL_ID"], task["type"], task["index"])
with open(os.path.join(sys.argv[1], "." + name), "w") as f:
    json.dump({"tf_config": c, "env": env}, f)
os.rename(os.path.join(sys.argv[1], "." + name), os.path.join(sys.argv[1], name))
if task["type"] == "worker":
    # As a real worker needs its servers: wait (bounded) until every server
    # has written its record, so that none is stopped before it could.
    servers = len(c["cluster"].get("ps", []))
    deadline = time.time() + 60
    while len([f for f in os.listdir(sys.argv[1]) if f.startswith(env["SWEPT_TRIAL_ID"] + "-ps-")]) < servers:
        assert time.time() < deadline, "the servers never started"
        time.sleep(0.02)
    print(json.dumps({"worker": task["index"]}), flush=True)
    sys.exit(0)
time.sleep(600)
PY
  # check.py DB RECORDS WORKERS SERVERS: every process's record agrees.
  cat >"$tmp/check.py" <<'PY'
import glob, json, os, sqlite3, sys
db, records, workers, servers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
(trial,) = con.execute("SELECT id FROM trials").fetchone()
state, reason = con.execute("SELECT state, reason FROM trials WHERE id = ?", (trial,)).fetchone()
assert state == "completed", (state, reason)
recs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(records, f"{trial}-*.json")))]
assert len(recs) == workers + servers, [r["tf_config"]["task"] for r in recs]
cluster = recs[0]["tf_config"]["cluster"]
assert sorted(cluster) == (["ps", "worker"] if servers else ["worker"]), cluster
assert len(cluster["worker"]) == workers and len(cluster.get("ps", [])) == servers, cluster
entries = cluster["worker"] + cluster.get("ps", [])
for e in entries:
    host, port = e.rsplit(":", 1)
    assert host and 1 <= int(port) <= 65535, e
assert len(set(entries)) == len(entries), ("two processes share a host:port", entries)
tasks = set()
for r in recs:
    assert r["tf_config"]["cluster"] == cluster, ("clusters differ", r, cluster)
    t, env = r["tf_config"]["task"], r["env"]
    assert env["SWEPT_ROLE"] == t["type"] and int(env["SWEPT_ROLE_INDEX"]) == t["index"], r
    if t["type"] == "worker":
        assert int(env["RANK"]) == t["index"] and int(env["WORLD_SIZE"]) == workers, r
    else:
        assert env["RANK"] is None and env["WORLD_SIZE"] is None, ("a server is no rank", r)
    tasks.add((t["type"], t["index"]))
assert tasks == {("worker", i) for i in range(workers)} | {("ps", j) for j in range(servers)}, tasks
rows = con.execute("SELECT name, value FROM metrics WHERE trial_id = ?", (trial,)).fetchall()
assert rows == [("worker", 0.0)], ("metric lines from worker 0 only", rows)
PY
  # Round-robin: 2 workers' nodes of 2 workers, 3 servers (node 0 holds 2).
  cat >"$tmp/shared.json" <<EOF
{"method": "grid", "command": ["/usr/bin/python3", "$tmp/role.py", "$tmp/records"],
 "parameters": {"x": {"value": 1}}, "resources": {"nodes": 2, "procs_per_node": 2, "ps": 3, "cpus": 1},
 "max_retries": 0}
EOF
  # Node 0 takes 2 workers + 2 servers = 4 slots, node 1 takes 3.
  run_sweep shared "$tmp/shared.json" 2 8 || fail "swept run (servers on the workers' nodes) exited $?"
  python3 "$tmp/check.py" "$tmp/shared.db" "$tmp/records" 4 3 || fail "TF_CONFIG with servers on the workers' nodes"
  rm -f "$tmp/records"/*.json
  # ps_nodes: 2 workers' nodes and 2 servers on agents of their own: 4 agents.
  cat >"$tmp/own.json" <<EOF
{"method": "grid", "command": ["/usr/bin/python3", "$tmp/role.py", "$tmp/records"],
 "parameters": {"x": {"value": 1}}, "resources": {"nodes": 2, "ps": 2, "ps_nodes": true}, "max_retries": 0}
EOF
  run_sweep own "$tmp/own.json" 4 4 || fail "swept run (servers on nodes of their own) exited $?"
  python3 "$tmp/check.py" "$tmp/own.db" "$tmp/records" 2 2 || fail "TF_CONFIG with servers on nodes of their own"
  nodes=$(db_sql own "SELECT json_array_length(nodes) FROM trials")
  [ "$nodes" = 4 ] || fail "a trial with ps_nodes spans $nodes agents, not 4"
  echo "PASS: TF_CONFIG parsed by Python on each role, servers round-robin and on their own nodes, stopped after the workers"
  exit 0
fi

# ---- swept-train: a generated MNIST-like data set (as trainer/test_util.h) ----
python3 "$(dirname "$0")/mnist_like.py" "$tmp/data"
# Each process records its pid by role, then becomes swept-train.
cat >"$tmp/train.sh" <<EOF
#!/bin/sh
echo \$\$ > "$tmp/pid-\$SWEPT_TRIAL_ID-\$SWEPT_ROLE-\$SWEPT_ROLE_INDEX"
exec "$train" --strategy=ps --data="$tmp/data" --model=mlp --hidden=16 --threads=1 "\$@"
EOF
chmod +x "$tmp/train.sh"

if [ "$mode" = sweep ]; then
  cat >"$tmp/sweep.json" <<EOF
{"metric": {"name": "val_accuracy", "goal": "maximize"}, "command": ["$tmp/train.sh", "\${args}"],
 "parameters": {"batch_size": {"value": 20}, "max_steps": {"value": 12}, "log_every": {"value": 2},
                "eval_every": {"value": 6}},
 "trials": [{"ps_mode": "async", "lr": 0.1}, {"ps_mode": "sync", "backup_workers": 0, "lr": 0.1},
            {"ps_mode": "sync", "backup_workers": 1, "lr": 0.05}],
 "resources": {"nodes": 2, "ps": 1}, "max_retries": 0}
EOF
  run_sweep sweep "$tmp/sweep.json" 2 3 || fail "swept run exited $?"
  python3 - "$tmp/sweep.db" "$tmp/work/sweep" <<'PY' || fail "the sweep's records are not what the trials promise"
import glob, json, os, sqlite3, sys
db, work = sys.argv[1], sys.argv[2]
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
trials = con.execute("SELECT id, state, reason, params FROM trials ORDER BY id").fetchall()
assert len(trials) == 3, trials
for t, state, reason, params in trials:
    assert state == "completed", (t, state, reason)
    names = {n for (n,) in con.execute("SELECT DISTINCT name FROM metrics WHERE trial_id = ?", (t,))}
    for want in ("loss", "val_accuracy", "staleness_mean", "staleness_max", "gradients_dropped"):
        assert want in names, (t, want, names)
    # One server, on node 0: its logs there, and no metric of its own.
    logs = glob.glob(os.path.join(work, "*", "sweep-*", f"trial-{t}", "ps-0.stderr.log"))
    assert len(logs) == 1, (t, logs)
    for r in (0, 1):
        assert glob.glob(os.path.join(work, "*", "sweep-*", f"trial-{t}", f"rank-{r}.stderr.log")), (t, r)
PY
  echo "PASS: a sweep over ps_mode, backup_workers and lr ran as multi-node trials with a parameter server"
  exit 0
fi

if [ "$mode" = killps ]; then
  cat >"$tmp/kill.json" <<EOF
{"method": "grid", "command": ["$tmp/train.sh", "\${args}"],
 "parameters": {"batch_size": {"value": 20}, "epochs": {"value": 100000}, "log_every": {"value": 1},
                "ps_mode": {"value": "async"}},
 "resources": {"nodes": 2, "ps": 1}, "max_retries": 0}
EOF
  run_sweep kill "$tmp/kill.json" 2 3 &
  run_pid=$!
  # Mid-trial: worker 0 has reported a loss line, and the server runs.
  wait_for 120 '[ -f "$tmp/kill.db" ] && [ "$(db_sql kill "SELECT COUNT(*) FROM metrics WHERE name = '"'loss'"'" 2>/dev/null)" -gt 0 ] 2>/dev/null' ||
    fail "the trial reported no loss"
  server=$(cat "$tmp"/pid-*-ps-0)
  kill -0 "$server" || fail "the server ($server) is not running"
  kill -9 "$server"
  wait "$run_pid" || true
  run_pid=
  state=$(db_sql kill "SELECT state FROM trials")
  [ "$state" = failed ] || fail "the trial is $state after its server was killed, not failed: $(db_sql kill "SELECT reason FROM trials")"
  for f in "$tmp"/pid-*; do
    p=$(cat "$f")
    ! kill -0 "$p" 2>/dev/null || fail "process $p ($(basename "$f")) still runs after the attempt ended"
  done
  echo "PASS: a killed parameter server ended the attempt ($(db_sql kill "SELECT reason FROM trials"))"
  exit 0
fi
fail "unknown mode $mode"
