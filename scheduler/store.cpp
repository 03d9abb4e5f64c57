// Store: the scheduler's SQLite database. See store.h for the contract and
// schema.sql for the tables and their invariants.
//
// Migrations: version 1 is schema.sql exactly as written (compiled in); each
// later version is one function below that moves a database from N-1 to N in
// the same transaction that records the new version in meta.schema_version.
// A database whose version is newer than kSchemaVersion is refused rather
// than misread.
#include "scheduler/store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>

namespace swept::scheduler {

namespace {

Status sqlite_error(sqlite3* db, int rc, const char* call, const char* file, int line) {
  std::string where = std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: ";
  const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return Status::IoError(where + (msg ? msg : "?") + " (SQLite code " + std::to_string(rc) + ")");
}

}  // namespace

// SWEPT_SQLITE_CHECK(call): the one check macro for SQLite calls on the
// scheduler's side. Any result code other than OK, ROW or DONE returns a
// Status naming the file, line, call and SQLite's message.
#define SWEPT_SQLITE_CHECK(call)                                                          \
  do {                                                                                    \
    int _swept_rc = (call);                                                               \
    if (_swept_rc != SQLITE_OK && _swept_rc != SQLITE_ROW && _swept_rc != SQLITE_DONE)    \
      return sqlite_error(db_, _swept_rc, #call, __FILE__, __LINE__);                     \
  } while (0)

namespace {

// Binding helpers: a statement is filled with bind_arg(stmt, i, value).
int bind_arg(sqlite3_stmt* s, int i, int64_t v) { return sqlite3_bind_int64(s, i, v); }
int bind_arg(sqlite3_stmt* s, int i, int v) { return sqlite3_bind_int64(s, i, v); }
int bind_arg(sqlite3_stmt* s, int i, double v) { return sqlite3_bind_double(s, i, v); }
int bind_arg(sqlite3_stmt* s, int i, const std::string& v) {
  return sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}
template <typename T>
int bind_arg(sqlite3_stmt* s, int i, const std::optional<T>& v) {
  return v ? bind_arg(s, i, *v) : sqlite3_bind_null(s, i);
}

std::optional<int64_t> col_opt_i64(sqlite3_stmt* s, int c) {
  if (sqlite3_column_type(s, c) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(s, c);
}
std::optional<double> col_opt_f64(sqlite3_stmt* s, int c) {
  if (sqlite3_column_type(s, c) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(s, c);
}
std::string col_str(sqlite3_stmt* s, int c) {
  const unsigned char* t = sqlite3_column_text(s, c);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s, c)) : std::string();
}
std::optional<std::string> col_opt_str(sqlite3_stmt* s, int c) {
  if (sqlite3_column_type(s, c) == SQLITE_NULL) return std::nullopt;
  return col_str(s, c);
}

std::string gpus_json(const std::vector<int>& gpus) { return nlohmann::json(gpus).dump(); }
std::vector<int> parse_gpus(const std::optional<std::string>& text) {
  std::vector<int> out;
  if (!text) return out;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& v : j)
    if (v.is_number_integer()) out.push_back(v.get<int>());
  return out;
}
nlohmann::json parse_json_or(const std::string& text, nlohmann::json fallback) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? fallback : j;
}

// One row of "SELECT id, sweep_id, idx, state, attempts, agent, gpus,
// gpu_fraction, params, command, started_at IS NOT NULL FROM trials".
TrialRecord read_trial_record(sqlite3_stmt* st) {
  TrialRecord t;
  t.id = sqlite3_column_int64(st, 0);
  t.sweep_id = sqlite3_column_int64(st, 1);
  t.index = sqlite3_column_int64(st, 2);
  t.state = col_str(st, 3);
  t.attempts = sqlite3_column_int(st, 4);
  t.agent = col_str(st, 5);
  t.gpus = parse_gpus(col_opt_str(st, 6));
  t.gpu_fraction = col_opt_f64(st, 7).value_or(0.0);
  t.params = col_str(st, 8);
  t.command = col_str(st, 9);
  t.started = sqlite3_column_int(st, 10) != 0;
  return t;
}

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const std::string& path, Mode mode) {
  std::unique_ptr<Store> store(new Store());
  if (mode == Mode::kReadOnly) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return Status::NotFound("database " + path + " does not exist: pass the file the scheduler writes (--db)");
  }
  int flags = mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  int rc = sqlite3_open_v2(path.c_str(), &store->db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = store->db_ ? sqlite3_errmsg(store->db_) : sqlite3_errstr(rc);
    return Status::IoError("cannot open database " + path + ": " + msg);
  }
  sqlite3_busy_timeout(store->db_, 5000);
  sqlite3* db_ = store->db_;  // for SWEPT_SQLITE_CHECK below
  if (mode == Mode::kReadWrite) {
    rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK)
      return Status::Corruption(path + " cannot be used as a swept database (" + sqlite3_errmsg(db_) +
                                "): pass another --db file");
    Status s = store->migrate();
    if (!s.ok()) return s.WithContext(path);
  } else {
    // Read the version; a file that is not a swept database says so here.
    sqlite3_stmt* st = nullptr;
    rc = sqlite3_prepare_v2(db_, "SELECT value FROM meta WHERE key='schema_version'", -1, &st, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(st);
      return Status::Corruption(path + " is not a swept database (" + sqlite3_errmsg(db_) + ")");
    }
    if (sqlite3_step(st) == SQLITE_ROW) store->schema_version_ = std::atoi(col_str(st, 0).c_str());
    sqlite3_finalize(st);
    if (store->schema_version_ > kSchemaVersion)
      return Status::Corruption(path + " has schema version " + std::to_string(store->schema_version_) +
                                ", newer than this swept understands (" + std::to_string(kSchemaVersion) +
                                "): use a newer swept");
  }
  return store;
}

Store::~Store() {
  for (auto& [sql, st] : cache_) sqlite3_finalize(st);
  if (db_) sqlite3_close_v2(db_);
}

Status Store::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string m = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return Status::IoError(std::string("SQL failed: ") + m + " in: " + std::string(sql).substr(0, 80));
  }
  return Status::Ok();
}

Status Store::migrate() {
  SWEPT_RETURN_IF_ERROR(exec("BEGIN IMMEDIATE"));
  auto fail = [&](Status s) {
    exec("ROLLBACK");
    return s;
  };
  Status s = exec("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
  if (!s.ok()) return fail(s.WithContext("not a swept database?"));
  int version = 0;
  {
    sqlite3_stmt* st = nullptr;
    SWEPT_SQLITE_CHECK(sqlite3_prepare_v2(db_, "SELECT value FROM meta WHERE key='schema_version'", -1, &st, nullptr));
    if (sqlite3_step(st) == SQLITE_ROW) version = std::atoi(col_str(st, 0).c_str());
    sqlite3_finalize(st);
  }
  if (version > kSchemaVersion)
    return fail(Status::Corruption("schema version " + std::to_string(version) + " is newer than this swept (" +
                                   std::to_string(kSchemaVersion) + "): use a newer swept"));
  if (version < 1) {
    s = exec(kSchemaSql);
    if (!s.ok()) return fail(s);
    version = 1;
  }
  if (version < 2) {
    // v2: the highest stored METRICS batch per attempt, so re-sent batches
    // (at-least-once delivery, docs/protocol.md) are recognised after a
    // scheduler restart.
    s = exec("ALTER TABLE attempts ADD COLUMN metrics_seq INTEGER NOT NULL DEFAULT 0");
    if (!s.ok()) return fail(s);
    version = 2;
  }
  std::string set = "INSERT INTO meta(key, value) VALUES('schema_version', '" + std::to_string(version) +
                    "') ON CONFLICT(key) DO UPDATE SET value=excluded.value";
  s = exec(set.c_str());
  if (!s.ok()) return fail(s);
  SWEPT_RETURN_IF_ERROR(exec("COMMIT"));
  schema_version_ = version;
  return Status::Ok();
}

Result<sqlite3_stmt*> Store::prepare(const char* sql) {
  for (auto& [key, st] : cache_) {
    if (key == sql) {
      sqlite3_reset(st);
      sqlite3_clear_bindings(st);
      return st;
    }
  }
  sqlite3_stmt* st = nullptr;
  SWEPT_SQLITE_CHECK(sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr));
  cache_.emplace_back(sql, st);
  return st;
}

// Runs a prepared statement that returns no rows.
#define SWEPT_STEP_DONE(st)                                   \
  do {                                                        \
    int _rc = sqlite3_step(st);                               \
    if (_rc != SQLITE_DONE && _rc != SQLITE_ROW) {            \
      Status _s = sqlite_error(db_, _rc, "sqlite3_step", __FILE__, __LINE__); \
      sqlite3_reset(st);                                      \
      return _s;                                              \
    }                                                         \
    sqlite3_reset(st);                                        \
  } while (0)

#define SWEPT_PREPARE(var, sql)          \
  auto var##_r = prepare(sql);           \
  if (!var##_r.ok()) return var##_r.status(); \
  sqlite3_stmt* var = *var##_r

// BEGIN and COMMIT run once per broker turn: prepared once, like the rest.
Status Store::begin() {
  if (in_tx_) return Status::Internal("Store::begin: a transaction is already open");
  SWEPT_PREPARE(st, "BEGIN IMMEDIATE");
  SWEPT_STEP_DONE(st);
  in_tx_ = true;
  return Status::Ok();
}

Status Store::commit() {
  if (!in_tx_) return Status::Internal("Store::commit: no transaction is open");
  Status s = [&]() -> Status {
    SWEPT_PREPARE(st, "COMMIT");
    SWEPT_STEP_DONE(st);
    return Status::Ok();
  }();
  if (!s.ok()) {
    rollback();
    return s;
  }
  in_tx_ = false;
  return Status::Ok();
}

void Store::rollback() {
  if (!in_tx_) return;
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  in_tx_ = false;
}

// ---- sweeps ----

Result<int64_t> Store::insert_sweep(const SweepRecord& s) {
  SWEPT_PREPARE(st,
                "INSERT INTO sweeps(name, method, metric_name, metric_goal, spec, state, total_trials, next_index, "
                "created_at) VALUES(?,?,?,?,?,?,?,0,?)");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, s.name));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, s.method));
  SWEPT_SQLITE_CHECK(bind_arg(st, 3, s.metric_name));
  SWEPT_SQLITE_CHECK(bind_arg(st, 4, s.metric_goal));
  SWEPT_SQLITE_CHECK(bind_arg(st, 5, s.spec));
  SWEPT_SQLITE_CHECK(bind_arg(st, 6, s.state));
  SWEPT_SQLITE_CHECK(bind_arg(st, 7, s.total_trials));
  SWEPT_SQLITE_CHECK(bind_arg(st, 8, s.created_at));
  SWEPT_STEP_DONE(st);
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

Result<std::vector<SweepRecord>> Store::sweeps_in_state(const std::string& state) {
  SWEPT_PREPARE(st,
                "SELECT id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at "
                "FROM sweeps WHERE state=? ORDER BY id");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, state));
  std::vector<SweepRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    SweepRecord r;
    r.id = sqlite3_column_int64(st, 0);
    r.name = col_str(st, 1);
    r.method = col_str(st, 2);
    r.metric_name = col_opt_str(st, 3);
    r.metric_goal = col_opt_str(st, 4);
    r.spec = col_str(st, 5);
    r.state = col_str(st, 6);
    r.total_trials = col_opt_i64(st, 7);
    r.next_index = sqlite3_column_int64(st, 8);
    r.created_at = sqlite3_column_double(st, 9);
    out.push_back(std::move(r));
  }
  sqlite3_reset(st);
  SWEPT_SQLITE_CHECK(rc);
  return out;
}

Status Store::set_sweep_state(int64_t sweep_id, const std::string& state, std::optional<double> finished_at) {
  SWEPT_PREPARE(st, "UPDATE sweeps SET state=?, finished_at=? WHERE id=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, state));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, finished_at));
  SWEPT_SQLITE_CHECK(bind_arg(st, 3, sweep_id));
  SWEPT_STEP_DONE(st);
  return Status::Ok();
}

Status Store::set_sweep_total(int64_t sweep_id, std::optional<int64_t> total) {
  SWEPT_PREPARE(st, "UPDATE sweeps SET total_trials=? WHERE id=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, total));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, sweep_id));
  SWEPT_STEP_DONE(st);
  return Status::Ok();
}

// ---- trials ----

Result<int64_t> Store::insert_trial(int64_t sweep_id, int64_t index, const std::string& params_json,
                                    const std::string& command_json, double now) {
  SWEPT_PREPARE(st,
                "INSERT INTO trials(sweep_id, idx, params, command, state, attempts, created_at) "
                "VALUES(?,?,?,?,'queued',0,?)");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, sweep_id));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, index));
  SWEPT_SQLITE_CHECK(bind_arg(st, 3, params_json));
  SWEPT_SQLITE_CHECK(bind_arg(st, 4, command_json));
  SWEPT_SQLITE_CHECK(bind_arg(st, 5, now));
  SWEPT_STEP_DONE(st);
  int64_t id = sqlite3_last_insert_rowid(db_);
  SWEPT_PREPARE(up, "UPDATE sweeps SET next_index=MAX(next_index, ?) WHERE id=?");
  SWEPT_SQLITE_CHECK(bind_arg(up, 1, index + 1));
  SWEPT_SQLITE_CHECK(bind_arg(up, 2, sweep_id));
  SWEPT_STEP_DONE(up);
  return id;
}

Result<std::vector<TrialRecord>> Store::trials_in_state(int64_t sweep_id, const std::string& state) {
  SWEPT_PREPARE(st,
                "SELECT id, sweep_id, idx, state, attempts, agent, gpus, gpu_fraction, params, command, "
                "started_at IS NOT NULL FROM trials WHERE sweep_id=? AND state=? ORDER BY idx");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, sweep_id));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, state));
  std::vector<TrialRecord> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    out.push_back(read_trial_record(st));
  }
  sqlite3_reset(st);
  SWEPT_SQLITE_CHECK(rc);
  return out;
}

Result<TrialRecord> Store::trial_record(int64_t trial_id) {
  SWEPT_PREPARE(st,
                "SELECT id, sweep_id, idx, state, attempts, agent, gpus, gpu_fraction, params, command, "
                "started_at IS NOT NULL FROM trials WHERE id=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, trial_id));
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_reset(st);
    SWEPT_SQLITE_CHECK(rc);
    return Status::NotFound("no trial " + std::to_string(trial_id));
  }
  TrialRecord t = read_trial_record(st);
  sqlite3_reset(st);
  return t;
}

Result<std::vector<int64_t>> Store::trial_ids_in_state(int64_t sweep_id, const std::string& state) {
  SWEPT_PREPARE(st, "SELECT id FROM trials WHERE sweep_id=? AND state=? ORDER BY idx");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, sweep_id));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, state));
  std::vector<int64_t> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) out.push_back(sqlite3_column_int64(st, 0));
  sqlite3_reset(st);
  SWEPT_SQLITE_CHECK(rc);
  return out;
}

Status Store::start_attempt(int64_t trial_id, int attempt, const std::string& agent, const std::vector<int>& gpus,
                            double gpu_fraction, double now) {
  // A share of one GPU, or NULL for whole GPUs and CPU trials.
  auto bind_fraction = [&](sqlite3_stmt* st, int i) {
    return gpu_fraction > 0 ? sqlite3_bind_double(st, i, gpu_fraction) : sqlite3_bind_null(st, i);
  };
  std::string g = gpus_json(gpus);
  SWEPT_PREPARE(st,
                "UPDATE trials SET state='running', attempts=?, agent=?, gpus=?, gpu_fraction=?, exit_code=NULL, "
                "reason=NULL, started_at=NULL, ended_at=NULL WHERE id=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, attempt));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, agent));
  SWEPT_SQLITE_CHECK(bind_arg(st, 3, g));
  SWEPT_SQLITE_CHECK(bind_fraction(st, 4));
  SWEPT_SQLITE_CHECK(bind_arg(st, 5, trial_id));
  SWEPT_STEP_DONE(st);
  SWEPT_PREPARE(ins,
                "INSERT OR REPLACE INTO attempts(trial_id, attempt, agent, gpus, gpu_fraction, state, started_at, "
                "metrics_seq) VALUES(?,?,?,?,?,'running',?,0)");
  SWEPT_SQLITE_CHECK(bind_arg(ins, 1, trial_id));
  SWEPT_SQLITE_CHECK(bind_arg(ins, 2, attempt));
  SWEPT_SQLITE_CHECK(bind_arg(ins, 3, agent));
  SWEPT_SQLITE_CHECK(bind_arg(ins, 4, g));
  SWEPT_SQLITE_CHECK(bind_fraction(ins, 5));
  SWEPT_SQLITE_CHECK(bind_arg(ins, 6, now));
  SWEPT_STEP_DONE(ins);
  return Status::Ok();
}

Status Store::reopen_attempt(int64_t trial_id, int attempt, const std::string& agent) {
  SWEPT_PREPARE(st, "UPDATE trials SET state='running', agent=?, exit_code=NULL, reason=NULL, ended_at=NULL WHERE id=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, agent));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, trial_id));
  SWEPT_STEP_DONE(st);
  SWEPT_PREPARE(at, "UPDATE attempts SET state='running', reason=NULL, ended_at=NULL WHERE trial_id=? AND attempt=?");
  SWEPT_SQLITE_CHECK(bind_arg(at, 1, trial_id));
  SWEPT_SQLITE_CHECK(bind_arg(at, 2, attempt));
  SWEPT_STEP_DONE(at);
  return Status::Ok();
}

Status Store::confirm_started(int64_t trial_id, int attempt, const std::string& env_json, double started_at) {
  SWEPT_PREPARE(st, "UPDATE trials SET env=?, started_at=? WHERE id=? AND attempts=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, env_json));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, started_at));
  SWEPT_SQLITE_CHECK(bind_arg(st, 3, trial_id));
  SWEPT_SQLITE_CHECK(bind_arg(st, 4, attempt));
  SWEPT_STEP_DONE(st);
  SWEPT_PREPARE(at, "UPDATE attempts SET started_at=? WHERE trial_id=? AND attempt=?");
  SWEPT_SQLITE_CHECK(bind_arg(at, 1, started_at));
  SWEPT_SQLITE_CHECK(bind_arg(at, 2, trial_id));
  SWEPT_SQLITE_CHECK(bind_arg(at, 3, attempt));
  SWEPT_STEP_DONE(at);
  return Status::Ok();
}

Status Store::fill_started_at(int64_t trial_id, int attempt, double started_at) {
  SWEPT_PREPARE(st, "UPDATE trials SET started_at=? WHERE id=? AND attempts=? AND started_at IS NULL");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, started_at));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, trial_id));
  SWEPT_SQLITE_CHECK(bind_arg(st, 3, attempt));
  SWEPT_STEP_DONE(st);
  return Status::Ok();
}

Status Store::end_attempt(int64_t trial_id, int attempt, const std::string& attempt_state,
                          std::optional<int> exit_code, const std::string& reason, double ended_at,
                          const StartRecord* start) {
  SWEPT_PREPARE(st,
                "UPDATE attempts SET state=?, exit_code=?, reason=?, ended_at=?, started_at=COALESCE(?, started_at) "
                "WHERE trial_id=? AND attempt=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, attempt_state));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, exit_code));
  SWEPT_SQLITE_CHECK(bind_arg(st, 3, reason));
  SWEPT_SQLITE_CHECK(bind_arg(st, 4, ended_at));
  SWEPT_SQLITE_CHECK(start ? bind_arg(st, 5, start->started_at) : sqlite3_bind_null(st, 5));
  SWEPT_SQLITE_CHECK(bind_arg(st, 6, trial_id));
  SWEPT_SQLITE_CHECK(bind_arg(st, 7, attempt));
  SWEPT_STEP_DONE(st);
  return Status::Ok();
}

Status Store::set_trial_state(int64_t trial_id, const std::string& state, std::optional<int> exit_code,
                              const std::optional<std::string>& reason, std::optional<double> ended_at,
                              const StartRecord* start) {
  SWEPT_PREPARE(st,
                "UPDATE trials SET state=?, exit_code=?, reason=?, ended_at=?, env=COALESCE(?, env), "
                "started_at=COALESCE(?, started_at) WHERE id=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, state));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, exit_code));
  SWEPT_SQLITE_CHECK(bind_arg(st, 3, reason));
  SWEPT_SQLITE_CHECK(bind_arg(st, 4, ended_at));
  SWEPT_SQLITE_CHECK(start ? bind_arg(st, 5, start->env_json) : sqlite3_bind_null(st, 5));
  SWEPT_SQLITE_CHECK(start ? bind_arg(st, 6, start->started_at) : sqlite3_bind_null(st, 6));
  SWEPT_SQLITE_CHECK(bind_arg(st, 7, trial_id));
  SWEPT_STEP_DONE(st);
  return Status::Ok();
}

Result<Store::TrialBrief> Store::trial_brief(int64_t trial_id) {
  SWEPT_PREPARE(st, "SELECT sweep_id, state, attempts FROM trials WHERE id=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, trial_id));
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    TrialBrief b{sqlite3_column_int64(st, 0), col_str(st, 1), sqlite3_column_int(st, 2)};
    sqlite3_reset(st);
    return b;
  }
  sqlite3_reset(st);
  SWEPT_SQLITE_CHECK(rc);
  return Status::NotFound("no trial " + std::to_string(trial_id));
}

// ---- metrics ----

Result<int64_t> Store::metrics_seq(int64_t trial_id, int attempt) {
  SWEPT_PREPARE(st, "SELECT metrics_seq FROM attempts WHERE trial_id=? AND attempt=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, trial_id));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, attempt));
  int rc = sqlite3_step(st);
  int64_t seq = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_reset(st);
  SWEPT_SQLITE_CHECK(rc);
  return seq;
}

Result<bool> Store::add_metrics(const protocol::Metrics& batch, const std::optional<std::string>& metric_name) {
  auto stored = metrics_seq(batch.trial_id, batch.attempt);
  if (!stored.ok()) return stored.status();
  if (batch.seq <= *stored) return false;

  SWEPT_PREPARE(ins,
                "INSERT INTO metrics(trial_id, name, step, value) VALUES(?,?,?,?) "
                "ON CONFLICT(trial_id, name, step) DO UPDATE SET value=excluded.value");
  // The latest value per name within this batch: the highest step, the last
  // one printed on ties (docs/metrics.md: a repeated step keeps the last).
  std::unordered_map<std::string_view, const protocol::MetricRecord*> latest;
  const protocol::MetricRecord* metric_last = nullptr;
  for (const auto& r : batch.records) {
    SWEPT_SQLITE_CHECK(bind_arg(ins, 1, batch.trial_id));
    SWEPT_SQLITE_CHECK(sqlite3_bind_text(ins, 2, r.name.data(), static_cast<int>(r.name.size()), SQLITE_STATIC));
    SWEPT_SQLITE_CHECK(bind_arg(ins, 3, r.step));
    SWEPT_SQLITE_CHECK(bind_arg(ins, 4, r.value));
    SWEPT_STEP_DONE(ins);
    auto& slot = latest[r.name];
    if (!slot || r.step >= slot->step) slot = &r;
    if (metric_name && r.name == *metric_name) metric_last = &r;
  }
  SWEPT_PREPARE(lat,
                "INSERT INTO trial_latest(trial_id, name, step, value) VALUES(?,?,?,?) "
                "ON CONFLICT(trial_id, name) DO UPDATE SET step=excluded.step, value=excluded.value "
                "WHERE excluded.step >= trial_latest.step");
  for (const auto& [name, r] : latest) {
    SWEPT_SQLITE_CHECK(bind_arg(lat, 1, batch.trial_id));
    SWEPT_SQLITE_CHECK(sqlite3_bind_text(lat, 2, r->name.data(), static_cast<int>(r->name.size()), SQLITE_STATIC));
    SWEPT_SQLITE_CHECK(bind_arg(lat, 3, r->step));
    SWEPT_SQLITE_CHECK(bind_arg(lat, 4, r->value));
    SWEPT_STEP_DONE(lat);
  }
  if (metric_last) {
    SWEPT_PREPARE(mv, "UPDATE trials SET metric_value=? WHERE id=?");
    SWEPT_SQLITE_CHECK(bind_arg(mv, 1, metric_last->value));
    SWEPT_SQLITE_CHECK(bind_arg(mv, 2, batch.trial_id));
    SWEPT_STEP_DONE(mv);
  }
  SWEPT_PREPARE(seq, "UPDATE attempts SET metrics_seq=? WHERE trial_id=? AND attempt=?");
  SWEPT_SQLITE_CHECK(bind_arg(seq, 1, batch.seq));
  SWEPT_SQLITE_CHECK(bind_arg(seq, 2, batch.trial_id));
  SWEPT_SQLITE_CHECK(bind_arg(seq, 3, batch.attempt));
  SWEPT_STEP_DONE(seq);
  if (!batch.log.empty()) SWEPT_RETURN_IF_ERROR(append_log(batch.trial_id, batch.log));
  return true;
}

Status Store::append_log(int64_t trial_id, const std::string& chunk) {
  if (chunk.empty()) return Status::Ok();
  std::string tail;
  SWEPT_PREPARE(get, "SELECT tail FROM trial_logs WHERE trial_id=?");
  SWEPT_SQLITE_CHECK(bind_arg(get, 1, trial_id));
  int rc = sqlite3_step(get);
  if (rc == SQLITE_ROW) tail = col_str(get, 0);
  sqlite3_reset(get);
  SWEPT_SQLITE_CHECK(rc);
  tail += chunk;
  if (tail.size() > kLogTailBytes) {
    size_t cut = tail.size() - kLogTailBytes;
    // Do not start in the middle of a UTF-8 sequence.
    while (cut < tail.size() && (static_cast<unsigned char>(tail[cut]) & 0xC0) == 0x80) ++cut;
    tail.erase(0, cut);
  }
  SWEPT_PREPARE(put,
                "INSERT INTO trial_logs(trial_id, tail) VALUES(?,?) ON CONFLICT(trial_id) DO UPDATE SET "
                "tail=excluded.tail");
  SWEPT_SQLITE_CHECK(bind_arg(put, 1, trial_id));
  SWEPT_SQLITE_CHECK(bind_arg(put, 2, tail));
  SWEPT_STEP_DONE(put);
  return Status::Ok();
}

// ---- agents ----

Status Store::upsert_agent(const std::string& name, const std::string& host, int slots,
                           const std::vector<protocol::GpuInfo>& gpus, double now) {
  SWEPT_PREPARE(st,
                "INSERT INTO agents(name, host, state, slots, registered_at, last_seen) VALUES(?,?,'alive',?,?,?) "
                "ON CONFLICT(name) DO UPDATE SET host=excluded.host, state='alive', slots=excluded.slots, "
                "registered_at=excluded.registered_at, last_seen=excluded.last_seen");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, name));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, host));
  SWEPT_SQLITE_CHECK(bind_arg(st, 3, slots));
  SWEPT_SQLITE_CHECK(bind_arg(st, 4, now));
  SWEPT_SQLITE_CHECK(bind_arg(st, 5, now));
  SWEPT_STEP_DONE(st);
  SWEPT_PREPARE(del, "DELETE FROM agent_gpus WHERE agent=?");
  SWEPT_SQLITE_CHECK(bind_arg(del, 1, name));
  SWEPT_STEP_DONE(del);
  SWEPT_PREPARE(ins, "INSERT INTO agent_gpus(agent, idx, uuid, name, memory_bytes) VALUES(?,?,?,?,?)");
  for (const auto& g : gpus) {
    SWEPT_SQLITE_CHECK(bind_arg(ins, 1, name));
    SWEPT_SQLITE_CHECK(bind_arg(ins, 2, g.index));
    SWEPT_SQLITE_CHECK(bind_arg(ins, 3, g.uuid));
    SWEPT_SQLITE_CHECK(bind_arg(ins, 4, g.name));
    SWEPT_SQLITE_CHECK(bind_arg(ins, 5, g.memory_bytes));
    SWEPT_STEP_DONE(ins);
  }
  return Status::Ok();
}

Status Store::set_agent_state(const std::string& name, const std::string& state, double now) {
  SWEPT_PREPARE(st, "UPDATE agents SET state=?, last_seen=? WHERE name=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, state));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, now));
  SWEPT_SQLITE_CHECK(bind_arg(st, 3, name));
  SWEPT_STEP_DONE(st);
  return Status::Ok();
}

Status Store::mark_all_agents(const std::string& from_state, const std::string& to_state) {
  SWEPT_PREPARE(st, "UPDATE agents SET state=? WHERE state=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, to_state));
  SWEPT_SQLITE_CHECK(bind_arg(st, 2, from_state));
  SWEPT_STEP_DONE(st);
  return Status::Ok();
}

// ---- queries ----

Result<std::vector<protocol::SweepSummary>> Store::sweep_summaries(std::optional<int64_t> sweep_id) {
  SWEPT_PREPARE(st,
                "SELECT id, name, method, state, metric_name, metric_goal, total_trials, created_at, finished_at "
                "FROM sweeps WHERE (?1 IS NULL OR id=?1) ORDER BY id");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, sweep_id));
  std::vector<protocol::SweepSummary> out;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    protocol::SweepSummary s;
    s.id = sqlite3_column_int64(st, 0);
    s.name = col_str(st, 1);
    s.method = col_str(st, 2);
    s.state = col_str(st, 3);
    s.metric_name = col_opt_str(st, 4);
    s.metric_goal = col_opt_str(st, 5);
    s.total_trials = col_opt_i64(st, 6);
    s.created_at = sqlite3_column_double(st, 7);
    s.finished_at = col_opt_f64(st, 8);
    out.push_back(std::move(s));
  }
  sqlite3_reset(st);
  SWEPT_SQLITE_CHECK(rc);
  if (sweep_id && out.empty()) return Status::NotFound("no sweep " + std::to_string(*sweep_id));

  SWEPT_PREPARE(counts, "SELECT state, COUNT(*) FROM trials WHERE sweep_id=? GROUP BY state");
  SWEPT_PREPARE(best_min,
                "SELECT id, metric_value, params FROM trials WHERE sweep_id=? AND state='completed' AND "
                "metric_value IS NOT NULL ORDER BY metric_value ASC, id LIMIT 1");
  SWEPT_PREPARE(best_max,
                "SELECT id, metric_value, params FROM trials WHERE sweep_id=? AND state='completed' AND "
                "metric_value IS NOT NULL ORDER BY metric_value DESC, id LIMIT 1");
  for (auto& s : out) {
    SWEPT_SQLITE_CHECK(bind_arg(counts, 1, s.id));
    while ((rc = sqlite3_step(counts)) == SQLITE_ROW) {
      std::string state = col_str(counts, 0);
      int64_t n = sqlite3_column_int64(counts, 1);
      if (state == "queued") s.counts.queued = n;
      else if (state == "running") s.counts.running = n;
      else if (state == "completed") s.counts.completed = n;
      else if (state == "failed") s.counts.failed = n;
      else if (state == "stopped") s.counts.stopped = n;
      else if (state == "lost") s.counts.lost = n;
    }
    sqlite3_reset(counts);
    SWEPT_SQLITE_CHECK(rc);
    if (!s.metric_name) continue;
    sqlite3_stmt* best = s.metric_goal == std::optional<std::string>("maximize") ? best_max : best_min;
    SWEPT_SQLITE_CHECK(bind_arg(best, 1, s.id));
    rc = sqlite3_step(best);
    if (rc == SQLITE_ROW) {
      s.best_trial_id = sqlite3_column_int64(best, 0);
      s.best_value = sqlite3_column_double(best, 1);
      s.best_params = parse_json_or(col_str(best, 2), nlohmann::json::object());
    }
    sqlite3_reset(best);
    SWEPT_SQLITE_CHECK(rc);
  }
  return out;
}

Result<std::vector<protocol::TrialRow>> Store::trial_rows(int64_t sweep_id) {
  SWEPT_PREPARE(st,
                "SELECT id, sweep_id, idx, state, attempts, agent, gpus, gpu_fraction, exit_code, reason, "
                "metric_value, params, command, started_at, ended_at FROM trials WHERE sweep_id=? ORDER BY idx");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, sweep_id));
  std::vector<protocol::TrialRow> out;
  std::unordered_map<int64_t, size_t> by_id;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    protocol::TrialRow t;
    t.id = sqlite3_column_int64(st, 0);
    t.sweep_id = sqlite3_column_int64(st, 1);
    t.index = sqlite3_column_int64(st, 2);
    t.state = col_str(st, 3);
    t.attempts = sqlite3_column_int(st, 4);
    t.agent = col_opt_str(st, 5);
    t.gpus = parse_gpus(col_opt_str(st, 6));
    t.gpu_fraction = col_opt_f64(st, 7);
    auto ec = col_opt_i64(st, 8);
    if (ec) t.exit_code = static_cast<int>(*ec);
    t.reason = col_opt_str(st, 9);
    t.metric_value = col_opt_f64(st, 10);
    t.params = parse_json_or(col_str(st, 11), nlohmann::json::object());
    t.command = parse_json_or(col_str(st, 12), nlohmann::json::array());
    t.started_at = col_opt_f64(st, 13);
    t.ended_at = col_opt_f64(st, 14);
    by_id[t.id] = out.size();
    out.push_back(std::move(t));
  }
  sqlite3_reset(st);
  SWEPT_SQLITE_CHECK(rc);
  SWEPT_PREPARE(lat,
                "SELECT l.trial_id, l.name, l.value FROM trial_latest l JOIN trials t ON t.id=l.trial_id "
                "WHERE t.sweep_id=?");
  SWEPT_SQLITE_CHECK(bind_arg(lat, 1, sweep_id));
  while ((rc = sqlite3_step(lat)) == SQLITE_ROW) {
    auto it = by_id.find(sqlite3_column_int64(lat, 0));
    if (it != by_id.end()) out[it->second].latest[col_str(lat, 1)] = sqlite3_column_double(lat, 2);
  }
  sqlite3_reset(lat);
  SWEPT_SQLITE_CHECK(rc);
  return out;
}

Result<std::vector<protocol::AgentRow>> Store::agent_rows() {
  SWEPT_PREPARE(st, "SELECT name, host, state, slots, last_seen FROM agents ORDER BY name");
  std::vector<protocol::AgentRow> out;
  std::map<std::string, size_t> by_name;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    protocol::AgentRow a;
    a.name = col_str(st, 0);
    a.host = col_str(st, 1);
    a.state = col_str(st, 2);
    a.slots = sqlite3_column_int(st, 3);
    a.last_seen = sqlite3_column_double(st, 4);
    by_name[a.name] = out.size();
    out.push_back(std::move(a));
  }
  sqlite3_reset(st);
  SWEPT_SQLITE_CHECK(rc);
  SWEPT_PREPARE(g, "SELECT agent, idx, uuid, name, memory_bytes FROM agent_gpus ORDER BY agent, idx");
  while ((rc = sqlite3_step(g)) == SQLITE_ROW) {
    auto it = by_name.find(col_str(g, 0));
    if (it == by_name.end()) continue;
    out[it->second].gpus.push_back(
        {sqlite3_column_int(g, 1), col_str(g, 2), col_str(g, 3), sqlite3_column_int64(g, 4)});
  }
  sqlite3_reset(g);
  SWEPT_SQLITE_CHECK(rc);
  SWEPT_PREPARE(r, "SELECT id, agent, gpus, gpu_fraction FROM trials WHERE state='running' ORDER BY id");
  while ((rc = sqlite3_step(r)) == SQLITE_ROW) {
    auto it = by_name.find(col_str(r, 1));
    if (it == by_name.end()) continue;
    out[it->second].running.push_back({sqlite3_column_int64(r, 0), parse_gpus(col_opt_str(r, 2)), col_opt_f64(r, 3)});
  }
  sqlite3_reset(r);
  SWEPT_SQLITE_CHECK(rc);
  return out;
}

Result<std::string> Store::trial_log_tail(int64_t trial_id) {
  SWEPT_PREPARE(st, "SELECT tail FROM trial_logs WHERE trial_id=?");
  SWEPT_SQLITE_CHECK(bind_arg(st, 1, trial_id));
  int rc = sqlite3_step(st);
  std::string tail = rc == SQLITE_ROW ? col_str(st, 0) : std::string();
  sqlite3_reset(st);
  SWEPT_SQLITE_CHECK(rc);
  return tail;
}

}  // namespace swept::scheduler
