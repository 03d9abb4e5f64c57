// SWEPT_SQLITE_CHECK: the one check macro for SQLite calls in web/.
//
// Evaluates a sqlite3_* call; if its result code is not in the accepted set
// (SQLITE_OK, SQLITE_ROW, SQLITE_DONE) it returns from the enclosing function a
// Status naming the failing call, file, line and SQLite's message. The
// enclosing function must return Status or Result<T>, and `db` (sqlite3*) must
// be in scope for the message.
#pragma once

#include <sqlite3.h>

#include <string>

#include "common/status.h"

namespace swept::web {

// Maps a failed SQLite call to a Status: busy/locked -> Unavailable (retry),
// cantopen -> NotFound, the rest -> IoError.
Status sqlite_error(sqlite3* db, int rc, const char* call, const char* file, int line);

}  // namespace swept::web

#define SWEPT_SQLITE_CHECK(db, call)                                              \
  do {                                                                            \
    int _swept_rc = (call);                                                       \
    if (_swept_rc != SQLITE_OK && _swept_rc != SQLITE_ROW && _swept_rc != SQLITE_DONE) \
      return ::swept::web::sqlite_error((db), _swept_rc, #call, __FILE__, __LINE__); \
  } while (0)
