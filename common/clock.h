// Clock: time behind an interface, so that heartbeats, timeouts and liveness
// can be tested by advancing a FakeClock instead of sleeping.
// SteadyClock is thread-safe; FakeClock is safe to share once set up (atomic).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace swept {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic milliseconds since an arbitrary origin: for timeouts and intervals.
  virtual int64_t now_ms() const = 0;
  // The same clock in microseconds, for windows shorter than a millisecond
  // can measure (the broker's gather window, its turn budget).
  virtual int64_t now_us() const = 0;
  // Seconds since the Unix epoch: for timestamps stored in the database.
  virtual double wall_seconds() const = 0;
};

class SteadyClock final : public Clock {
 public:
  int64_t now_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t now_us() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  double wall_seconds() const override {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  static SteadyClock& instance() {
    static SteadyClock clock;
    return clock;
  }
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'000'000) : ms_(start_ms) {}
  int64_t now_ms() const override { return ms_.load(); }
  int64_t now_us() const override { return ms_.load() * 1000; }
  double wall_seconds() const override { return 1.7e9 + static_cast<double>(ms_.load()) / 1000.0; }
  void advance_ms(int64_t d) { ms_ += d; }

 private:
  std::atomic<int64_t> ms_;
};

}  // namespace swept
