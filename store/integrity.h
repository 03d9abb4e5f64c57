// Whether a database file is sound enough to open (issue 26, item 3): a file
// whose pages were damaged (a bad disk, a bad copy, a stray write) is
// refused at open with exit 2 and how to recover it, never opened and
// written to (which spreads the damage) nor read until a query crashes.
//
// The check is SQLite's PRAGMA quick_check: every page's b-tree structure,
// without cross-checking indexes against their tables, O(file size). It is
// bounded in time (the documented compromise, docs/exit-codes.md): a file
// checked whole within the budget is refused on any problem; a larger one is
// checked for the budget's length, what was read is held to the same rule,
// and the rest is left for SQLite's own checks as pages are read (a damaged
// page met later fails that query with an error, never a crash).
//
// Errors: Corruption naming the file, the first problem and the recovery;
// IoError when the check cannot run. Thread safety: as the Connection's.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "store/sqlite.h"

namespace swept::store {

inline constexpr int64_t kIntegrityCheckBudgetMs = 3000;

// Runs the check on an open connection to `path`.
Status check_integrity(Connection& db, const std::string& path, int64_t budget_ms = kIntegrityCheckBudgetMs);
// Opens `path` read-only and checks it; a file that does not exist (yet) or
// has no swept tables (yet) is not refused (`swept web` may start before
// the scheduler has made its database).
Status check_database_file(const std::string& path, int64_t budget_ms = kIntegrityCheckBudgetMs);

}  // namespace swept::store
