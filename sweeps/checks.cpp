// The generic checks of checks.h: messages, paths, text gates, the Checker.
#include "sweeps/checks.h"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace swept::sweeps {

using json = nlohmann::json;

const char* const kNotFinite = "expected a finite number, found a number beyond the range of a double";

std::string not_finite_message(const std::string& spelling) {
  return "expected a finite number, found " + spelling + ", a number beyond the range of a double (about 1.8e308)";
}

std::string integer_range_message(const std::string& spelling) {
  const bool negative = !spelling.empty() && spelling[0] == '-';
  return "expected an integer from -9223372036854775808 to 18446744073709551615, found " + spelling +
         ", an integer too " + (negative ? "small" : "large") + " for 64 bits; add '.0' if a float is meant";
}

std::string found(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return v.empty() ? "an empty object" : "an object";
    case json::value_t::array: return v.empty() ? "an empty array" : "an array of " + std::to_string(v.size()) + " items";
    case json::value_t::null: return "null";
    case json::value_t::number_float:
      if (!std::isfinite(v.get<double>())) return "a number beyond the range of a double";
      [[fallthrough]];
    default: {
      std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
      if (s.size() > 60) s = s.substr(0, 57) + "...";
      return s;
    }
  }
}

namespace {
bool plain_name_chars(const std::string& name) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.')) return false;
  }
  return true;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string path_name(const std::string& name) {
  if (plain_name_chars(name)) return name;
  std::string q = json(name).dump(-1, ' ', true, json::error_handler_t::replace);
  if (q.size() > 40) q = q.substr(0, 37) + "...\"";
  return q;
}

std::string join(const std::string& path, const std::string& name) {
  return path.empty() ? path_name(name) : path + "." + path_name(name);
}
std::string index_path(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

std::string list_of(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

std::string nearest_key(const std::string& key, const std::vector<std::string>& allowed) {
  std::string best;
  size_t best_distance = 3;
  if (key.size() < 64) {
    for (const auto& k : allowed) {
      const size_t d = edit_distance(key, k);
      if (d < best_distance) best_distance = d, best = k;
    }
  }
  return best;
}

std::string unknown_key_message(const std::string& key, const std::vector<std::string>& allowed) {
  const std::string best = nearest_key(key, allowed);
  std::string m = "unknown key";
  if (!best.empty()) m += " (did you mean '" + best + "'?)";
  return m + "; expected one of: " + list_of(allowed);
}

namespace {

// The value of a decimal spelling (checks.h's decimal_number), or nullopt when
// `text` is not one; an infinity when beyond a double.
std::optional<json> decimal_value(std::string_view text) {
  size_t i = 0;
  const size_t n = text.size();
  bool negative = false;
  if (i < n && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  const size_t start = i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++int_digits;
  bool dot = false, exponent = false;
  if (i < n && text[i] == '.') {
    dot = true;
    ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return std::nullopt;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    exponent = true;
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return std::nullopt;
  }
  if (i != n) return std::nullopt;
  const std::string body(text.substr(start));
  if (!dot && !exponent) {
    int64_t value = 0;
    const auto r = std::from_chars(body.data(), body.data() + body.size(), value);
    if (r.ec == std::errc() && r.ptr == body.data() + body.size()) return json(negative ? -value : value);
  }
  double d = 0;
  const auto r = std::from_chars(body.data(), body.data() + body.size(), d);
  if (r.ec == std::errc::result_out_of_range) {
    // from_chars leaves `d` alone out of range; strtod (the "C" locale's '.':
    // swept never calls setlocale) says which side, as nlohmann's reader does:
    // HUGE_VAL beyond a double, 0 or a subnormal below its smallest.
    d = std::strtod(body.c_str(), nullptr);
  } else if (r.ec != std::errc() || r.ptr != body.data() + body.size()) {
    return std::nullopt;
  }
  return json(negative ? -d : d);
}

}  // namespace

std::optional<json> decimal_number(std::string_view text) {
  auto v = decimal_value(text);
  if (v && v->is_number_float() && !std::isfinite(v->get<double>())) return std::nullopt;
  return v;
}

bool decimal_beyond_double(std::string_view text) {
  const auto v = decimal_value(text);
  return v && v->is_number_float() && !std::isfinite(v->get<double>());
}

LineColumn line_column(std::string_view text, size_t offset) {
  LineColumn lc;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++lc.line;
      lc.column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++lc.column;  // count characters, not continuation bytes
    }
  }
  return lc;
}

size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int length;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) length = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) length = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) length = 4, cp = c & 0x07;
    else return i;
    if (i + length > s.size()) return i;
    for (int k = 1; k < length; ++k) {
      const unsigned char cc = s[i + k];
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((length == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (length == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

size_t first_too_deep_json(std::string_view s, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

// ---- the Checker -------------------------------------------------------------

void Checker::add(const std::string& path, std::string message) {
  for (const Problem& p : problems) {
    if (p.path == path && p.message == message) return;  // found twice (syntax gate and key check)
  }
  if (problems.size() >= kMaxProblems) {
    ++dropped;
    return;
  }
  problems.push_back({path, std::move(message)});
}

void Checker::warn(const std::string& path, std::string message) {
  for (const Problem& p : warnings) {
    if (p.path == path && p.message == message) return;
  }
  if (warnings.size() < kMaxProblems) warnings.push_back({path, std::move(message)});
}

void Checker::note(const std::string& path, std::string spelling, std::string value, std::string rule) {
  if (readings.size() < 10 * kMaxProblems) readings.push_back({path, 0, 0, std::move(spelling), std::move(value), std::move(rule)});
}

std::optional<json> Checker::numeric(const json& v, const std::string& path) {
  if (v.is_number()) return v;
  if (!v.is_string()) return std::nullopt;
  const std::string& text = v.get_ref<const std::string&>();
  auto number = decimal_number(text);
  if (!number) return std::nullopt;
  warn(path, "expected a number, found the string " + found(v) + "; read as " + number->dump() +
                 " (W&B's server reads it so; write it without quotes)");
  note(path, found(v), number->dump(), "a quoted decimal number in a numeric position is that number");
  return number;
}

std::optional<double> Checker::number(const json& raw, const std::string& path) {
  const auto v = numeric(raw, path);
  if (!v) {
    add(path, "expected a number, found " + found(raw));
    return std::nullopt;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d)) {
    add(path, kNotFinite);
    return std::nullopt;
  }
  return d;
}

std::optional<int64_t> Checker::integer(const json& raw, const std::string& path, int64_t lo, int64_t hi,
                                        const std::string& what) {
  const std::string expected = "expected " + what;
  std::optional<json> v;
  if (raw.is_string()) {
    auto number = decimal_number(raw.get<std::string>());
    if (number && number->is_number_integer()) v = numeric(raw, path);
  } else {
    v = raw;
  }
  if (!v || !v->is_number_integer()) {
    add(path, expected + ", found " + found(raw));
    return std::nullopt;
  }
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    add(path, expected + ", found " + found(raw) + " (too large)");
    return std::nullopt;
  }
  const int64_t i = v->get<int64_t>();
  if (i < lo || i > hi) {
    add(path, expected + ", found " + found(raw));
    return std::nullopt;
  }
  return i;
}

std::optional<std::string> Checker::string(const json& v, const std::string& path, bool non_empty) {
  if (!v.is_string()) {
    add(path, std::string("expected a ") + (non_empty ? "non-empty " : "") + "string, found " + found(v));
    return std::nullopt;
  }
  if (non_empty && v.get_ref<const std::string&>().empty()) {
    add(path, "expected a non-empty string, found \"\"");
    return std::nullopt;
  }
  return v.get<std::string>();
}

std::optional<std::string> Checker::choice(const json& v, const std::string& path, const std::vector<std::string>& choices) {
  if (!v.is_string() || std::find(choices.begin(), choices.end(), v.get<std::string>()) == choices.end()) {
    std::string quoted;
    for (size_t i = 0; i < choices.size(); ++i) {
      quoted += (i ? (i + 1 == choices.size() ? " or " : ", ") : "") + ("\"" + choices[i] + "\"");
    }
    add(path, "expected " + quoted + ", found " + found(v));
    return std::nullopt;
  }
  return v.get<std::string>();
}

void Checker::only_keys(const json& object, const std::string& path, const std::vector<std::string>& allowed) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
      add(join(path, it.key()), unknown_key_message(it.key(), allowed));
    }
  }
}

std::optional<int64_t> parse_memory_bytes(const json& v) {
  constexpr int64_t kMin = int64_t{1} << 20, kMax = int64_t{1} << 50;
  auto in_range = [&](double bytes) -> std::optional<int64_t> {
    if (!(bytes >= double(kMin) && bytes <= double(kMax))) return std::nullopt;
    return static_cast<int64_t>(bytes);
  };
  if (v.is_number()) {  // bytes; a float only when whole (YAML reads 1e9 as one)
    const double bytes = v.get<double>();
    return bytes == std::floor(bytes) ? in_range(bytes) : std::nullopt;
  }
  if (!v.is_string()) return std::nullopt;
  const std::string text = v.get<std::string>();
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) ++digits;
  if (digits == 0 || digits > 24 || std::count(text.begin(), text.begin() + digits, '.') > 1 || text[0] == '.') {
    return std::nullopt;
  }
  size_t unit_at = digits;
  while (unit_at < text.size() && text[unit_at] == ' ') ++unit_at;
  const std::string unit = text.substr(unit_at);
  // Decimal units as the SI says, binary ones as the IEC does: "8GB" and
  // "8GiB" differ by 7 %, which a limit near a job's peak must not blur.
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},          {"B", 1},         {"kB", 1e3},      {"KB", 1e3},         {"MB", 1e6},
      {"GB", 1e9},      {"TB", 1e12},     {"KiB", 1024.0},  {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) return in_range(std::strtod(text.substr(0, digits).c_str(), nullptr) * scale);
  }
  return std::nullopt;
}

}  // namespace swept::sweeps
