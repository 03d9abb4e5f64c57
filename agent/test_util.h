// Helpers shared by the agent's tests: a scripted launcher, temporary
// directories, and blocking on descriptors inside the conditions that
// swept::testing::eventually polls (never a fixed sleep). Test-only; not in
// the library.
#pragma once

#include <poll.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <optional>
#include <string>
#include <vector>

#include "agent/launcher.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/testing/temp_dir.h"

namespace swept::agent::testing {

// A Launcher for tests (AgentOptions::launcher): records every LaunchSpec
// and either fails the launch with a scripted Status (a system failure the
// real launcher can meet, fork's EAGAIN say) or hands it to the real one.
// Thread-safe: the agent launches from its own thread.
class FakeLauncher final : public Launcher {
 public:
  void fail_next_with(Status s) {
    MutexLock lock(mu_);
    fail_with_ = std::move(s);
  }
  std::vector<LaunchSpec> launched() const {
    MutexLock lock(mu_);
    return launched_;
  }
  Result<SpawnedChild> launch(const LaunchSpec& spec) override {
    {
      MutexLock lock(mu_);
      launched_.push_back(spec);
      if (fail_with_) {
        Status s = std::move(*fail_with_);
        fail_with_.reset();
        return s;
      }
    }
    return real_.launch(spec);
  }

 private:
  mutable Mutex mu_;
  std::optional<Status> fail_with_ SWEPT_GUARDED_BY(mu_);
  std::vector<LaunchSpec> launched_ SWEPT_GUARDED_BY(mu_);
  PosixLauncher real_;
};

// The tests' one temporary directory (common/testing/temp_dir.h).
using TempDir = ::swept::testing::TempDir;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// For swept::testing::eventually (common/testing/eventually.h) when its
// condition pumps events itself, blocking on them (poll_readable, a socket):
// then eventually() need not pause between tries.
inline constexpr std::chrono::milliseconds kNoPause{0};

// Waits for any of `fds` to be readable, at most wait_ms.
inline void poll_readable(const std::vector<int>& fds, int wait_ms) {
  std::vector<pollfd> items;
  for (int fd : fds) items.push_back(pollfd{fd, POLLIN, 0});
  ::poll(items.data(), items.size(), wait_ms);
}

}  // namespace swept::agent::testing
