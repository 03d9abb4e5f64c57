// Read-only SQLite access for the dashboard: see db.h.
#include "web/db.h"

#include <sys/stat.h>

#include "web/sqlite_check.h"

namespace swept::web {

Status sqlite_error(sqlite3* db, int rc, const char* call, const char* file, int line) {
  std::string msg = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
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
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Statement& Statement::bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Statement& Statement::bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::bind_null(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Result<bool> Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return sqlite_error(db_, rc, "sqlite3_step", __FILE__, __LINE__);
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

Result<std::unique_ptr<Connection>> Connection::open_read_only(const std::string& path, int busy_timeout_ms) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::NotFound("database '" + path + "' does not exist yet; start the scheduler (or swept run) with --db " +
                            path + ", or pass the right --db");
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = sqlite_error(db, rc, "sqlite3_open_v2(SQLITE_OPEN_READONLY)", __FILE__, __LINE__);
    sqlite3_close(db);
    return s.WithContext("opening '" + path + "'");
  }
  std::unique_ptr<Connection> conn(new Connection(db));
  sqlite3_busy_timeout(db, busy_timeout_ms);
  SWEPT_RETURN_IF_ERROR(conn->exec("PRAGMA query_only = 1"));
  // Memory-mapped reads: pages come from the OS page cache without a read(2)
  // each, which matters for sampled queries that touch one row per page. A
  // connection's own page cache is dropped whenever the scheduler commits, so
  // it cannot play that role.
  SWEPT_RETURN_IF_ERROR(conn->exec("PRAGMA mmap_size = 1073741824"));
  return conn;
}

Connection::~Connection() { sqlite3_close(db_); }

Result<Statement> Connection::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  SWEPT_SQLITE_CHECK(db_, sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr));
  return Statement(db_, stmt);
}

Status Connection::exec(const char* sql) {
  SWEPT_SQLITE_CHECK(db_, sqlite3_exec(db_, sql, nullptr, nullptr, nullptr));
  return Status::Ok();
}

Result<bool> Connection::has_schema() {
  if (schema_seen_) return true;
  auto stmt = prepare(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
      "('sweeps', 'trials', 'metrics', 'trial_latest', 'trial_logs', 'agents', 'agent_gpus')");
  if (!stmt.ok()) return stmt.status();
  auto row = stmt->step();
  if (!row.ok()) return row.status();
  schema_seen_ = *row && stmt->int64(0) == 7;
  return schema_seen_;
}

Result<int64_t> Connection::data_version() {
  auto stmt = prepare("PRAGMA data_version");
  if (!stmt.ok()) return stmt.status();
  auto row = stmt->step();
  if (!row.ok()) return row.status();
  return *row ? stmt->int64(0) : int64_t{0};
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
  auto conn = Connection::open_read_only(path_, busy_timeout_ms_);
  if (!conn.ok()) return conn.status();
  return Lease(this, std::move(*conn));
}

void ConnectionPool::release(std::unique_ptr<Connection> c) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(c));
}

}  // namespace swept::web
