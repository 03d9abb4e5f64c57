// What the store's and the scheduler's unit tests share: a temporary database path and a
// one-number query against it. Test code only (included by *_test.cpp).
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <doctest/doctest.h>

namespace swept::store::testing {

// A fresh temporary database path, removed (with its WAL files) at scope end.
struct TempDb {
  std::string path;
  TempDb() {
    char tmpl[] = "/tmp/swept-store-test-XXXXXX";
    int fd = mkstemp(tmpl);
    close(fd);
    std::filesystem::remove(tmpl);
    path = tmpl;
  }
  ~TempDb() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  }
};

// The single integer `sql` selects, read through a read-only connection.
inline int64_t query_int(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

}  // namespace swept::store::testing
