// Writer: the scheduler's side of the store (schema and invariants:
// store/schema.sql). The scheduler is the only process that writes; the
// dashboard and the CLI's --db commands read through reader.h on their own
// read-only connections.
//
// The database is opened in WAL mode with synchronous=NORMAL: a committed
// transaction survives a SIGKILL of the scheduler (the WAL is on disk before
// commit returns; an OS crash may lose the last commits, never corrupt).
// Writers group their work into transactions with begin()/commit(); the
// broker commits once per turn of its loop, so a burst of metrics costs one
// commit, and it sends acknowledgements only after the commit.
//
// Files going away: a SIGBUS (the -shm index or the mapped database file
// truncated, its storage failed) ends the process with a message and exit 1
// instead of silently (sigbus_guard.h); a WAL that cannot be checkpointed is
// reported once with its size (WriterOptions).
//
// Errors: every method returns Status/Result; a failing SQLite call is
// reported with the file, line, call and SQLite's message (sqlite.h's one
// check macro and error mapping). Nothing throws.
// Thread safety: a Writer is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/rows.h"
#include "common/states.h"
#include "common/status.h"
#include "store/schema.h"

namespace swept::store {

class Connection;
struct WalWatch;

struct WriterOptions {
  // A registered SQLite VFS by name; nullptr: the default. Tests put a
  // failing one under the writer (fault_vfs.h), as LevelDB's tests use an Env.
  const char* vfs = nullptr;
  // The WAL is checkpointed (PASSIVE) after a commit that leaves it with at
  // least wal_checkpoint_pages pages (SQLite's default autocheckpoint). When
  // it holds wal_warn_pages pages (64 MiB of 4 KiB pages) or a checkpoint
  // fails, the log cannot be checkpointed: one WARN says so with the WAL's
  // size and why, and one INFO when checkpoints succeed again.
  int wal_checkpoint_pages = 1000;
  int wal_warn_pages = 16384;
};

class Writer {
 public:
  // Opens (creating) the database at `path` and applies the schema and the
  // migrations, so a file written by an older swept is upgraded in place.
  // Errors: kIoError (cannot open), kCorruption (not a swept database, or
  // from a newer swept).
  static Result<std::unique_ptr<Writer>> open(const std::string& path, const WriterOptions& options = {});
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Transactions. begin() takes the write lock at once (BEGIN IMMEDIATE).
  // Nesting is not supported: in_transaction() tells.
  Status begin();
  Status commit();
  void rollback();  // best effort; never fails
  bool in_transaction() const { return in_tx_; }
  // Runs `what` once the open transaction has committed: for what may be
  // said only of stored state (a log line that must not be said again
  // after a crash, when a restarted scheduler would re-derive it). Outside a
  // transaction it runs at once; a rollback drops it.
  void after_commit(std::function<void()> what);

  int schema_version() const { return schema_version_; }

  // ---- sweeps ----
  Result<int64_t> insert_sweep(const SweepRow& s);
  Result<std::vector<SweepRow>> sweeps_in_state(SweepState state);
  Status set_sweep_state(int64_t sweep_id, SweepState state, std::optional<double> finished_at);

  // ---- trials ----
  // Inserts trial `index` of the sweep (state queued) and advances the
  // sweep's next_index to index+1. Returns the trial id.
  Result<int64_t> insert_trial(int64_t sweep_id, int64_t index, const std::string& params_json,
                               const std::string& command_json, double now);
  // Trials of a sweep in a state, ordered by index. A row whose params or
  // command do not decode is kCorruption naming the trial and the column
  // (schema.h's codec), never a record with a guessed value.
  Result<std::vector<TrialRow>> trials_in_state(int64_t sweep_id, TrialState state);
  // A new attempt: trial -> running on `agent`, attempts = attempt, attempts row inserted.
  // A multi-node trial's `nodes` (node 0 first) are stored beside it, and
  // its processes (`gang`, issue 30; nullptr: none) with the attempt.
  Status start_attempt(int64_t trial_id, int attempt, const std::string& agent, const std::vector<int>& gpus,
                       double gpu_fraction, double now, const std::vector<TrialNode>& nodes = {},
                       const GangRecord* gang = nullptr);
  // The processes of attempt `attempt` of a multi-node trial, as
  // start_attempt stored them (attempts.gang, schema 9); nullopt for a
  // one-node trial, an attempt started before schema 9, or a damaged cell.
  Result<std::optional<GangRecord>> attempt_gang(int64_t trial_id, int attempt);
  // A trial given up (lost, requeued) whose agent came back still running
  // that same attempt: running again on `agent`, the attempt reopened.
  Status reopen_attempt(int64_t trial_id, int attempt, const std::string& agent);
  // The agent confirmed the start: the environment it set, the start time.
  Status confirm_started(int64_t trial_id, int attempt, const std::string& env_json, double started_at);
  // Sets the trial's end time where none is recorded yet (a trial the user
  // stopped is `stopped` at once, and ended once its process has).
  Status fill_ended_at(int64_t trial_id, double ended_at);
  // After a restart: trials the user stopped whose end the scheduler never
  // saw are ended now (an agent still running one is told to stop it as a
  // stale attempt when it re-registers). Returns how many.
  Result<int64_t> end_stopping_trials(double now);
  // Sets the start time of the trial's attempt where none is recorded yet.
  Status fill_started_at(int64_t trial_id, int attempt, double started_at);
  // The agent's start record when it has not been written yet (as
  // confirm_started would write it): end_attempt and set_trial_state take it
  // along, so that a trial that starts and ends within one commit costs two
  // statements, not four.
  struct StartRecord {
    std::string env_json;
    double started_at = 0;
  };
  // Ends an attempt in the history only (state of that attempt).
  Status end_attempt(int64_t trial_id, int attempt, TrialState attempt_state, std::optional<int> exit_code,
                     const std::string& reason, double ended_at, const StartRecord* start = nullptr);
  // One attempt's end, and with it the trial's own state: what end_trial
  // records in one call.
  struct TrialEnd {
    int64_t trial_id = 0;
    int attempt = 0;
    TrialState attempt_state = TrialState::kFailed;  // the attempt's state in the history
    std::optional<int> exit_code;
    std::string reason;
    double ended_at = 0;  // the attempt's end
    // The trial's own new state (final, or queued again); nullopt: the
    // trial's row stays as it is (a cancelled trial is already stopped, a
    // superseded attempt is history only).
    std::optional<TrialState> trial_state;
    std::optional<std::string> trial_reason;  // nullopt: `reason`
    std::optional<double> trial_ended_at;     // nullopt: none (a queued trial has not ended)
    std::optional<StartRecord> start;         // the start record not written yet, if any
    bool forget_metric_value = false;         // a diverged trial: its value is no result
  };
  // Records a trial's end in one call, inside the open transaction or, when
  // none is open, in one of its own (committed before it returns).
  Status end_trial(const TrialEnd& end);
  // Sets the trial's own state (final or queued) with its exit code and reason.
  // Forgets the trial's value of its sweep's metric (a diverged trial).
  Status clear_metric_value(int64_t trial_id);
  Status set_trial_state(int64_t trial_id, TrialState state, std::optional<int> exit_code,
                         const std::optional<std::string>& reason, std::optional<double> ended_at,
                         const StartRecord* start = nullptr);
  // One trial as trials_in_state() returns it (kCorruption alike), or kNotFound.
  Result<TrialRow> trial_record(int64_t trial_id);
  // How many of the trial's attempts ended in `attempt_state` (the broker
  // counts the `queued` ones, requeued at no cost, out of the retries spent).
  Result<int> count_attempts(int64_t trial_id, TrialState attempt_state);
  // The model state (JSON text) that chose the trial's params (bayes/tpe).
  Status set_trial_suggestion(int64_t trial_id, const std::string& model_json);
  // ---- population-based training (issue 29; writer_pbt.cpp) ----
  // A member's parameters and command for its next segment (they change at
  // an exploit); its queued attempt is built from them (trial_record).
  Status set_trial_params(int64_t trial_id, const std::string& params_json, const std::string& command_json);
  // One row of a member's lineage (migration v8): from `from_step` on it
  // runs with `params_json`, resumed from donor's segment (nullopt: its own).
  struct LineageRow {
    int64_t trial_id = 0;
    int64_t round = 0;
    int64_t from_step = 0;
    std::optional<int64_t> donor_trial_id;
    std::optional<int> donor_segment;
    std::string params_json;
    std::string changes_json = "[]";
    double decided_at = 0;
  };
  // Inserts the row, or replaces the member's row for that round (a plan
  // recomputed after a donor was lost).
  Status record_lineage(const LineageRow& row);
  // Where attempt `attempt` of trial `trial_id` ran, and the trial's sweep:
  // the agent holding that segment's checkpoint. nullopt when no such attempt.
  struct AttemptPlace {
    std::string agent;
    int64_t sweep_id = 0;
  };
  Result<std::optional<AttemptPlace>> attempt_place(int64_t trial_id, int attempt);
  // A pbt member as a restarted scheduler rebuilds its population from it
  // (SweepRunner::recover): the trial, its newest attempt, its newest
  // attempt that ended at an interval (the attempt's reason holds
  // `interval_reason`), and its newest lineage row.
  struct PbtMemberRecord {
    int64_t trial_id = 0;
    int64_t index = 0;
    TrialState state = TrialState::kQueued;
    std::string params_json;
    int attempts = 0;          // its newest attempt (0: none yet)
    int interval_segment = 0;  // its newest attempt ended at an interval (0: none)
    int64_t lineage_round = -1;  // its newest lineage row's round (-1: none)
    int64_t lineage_from_step = 0;
    std::optional<int64_t> donor_trial_id;
    int donor_segment = 0;
    std::string env_json;  // trials.env: its newest confirmed start's (SWEPT_ATTEMPT says which attempt's)
  };
  Result<std::vector<PbtMemberRecord>> pbt_members(int64_t sweep_id, const std::string& interval_reason);
  // The first value of `metric` the trial reported at or after `step`, as
  // (step, value); nullopt when it reported none there.
  Result<std::optional<std::pair<int64_t, double>>> first_metric_from(int64_t trial_id, const std::string& metric,
                                                                       int64_t step);
  // What an adaptive searcher learns from: the sweep's trials that ended
  // (completed, failed, lost, and imported ones, which end when imported:
  // before any of its own) in completion order (ended_at, then id), with
  // trials.metric_value for completed ones and nullopt for the rest (a
  // completed trial that never reported the metric has nullopt too), and the
  // params of its running trials (out on agents), by index. Params are
  // decoded; a row whose params do not is kCorruption naming the trial.
  struct SearchHistoryRows {
    std::vector<std::pair<nlohmann::json, std::optional<double>>> finished;  // params, value
    std::vector<nlohmann::json> pending;                                       // params
    // Beside `finished`, row for row: the trial's id and whether it completed
    // (several objectives and constraints read each trial's final values by id).
    std::vector<int64_t> finished_ids;
    std::vector<bool> finished_completed;
  };
  Result<SearchHistoryRows> search_history(int64_t sweep_id);
  // ---- early termination (issue 16; schema v4) ----
  // The decision of the sweep's early_terminate rule that stopped a trial:
  // the rule ("hyperband", ...), where it judged (band in iterations, rung,
  // or step: `at`), the step of the value judged, that value, the threshold
  // it had to beat (nullopt: none) and the one-line reason.
  struct StopDecision {
    std::string rule;
    int64_t at = -1;
    int64_t step = 0;
    std::optional<double> value, threshold;
    std::string reason;
    double decided_at = 0;
  };
  Status record_stop_decision(int64_t trial_id, const StopDecision& d);
  // `swept retry --early-stopped`: the trial runs again, undecided.
  Status clear_stop_decision(int64_t trial_id);
  // Every trial of a sweep (and its recorded stop step) with its values of `metric_name` in step order
  // (the stored curve: a step logged twice keeps its last value), ordered
  // by index: what the scheduler's early-termination unit is rebuilt from.
  struct CurveRows {
    int64_t trial_id = 0;
    int64_t index = 0;
    TrialState state = TrialState::kQueued;
    bool stop_decided = false;  // a decision is recorded (it may still be running)
    std::optional<int64_t> stop_step;  // the step of the value it was stopped at
    std::vector<std::pair<int64_t, double>> points;  // (step, value)
  };
  Result<std::vector<CurveRows>> metric_curves(int64_t sweep_id, const std::string& metric_name);

  // ---- warm starts (issue 28) ----
  // An earlier trial imported into the sweep at `index` (a grid point's
  // index, or below 0 outside a grid): state imported, never run (no
  // attempts, an empty command), its reason "imported from <origin>", its
  // value of `metric_name` as metric_value and as that metric's latest
  // value, ended at `now`. Leaves next_index as it is. Returns the trial id.
  Result<int64_t> insert_imported_trial(int64_t sweep_id, int64_t index, const std::string& params_json,
                                        const std::string& metric_name, double value, const std::string& origin,
                                        double now);
  // The indices (>= 0: grid points) of the sweep's imported trials, ascending.
  Result<std::vector<int64_t>> imported_indices(int64_t sweep_id);
  // Raises the sweep's next_index to `next_index` (trials below it exist:
  // run, or imported at grid points the sweep skips).
  Status raise_next_index(int64_t sweep_id, int64_t next_index);

  // Trials of a sweep in a state, ids only, ordered by index.
  Result<std::vector<int64_t>> trial_ids_in_state(int64_t sweep_id, TrialState state);

  // ---- metrics and logs ----
  // Stores one METRICS batch idempotently: skipped (returns false) when
  // `seq` is not above the attempt's stored seq. Rows are upserted by
  // (trial, name, step); trial_latest keeps the value of the highest step;
  // trials.metric_value follows `metric_name` when given.
  Result<bool> add_metrics(const protocol::Metrics& batch, const std::optional<std::string>& metric_name);
  // Highest stored batch seq of an attempt (0 when none).
  Result<int64_t> metrics_seq(int64_t trial_id, int attempt);
  // Appends to the trial's bounded log tail (the last kLogTailBytes kept).
  Status append_log(int64_t trial_id, const std::string& chunk);

  // ---- agents ----
  // `containment`: the mode its REGISTER named ("" stores NULL: unsaid).
  Status upsert_agent(const std::string& name, const std::string& host, int slots,
                      const std::vector<protocol::GpuInfo>& gpus, double now, const std::string& containment = "");
  Status set_agent_state(const std::string& name, AgentState state, double now);
  Status mark_all_agents(AgentState from_state, AgentState to_state);
  // Quarantine (docs/protocol.md, "Host faults and quarantine"): the reason,
  // or nullopt to lift it. No-op for an unknown name.
  Status set_agent_quarantine(const std::string& name, const std::optional<std::string>& reason);
  // Agent name -> quarantine reason, for every quarantined agent.
  Result<std::map<std::string, std::string>> quarantined_agents();
  // Deletes the rows (agents, agent_gpus) of agents not alive and last seen
  // before `gone_before` (Unix seconds), except quarantined ones; trials and
  // attempts keep their agent's name. Returns how many agents went.
  Result<int64_t> forget_agents(double gone_before);
  // Whether the agents table has a row for `name`.
  Result<bool> agent_known(const std::string& name);
  // Deletes the row (and GPUs) of an agent that never ran anything, as it
  // leaves (docs/protocol.md, "One agent per key"); a quarantined one stays.
  Status forget_agent(const std::string& name);

  // The connection, for the read model (reader.h) on the scheduler's side:
  // reads through it see this writer's uncommitted work.
  Connection& connection() { return *conn_; }

 private:
  explicit Writer(std::unique_ptr<Connection> conn);
  Status migrate();

  std::unique_ptr<WalWatch> wal_watch_;  // the WAL hook's state (writer.cpp); outlives conn_
  std::unique_ptr<Connection> conn_;
  bool in_tx_ = false;
  std::vector<std::function<void()>> after_commit_;  // run by commit(), dropped by rollback()
  int schema_version_ = 0;
};

}  // namespace swept::store
