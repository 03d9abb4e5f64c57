// Backoff: the reconnect delays of docs/protocol.md ("Reconnecting"): the
// first delay, then twice the previous one, up to a maximum; back to the
// first after a success. Pure arithmetic, so it is tested without a clock.
// Thread safety: a value; one owner.
#pragma once

#include <algorithm>
#include <cstdint>

namespace swept::agent {

class Backoff {
 public:
  // Precondition: 0 < initial_ms <= max_ms.
  Backoff(int64_t initial_ms, int64_t max_ms) : initial_ms_(initial_ms), max_ms_(max_ms), next_ms_(initial_ms) {}

  // The delay before the next try; each call doubles the one after (capped).
  int64_t next_delay_ms() {
    int64_t delay = next_ms_;
    next_ms_ = std::min(next_ms_ * 2, max_ms_);
    return delay;
  }
  // After a success: the next delay is the first again.
  void reset() { next_ms_ = initial_ms_; }

 private:
  int64_t initial_ms_;
  int64_t max_ms_;
  int64_t next_ms_;
};

}  // namespace swept::agent
