#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <string>

namespace swept::log {
namespace {
std::string g_program = "swept";
std::atomic<int> g_level{static_cast<int>(Level::kInfo)};

const char* level_name(Level l) {
  switch (l) {
    case Level::kDebug: return "DEBUG";
    case Level::kInfo: return "INFO";
    case Level::kWarn: return "WARN";
    case Level::kError: return "ERROR";
  }
  return "?";
}
}  // namespace

void set_program(std::string_view name) { g_program = std::string(name); }
void set_level(Level l) { g_level.store(static_cast<int>(l)); }
Level level() { return static_cast<Level>(g_level.load()); }

void write(Level l, std::string_view message) {
  if (static_cast<int>(l) < g_level.load()) return;
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  std::string line;
  line.reserve(message.size() + 64);
  line.append(g_program).append(" ").append(stamp).append(" ").append(level_name(l)).append(" ");
  line.append(message).append("\n");
  // One write per line keeps lines from different threads whole.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void Throttle::flush(int64_t now_ms) {
  if (suppressed_ == 0 || now_ms - window_start_ms_ < window_ms_) return;
  log::write(level_, std::to_string(suppressed_) + " more like this in the last " +
                         std::to_string((now_ms - window_start_ms_ + 999) / 1000) + " s, not shown (the last: " +
                         last_suppressed_ + ")");
  suppressed_ = 0;
  last_suppressed_.clear();
}

void Throttle::write(int64_t now_ms, std::string_view message) {
  if (window_start_ms_ == INT64_MIN || now_ms - window_start_ms_ >= window_ms_) {
    flush(now_ms);
    window_start_ms_ = now_ms;
    written_ = 0;
  }
  if (written_ < burst_) {
    ++written_;
    log::write(level_, message);
    return;
  }
  ++suppressed_;
  last_suppressed_.assign(message.substr(0, 300));
}

}  // namespace swept::log
