// The metric-line parser (docs/metrics.md).
//
// JSON has no NaN or infinity, but the programs that print metric lines do:
// Python's print of a float writes `nan`, `inf` and `-inf`, its json.dumps
// writes `NaN`, `Infinity` and `-Infinity`, and C's printf writes `-nan`. A
// loss that became one of those is the clearest sign that a trial diverged,
// so the parser must not turn such a line into log output (which would hide
// the divergence and leave the trial ranked by its last finite value).
// Before the JSON parser sees the line, `mark_non_finite` replaces each such
// token that stands where a value may (outside strings) by `null`, and notes
// the name of the member of the top-level object it was the value of. Those
// members then make the record `diverged`.
#include "common/metrics_line.h"

#include <array>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

namespace swept {

namespace {

// The spellings of non-finite numbers accepted as values, longest first
// where one is a prefix of another.
constexpr std::array<std::string_view, 8> kNonFiniteTokens = {"-Infinity", "Infinity", "-inf", "inf",
                                                              "-nan",      "-NaN",     "NaN",  "nan"};

// Whether position `i` of `text` ends a bare token: the end, or a character
// that may follow a JSON value.
bool token_ends_at(std::string_view text, size_t i) {
  return i == text.size() || text[i] == ',' || text[i] == '}' || text[i] == ']' ||
         std::isspace(static_cast<unsigned char>(text[i]));
}

struct Marked {
  std::string json;                    // the line with each non-finite token as `null`
  std::vector<std::string> raw_names;  // the top-level members whose values those were (JSON-quoted, raw)
};

// Rewrites non-finite tokens outside strings to `null`. Does not validate:
// the JSON parser that runs next rejects whatever is not JSON.
Marked mark_non_finite(std::string_view line) {
  Marked out;
  out.json.reserve(line.size());
  int depth = 0;
  bool in_string = false;
  size_t string_start = 0;
  std::string last_string;  // the raw text (quotes included) of the last string closed
  std::string key;          // the member name the next top-level value belongs to
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out.json += c;
      if (c == '\\' && i + 1 < line.size()) {
        out.json += line[++i];
      } else if (c == '"') {
        in_string = false;
        last_string.assign(line.substr(string_start, i + 1 - string_start));
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      string_start = i;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == ':' && depth == 1) {
      key = last_string;
    } else if (c == 'N' || c == 'n' || c == 'I' || c == 'i' || c == '-') {
      bool replaced = false;
      for (std::string_view token : kNonFiniteTokens) {
        if (line.substr(i, token.size()) == token && token_ends_at(line, i + token.size())) {
          out.json += "null";
          if (depth == 1 && !key.empty()) out.raw_names.push_back(key);
          i += token.size() - 1;
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
    }
    out.json += c;
  }
  return out;
}

}  // namespace

std::optional<MetricsRecord> parse_metrics_line(std::string_view line) {
  if (line.size() > kMaxMetricLineBytes) return std::nullopt;
  size_t b = line.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos || line[b] != '{') return std::nullopt;
  Marked marked = mark_non_finite(line);
  nlohmann::json j = nlohmann::json::parse(marked.json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;

  MetricsRecord rec;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "step") {
      if (v.is_number_unsigned()) {
        rec.step = static_cast<int64_t>(v.get<uint64_t>());
      } else if (v.is_number_integer() && v.get<int64_t>() >= 0) {
        rec.step = v.get<int64_t>();
      } else if (v.is_number_float() && v.get<double>() >= 0 &&
                 v.get<double>() == std::floor(v.get<double>()) && v.get<double>() < 9e15) {
        rec.step = static_cast<int64_t>(v.get<double>());
      } else {
        return std::nullopt;
      }
      continue;
    }
    if (key == "final") {
      rec.final = v.is_boolean() && v.get<bool>();
      continue;
    }
    if (key == "diverged") {
      rec.diverged = v.is_boolean() && v.get<bool>();
      continue;
    }
    if (!v.is_number() || key.empty()) continue;
    double d = v.get<double>();
    if (!std::isfinite(d)) continue;
    rec.values.emplace_back(key, d);
  }
  // The members written as NaN or infinity (a name given twice counts once;
  // the JSON parser keeps a repeated member's last value, so a member whose
  // last value was finite after all is not one of them).
  for (const std::string& raw : marked.raw_names) {
    nlohmann::json name = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
    if (!name.is_string()) continue;
    const std::string& n = name.get_ref<const std::string&>();
    if (n.empty() || n == "step" || n == "final" || n == "diverged") continue;
    auto found = j.find(n);
    if (found == j.end() || !found->is_null()) continue;
    bool seen = false;
    for (const auto& known : rec.non_finite) seen = seen || known == n;
    if (!seen) rec.non_finite.push_back(n);
  }
  if (!rec.non_finite.empty()) rec.diverged = true;
  return rec;
}

}  // namespace swept
