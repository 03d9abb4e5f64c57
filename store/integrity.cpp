// The integrity check at open (integrity.h): quick_check under a progress
// handler that interrupts it when the budget is spent.
#include "store/integrity.h"

#include <sqlite3.h>

#include <chrono>
#include <filesystem>

#include "common/log.h"

namespace swept::store {

namespace {

struct Budget {
  std::chrono::steady_clock::time_point deadline;
  bool spent = false;
};

// SQLite calls this every few thousand VM steps; non-zero interrupts.
int over_budget(void* context) {
  auto& b = *static_cast<Budget*>(context);
  if (std::chrono::steady_clock::now() < b.deadline) return 0;
  b.spent = true;
  return 1;
}

std::string recovery_advice(const std::string& path) {
  return "swept will not open it. Recover what it holds into a new file (sqlite3 " + path + " .recover | sqlite3 " +
         path + ".recovered) and pass --db " + path + ".recovered, or restore a backup";
}

}  // namespace

Status check_integrity(Connection& db, const std::string& path, int64_t budget_ms) {
  sqlite3* h = db.handle();
  Budget budget{std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms), false};
  sqlite3_progress_handler(h, 4000, over_budget, &budget);
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(h, "PRAGMA quick_check(5)", -1, &st, nullptr);
  std::string problems;
  if (rc == SQLITE_OK) {
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      std::string line = text ? text : "";
      if (line != "ok") problems += (problems.empty() ? "" : "; ") + line;
    }
  }
  const std::string error = sqlite3_errmsg(h);
  sqlite3_finalize(st);
  sqlite3_progress_handler(h, 0, nullptr, nullptr);
  if (!problems.empty())
    return Status::Corruption(path + " is damaged (SQLite's quick_check: " + problems + "); " + recovery_advice(path));
  if (rc == SQLITE_DONE) return Status::Ok();
  if (budget.spent) {
    log::info(path + ": checked for " + std::to_string(budget_ms) +
              " ms at open and found nothing wrong; a file this large is not checked whole (docs/exit-codes.md)");
    return Status::Ok();
  }
  if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB)
    return Status::Corruption(path + " is damaged (" + error + "); " + recovery_advice(path));
  return Status::IoError(path + ": the integrity check could not run (" + error + ")");
}

Status check_database_file(const std::string& path, int64_t budget_ms) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::Ok();
  SWEPT_ASSIGN_OR_RETURN(conn, Connection::open(path, Connection::Mode::kReadOnly, 5000));
  return check_integrity(*conn, path, budget_ms);
}

}  // namespace swept::store
