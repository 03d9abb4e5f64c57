// Read-only access to the scheduler's SQLite store (scheduler/schema.sql).
//
// The dashboard never writes: every connection is opened with
// SQLITE_OPEN_READONLY and `PRAGMA query_only`, so a bug here cannot corrupt
// the scheduler's database. The store is in WAL mode, so readers see the last
// committed state while the scheduler writes; a busy timeout covers the short
// moments (checkpoints, recovery) when a reader must wait.
//
// A missing file or a file without swept's tables is not an error for callers
// that list things: Connection::has_schema() says so and they answer empty.
//
// Thread safety: a Connection and its Statements belong to one thread at a
// time; ConnectionPool is thread-safe and hands each request its own
// Connection.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace swept::web {

// A prepared statement; finalized when destroyed. Bind indices start at 1.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind_null(int index);
  // Rewinds for another run with new bindings.
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  // Advances: true when a row is ready, false when done; an error Status when
  // SQLite fails (busy past the timeout -> Unavailable).
  Result<bool> step();

  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string text(int col) const;
  std::optional<double> optional_real(int col) const;
  std::optional<int64_t> optional_int64(int col) const;
  std::optional<std::string> optional_text(int col) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

class Connection {
 public:
  // Opens `path` read-only. NotFound when the file does not exist (the
  // scheduler has not created it yet); IoError for other failures.
  static Result<std::unique_ptr<Connection>> open_read_only(const std::string& path, int busy_timeout_ms);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Result<Statement> prepare(std::string_view sql);
  // Runs statements that return no rows (BEGIN, COMMIT, PRAGMA settings).
  Status exec(const char* sql);
  // True once the scheduler has created swept's tables in the file.
  Result<bool> has_schema();
  // PRAGMA data_version: changes when another connection commits.
  Result<int64_t> data_version();

 private:
  explicit Connection(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  bool schema_seen_ = false;
};

// Hands out read-only connections, reusing idle ones (at most `max_idle` kept).
class ConnectionPool {
 public:
  ConnectionPool(std::string path, int busy_timeout_ms, size_t max_idle = 8)
      : path_(std::move(path)), busy_timeout_ms_(busy_timeout_ms), max_idle_(max_idle) {}

  // A connection returned to the pool when the Lease is destroyed.
  class Lease {
   public:
    Lease(ConnectionPool* pool, std::unique_ptr<Connection> c) : pool_(pool), conn_(std::move(c)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (conn_) pool_->release(std::move(conn_));
    }
    Connection& operator*() { return *conn_; }
    Connection* operator->() { return conn_.get(); }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  Result<Lease> acquire();
  const std::string& path() const { return path_; }

 private:
  void release(std::unique_ptr<Connection> c);
  std::string path_;
  int busy_timeout_ms_;
  size_t max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace swept::web
