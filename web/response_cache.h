// ResponseCache: the dashboard's answers kept until the database changes.
//
// Every open dashboard refetches the same few answers (the sweeps list, the
// sweep on screen, its trials page) on every live event, so with N viewers
// the server would compute each answer N times per change; under 50
// concurrent clients the database calls were CPU-bound at 4 to 20 times the
// 100 ms p99 target (docs/benchmarks.md). This cache computes each answer
// once per change of the database, however many clients ask:
//
// - Freshness: one read-only connection of its own reads PRAGMA
//   data_version, which changes whenever another connection (the
//   scheduler, in any process) commits. An answer is stored with the version
//   read *before* it was computed, and served only while the version is
//   still that: no commit since then, so the answer (computed from a
//   snapshot at least that new) is what a fresh computation would give.
// - One computation per key and version: a request that finds the answer
//   being computed waits for it rather than computing it again.
// - Bounded: at most kMaxEntries answers and kMaxBytes in all (answers over
//   kMaxBodyBytes are never kept); when full, everything is dropped.
// - No cache, always computing, while the database does not exist yet, or
//   when it can only be opened immutable (a folder readers cannot write:
//   data_version then never changes, store/sqlite.h).
//
// Thread-safe. Failures of `compute` are returned, never cached.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "common/status.h"
#include "store/sqlite.h"

namespace swept::web {

class ResponseCache {
 public:
  static constexpr size_t kMaxEntries = 512;
  static constexpr size_t kMaxBodyBytes = 1 << 20;
  static constexpr size_t kMaxBytes = 64 << 20;

  explicit ResponseCache(std::string db_path) : db_path_(std::move(db_path)) {}

  // The answer for `key`: the stored one if the database has not changed
  // since it was computed, else compute()'s (stored when it succeeds).
  Result<std::string> get(const std::string& key, const std::function<Result<std::string>()>& compute)
      SWEPT_EXCLUDES(mu_);

  struct Stats {
    uint64_t hits = 0, computed = 0;
  };
  Stats stats() const SWEPT_EXCLUDES(mu_);

 private:
  struct Entry {
    int64_t version = -1;  // the data_version the body belongs to
    std::string body;
    bool computing = false;
  };
  // The database's current data_version; nullopt when there is no usable
  // version (no database yet, an immutable one, an error).
  std::optional<int64_t> version() SWEPT_REQUIRES(mu_);

  const std::string db_path_;
  mutable Mutex mu_;
  std::condition_variable_any done_;
  std::unique_ptr<store::Connection> conn_ SWEPT_GUARDED_BY(mu_);
  std::map<std::string, Entry> entries_ SWEPT_GUARDED_BY(mu_);
  size_t bytes_ SWEPT_GUARDED_BY(mu_) = 0;
  Stats stats_ SWEPT_GUARDED_BY(mu_);
};

}  // namespace swept::web
