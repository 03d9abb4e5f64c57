// The store's SQLite wrapper: see sqlite.h.
#include "store/sqlite.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "common/log.h"
#include "store/schema.h"

namespace swept::store {

Status sqlite_error(sqlite3* db, int rc, const char* call, const char* file, int line) {
  const char* what = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  // The call, file and line are for us, not for the user: they go to the
  // debug log. The message says what SQLite said and what to do.
  log::debug(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + (what ? what : "?") +
             " (SQLite code " + std::to_string(rc) + ")");
  std::string msg = std::string("the database said: ") + (what ? what : "?");
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(msg + " (the database is busy; retry)");
    case SQLITE_CANTOPEN:
      return Status::NotFound(msg);
    case SQLITE_NOTADB:
      return Status::Corruption(msg + " (this file is not a SQLite database: pass the scheduler's database as --db)");
    case SQLITE_CORRUPT:
      return Status::Corruption(msg + " (the database file is damaged: restore it from a copy, or start afresh with "
                                      "another --db)");
    case SQLITE_FULL:
      return Status::IoError(msg + " (the disk is full: free space on it)");
    case SQLITE_READONLY:
      return Status::IoError(msg + " (the database files or their folder cannot be written: fix their permissions)");
    default:
      return Status::IoError(msg);
  }
}

namespace {

// "file:" URI for `path` with ?immutable=1 (docs: sqlite.org/uri.html):
// '%', '?' and '#' in the path are escaped.
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      uri += buf;
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

std::string folder_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

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
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (mode == Mode::kReadOnly && !exists) {
    return Status::NotFound("database '" + path +
                            "' does not exist yet; start the scheduler (or swept run) with --db " + path +
                            ", or pass the right --db");
  }
  if (exists && S_ISDIR(st.st_mode))
    return Status::InvalidArgument("'" + path + "' is a directory, not a database file: pass a file as --db (e.g. " +
                                   path + "/swept.db)");
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
    // A WAL database needs its -shm file to be read. With the scheduler
    // running (or killed), -wal and -shm exist and SQLite reads them even
    // without write permission. With the scheduler stopped cleanly, they
    // are gone, and a reader that cannot write the folder cannot create
    // them: then no writer is there and the main file holds everything,
    // so it is read as immutable. With a -wal left but no -shm, there is no
    // safe way: say why and what to do.
    Status probe = conn->exec("SELECT count(*) FROM sqlite_master");
    const std::string folder = folder_of(path);
    if (!probe.ok() && (probe.code() == StatusCode::kNotFound || probe.code() == StatusCode::kIoError) &&
        ::access(folder.c_str(), W_OK) != 0) {
      struct stat wal {};
      const bool has_wal = ::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0;
      if (!has_wal) {
        conn.reset();
        db = nullptr;
        rc = sqlite3_open_v2(immutable_uri(path).c_str(), &db,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, vfs);
        if (rc != SQLITE_OK) {
          Status s = sqlite_error(db, rc, "sqlite3_open_v2(immutable)", __FILE__, __LINE__);
          sqlite3_close(db);
          return s.WithContext("opening '" + path + "' read-only");
        }
        conn.reset(new Connection(db, path));
        conn->immutable_ = true;
        sqlite3_busy_timeout(db, busy_timeout_ms);
        log::debug("reading " + path + " as immutable: its folder is not writable and no scheduler has it open");
      } else {
        return Status::FailedPrecondition(
            "cannot read '" + path + "': it is a WAL database whose log (" + path + "-wal, " +
            std::to_string(wal.st_size) + " bytes) is not checkpointed, and SQLite cannot create its shared-memory "
            "file (" + path + "-shm) because the folder " + folder + " is not writable by this user. Run this as a "
            "user who can write " + folder + ", restart the scheduler on it (its -shm then exists and is read), or "
            "copy the database and its -wal file to a folder you can write and pass that --db");
      }
    } else if (!probe.ok()) {
      return probe.WithContext("opening '" + path + "'");
    }
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

void Connection::reset_cached() {
  for (auto& [key, st] : cache_) st->reset();
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
    MutexLock lock(mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(c));
    }
  }
  auto conn = Connection::open(path_, Connection::Mode::kReadOnly, busy_timeout_ms_);
  if (!conn.ok()) return conn.status();
  // The dashboard refuses what the CLI refuses (open_reader): a database
  // written by a newer swept. One without a schema yet is served empty.
  if (auto version = read_schema_version(**conn); version.ok() && *version > kSchemaVersion)
    return Status::FailedPrecondition(path_ + " has schema version " + std::to_string(*version) +
                                      ", newer than this swept understands (" + std::to_string(kSchemaVersion) +
                                      "): use a newer swept");
  return Lease(this, std::move(*conn));
}

void ConnectionPool::release(std::unique_ptr<Connection> c) {
  if (c->immutable()) return;  // reopened per request, so a scheduler started since is seen
  MutexLock lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(c));
}

}  // namespace swept::store
