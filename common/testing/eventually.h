// The tests' one way to wait (target swept_test_support, test code only):
// a condition polled until it holds or a deadline passes. Tests wait on an
// event, never for a fixed time; the deadline only bounds a test that would
// otherwise hang, so it is generous and never a timing threshold.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace swept::testing {

// Polls `cond` every `every` until it holds or `seconds` pass. Returns
// whether it held (checked once more at the deadline).
inline bool eventually(const std::function<bool()>& cond, double seconds = 30,
                       std::chrono::milliseconds every = std::chrono::milliseconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(every);
  }
  return cond();
}

}  // namespace swept::testing
