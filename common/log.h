// Human-readable logging to stderr: "swept-agent 2026-11-21T22:01:02Z INFO msg".
// Machine-readable output (metric lines, JSON) never goes through here.
// Thread-safe: each line is written with one write(2).
#pragma once

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

}  // namespace swept::log
