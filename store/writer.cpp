// Writer: the scheduler's side of the store. See writer.h for the contract
// and schema.sql for the tables and their invariants. This file opens the
// database (WAL mode, the checkpoint hook), runs transactions and writes
// sweeps and trials; migrations.cpp upgrades older files, writer_metrics.cpp
// stores metrics and logs, writer_agents.cpp the agents.
#include "store/writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "common/log.h"
#include "store/integrity.h"
#include "store/rows.h"
#include "store/sigbus_guard.h"
#include "store/sqlite.h"
#include "store/writer_cached.h"

namespace swept::store {

namespace {

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
  // A damaged file is refused before anything is written to it (integrity.h).
  s = check_integrity(*w->conn_, path);
  if (!s.ok()) return s;
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
                      "(?2, ?3, ?4, ?5) ORDER BY ended_at, id");
  ended.bind(1, sweep_id).bind(2, TrialState::kCompleted).bind(3, TrialState::kFailed).bind(4, TrialState::kLost);
  ended.bind(5, TrialState::kImported);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, ended.step());
    if (!row) break;
    std::optional<double> value;
    const auto state = trial_state_named(ended.text(1));
    if (state == TrialState::kCompleted || state == TrialState::kImported) value = ended.optional_real(2);
    SWEPT_ASSIGN_OR_RETURN(params, decode_params(ended.int64(3), ended.text(0)));
    out.finished.emplace_back(std::move(params), value);
    out.finished_ids.push_back(ended.int64(3));
    out.finished_completed.push_back(trial_state_named(ended.text(1)) == TrialState::kCompleted);
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

Result<int64_t> Writer::insert_sweep(const SweepRow& s) {
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

Result<std::vector<SweepRow>> Writer::sweeps_in_state(SweepState state) {
  static const std::string sql = std::string("SELECT ") + kSweepColumns + " FROM sweeps WHERE state=? ORDER BY id";
  SWEPT_CACHED(st, sql.c_str());
  st.bind(1, state);
  std::vector<SweepRow> out;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    out.push_back(read_sweep_row(st));
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

Result<int64_t> Writer::insert_imported_trial(int64_t sweep_id, int64_t index, const std::string& params_json,
                                             const std::string& metric_name, double value, const std::string& origin,
                                             double now) {
  SWEPT_CACHED(st,
               "INSERT INTO trials(sweep_id, idx, params, command, state, attempts, reason, metric_value, created_at, "
               "ended_at) VALUES(?1, ?2, ?3, '[]', ?4, 0, ?5, ?6, ?7, ?7)");
  st.bind(1, sweep_id).bind(2, index).bind(3, params_json).bind(4, TrialState::kImported);
  st.bind(5, "imported from " + origin).bind(6, value).bind(7, now);
  SWEPT_RETURN_IF_ERROR(st.run());
  const int64_t id = conn_->last_insert_rowid();
  // Its value as the trial's latest of the metric, as a run trial's would be:
  // what `swept trials`, the export and a later warm start read.
  SWEPT_CACHED(latest, "INSERT INTO trial_latest(trial_id, name, step, value) VALUES(?1, ?2, 0, ?3)");
  latest.bind(1, id).bind(2, metric_name).bind(3, value);
  SWEPT_RETURN_IF_ERROR(latest.run());
  return id;
}

Result<std::vector<int64_t>> Writer::imported_indices(int64_t sweep_id) {
  SWEPT_CACHED(st, "SELECT idx FROM trials WHERE sweep_id = ?1 AND state = ?2 AND idx >= 0 ORDER BY idx");
  st.bind(1, sweep_id).bind(2, TrialState::kImported);
  std::vector<int64_t> out;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    out.push_back(st.int64(0));
  }
  return out;
}

Status Writer::raise_next_index(int64_t sweep_id, int64_t next_index) {
  SWEPT_CACHED(st, "UPDATE sweeps SET next_index = MAX(next_index, ?1) WHERE id = ?2");
  st.bind(1, next_index).bind(2, sweep_id);
  return st.run();
}

// The scheduler's reads of trials refuse a damaged row (sound_trial_row):
// it never runs a trial from a guess at its parameters or command.
Result<std::vector<TrialRow>> Writer::trials_in_state(int64_t sweep_id, TrialState state) {
  static const std::string sql =
      std::string("SELECT ") + kTrialColumns + " FROM trials t WHERE t.sweep_id=? AND t.state=? ORDER BY t.idx";
  SWEPT_CACHED(st, sql.c_str());
  st.bind(1, sweep_id);
  st.bind(2, state);
  std::vector<TrialRow> out;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    SWEPT_ASSIGN_OR_RETURN(record, sound_trial_row(st));
    out.push_back(std::move(record));
  }
  return out;
}

Result<TrialRow> Writer::trial_record(int64_t trial_id) {
  // The row and, for a multi-node trial, the nodes of its current attempt
  // (the lifecycle never adopts one node of a gang as a trial of its own).
  static const std::string sql = std::string("SELECT ") + kTrialColumns + ", t.nodes FROM trials t WHERE t.id=?";
  SWEPT_CACHED(st, sql.c_str());
  st.bind(1, trial_id);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  if (!row) return Status::NotFound("no trial " + std::to_string(trial_id));
  Result<TrialRow> t = sound_trial_row(st);
  if (t.ok()) t->nodes = decode_nodes(st.optional_text(kTrialColumnCount));
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
                            double gpu_fraction, double now, const std::vector<TrialNode>& nodes,
                            const GangRecord* gang) {
  std::optional<std::string> nodes_json;
  if (!nodes.empty()) nodes_json = encode_nodes(nodes);
  // A share of one GPU, or NULL for whole GPUs and CPU trials.
  std::optional<double> fraction;
  if (gpu_fraction > 0) fraction = gpu_fraction;
  std::string g = encode_gpu_list(gpus);
  SWEPT_CACHED(st,
                "UPDATE trials SET state=?6, attempts=?1, agent=?2, gpus=?3, gpu_fraction=?4, exit_code=NULL, "
                "reason=NULL, started_at=NULL, ended_at=NULL, nodes=?7 WHERE id=?5");
  st.bind(7, nodes_json);
  st.bind(6, TrialState::kRunning);
  st.bind(1, attempt);
  st.bind(2, agent);
  st.bind(3, g);
  st.bind(4, fraction);
  st.bind(5, trial_id);
  SWEPT_RETURN_IF_ERROR(st.run());
  SWEPT_CACHED(ins,
                "INSERT OR REPLACE INTO attempts(trial_id, attempt, agent, gpus, gpu_fraction, state, started_at, "
                "metrics_seq, nodes, gang) VALUES(?1,?2,?3,?4,?5,?7,?6,0,?8,?9)");
  ins.bind(8, nodes_json);
  ins.bind(9, gang ? std::optional<std::string>(encode_gang(*gang)) : std::nullopt);
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

Result<std::optional<GangRecord>> Writer::attempt_gang(int64_t trial_id, int attempt) {
  SWEPT_CACHED(st, "SELECT gang FROM attempts WHERE trial_id=?1 AND attempt=?2");
  st.bind(1, trial_id);
  st.bind(2, attempt);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  std::optional<GangRecord> gang = row ? decode_gang(st.optional_text(0)) : std::nullopt;
  st.reset();
  return gang;
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

Status Writer::fill_ended_at(int64_t trial_id, double ended_at) {
  SWEPT_CACHED(st, "UPDATE trials SET ended_at=?1 WHERE id=?2 AND ended_at IS NULL");
  st.bind(1, ended_at);
  st.bind(2, trial_id);
  return st.run();
}

Result<int64_t> Writer::end_stopping_trials(double now) {
  SWEPT_CACHED(st, "UPDATE trials SET ended_at=?1 WHERE state=?2 AND ended_at IS NULL AND attempts > 0");
  st.bind(1, now);
  st.bind(2, TrialState::kStopped);
  SWEPT_RETURN_IF_ERROR(st.run());
  return static_cast<int64_t>(sqlite3_changes(conn_->handle()));
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

}  // namespace swept::store
