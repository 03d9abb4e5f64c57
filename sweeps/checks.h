// Generic checks on a parsed document, shared by every part of the sweep
// parser: how values and paths are written in messages, the text gates
// (UTF-8, nesting), the nearest known key, and the Checker that collects
// problems and warnings with their paths. Internal to sweeps/; nothing here
// knows what a sweep file means (parse.cpp and parameters.cpp do).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweeps/sweep.h"

namespace swept::sweeps {

extern const char* const kNotFinite;

// The two readers' messages for a number literal no JSON value holds, the
// same for JSON and YAML: `spelling` beyond a double (1e400), and an integer
// spelling beyond the 64-bit integers (99999999999999999999, and in YAML
// 0x1_0000_0000_0000_0000), which says the integer is too large or small.
std::string not_finite_message(const std::string& spelling);
std::string integer_range_message(const std::string& spelling);

// A short, printable rendering of what was found ("\"abc\"", "0.0", "an object").
std::string found(const nlohmann::json& v);

// A name as it appears in a path: as is when plain, else JSON-quoted so that
// control characters and spaces cannot garble the output line.
std::string path_name(const std::string& name);
std::string join(const std::string& path, const std::string& name);
std::string index_path(const std::string& path, size_t i);

std::string list_of(const std::vector<std::string>& names);
// The allowed key within edit distance 2 of `key`, or "".
std::string nearest_key(const std::string& key, const std::vector<std::string>& allowed);
// "unknown key (did you mean 'x'?); expected one of: a, b, c"
std::string unknown_key_message(const std::string& key, const std::vector<std::string>& allowed);

// A decimal number in any spelling a person writes one: 1e-5, 3E6, .5, +2,
// -0.25, 10 (no hex, no underscores, no inf/nan). An integer spelling (no '.'
// and no exponent) that fits int64 gives a JSON integer, anything else a
// float; nullopt when `text` is not such a number or is beyond a double.
// Below a double's smallest (1e-400) it is 0 or a subnormal, as in JSON.
std::optional<nlohmann::json> decimal_number(std::string_view text);
// Whether `text` is spelt as decimal_number reads but is beyond a double (1e400).
bool decimal_beyond_double(std::string_view text);

// resources.memory: a plain integer of bytes, or a decimal number with a
// unit ("8GiB", "1.5 GB", "512MB"; B, kB/KB, MB, GB, TB as powers of 1000,
// KiB, MiB, GiB, TiB as powers of 1024), from 1 MiB to 1 PiB. nullopt for
// anything else (the caller names the field).
std::optional<int64_t> parse_memory_bytes(const nlohmann::json& v);

// 1-based line and column (in characters) of a byte offset.
struct LineColumn {
  size_t line = 1, column = 1;
};
LineColumn line_column(std::string_view text, size_t offset);

// Offset of the first byte that breaks UTF-8 (overlong forms, surrogates and
// code points above U+10FFFF included), or npos.
size_t first_invalid_utf8(std::string_view s);

// Offset of the JSON bracket that first exceeds `limit` levels, or npos.
size_t first_too_deep_json(std::string_view s, int limit);

// Collects problems (errors) and warnings, each with its path, and the
// readings --explain shows. Typed getters record a problem and return
// nullopt when a value is not what the format says.
class Checker {
 public:
  std::vector<Problem> problems;
  std::vector<Problem> warnings;
  std::vector<Reading> readings;
  size_t dropped = 0;

  void add(const std::string& path, std::string message);
  void warn(const std::string& path, std::string message);
  void note(const std::string& path, std::string spelling, std::string value, std::string rule);
  size_t count() const { return problems.size() + dropped; }

  // A number; a string holding a decimal number is read as that number, with
  // a warning (W&B's server reads it so; its schema does not).
  std::optional<double> number(const nlohmann::json& v, const std::string& path);
  // An integer in [lo, hi]; a string holding one is read as it, with a warning.
  std::optional<int64_t> integer(const nlohmann::json& v, const std::string& path, int64_t lo, int64_t hi,
                                 const std::string& what);
  std::optional<std::string> string(const nlohmann::json& v, const std::string& path, bool non_empty);
  std::optional<std::string> choice(const nlohmann::json& v, const std::string& path,
                                    const std::vector<std::string>& choices);
  void only_keys(const nlohmann::json& object, const std::string& path, const std::vector<std::string>& allowed);

  // `v` itself when it is a number, else the number a decimal string holds
  // (with the warning and the reading), else nullopt. No problem recorded.
  std::optional<nlohmann::json> numeric(const nlohmann::json& v, const std::string& path);
};

}  // namespace swept::sweeps

namespace swept::sweeps {
// Python's str() of a value (command.cpp): how W&B's agent turns a non-string
// command item or a parameter value into text ("True", "None", "1e-05").
std::string python_text(const nlohmann::json& v);
}  // namespace swept::sweeps

namespace swept::sweeps {
// resources.ps (0 to 64) and resources.ps_nodes (a boolean, only with ps >= 1;
// nodes + ps within 1024 agents) from `resources` into spec.resources,
// problems into `ck` (resources_parse.cpp). Runs after nodes is read.
void parse_parameter_servers(Checker& ck, const nlohmann::json& resources, SweepSpec& spec);
}  // namespace swept::sweeps
