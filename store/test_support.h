// What the store's and the scheduler's unit tests share: a temporary database
// path and small queries against it through their own SQLite connections
// (so they see only what was committed). Test code only (included by
// *_test.cpp). Every handle is owned by a unique_ptr, so a failing REQUIRE
// (which throws) leaks no connection or statement.
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <doctest/doctest.h>

#include "common/testing/temp_dir.h"
#include "store/writer.h"

namespace swept::store::testing {

// A database path in a fresh temporary directory (common/testing/
// temp_dir.h), removed with its WAL files at scope end.
struct TempDb {
  ::swept::testing::TempDir dir{"swept-store-test"};
  std::string path = dir / "swept.db";
};

struct SqliteClose {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
struct SqliteFinalize {
  void operator()(sqlite3_stmt* st) const { sqlite3_finalize(st); }
};
using SqliteDb = std::unique_ptr<sqlite3, SqliteClose>;
using SqliteStmt = std::unique_ptr<sqlite3_stmt, SqliteFinalize>;

// A connection to `path` with `flags` (sqlite3_open_v2); REQUIREs success.
inline SqliteDb open_db(const std::string& path, int flags = SQLITE_OPEN_READONLY) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  SqliteDb db(raw);  // owned before REQUIRE can throw (sqlite3 may hand one back on failure)
  REQUIRE_MESSAGE(rc == SQLITE_OK, "cannot open ", path);
  return db;
}

// `sql` prepared on `db`; REQUIREs success.
inline SqliteStmt prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr);
  SqliteStmt st(raw);
  REQUIRE_MESSAGE(rc == SQLITE_OK, sql, ": ", sqlite3_errmsg(db));
  return st;
}

// The single integer `sql` selects, read through a read-only connection.
inline int64_t query_int(const std::string& path, const std::string& sql) {
  SqliteDb db = open_db(path);
  SqliteStmt st = prepare(db.get(), sql);
  REQUIRE_MESSAGE(sqlite3_step(st.get()) == SQLITE_ROW, sql, ": no row");
  return sqlite3_column_int64(st.get(), 0);
}

// Every row of `sql`'s result as text, one line per row ("a|b|\n"; NULL as
// NULL): for comparing a table before and after an upgrade.
inline std::string dump(const std::string& path, const std::string& sql) {
  SqliteDb db = open_db(path);
  SqliteStmt st = prepare(db.get(), sql);
  std::string out;
  while (sqlite3_step(st.get()) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(st.get()); ++c) {
      const unsigned char* v = sqlite3_column_text(st.get(), c);
      out += v ? reinterpret_cast<const char*>(v) : "NULL";
      out += '|';
    }
    out += '\n';
  }
  return out;
}

// Runs `sql` on a read-write connection; SQLite's error message, or "" when
// it succeeded.
inline std::string exec_error(const std::string& path, const std::string& sql) {
  SqliteDb db = open_db(path, SQLITE_OPEN_READWRITE);
  char* err = nullptr;
  sqlite3_exec(db.get(), sql.c_str(), nullptr, nullptr, &err);
  std::string out = err ? err : "";
  sqlite3_free(err);
  return out;
}

// Inserts, and rolls back, one row with `state` into `table` (trials, sweeps
// or agents): SQLite's error ("CHECK constraint failed: ...") when the
// table's state CHECK refuses the name, "" when it takes it. The file is left
// as it was either way.
inline std::string state_probe_error(const std::string& path, const std::string& table, const std::string& state) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive)
  // about "'" + std::string.
  std::string quoted(1, '\'');
  quoted += state;
  quoted += '\'';
  std::string insert;
  if (table == "sweeps")
    insert = "INSERT INTO sweeps(name, method, spec, state, created_at) VALUES('probe', 'grid', '{}', " + quoted + ", 1)";
  else if (table == "trials")
    insert = "INSERT INTO trials(sweep_id, idx, params, command, state, created_at) "
             "VALUES((SELECT COALESCE(MAX(id), 1) FROM sweeps), (SELECT COALESCE(MAX(idx), 0) + 1 FROM trials), "
             "'{}', '[]', " + quoted + ", 1)";
  else if (table == "agents")
    insert = "INSERT INTO agents(name, host, state, slots, registered_at, last_seen) "
             "VALUES('state-probe', 'h', " + quoted + ", 1, 1, 1)";
  REQUIRE_MESSAGE(!insert.empty(), "no state column in table ", table);
  return exec_error(path, "BEGIN; " + insert + "; ROLLBACK;");
}

// A swept database with a sweep and enough trials to span many pages, closed
// (its WAL checkpointed into the file).
inline void make_database(const std::string& path) {
  auto w = swept::store::Writer::open(path);
  REQUIRE(w.ok());
  REQUIRE((*w)->begin().ok());
  swept::SweepRow s;
  s.name = "damage";
  s.method = "grid";
  s.spec = "{}";
  s.created_at = 1;
  auto sid = (*w)->insert_sweep(s);
  REQUIRE(sid.ok());
  const std::string params = R"({"lr": 0.001, "note": ")" + std::string(200, 'x') + "\"}";
  for (int i = 0; i < 400; ++i) REQUIRE((*w)->insert_trial(*sid, i, params, R"(["true"])", 1).ok());
  REQUIRE((*w)->commit().ok());
}

// Overwrites pages `first`..`last` (1-based) of the file with bytes that are
// no b-tree page.
inline void damage_pages(const std::string& path, int first, int last) {
  const int64_t page_size = query_int(path, "PRAGMA page_size");
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f.good());
  const std::string junk(static_cast<size_t>(page_size), '\x5a');
  for (int p = first; p <= last; ++p) {
    f.seekp(static_cast<std::streamoff>((p - 1) * page_size));
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  REQUIRE(f.good());
}


}  // namespace swept::store::testing
