// Writer: the scheduler's side of the store. See writer.h for the contract
// and schema.sql for the tables and their invariants.
//
// Migrations: version 1 is schema.sql (compiled in) with its state CHECK
// lists filled from common/states.h (state_checks.h); each later version is
// one step in migrate() that moves a database from N-1 to N in the same
// transaction that records the new version in meta.schema_version. After
// the steps, the same transaction brings every state CHECK to the tables of
// common/states.h (a no-op when they match). A database whose version is
// newer than kSchemaVersion is refused rather than misread.
#include "store/writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string_view>
#include <unordered_map>

#include "common/log.h"
#include "store/sigbus_guard.h"
#include "store/sqlite.h"
#include "store/state_checks.h"

namespace swept::store {

// A cached statement of the writer's connection, as `Statement& var`.
#define SWEPT_CACHED(var, sql)                                \
  SWEPT_ASSIGN_OR_RETURN(var##_ptr, conn_->cached(sql));      \
  Statement& var = *var##_ptr

namespace {

// One row of "SELECT id, sweep_id, idx, state, attempts, agent, gpus,
// gpu_fraction, params, command, started_at IS NOT NULL FROM trials"; a
// row whose params or command do not decode is Corruption.
Result<TrialRecord> read_trial_record(const Statement& st) {
  TrialRecord t;
  t.id = st.int64(0);
  t.sweep_id = st.int64(1);
  t.index = st.int64(2);
  t.state = trial_state_named(st.text(3)).value_or(TrialState::kQueued);
  t.attempts = static_cast<int>(st.int64(4));
  t.agent = st.text(5);
  t.gpus = decode_gpu_list<int>(st.optional_text(6));
  t.gpu_fraction = st.optional_real(7).value_or(0.0);
  SWEPT_ASSIGN_OR_RETURN(params, decode_params(t.id, st.text(8)));
  t.params = std::move(params);
  SWEPT_ASSIGN_OR_RETURN(argv, decode_argv(t.id, st.text(9)));
  t.argv = std::move(argv);
  t.started = st.int64(10) != 0;
  return t;
}

}  // namespace

// What the WAL hook needs (see WriterOptions).
struct WalWatch {
  std::string db_path;
  int checkpoint_pages = 1000;
  int warn_pages = 16384;
  bool warned = false;
};

namespace {

// Replaces SQLite's autocheckpoint hook (sqlite3_wal_hook), checkpointing the
// same way, and says so when the log cannot be checkpointed.
int wal_hook(void* context, sqlite3* db, const char* schema, int pages) {
  auto& watch = *static_cast<WalWatch*>(context);
  if (pages < watch.checkpoint_pages) {
    if (watch.warned) {
      log::info("the write-ahead log of " + watch.db_path + " is checkpointed again");
      watch.warned = false;
    }
    return SQLITE_OK;
  }
  int log_pages = 0;
  int copied = 0;
  int rc = sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, &log_pages, &copied);
  const bool failed = rc != SQLITE_OK && rc != SQLITE_BUSY;
  if (watch.warned || (!failed && pages < watch.warn_pages)) return SQLITE_OK;
  watch.warned = true;
  struct stat st {};
  const std::string wal = watch.db_path + "-wal";
  const double mib = ::stat(wal.c_str(), &st) == 0 ? static_cast<double>(st.st_size) / (1024.0 * 1024.0) : 0;
  char size[64];
  std::snprintf(size, sizeof size, "%.1f MiB", mib);
  std::string why = failed ? std::string("checkpointing failed: ") + sqlite3_errstr(rc) + " (is " + watch.db_path +
                                 " writable, its disk not full?)"
                           : "only " + std::to_string(copied) + " of its " + std::to_string(log_pages) +
                                 " pages could be copied: a reader keeps an older snapshot open (a long query of "
                                 "swept web or swept status --db?)";
  log::warn("the write-ahead log " + wal + " cannot be checkpointed into the database: " + why + "; it is " + size +
            " (" + std::to_string(pages) + " pages) and grows with every write. The scheduler goes on writing it; "
            "said once, until checkpoints succeed again");
  return SQLITE_OK;
}

}  // namespace

Result<std::unique_ptr<Writer>> Writer::open(const std::string& path, const WriterOptions& options) {
  auto conn = Connection::open(path, Connection::Mode::kReadWrite, 5000, options.vfs);
  if (!conn.ok()) return conn.status();
  std::unique_ptr<Writer> w(new Writer(std::move(*conn)));
  Status s = w->conn_->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
  if (!s.ok())
    return Status::Corruption(path + " cannot be used as a swept database (" + s.message() +
                              "): pass another --db file");
  install_sigbus_guard(path);
  w->wal_watch_ = std::make_unique<WalWatch>();
  w->wal_watch_->db_path = path;
  w->wal_watch_->checkpoint_pages = std::max(1, options.wal_checkpoint_pages);
  w->wal_watch_->warn_pages = std::max(1, options.wal_warn_pages);
  sqlite3_wal_hook(w->conn_->handle(), wal_hook, w->wal_watch_.get());
  s = w->migrate();
  if (!s.ok()) return s.WithContext(path);
  return w;
}

Writer::Writer(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}
Writer::~Writer() = default;

Status Writer::migrate() {
  SWEPT_RETURN_IF_ERROR(conn_->exec("BEGIN IMMEDIATE"));
  auto fail = [&](Status s) {
    (void)conn_->exec("ROLLBACK");
    return s;
  };
  Status s = conn_->exec("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
  if (!s.ok()) return fail(s.WithContext("not a swept database?"));
  auto read = read_schema_version(*conn_);
  if (!read.ok()) return fail(read.status());
  int version = *read;
  if (version > kSchemaVersion)
    return fail(Status::Corruption("schema version " + std::to_string(version) + " is newer than this swept (" +
                                   std::to_string(kSchemaVersion) + "): use a newer swept"));
  // Step v-1 takes a database from version v-1 to v; each runs in this
  // transaction, so a failed upgrade leaves the file as it was.
  static const char* const kSteps[] = {
      // v1: schema.sql, its state CHECKs filled from common/states.h.
      schema_sql().c_str(),
      // v2: the highest stored METRICS batch per attempt, so re-sent batches
      // (at-least-once delivery, docs/protocol.md) are recognised after a
      // scheduler restart.
      "ALTER TABLE attempts ADD COLUMN metrics_seq INTEGER NOT NULL DEFAULT 0",
      // v3: the model state that produced a bayes/tpe trial (why it was chosen).
      "ALTER TABLE trials ADD COLUMN suggestion TEXT",
      // v4 (issue 16): the early-termination decision that stopped a trial
      // (and early_stopped in trials.state's CHECK, synced below).
      "ALTER TABLE trials ADD COLUMN stop_rule TEXT;"
      "ALTER TABLE trials ADD COLUMN stop_at INTEGER;"
      "ALTER TABLE trials ADD COLUMN stop_step INTEGER;"
      "ALTER TABLE trials ADD COLUMN stop_value REAL;"
      "ALTER TABLE trials ADD COLUMN stop_threshold REAL;"
      "ALTER TABLE trials ADD COLUMN stop_reason TEXT;"
      "ALTER TABLE trials ADD COLUMN stop_decided_at REAL;",
      // v5: why an agent is quarantined (host faults); NULL: it may have work.
      "ALTER TABLE agents ADD COLUMN quarantine TEXT",
      // v6: the agent's trial containment mode, as its REGISTER said; NULL: unsaid.
      "ALTER TABLE agents ADD COLUMN containment TEXT",
  };
  static_assert(std::size(kSteps) == kSchemaVersion, "one migration step per schema version");
  for (; version < kSchemaVersion; ++version) {
    s = conn_->exec(kSteps[version]);
    if (!s.ok()) return fail(s);
  }
  // Every state CHECK (trials, sweeps, agents) is common/states.h's table:
  // a table whose list differs is rebuilt here (state_checks.h).
  auto synced = sync_state_checks(*conn_, state_columns());
  if (!synced.ok()) return fail(synced.status());
  std::string set = "INSERT INTO meta(key, value) VALUES('schema_version', '" + std::to_string(version) +
                    "') ON CONFLICT(key) DO UPDATE SET value=excluded.value";
  s = conn_->exec(set.c_str());
  if (!s.ok()) return fail(s);
  SWEPT_RETURN_IF_ERROR(conn_->exec("COMMIT"));
  schema_version_ = version;
  return Status::Ok();
}

// BEGIN and COMMIT run once per broker turn: prepared once, like the rest.
Status Writer::begin() {
  if (in_tx_) return Status::Internal("Writer::begin: a transaction is already open");
  SWEPT_CACHED(st, "BEGIN IMMEDIATE");
  SWEPT_RETURN_IF_ERROR(st.run());
  in_tx_ = true;
  return Status::Ok();
}

Status Writer::commit() {
  if (!in_tx_) return Status::Internal("Writer::commit: no transaction is open");
  // No statement may stay active past the commit: the WAL hook checkpoints
  // right after it, and cannot while one is (the log then never shrinks).
  conn_->reset_cached();
  Status s = [&]() -> Status {
    SWEPT_CACHED(st, "COMMIT");
    return st.run();
  }();
  if (!s.ok()) {
    rollback();
    return s.WithContext("commit failed, nothing of this transaction was stored (rolled back)");
  }
  in_tx_ = false;
  std::vector<std::function<void()>> after = std::move(after_commit_);
  after_commit_.clear();
  for (auto& what : after) what();
  return Status::Ok();
}

void Writer::rollback() {
  after_commit_.clear();
  if (!in_tx_) return;
  (void)conn_->exec("ROLLBACK");
  in_tx_ = false;
}

void Writer::after_commit(std::function<void()> what) {
  if (in_tx_)
    after_commit_.push_back(std::move(what));
  else
    what();
}

// ---- sweeps ----

Status Writer::set_trial_suggestion(int64_t trial_id, const std::string& model_json) {
  SWEPT_CACHED(st, "UPDATE trials SET suggestion = ? WHERE id = ?");
  st.bind(1, model_json);
  st.bind(2, trial_id);
  return st.run();
}

Result<Writer::SearchHistoryRows> Writer::search_history(int64_t sweep_id) {
  SearchHistoryRows out;
  // Index: trials_by_sweep_state (sweep_id, state).
  SWEPT_CACHED(ended, "SELECT params, state, metric_value, id FROM trials WHERE sweep_id = ?1 AND state IN "
                      "(?2, ?3, ?4) ORDER BY ended_at, id");
  ended.bind(1, sweep_id).bind(2, TrialState::kCompleted).bind(3, TrialState::kFailed).bind(4, TrialState::kLost);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, ended.step());
    if (!row) break;
    std::optional<double> value;
    if (trial_state_named(ended.text(1)) == TrialState::kCompleted) value = ended.optional_real(2);
    SWEPT_ASSIGN_OR_RETURN(params, decode_params(ended.int64(3), ended.text(0)));
    out.finished.emplace_back(std::move(params), value);
  }
  SWEPT_CACHED(running, "SELECT params, id FROM trials WHERE sweep_id = ?1 AND state = ?2 ORDER BY idx");
  running.bind(1, sweep_id).bind(2, TrialState::kRunning);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, running.step());
    if (!row) break;
    SWEPT_ASSIGN_OR_RETURN(params, decode_params(running.int64(1), running.text(0)));
    out.pending.push_back(std::move(params));
  }
  return out;
}

Status Writer::record_stop_decision(int64_t trial_id, const StopDecision& d) {
  SWEPT_CACHED(st, "UPDATE trials SET stop_rule=?, stop_at=?, stop_step=?, stop_value=?, stop_threshold=?, "
                   "stop_reason=?, stop_decided_at=? WHERE id=?");
  st.bind(1, d.rule);
  st.bind(2, d.at);
  st.bind(3, d.step);
  st.bind(4, d.value);
  st.bind(5, d.threshold);
  st.bind(6, d.reason);
  st.bind(7, d.decided_at);
  st.bind(8, trial_id);
  return st.run();
}

Status Writer::clear_stop_decision(int64_t trial_id) {
  SWEPT_CACHED(st, "UPDATE trials SET stop_rule=NULL, stop_at=NULL, stop_step=NULL, stop_value=NULL, "
                   "stop_threshold=NULL, stop_reason=NULL, stop_decided_at=NULL WHERE id=?");
  st.bind(1, trial_id);
  return st.run();
}

Result<std::vector<Writer::CurveRows>> Writer::metric_curves(int64_t sweep_id, const std::string& metric_name) {
  std::vector<CurveRows> out;
  std::unordered_map<int64_t, size_t> by_id;
  {
    SWEPT_CACHED(st, "SELECT id, idx, state, stop_rule IS NOT NULL, stop_step FROM trials WHERE sweep_id = ? ORDER BY idx");
    st.bind(1, sweep_id);
    while (true) {
      SWEPT_ASSIGN_OR_RETURN(row, st.step());
      if (!row) break;
      CurveRows c;
      c.trial_id = st.int64(0);
      c.index = st.int64(1);
      c.state = trial_state_named(st.text(2)).value_or(TrialState::kQueued);
      c.stop_decided = st.int64(3) != 0;
      c.stop_step = st.optional_int64(4);
      by_id[c.trial_id] = out.size();
      out.push_back(std::move(c));
    }
  }
  // Index: the metrics primary key (trial_id, name, step), one range per trial.
  SWEPT_CACHED(pts, "SELECT m.trial_id, m.step, m.value FROM trials t JOIN metrics m ON m.trial_id = t.id "
                    "AND m.name = ? WHERE t.sweep_id = ? ORDER BY m.trial_id, m.step");
  pts.bind(1, metric_name);
  pts.bind(2, sweep_id);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, pts.step());
    if (!row) break;
    auto it = by_id.find(pts.int64(0));
    if (it != by_id.end()) out[it->second].points.emplace_back(pts.int64(1), pts.real(2));
  }
  return out;
}

Result<int64_t> Writer::insert_sweep(const SweepRecord& s) {
  SWEPT_CACHED(st,
                "INSERT INTO sweeps(name, method, metric_name, metric_goal, spec, state, total_trials, next_index, "
                "created_at) VALUES(?,?,?,?,?,?,?,0,?)");
  st.bind(1, s.name);
  st.bind(2, s.method);
  st.bind(3, s.metric_name);
  st.bind(4, s.metric_goal);
  st.bind(5, s.spec);
  st.bind(6, s.state);
  st.bind(7, s.total_trials);
  st.bind(8, s.created_at);
  SWEPT_RETURN_IF_ERROR(st.run());
  return conn_->last_insert_rowid();
}

Result<std::vector<SweepRecord>> Writer::sweeps_in_state(SweepState state) {
  SWEPT_CACHED(st,
                "SELECT id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at "
                "FROM sweeps WHERE state=? ORDER BY id");
  st.bind(1, state);
  std::vector<SweepRecord> out;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    SweepRecord r;
    r.id = st.int64(0);
    r.name = st.text(1);
    r.method = st.text(2);
    r.metric_name = st.optional_text(3);
    r.metric_goal = st.optional_text(4);
    r.spec = st.text(5);
    r.state = sweep_state_named(st.text(6)).value_or(SweepState::kRunning);
    r.total_trials = st.optional_int64(7);
    r.next_index = st.int64(8);
    r.created_at = st.real(9);
    out.push_back(std::move(r));
  }
  return out;
}

Status Writer::set_sweep_state(int64_t sweep_id, SweepState state, std::optional<double> finished_at) {
  SWEPT_CACHED(st, "UPDATE sweeps SET state=?, finished_at=? WHERE id=?");
  st.bind(1, state);
  st.bind(2, finished_at);
  st.bind(3, sweep_id);
  SWEPT_RETURN_IF_ERROR(st.run());
  return Status::Ok();
}

// ---- trials ----

Result<int64_t> Writer::insert_trial(int64_t sweep_id, int64_t index, const std::string& params_json,
                                    const std::string& command_json, double now) {
  SWEPT_CACHED(st,
                "INSERT INTO trials(sweep_id, idx, params, command, state, attempts, created_at) "
                "VALUES(?1,?2,?3,?4,?6,0,?5)");
  st.bind(6, TrialState::kQueued);
  st.bind(1, sweep_id);
  st.bind(2, index);
  st.bind(3, params_json);
  st.bind(4, command_json);
  st.bind(5, now);
  SWEPT_RETURN_IF_ERROR(st.run());
  int64_t id = conn_->last_insert_rowid();
  SWEPT_CACHED(up, "UPDATE sweeps SET next_index=MAX(next_index, ?) WHERE id=?");
  up.bind(1, index + 1);
  up.bind(2, sweep_id);
  SWEPT_RETURN_IF_ERROR(up.run());
  return id;
}

Result<std::vector<TrialRecord>> Writer::trials_in_state(int64_t sweep_id, TrialState state) {
  SWEPT_CACHED(st,
                "SELECT id, sweep_id, idx, state, attempts, agent, gpus, gpu_fraction, params, command, "
                "started_at IS NOT NULL FROM trials WHERE sweep_id=? AND state=? ORDER BY idx");
  st.bind(1, sweep_id);
  st.bind(2, state);
  std::vector<TrialRecord> out;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    SWEPT_ASSIGN_OR_RETURN(record, read_trial_record(st));
    out.push_back(std::move(record));
  }
  return out;
}

Result<TrialRecord> Writer::trial_record(int64_t trial_id) {
  SWEPT_CACHED(st,
                "SELECT id, sweep_id, idx, state, attempts, agent, gpus, gpu_fraction, params, command, "
                "started_at IS NOT NULL FROM trials WHERE id=?");
  st.bind(1, trial_id);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  if (!row) return Status::NotFound("no trial " + std::to_string(trial_id));
  Result<TrialRecord> t = read_trial_record(st);
  st.reset();
  return t;
}

Result<int> Writer::count_attempts(int64_t trial_id, TrialState attempt_state) {
  SWEPT_CACHED(st, "SELECT COUNT(*) FROM attempts WHERE trial_id=? AND state=?");
  st.bind(1, trial_id);
  st.bind(2, attempt_state);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  int n = row ? static_cast<int>(st.int64(0)) : 0;
  st.reset();
  return n;
}

Result<std::vector<int64_t>> Writer::trial_ids_in_state(int64_t sweep_id, TrialState state) {
  SWEPT_CACHED(st, "SELECT id FROM trials WHERE sweep_id=? AND state=? ORDER BY idx");
  st.bind(1, sweep_id);
  st.bind(2, state);
  std::vector<int64_t> out;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    out.push_back(st.int64(0));
  }
  return out;
}

Status Writer::start_attempt(int64_t trial_id, int attempt, const std::string& agent, const std::vector<int>& gpus,
                            double gpu_fraction, double now) {
  // A share of one GPU, or NULL for whole GPUs and CPU trials.
  std::optional<double> fraction;
  if (gpu_fraction > 0) fraction = gpu_fraction;
  std::string g = encode_gpu_list(gpus);
  SWEPT_CACHED(st,
                "UPDATE trials SET state=?6, attempts=?1, agent=?2, gpus=?3, gpu_fraction=?4, exit_code=NULL, "
                "reason=NULL, started_at=NULL, ended_at=NULL WHERE id=?5");
  st.bind(6, TrialState::kRunning);
  st.bind(1, attempt);
  st.bind(2, agent);
  st.bind(3, g);
  st.bind(4, fraction);
  st.bind(5, trial_id);
  SWEPT_RETURN_IF_ERROR(st.run());
  SWEPT_CACHED(ins,
                "INSERT OR REPLACE INTO attempts(trial_id, attempt, agent, gpus, gpu_fraction, state, started_at, "
                "metrics_seq) VALUES(?1,?2,?3,?4,?5,?7,?6,0)");
  ins.bind(7, TrialState::kRunning);
  ins.bind(1, trial_id);
  ins.bind(2, attempt);
  ins.bind(3, agent);
  ins.bind(4, g);
  ins.bind(5, fraction);
  ins.bind(6, now);
  SWEPT_RETURN_IF_ERROR(ins.run());
  return Status::Ok();
}

Status Writer::reopen_attempt(int64_t trial_id, int attempt, const std::string& agent) {
  SWEPT_CACHED(st,
               "UPDATE trials SET state=?3, agent=?1, exit_code=NULL, reason=NULL, ended_at=NULL WHERE id=?2");
  st.bind(3, TrialState::kRunning);
  st.bind(1, agent);
  st.bind(2, trial_id);
  SWEPT_RETURN_IF_ERROR(st.run());
  SWEPT_CACHED(at,
               "UPDATE attempts SET state=?3, reason=NULL, ended_at=NULL WHERE trial_id=?1 AND attempt=?2");
  at.bind(3, TrialState::kRunning);
  at.bind(1, trial_id);
  at.bind(2, attempt);
  SWEPT_RETURN_IF_ERROR(at.run());
  return Status::Ok();
}

Status Writer::confirm_started(int64_t trial_id, int attempt, const std::string& env_json, double started_at) {
  SWEPT_CACHED(st, "UPDATE trials SET env=?, started_at=? WHERE id=? AND attempts=?");
  st.bind(1, env_json);
  st.bind(2, started_at);
  st.bind(3, trial_id);
  st.bind(4, attempt);
  SWEPT_RETURN_IF_ERROR(st.run());
  SWEPT_CACHED(at, "UPDATE attempts SET started_at=? WHERE trial_id=? AND attempt=?");
  at.bind(1, started_at);
  at.bind(2, trial_id);
  at.bind(3, attempt);
  SWEPT_RETURN_IF_ERROR(at.run());
  return Status::Ok();
}

Status Writer::fill_started_at(int64_t trial_id, int attempt, double started_at) {
  SWEPT_CACHED(st, "UPDATE trials SET started_at=? WHERE id=? AND attempts=? AND started_at IS NULL");
  st.bind(1, started_at);
  st.bind(2, trial_id);
  st.bind(3, attempt);
  SWEPT_RETURN_IF_ERROR(st.run());
  return Status::Ok();
}

Status Writer::end_attempt(int64_t trial_id, int attempt, TrialState attempt_state,
                          std::optional<int> exit_code, const std::string& reason, double ended_at,
                          const StartRecord* start) {
  SWEPT_CACHED(st,
                "UPDATE attempts SET state=?, exit_code=?, reason=?, ended_at=?, started_at=COALESCE(?, started_at) "
                "WHERE trial_id=? AND attempt=?");
  st.bind(1, attempt_state);
  st.bind(2, exit_code);
  st.bind(3, reason);
  st.bind(4, ended_at);
  st.bind(5, start ? std::optional<double>(start->started_at) : std::nullopt);
  st.bind(6, trial_id);
  st.bind(7, attempt);
  SWEPT_RETURN_IF_ERROR(st.run());
  return Status::Ok();
}

Status Writer::clear_metric_value(int64_t trial_id) {
  SWEPT_CACHED(st, "UPDATE trials SET metric_value=NULL WHERE id=?");
  st.bind(1, trial_id);
  return st.run();
}

Status Writer::set_trial_state(int64_t trial_id, TrialState state, std::optional<int> exit_code,
                              const std::optional<std::string>& reason, std::optional<double> ended_at,
                              const StartRecord* start) {
  SWEPT_CACHED(st,
                "UPDATE trials SET state=?, exit_code=?, reason=?, ended_at=?, env=COALESCE(?, env), "
                "started_at=COALESCE(?, started_at) WHERE id=?");
  st.bind(1, state);
  st.bind(2, exit_code);
  st.bind(3, reason);
  st.bind(4, ended_at);
  st.bind(5, start ? std::optional<std::string>(start->env_json) : std::nullopt);
  st.bind(6, start ? std::optional<double>(start->started_at) : std::nullopt);
  st.bind(7, trial_id);
  SWEPT_RETURN_IF_ERROR(st.run());
  return Status::Ok();
}

// ---- metrics ----

Result<int64_t> Writer::metrics_seq(int64_t trial_id, int attempt) {
  SWEPT_CACHED(st, "SELECT metrics_seq FROM attempts WHERE trial_id=? AND attempt=?");
  st.bind(1, trial_id);
  st.bind(2, attempt);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  int64_t seq = row ? st.int64(0) : 0;
  st.reset();
  return seq;
}

Result<bool> Writer::add_metrics(const protocol::Metrics& batch, const std::optional<std::string>& metric_name) {
  auto stored = metrics_seq(batch.trial_id, batch.attempt);
  if (!stored.ok()) return stored.status();
  if (batch.seq <= *stored) return false;

  SWEPT_CACHED(ins,
                "INSERT INTO metrics(trial_id, name, step, value) VALUES(?,?,?,?) "
                "ON CONFLICT(trial_id, name, step) DO UPDATE SET value=excluded.value");
  // The latest value per name within this batch: the highest step, the last
  // one printed on ties (docs/metrics.md: a repeated step keeps the last).
  std::unordered_map<std::string_view, const protocol::MetricRecord*> latest;
  const protocol::MetricRecord* metric_last = nullptr;
  for (const auto& r : batch.records) {
    ins.bind(1, batch.trial_id);
    ins.bind(2, std::string_view(r.name));
    ins.bind(3, r.step);
    ins.bind(4, r.value);
    SWEPT_RETURN_IF_ERROR(ins.run());
    auto& slot = latest[r.name];
    if (!slot || r.step >= slot->step) slot = &r;
    if (metric_name && r.name == *metric_name) metric_last = &r;
  }
  SWEPT_CACHED(lat,
                "INSERT INTO trial_latest(trial_id, name, step, value) VALUES(?,?,?,?) "
                "ON CONFLICT(trial_id, name) DO UPDATE SET step=excluded.step, value=excluded.value "
                "WHERE excluded.step >= trial_latest.step");
  for (const auto& [name, r] : latest) {
    lat.bind(1, batch.trial_id);
    lat.bind(2, std::string_view(r->name));
    lat.bind(3, r->step);
    lat.bind(4, r->value);
    SWEPT_RETURN_IF_ERROR(lat.run());
  }
  if (metric_last) {
    SWEPT_CACHED(mv, "UPDATE trials SET metric_value=? WHERE id=?");
    mv.bind(1, metric_last->value);
    mv.bind(2, batch.trial_id);
    SWEPT_RETURN_IF_ERROR(mv.run());
  }
  SWEPT_CACHED(seq, "UPDATE attempts SET metrics_seq=? WHERE trial_id=? AND attempt=?");
  seq.bind(1, batch.seq);
  seq.bind(2, batch.trial_id);
  seq.bind(3, batch.attempt);
  SWEPT_RETURN_IF_ERROR(seq.run());
  if (!batch.log.empty()) SWEPT_RETURN_IF_ERROR(append_log(batch.trial_id, batch.log));
  return true;
}

Status Writer::append_log(int64_t trial_id, const std::string& chunk) {
  if (chunk.empty()) return Status::Ok();
  std::string tail;
  SWEPT_CACHED(get, "SELECT tail FROM trial_logs WHERE trial_id=?");
  get.bind(1, trial_id);
  SWEPT_ASSIGN_OR_RETURN(row, get.step());
  if (row) tail = get.text(0);
  get.reset();
  tail += chunk;
  if (tail.size() > kLogTailBytes) {
    size_t cut = tail.size() - kLogTailBytes;
    // Do not start in the middle of a UTF-8 sequence.
    while (cut < tail.size() && (static_cast<unsigned char>(tail[cut]) & 0xC0) == 0x80) ++cut;
    tail.erase(0, cut);
  }
  SWEPT_CACHED(put,
                "INSERT INTO trial_logs(trial_id, tail) VALUES(?,?) ON CONFLICT(trial_id) DO UPDATE SET "
                "tail=excluded.tail");
  put.bind(1, trial_id);
  put.bind(2, tail);
  SWEPT_RETURN_IF_ERROR(put.run());
  return Status::Ok();
}

// ---- agents ----

Status Writer::upsert_agent(const std::string& name, const std::string& host, int slots,
                           const std::vector<protocol::GpuInfo>& gpus, double now, const std::string& containment) {
  SWEPT_CACHED(st,
                "INSERT INTO agents(name, host, state, slots, registered_at, last_seen, containment) "
                "VALUES(?1,?2,?6,?3,?4,?5,NULLIF(?7,'')) "
                "ON CONFLICT(name) DO UPDATE SET host=excluded.host, state=excluded.state, slots=excluded.slots, "
                "registered_at=excluded.registered_at, last_seen=excluded.last_seen, containment=excluded.containment");
  st.bind(6, AgentState::kAlive);
  st.bind(7, containment);
  st.bind(1, name);
  st.bind(2, host);
  st.bind(3, slots);
  st.bind(4, now);
  st.bind(5, now);
  SWEPT_RETURN_IF_ERROR(st.run());
  SWEPT_CACHED(del, "DELETE FROM agent_gpus WHERE agent=?");
  del.bind(1, name);
  SWEPT_RETURN_IF_ERROR(del.run());
  SWEPT_CACHED(ins, "INSERT INTO agent_gpus(agent, idx, uuid, name, memory_bytes) VALUES(?,?,?,?,?)");
  for (const auto& g : gpus) {
    ins.bind(1, name);
    ins.bind(2, g.index);
    ins.bind(3, g.uuid);
    ins.bind(4, g.name);
    ins.bind(5, g.memory_bytes);
    SWEPT_RETURN_IF_ERROR(ins.run());
  }
  return Status::Ok();
}

Status Writer::set_agent_state(const std::string& name, AgentState state, double now) {
  SWEPT_CACHED(st, "UPDATE agents SET state=?, last_seen=? WHERE name=?");
  st.bind(1, state);
  st.bind(2, now);
  st.bind(3, name);
  SWEPT_RETURN_IF_ERROR(st.run());
  return Status::Ok();
}

Status Writer::set_agent_quarantine(const std::string& name, const std::optional<std::string>& reason) {
  SWEPT_CACHED(st, "UPDATE agents SET quarantine=? WHERE name=?");
  if (reason)
    st.bind(1, *reason);
  else
    st.bind_null(1);
  st.bind(2, name);
  return st.run();
}

Result<std::map<std::string, std::string>> Writer::quarantined_agents() {
  SWEPT_CACHED(st, "SELECT name, quarantine FROM agents WHERE quarantine IS NOT NULL");
  std::map<std::string, std::string> out;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    out[st.text(0)] = st.text(1);
  }
  return out;
}

Result<int64_t> Writer::forget_agents(double gone_before) {
  // Which: gone or lost before the cut-off, not quarantined (an operator
  // should see those until released). Trials keep the name as text.
  // (State names are bound from common/states.h, never spelled here.)
  SWEPT_CACHED(count, "SELECT COUNT(*) FROM agents WHERE state <> ?2 AND last_seen < ?1 AND quarantine IS NULL");
  count.bind(1, gone_before).bind(2, AgentState::kAlive);
  SWEPT_ASSIGN_OR_RETURN(row, count.step());
  const int64_t n = row ? count.int64(0) : 0;
  count.reset();
  if (n == 0) return n;
  // Their GPUs first: agent_gpus references agents.
  SWEPT_CACHED(gpus, "DELETE FROM agent_gpus WHERE agent IN (SELECT name FROM agents WHERE state <> ?2 AND "
                     "last_seen < ?1 AND quarantine IS NULL)");
  gpus.bind(1, gone_before).bind(2, AgentState::kAlive);
  SWEPT_RETURN_IF_ERROR(gpus.run());
  SWEPT_CACHED(del, "DELETE FROM agents WHERE state <> ?2 AND last_seen < ?1 AND quarantine IS NULL");
  del.bind(1, gone_before).bind(2, AgentState::kAlive);
  SWEPT_RETURN_IF_ERROR(del.run());
  return n;
}

Status Writer::mark_all_agents(AgentState from_state, AgentState to_state) {
  SWEPT_CACHED(st, "UPDATE agents SET state=? WHERE state=?");
  st.bind(1, to_state);
  st.bind(2, from_state);
  SWEPT_RETURN_IF_ERROR(st.run());
  return Status::Ok();
}

}  // namespace swept::store
