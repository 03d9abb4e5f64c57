// ResponseCache: see response_cache.h for the freshness argument.
#include "web/response_cache.h"

namespace swept::web {

std::optional<int64_t> ResponseCache::version() {
  if (!conn_) {
    auto opened = store::Connection::open(db_path_, store::Connection::Mode::kReadOnly, 2000);
    if (!opened.ok()) return std::nullopt;  // no database yet: try again next time
    conn_ = std::move(*opened);
  }
  if (conn_->immutable()) {
    // Cannot see later commits: answer uncached, and reopen next time (the
    // scheduler may have started and made the file shareable since).
    conn_.reset();
    return std::nullopt;
  }
  auto v = conn_->data_version();
  if (!v.ok()) {
    conn_.reset();
    return std::nullopt;
  }
  return *v;
}

Result<std::string> ResponseCache::get(const std::string& key, const std::function<Result<std::string>()>& compute) {
  MutexLock lock(mu_);
  std::optional<int64_t> now;
  while (true) {
    now = version();
    if (!now) {
      lock.unlock();
      return compute();
    }
    auto it = entries_.find(key);
    if (it == entries_.end()) break;
    if (!it->second.computing && it->second.version == *now) {
      ++stats_.hits;
      return it->second.body;
    }
    if (!it->second.computing) break;
    done_.wait(lock);  // another request computes it: wait, then look again
  }
  Entry& entry = entries_[key];
  entry.computing = true;
  lock.unlock();

  Result<std::string> body = Status::Internal("not computed");
  try {
    body = compute();
  } catch (...) {
    lock.lock();
    entries_[key].computing = false;
    done_.notify_all();
    throw;
  }

  lock.lock();
  ++stats_.computed;
  Entry& stored = entries_[key];
  stored.computing = false;
  bytes_ -= stored.body.size();
  stored.body.clear();
  stored.version = -1;
  if (body.ok() && body->size() <= kMaxBodyBytes) {
    if (entries_.size() > kMaxEntries || bytes_ + body->size() > kMaxBytes) {
      // Full: drop every answer no request is computing right now.
      for (auto e = entries_.begin(); e != entries_.end();) {
        if (e->second.computing || e->first == key) {
          ++e;
        } else {
          bytes_ -= e->second.body.size();
          e = entries_.erase(e);
        }
      }
    }
    stored.version = *now;
    stored.body = *body;
    bytes_ += stored.body.size();
  }
  done_.notify_all();
  return body;
}

ResponseCache::Stats ResponseCache::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

}  // namespace swept::web
