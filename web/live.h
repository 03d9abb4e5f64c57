// LiveFeed: the source of the dashboard's Server-Sent Events.
//
// One thread polls the store every `poll_interval_ms` with PRAGMA data_version
// (which changes when the scheduler commits); when it changed, it takes a
// LiveSnapshot (sweep summaries, running trials, max trial id) and publishes a
// small delta event: the sweeps whose summary changed, the trials running now
// and those that stopped running since the last poll. Clients refetch only
// what they show and what the event names.
//
// Memory stays bounded however long pages stay open: the feed keeps the last
// `kKeptEvents` events; a subscriber that fell further behind gets a single
// {"resync": true} event and refetches its page.
//
// Thread safety: every public method is thread-safe. Readers block in
// wait_events() with a deadline; stop() wakes them all.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace swept::web {

class LiveFeed {
 public:
  static constexpr size_t kKeptEvents = 64;
  static constexpr size_t kMaxTrialsPerEvent = 500;

  LiveFeed(std::string db_path, int poll_interval_ms);
  ~LiveFeed();  // stops
  void start();
  void stop();

  // The sequence number of the newest event (0: none yet).
  uint64_t latest() const;
  // Events with sequence numbers after `*cursor` (JSON text, each with a
  // "seq" field), waiting up to `timeout_ms` for one; advances `*cursor`.
  // Returns an empty vector on timeout or when stopping.
  std::vector<std::string> wait_events(uint64_t* cursor, int timeout_ms);
  bool stopping() const;

 private:
  friend struct LiveFeedTestPeer;  // live_test.cpp publishes events directly
  void run();
  // Appends an event (a JSON object's text) with the next sequence number,
  // dropping the oldest beyond kKeptEvents, and wakes the readers.
  void publish(std::string event);

  const std::string db_path_;
  const int poll_interval_ms_;
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  bool stop_ SWEPT_GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::deque<std::pair<uint64_t, std::string>> events_ SWEPT_GUARDED_BY(mu_);
  uint64_t seq_ SWEPT_GUARDED_BY(mu_) = 0;
  // Poller state (owned by the poller thread).
  int64_t last_version_ = -1;
  std::map<int64_t, std::string> last_sweeps_;  // sweep id -> its summary JSON
  std::map<int64_t, int64_t> last_running_;     // trial id -> sweep id
  int64_t last_max_trial_id_ = 0;
};

}  // namespace swept::web
