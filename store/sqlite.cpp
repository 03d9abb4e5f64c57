// The store's SQLite wrapper: see sqlite.h.
#include "store/sqlite.h"

#include <sys/stat.h>

namespace swept::store {

Status sqlite_error(sqlite3* db, int rc, const char* call, const char* file, int line) {
  const char* what = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string msg = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    (what ? what : "?") + " (SQLite code " + std::to_string(rc) + ")";
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(msg + " (the database is busy; retry)");
    case SQLITE_CANTOPEN:
      return Status::NotFound(msg);
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return Status::Corruption(msg + " (is --db the scheduler's database?)");
    default:
      return Status::IoError(msg);
  }
}

Statement::~Statement() {
  if (stmt_ && owned_) sqlite3_finalize(stmt_);
}

Result<bool> Statement::step() {
  if (bind_rc_ != SQLITE_OK) return sqlite_error(db_, bind_rc_, "sqlite3_bind_*", __FILE__, __LINE__);
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status s = sqlite_error(db_, rc, "sqlite3_step", __FILE__, __LINE__);
  sqlite3_reset(stmt_);
  return s;
}

Status Statement::run() {
  auto r = step();
  sqlite3_reset(stmt_);
  return r.ok() ? Status::Ok() : r.status();
}

std::string Statement::text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}
std::optional<double> Statement::optional_real(int col) const {
  if (is_null(col)) return std::nullopt;
  return real(col);
}
std::optional<int64_t> Statement::optional_int64(int col) const {
  if (is_null(col)) return std::nullopt;
  return int64(col);
}
std::optional<std::string> Statement::optional_text(int col) const {
  if (is_null(col)) return std::nullopt;
  return text(col);
}

Result<std::unique_ptr<Connection>> Connection::open(const std::string& path, Mode mode, int busy_timeout_ms,
                                                     const char* vfs) {
  if (mode == Mode::kReadOnly) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return Status::NotFound("database '" + path +
                              "' does not exist yet; start the scheduler (or swept run) with --db " + path +
                              ", or pass the right --db");
    }
  }
  int flags = mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, vfs);
  if (rc != SQLITE_OK) {
    Status s = sqlite_error(db, rc, "sqlite3_open_v2", __FILE__, __LINE__);
    sqlite3_close(db);
    return s.WithContext("opening '" + path + "'");
  }
  std::unique_ptr<Connection> conn(new Connection(db, path));
  sqlite3_busy_timeout(db, busy_timeout_ms);
  if (mode == Mode::kReadOnly) {
    SWEPT_RETURN_IF_ERROR(conn->exec("PRAGMA query_only = 1"));
    // Memory-mapped reads: pages come from the OS page cache without a
    // read(2) each, which matters for sampled queries that touch one row per
    // page. A connection's own page cache is dropped whenever the scheduler
    // commits, so it cannot play that role.
    SWEPT_RETURN_IF_ERROR(conn->exec("PRAGMA mmap_size = 1073741824"));
  }
  return conn;
}

Connection::~Connection() {
  cache_.clear();  // finalize the cached statements before closing
  sqlite3_close_v2(db_);
}

Result<Statement> Connection::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  SWEPT_SQLITE_CHECK(db_, sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr));
  return Statement(db_, stmt);
}

Result<Statement*> Connection::cached(const char* sql) {
  for (auto& [key, st] : cache_) {
    if (key == sql) {
      st->reset();
      return st.get();
    }
  }
  sqlite3_stmt* stmt = nullptr;
  SWEPT_SQLITE_CHECK(db_, sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr));
  cache_.emplace_back(sql, std::make_unique<Statement>(db_, stmt));
  return cache_.back().second.get();
}

Status Connection::exec(const char* sql) {
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    std::string call = "sqlite3_exec(" + std::string(sql).substr(0, 80) + ")";
    return sqlite_error(db_, rc, call.c_str(), __FILE__, __LINE__);
  }
  return Status::Ok();
}

Result<bool> Connection::has_schema() {
  if (schema_seen_) return true;
  SWEPT_ASSIGN_OR_RETURN(stmt, prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                                       "('sweeps', 'trials', 'metrics', 'trial_latest', 'trial_logs', 'agents', "
                                       "'agent_gpus')"));
  SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
  schema_seen_ = row && stmt.int64(0) == 7;
  return schema_seen_;
}

Result<int64_t> Connection::data_version() {
  SWEPT_ASSIGN_OR_RETURN(stmt, prepare("PRAGMA data_version"));
  SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
  return row ? stmt.int64(0) : int64_t{0};
}

ReadTransaction::ReadTransaction(Connection& db) : db_(db) {
  if (db_.in_transaction()) return;
  status_ = db_.exec("BEGIN");
  began_ = status_.ok();
}

ReadTransaction::~ReadTransaction() {
  if (began_) (void)db_.exec("COMMIT");
}

Result<ConnectionPool::Lease> ConnectionPool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(c));
    }
  }
  auto conn = Connection::open(path_, Connection::Mode::kReadOnly, busy_timeout_ms_);
  if (!conn.ok()) return conn.status();
  return Lease(this, std::move(*conn));
}

void ConnectionPool::release(std::unique_ptr<Connection> c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(c));
}

}  // namespace swept::store
