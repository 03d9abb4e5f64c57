// Store: the scheduler's SQLite database (schema and invariants:
// scheduler/schema.sql). The only code on the scheduler's side that includes
// sqlite3.h.
//
// The database is opened in WAL mode with synchronous=NORMAL: a committed
// transaction survives a SIGKILL of the scheduler (the WAL is on disk before
// commit returns; an OS crash may lose the last commits, never corrupt).
// Writers group their work into transactions with begin()/commit(); the
// broker commits once per turn of its loop, so a burst of metrics costs one
// commit, and it sends acknowledgements only after the commit.
//
// Errors: every method returns Status/Result; a failing SQLite call is
// reported with the file, line, call and SQLite's message (SWEPT_SQLITE_CHECK
// in store.cpp). Nothing throws.
// Thread safety: a Store is used by one thread at a time. Other threads and
// processes (the dashboard, `swept status --db`) open their own read-only
// Store on the same file; WAL lets them read while the scheduler writes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace swept::scheduler {

// The schema version this code writes; older files are migrated on open.
inline constexpr int kSchemaVersion = 2;
// The text of scheduler/schema.sql (version 1), compiled in.
extern const char* const kSchemaSql;
// Bound of trial_logs.tail.
inline constexpr size_t kLogTailBytes = 64 * 1024;

struct SweepRecord {
  int64_t id = 0;
  std::string name;
  std::string method;
  std::optional<std::string> metric_name;
  std::optional<std::string> metric_goal;
  std::string spec;
  std::string state;  // running | completed | cancelled
  std::optional<int64_t> total_trials;
  int64_t next_index = 0;
  double created_at = 0;
};

// A trial that is not final, as the store knows it (for recovery and queues).
struct TrialRecord {
  int64_t id = 0;
  int64_t sweep_id = 0;
  int64_t index = 0;
  std::string state;
  int attempts = 0;
  std::string agent;
  std::vector<int> gpus;
  double gpu_fraction = 0;
  std::string params;   // JSON text
  std::string command;  // JSON text
  bool started = false;  // the current attempt reported TRIAL_STARTED
};

class Store {
 public:
  enum class Mode { kReadWrite, kReadOnly };

  // Opens (creating in kReadWrite) the database at `path`, applies the schema
  // and migrations (kReadWrite), and checks the version. Errors:
  // kIoError (cannot open), kCorruption (not a swept database, or from a newer
  // swept), kNotFound (kReadOnly and the file does not exist).
  static Result<std::unique_ptr<Store>> open(const std::string& path, Mode mode);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Transactions. begin() takes the write lock at once (BEGIN IMMEDIATE).
  // Nesting is not supported: in_transaction() tells.
  Status begin();
  Status commit();
  void rollback();  // best effort; never fails
  bool in_transaction() const { return in_tx_; }

  int schema_version() const { return schema_version_; }

  // ---- sweeps ----
  Result<int64_t> insert_sweep(const SweepRecord& s);
  Result<std::vector<SweepRecord>> sweeps_in_state(const std::string& state);
  Status set_sweep_state(int64_t sweep_id, const std::string& state, std::optional<double> finished_at);
  Status set_sweep_total(int64_t sweep_id, std::optional<int64_t> total);

  // ---- trials ----
  // Inserts trial `index` of the sweep (state queued) and advances the
  // sweep's next_index to index+1. Returns the trial id.
  Result<int64_t> insert_trial(int64_t sweep_id, int64_t index, const std::string& params_json,
                               const std::string& command_json, double now);
  // Trials of a sweep in a state ("queued", "running", ...), ordered by index.
  Result<std::vector<TrialRecord>> trials_in_state(int64_t sweep_id, const std::string& state);
  // A new attempt: trial -> running on `agent`, attempts = attempt, attempts row inserted.
  Status start_attempt(int64_t trial_id, int attempt, const std::string& agent, const std::vector<int>& gpus,
                       double gpu_fraction, double now);
  // A trial given up (lost, requeued) whose agent came back still running
  // that same attempt: running again on `agent`, the attempt reopened.
  Status reopen_attempt(int64_t trial_id, int attempt, const std::string& agent);
  // The agent confirmed the start: the environment it set, the start time.
  Status confirm_started(int64_t trial_id, int attempt, const std::string& env_json, double started_at);
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
  Status end_attempt(int64_t trial_id, int attempt, const std::string& attempt_state, std::optional<int> exit_code,
                     const std::string& reason, double ended_at, const StartRecord* start = nullptr);
  // Sets the trial's own state (final or queued) with its exit code and reason.
  Status set_trial_state(int64_t trial_id, const std::string& state, std::optional<int> exit_code,
                         const std::optional<std::string>& reason, std::optional<double> ended_at,
                         const StartRecord* start = nullptr);
  // One trial as trials_in_state() returns it, or kNotFound.
  Result<TrialRecord> trial_record(int64_t trial_id);
  // Trials of a sweep in a state, ids only, ordered by index.
  Result<std::vector<int64_t>> trial_ids_in_state(int64_t sweep_id, const std::string& state);
  // Trial's state and current attempt, or kNotFound.
  struct TrialBrief {
    int64_t sweep_id = 0;
    std::string state;
    int attempts = 0;
  };
  Result<TrialBrief> trial_brief(int64_t trial_id);

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
  Status upsert_agent(const std::string& name, const std::string& host, int slots,
                      const std::vector<protocol::GpuInfo>& gpus, double now);
  Status set_agent_state(const std::string& name, const std::string& state, double now);
  Status mark_all_agents(const std::string& from_state, const std::string& to_state);

  // ---- queries (CLI, `swept run` progress) ----
  Result<std::vector<protocol::SweepSummary>> sweep_summaries(std::optional<int64_t> sweep_id);
  Result<std::vector<protocol::TrialRow>> trial_rows(int64_t sweep_id);
  Result<std::vector<protocol::AgentRow>> agent_rows();
  Result<std::string> trial_log_tail(int64_t trial_id);

 private:
  Store() = default;
  Status exec(const char* sql);
  Status migrate();
  Result<sqlite3_stmt*> prepare(const char* sql);  // cached, reset before use

  sqlite3* db_ = nullptr;
  bool in_tx_ = false;
  int schema_version_ = 0;
  std::vector<std::pair<const char*, sqlite3_stmt*>> cache_;
};

}  // namespace swept::scheduler
