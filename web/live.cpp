// LiveFeed: polls data_version, publishes bounded delta events. See live.h.
#include "web/live.h"

#include <chrono>
#include <memory>

#include "common/log.h"
#include "web/api_json.h"
#include "store/reader.h"

namespace swept::web {

using nlohmann::json;

LiveFeed::LiveFeed(std::string db_path, int poll_interval_ms)
    : db_path_(std::move(db_path)), poll_interval_ms_(poll_interval_ms) {}

LiveFeed::~LiveFeed() { stop(); }

void LiveFeed::start() { thread_ = std::thread([this] { run(); }); }

void LiveFeed::stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LiveFeed::stopping() const {
  MutexLock lock(mu_);
  return stop_;
}

uint64_t LiveFeed::latest() const {
  MutexLock lock(mu_);
  return seq_;
}

std::vector<std::string> LiveFeed::wait_events(uint64_t* cursor, int timeout_ms) {
  MutexLock lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!stop_ && seq_ <= *cursor)
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  std::vector<std::string> out;
  if (stop_ || seq_ <= *cursor) return out;
  if (events_.empty() || events_.front().first > *cursor + 1) {
    // Fell behind what is kept: one resync instead of the missed deltas.
    out.push_back(json{{"seq", seq_}, {"resync", true}}.dump());
  } else {
    for (const auto& [seq, text] : events_)
      if (seq > *cursor) out.push_back(text);
  }
  *cursor = seq_;
  return out;
}

void LiveFeed::run() {
  std::unique_ptr<store::Connection> conn;
  while (true) {
    {
      MutexLock lock(mu_);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(poll_interval_ms_);
      while (!stop_ && cv_.wait_until(lock, deadline) != std::cv_status::timeout) {
      }
      if (stop_) return;
    }
    if (!conn) {
      auto opened = store::Connection::open(db_path_, store::Connection::Mode::kReadOnly, 2000);
      if (!opened.ok()) continue;  // not created yet: try again next poll
      conn = std::move(*opened);
    }
    auto version = conn->data_version();
    if (!version.ok()) {
      conn.reset();
      continue;
    }
    if (*version == last_version_) continue;
    auto snap = store::live_snapshot(*conn, kMaxTrialsPerEvent);
    if (!snap.ok()) {
      if (snap.status().code() != StatusCode::kUnavailable)
        log::warn("web: live update poll failed: " + snap.status().ToString());
      continue;  // keep last_version_: retry next poll
    }
    last_version_ = *version;
    json sweeps = json::array();
    std::map<int64_t, std::string> now_sweeps;
    for (const auto& sw : snap->sweeps) {
      json j = sweep_json(sw);
      std::string text = j.dump();
      auto it = last_sweeps_.find(sw.id);
      if (it == last_sweeps_.end() || it->second != text) sweeps.push_back(std::move(j));
      now_sweeps[sw.id] = std::move(text);
    }
    json running = json::array(), finished = json::array();
    for (const auto& [id, sweep] : snap->running) running.push_back({{"id", id}, {"sweep_id", sweep}});
    for (const auto& [id, sweep] : last_running_)
      if (!snap->running.count(id) && finished.size() < kMaxTrialsPerEvent)
        finished.push_back({{"id", id}, {"sweep_id", sweep}});
    bool changed = !sweeps.empty() || !running.empty() || !finished.empty() ||
                   snap->max_trial_id != last_max_trial_id_ || now_sweeps.size() != last_sweeps_.size();
    last_sweeps_ = std::move(now_sweeps);
    last_running_ = snap->running;
    last_max_trial_id_ = snap->max_trial_id;
    if (!changed) continue;
    publish(dump_json(json{{"sweeps", sweeps},
                           {"running", running},
                           {"finished", finished},
                           {"max_trial_id", snap->max_trial_id}}));
  }
}

void LiveFeed::publish(std::string event) {
  {
    MutexLock lock(mu_);
    ++seq_;
    // Prepend the sequence number to the object: {"seq":N,...}.
    event = "{\"seq\":" + std::to_string(seq_) + "," + event.substr(1);
    events_.emplace_back(seq_, std::move(event));
    while (events_.size() > kKeptEvents) events_.pop_front();
  }
  cv_.notify_all();
}

}  // namespace swept::web
