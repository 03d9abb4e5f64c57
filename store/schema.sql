-- The swept store: schema version 9.
--
-- This file is version 1, executed on a new database with its state CHECK
-- lists filled in (see "State CHECKs" below); later versions
-- are migrations in store/writer.cpp (Writer::migrate), applied in order in
-- one transaction, and meta.schema_version says which the file has:
--   2: attempts.metrics_seq INTEGER NOT NULL DEFAULT 0, the highest METRICS
--      batch (docs/protocol.md) stored for that attempt, so that batches an
--      agent re-sends after a reconnect or a scheduler restart are skipped.
--   3: trials.suggestion TEXT, the JSON model state (sweeps/search/search.h,
--      ModelState) of the searcher that chose the trial's params; NULL for
--      grid and random trials. Readers select it only from version 3 on.
--   4: early termination (issue 16). trials.stop_rule, stop_at, stop_step,
--      stop_value, stop_threshold, stop_reason, stop_decided_at: the decision
--      of the sweep's early_terminate rule to stop the trial (the rule:
--      hyperband | asha | median; where it judged: the band in iterations,
--      the rung, or the step; the step of the value judged; that value; the
--      threshold it had to beat, NULL when none; the one-line reason; when).
--      All NULL when no rule stopped it. And the state early_stopped in
--      trials.state's CHECK (see "State CHECKs" below).
--      Readers select the stop_* columns only from version 4 on.
--   5: agents.quarantine TEXT, why the scheduler sends the agent no work
--      (docs/protocol.md, "Host faults and quarantine"); NULL when it may
--      have work. Readers select it only from version 5 on.
--   6: agents.containment TEXT, how the agent keeps its trials' processes
--      together, as its REGISTER named it (docs/protocol.md: "cgroup" or
--      "subreaper"); NULL when it named none. Readers select it only from
--      version 6 on.
--   7: trials.nodes and attempts.nodes TEXT, a multi-node trial's nodes
--      (issue 25) as JSON [{"agent": "a", "gpus": [0, 1]}, ...], node 0 first
--      (it is also trials.agent/gpus); NULL for a one-node trial. Readers
--      select them only from version 7 on.
--   8: pbt_lineage (issue 29), a pbt member's parameters by round (see
--      store/migrations.cpp).
--   9: attempts.gang TEXT (issue 30), a multi-node trial's processes for
--      that attempt as JSON {"worker_nodes": 2, "master_port": 29500,
--      "processes": [{"role": "worker"|"ps", "index": 0, "node": 0,
--      "port": 29501}, ...], "slots": [1, 1, 2]}: each worker's and
--      parameter server's TF_CONFIG task, the node (as trials.nodes counts,
--      0 first) that runs it and its port; and the CPU slots each node
--      holds. Nodes below worker_nodes run workers, the rest servers only. A
--      restarted scheduler reads it to adopt a running attempt whole: the
--      trial ends when its workers' nodes have, its servers are then
--      stopped, and its ports stay taken. NULL for a one-node trial and for
--      attempts started before version 9: for those the scheduler takes the
--      roles from the sweep's file (resources.nodes, ps, ps_nodes), ports
--      unknown.
-- Readers (web/) must accept columns they do not know.
--
-- State CHECKs: trials.state, sweeps.state and agents.state hold the names of
-- common/states.h's tables, and their CHECK lists are those tables: this file
-- writes each list empty, `CHECK (state IN ())`, and store/state_checks.h
-- fills it in. A new database is created with the lists filled; on every
-- open the writer rebuilds a table whose stored list differs (a file of an
-- older release, or one opened before a state was added to the table),
-- keeping its rows, indexes and references, and leaves the others alone. No
-- schema version is needed for that: the list always follows the table.
--
-- One SQLite file (WAL mode) holds everything the scheduler knows, so that a
-- scheduler killed with SIGKILL and restarted on the same file carries on where
-- it stopped. store/ owns it: the scheduler writes through store/writer.h
-- (the only writer); the scheduler's answers to clients, the dashboard (web/)
-- and the CLI's --db commands read through one read model (store/reader.h),
-- the last two on read-only connections. No code outside store/ has SQL.
--
-- The tables and their invariants:
--
-- sweeps: one row per submitted sweep. `spec` is the file exactly as submitted,
--   so that the sweep can be re-parsed and trial i recomputed after a restart.
--   `next_index` is the index of the next trial the searcher will produce:
--   trials 0..next_index-1 exist in `trials`, no others. `total_trials` is
--   NULL for an unbounded (random, no run_cap) sweep. A sweep is `running`
--   until every trial it will ever have is in a final state, then `completed`;
--   `cancelled` when the user cancelled it (its trials are then final too);
--   `swept retry` makes a completed or cancelled sweep `running` again.
--
-- trials: one row per trial. `state` moves as the scheduler's transition
--   table says (common/states.h, tested in common/states_test.cpp):
--
--     queued  -> running            dispatched to an agent (a new attempt)
--     queued  -> running            adopted: requeued while its agent was away,
--                                   and the agent came back still running it
--     queued  -> failed             its command cannot be built
--     queued  -> stopped            cancelled before it ran
--     running -> completed | failed its process ended: exit 0 | anything else
--                                   (exit code, signal, timeout, no start)
--     running -> stopped            cancelled (marked at once; the process is
--                                   stopped after)
--     running -> queued             its agent was lost and a retry is left, or
--                                   the attempt never started (costs no retry)
--     running -> lost               its agent was lost, no retries left
--     running -> early_stopped      its sweep's early_terminate rule judged it
--                                   and the scheduler stopped it (stop_* says
--                                   why); its metrics stay
--     running -> queued             its host could not start it (a host fault)
--                                   or its agent drains: costs no retry (the
--                                   attempt is kept as `queued`, so later
--                                   losses can tell)
--     queued | lost -> completed | failed
--                                   given up while its agent was away, but the
--                                   agent came back with its result: it stands
--     failed | lost -> queued       `swept retry`
--     early_stopped -> queued       `swept retry --early-stopped` only
--     (none) -> imported            a warm start (issue 28) records an earlier
--                                   trial's result in a new sweep: final from
--                                   the start, never run (no attempts, command
--                                   []), its reason naming the source; no event
--                                   moves it. Its idx is the grid point it is,
--                                   which the sweep steps over (next_index
--                                   passes it), or below 0 outside a grid.
--
--   completed, failed, stopped, lost and early_stopped are final (failed and
--   lost until `swept retry`, early_stopped until `swept retry
--   --early-stopped`). `attempts` counts how many times it was started. A trial
--   is running on at most one agent at a time: `agent`, `gpus` and
--   `gpu_fraction` describe the current (or last) attempt. `metric_value` is
--   the last value the trial reported for its sweep's metric (NULL when
--   none), kept here so that "best" (store/reader.h: the best value among
--   completed trials) and sorting by the sweep's metric need no scan of
--   `metrics`.
--
-- attempts: the history of every start of a trial (one row per attempt), so
--   that requeues and `swept retry` keep what happened before.
--
-- metrics: every metric value, keyed by (trial, name, step): a value reported
--   twice for the same step (a resumed trainer, a re-sent batch after a
--   scheduler restart) overwrites, so no row is ever duplicated.
--
-- trial_latest: the latest value of each metric of each trial (by step), kept
--   in the same transaction as `metrics`: the "final metrics" of the dashboard
--   and of `swept trials`.
--
-- trial_logs: a bounded tail (the last 64 KiB) of each trial's output.
--
-- agents, agent_gpus: the hosts that registered, their GPUs, and whether they
--   are alive. What each GPU runs is derived from running trials. Trials and
--   attempts name their agent as text (no foreign key), so the scheduler may
--   delete an agent that went away long ago (and its GPUs) without touching
--   any trial's history.
--
-- Times are Unix seconds (REAL). JSON columns hold UTF-8 JSON text.

CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS sweeps (
  id            INTEGER PRIMARY KEY,
  name          TEXT NOT NULL,
  method        TEXT NOT NULL,                 -- grid | random
  metric_name   TEXT,                          -- NULL when the file names no metric
  metric_goal   TEXT CHECK (metric_goal IN ('minimize', 'maximize')),
  spec          TEXT NOT NULL,                 -- the sweep file as submitted
  state         TEXT NOT NULL CHECK (state IN ()),  -- a sweep state (see State CHECKs)
  total_trials  INTEGER,                       -- NULL: unbounded
  next_index    INTEGER NOT NULL DEFAULT 0,
  created_at    REAL NOT NULL,
  finished_at   REAL
);

CREATE TABLE IF NOT EXISTS trials (
  id            INTEGER PRIMARY KEY,           -- unique across sweeps
  sweep_id      INTEGER NOT NULL REFERENCES sweeps(id),
  idx           INTEGER NOT NULL,              -- 0-based position in the sweep
  params        TEXT NOT NULL,                 -- JSON object, nested as in the file
  command       TEXT NOT NULL,                 -- JSON array: the argv
  state         TEXT NOT NULL CHECK (state IN ()),  -- a trial state (see State CHECKs)
  attempts      INTEGER NOT NULL DEFAULT 0,
  agent         TEXT,                          -- agent of the current or last attempt
  gpus          TEXT,                          -- JSON array of that agent's GPU indices
  gpu_fraction  REAL,                          -- share of one GPU; NULL otherwise
  env           TEXT,                          -- JSON object: the SWEPT_*/CUDA_* variables it got
  exit_code     INTEGER,
  reason        TEXT,                          -- why it ended so: "exit code 1", "timed out after 60 s"
  metric_value  REAL,
  created_at    REAL NOT NULL,
  started_at    REAL,
  ended_at      REAL,
  UNIQUE (sweep_id, idx)
);
CREATE INDEX IF NOT EXISTS trials_by_sweep_state ON trials (sweep_id, state);
CREATE INDEX IF NOT EXISTS trials_by_sweep_metric ON trials (sweep_id, metric_value);
CREATE INDEX IF NOT EXISTS trials_by_state ON trials (state);

CREATE TABLE IF NOT EXISTS attempts (
  trial_id      INTEGER NOT NULL REFERENCES trials(id),
  attempt       INTEGER NOT NULL,              -- 1, 2, ...
  agent         TEXT NOT NULL,
  gpus          TEXT,
  gpu_fraction  REAL,
  state         TEXT NOT NULL,                 -- a trial state: this attempt's final one, or running
  exit_code     INTEGER,
  reason        TEXT,
  started_at    REAL NOT NULL,
  ended_at      REAL,
  PRIMARY KEY (trial_id, attempt)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS metrics (
  trial_id      INTEGER NOT NULL REFERENCES trials(id),
  name          TEXT NOT NULL,
  step          INTEGER NOT NULL,
  value         REAL NOT NULL,
  PRIMARY KEY (trial_id, name, step)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS trial_latest (
  trial_id      INTEGER NOT NULL REFERENCES trials(id),
  name          TEXT NOT NULL,
  step          INTEGER NOT NULL,
  value         REAL NOT NULL,
  PRIMARY KEY (trial_id, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS trial_latest_by_name_value ON trial_latest (name, value);

CREATE TABLE IF NOT EXISTS trial_logs (
  trial_id      INTEGER PRIMARY KEY REFERENCES trials(id),
  tail          TEXT NOT NULL                  -- the last 64 KiB of stdout+stderr
);

CREATE TABLE IF NOT EXISTS agents (
  name          TEXT PRIMARY KEY,
  host          TEXT NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ()),  -- an agent state (see State CHECKs)
  slots         INTEGER NOT NULL,              -- CPU slots
  registered_at REAL NOT NULL,
  last_seen     REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS agent_gpus (
  agent         TEXT NOT NULL REFERENCES agents(name),
  idx           INTEGER NOT NULL,
  uuid          TEXT NOT NULL,
  name          TEXT NOT NULL,
  memory_bytes  INTEGER NOT NULL,
  PRIMARY KEY (agent, idx)
) WITHOUT ROWID;
