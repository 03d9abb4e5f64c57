// Human-readable logging to stderr: "swept-agent 2026-11-21T22:01:02Z INFO msg".
// Machine-readable output (metric lines, JSON) never goes through here.
// Thread-safe: each line is written with one write(2).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace swept::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Process-wide settings; set once at start-up, before threads start.
void set_program(std::string_view name);
void set_level(Level level);
Level level();

void write(Level level, std::string_view message);
inline void debug(std::string_view m) { write(Level::kDebug, m); }
inline void info(std::string_view m) { write(Level::kInfo, m); }
inline void warn(std::string_view m) { write(Level::kWarn, m); }
inline void error(std::string_view m) { write(Level::kError, m); }

// A log line that a peer can trigger at will (one per bad message) is
// throttled: at most `burst` lines per `window_ms`; the rest are counted,
// and the count is written once the window is over ("... 9,990 more like
// this in the last 10 s, not shown"), by the next line or by flush().
// Times come from the caller's clock (tests use a fake one).
// Thread safety: one owner (the broker's loop).
class Throttle {
 public:
  Throttle(Level level, int burst, int64_t window_ms) : level_(level), burst_(burst), window_ms_(window_ms) {}
  void write(int64_t now_ms, std::string_view message);
  // Writes the suppressed count of a window that is over; call it now and then.
  void flush(int64_t now_ms);
  int64_t suppressed() const { return suppressed_; }

 private:
  Level level_;
  int burst_;
  int64_t window_ms_;
  int64_t window_start_ms_ = INT64_MIN;
  int written_ = 0;
  int64_t suppressed_ = 0;
  std::string last_suppressed_;
};

}  // namespace swept::log
