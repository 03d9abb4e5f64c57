// The store's one SQLite wrapper: a Connection (RAII over sqlite3*) and a
// Statement (RAII over sqlite3_stmt*), one check macro (SWEPT_SQLITE_CHECK)
// and one mapping of SQLite result codes to Status (sqlite_error). The
// writer (writer.h) and the read model (reader.h) both sit on it; nothing
// outside store/ includes this header or sqlite3.h.
//
// Error mapping (sqlite_error): BUSY/LOCKED -> Unavailable (retry),
// CANTOPEN -> NotFound, NOTADB/CORRUPT -> Corruption, anything else ->
// IoError. The message is for users: SQLite's reason and what to do; the
// failing call, file and line go to the debug log (--log-level debug).
//
// A Statement records the first failing bind and reports it from the next
// step(), so call sites chain binds without checking each and no bind error
// is ever dropped.
//
// Thread safety: a Connection and its Statements belong to one thread at a
// time (opened with SQLITE_OPEN_NOMUTEX); ConnectionPool is thread-safe and
// hands each request its own read-only Connection.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/states.h"
#include "common/status.h"

namespace swept::store {

// Maps a failed SQLite call to a Status (see above).
Status sqlite_error(sqlite3* db, int rc, const char* call, const char* file, int line);

}  // namespace swept::store

// SWEPT_SQLITE_CHECK(db, call): evaluates a sqlite3_* call; any result other
// than OK, ROW or DONE returns sqlite_error(...) from the enclosing function
// (which returns Status or Result<T>).
#define SWEPT_SQLITE_CHECK(db, call)                                                    \
  do {                                                                                  \
    int _swept_rc = (call);                                                             \
    if (_swept_rc != SQLITE_OK && _swept_rc != SQLITE_ROW && _swept_rc != SQLITE_DONE)  \
      return ::swept::store::sqlite_error((db), _swept_rc, #call, __FILE__, __LINE__);  \
  } while (0)

namespace swept::store {

// A prepared statement; finalized when destroyed (unless the Connection's
// cache owns it). Bind indices start at 1.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt, bool owned = true) : db_(db), stmt_(stmt), owned_(owned) {}
  Statement(Statement&& o) noexcept
      : db_(o.db_), stmt_(std::exchange(o.stmt_, nullptr)), owned_(o.owned_), bind_rc_(o.bind_rc_) {}
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& bind(int index, int64_t value) { return note(sqlite3_bind_int64(stmt_, index, value)); }
  Statement& bind(int index, int value) { return note(sqlite3_bind_int64(stmt_, index, value)); }
  Statement& bind(int index, double value) { return note(sqlite3_bind_double(stmt_, index, value)); }
  Statement& bind(int index, std::string_view value) {
    return note(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT));
  }
  Statement& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind_null(int index) { return note(sqlite3_bind_null(stmt_, index)); }
  // States bind as their names (common/states.h): the SQL spelling.
  Statement& bind(int index, TrialState s) { return bind(index, name(s)); }
  Statement& bind(int index, SweepState s) { return bind(index, name(s)); }
  Statement& bind(int index, AgentState s) { return bind(index, name(s)); }
  template <typename T>
  Statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind_null(index);
  }
  // Rewinds for another run with new bindings.
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    bind_rc_ = SQLITE_OK;
  }

  // Advances: true when a row is ready, false when done; an error Status when
  // a bind or SQLite fails (busy past the timeout -> Unavailable).
  Result<bool> step();
  // Runs a statement that returns no rows (or ignores them) and rewinds it.
  Status run();

  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string text(int col) const;
  std::optional<double> optional_real(int col) const;
  std::optional<int64_t> optional_int64(int col) const;
  std::optional<std::string> optional_text(int col) const;

 private:
  Statement& note(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  bool owned_;
  int bind_rc_ = SQLITE_OK;
};

class Connection {
 public:
  enum class Mode { kReadWrite, kReadOnly };
  // Opens `path`. kReadOnly: the file must exist (NotFound names the --db to
  // pass), and the connection also sets `PRAGMA query_only`, so nothing read
  // through it can write. kReadWrite creates the file. `vfs`: a registered
  // SQLite VFS by name (tests: fault_vfs.h), nullptr for the default.
  static Result<std::unique_ptr<Connection>> open(const std::string& path, Mode mode, int busy_timeout_ms,
                                                  const char* vfs = nullptr);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // A new statement, finalized when the Statement goes.
  Result<Statement> prepare(std::string_view sql);
  // A statement prepared once per connection and kept (for the writer's hot
  // paths), reset and cleared before it is handed out. `sql` must be a
  // string literal (its address is the key). Valid while the Connection lives.
  Result<Statement*> cached(const char* sql);
  // Resets every cached statement: one left on a row stays active, and an
  // active statement makes every WAL checkpoint of this connection fail
  // (SQLITE_LOCKED), so the log would grow for ever.
  void reset_cached();
  // Runs statements that return no rows (BEGIN, COMMIT, PRAGMA settings).
  Status exec(const char* sql);
  // True while a transaction is open on this connection.
  bool in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }
  // Opened as an immutable file (a reader that cannot write the folder of a
  // WAL database no scheduler has open; see open()). It does not see later
  // writes, so pools do not keep it.
  bool immutable() const { return immutable_; }
  int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
  // True once the scheduler has created swept's tables in the file.
  Result<bool> has_schema();
  // PRAGMA data_version: changes when another connection commits.
  Result<int64_t> data_version();
  const std::string& path() const { return path_; }
  // The raw handle, for store/ code that installs SQLite hooks (writer.cpp).
  sqlite3* handle() const { return db_; }

 private:
  Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
  bool schema_seen_ = false;
  bool immutable_ = false;
  std::vector<std::pair<const char*, std::unique_ptr<Statement>>> cache_;
};

// One read transaction: every query of a response sees the same snapshot.
// Inside a transaction the caller already holds (the scheduler answering a
// query mid-turn) it does nothing.
class ReadTransaction {
 public:
  explicit ReadTransaction(Connection& db);
  ~ReadTransaction();
  const Status& status() const { return status_; }

 private:
  Connection& db_;
  bool began_ = false;
  Status status_;
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
  Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ SWEPT_GUARDED_BY(mu_);
};

}  // namespace swept::store
