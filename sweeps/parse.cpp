// parse_sweep: sweep file text -> SweepSpec, or every problem found.
//
// The text goes through four gates before any key is read: size (kMaxFileBytes),
// UTF-8, nesting depth (kMaxJsonDepth, so no recursive code below can blow the
// stack), and JSON syntax (nlohmann, with a callback that rejects duplicate
// keys). Then each key is checked against docs/sweep-format.md. Every problem
// is recorded with its path and the parser continues, so the user sees all of
// them at once. Nothing here throws past parse_sweep: nlohmann's exceptions are
// caught at the parse call, and every other access checks types first.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "sweeps/numeric.h"
#include "sweeps/space.h"
#include "sweeps/sweep.h"

namespace swept::sweeps {

using json = nlohmann::json;

std::string Problem::ToString() const { return path.empty() ? message : path + ": " + message; }

const char* distribution_name(Distribution d) {
  switch (d) {
    case Distribution::kConstant: return "constant";
    case Distribution::kCategorical: return "categorical";
    case Distribution::kCategoricalWithProbabilities: return "categorical_w_probabilities";
    case Distribution::kIntUniform: return "int_uniform";
    case Distribution::kUniform: return "uniform";
    case Distribution::kQUniform: return "q_uniform";
    case Distribution::kLogUniformValues: return "log_uniform_values";
    case Distribution::kInvLogUniformValues: return "inv_log_uniform_values";
    case Distribution::kQLogUniformValues: return "q_log_uniform_values";
    case Distribution::kNormal: return "normal";
    case Distribution::kQNormal: return "q_normal";
    case Distribution::kLogNormal: return "log_normal";
    case Distribution::kQLogNormal: return "q_log_normal";
    case Distribution::kBeta: return "beta";
    case Distribution::kQBeta: return "q_beta";
  }
  return "?";
}

namespace {

constexpr double kProbabilitySumTolerance = 1e-6;
// |Phi^-1(u)| for the u random search draws, (0.5 / 2^53 .. 1 - 0.5 / 2^53), is
// below 8.3; 9 standard deviations bound every normal-family draw.
constexpr double kNormalReach = 9.0;
// exp(709) is about the largest finite double.
constexpr double kMaxExpArgument = 709.0;
// Integer results must fit an int64 with room to spare.
constexpr double kMaxIntegerMagnitude = 9.0e18;

const std::vector<std::string> kTopLevelKeys = {
    "method", "metric", "parameters", "run_cap", "name", "description", "program", "command",
    "early_terminate", "resources", "max_parallel", "seed", "max_retries", "timeout_s", "order",
    "without_replacement", "trials", "apiVersion", "kind", "controller", "entity", "project"};

// ---- rendering values and paths for messages -------------------------------

// A short, printable rendering of what was found ("\"abc\"", "0.0", "an object").
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

bool plain_name_chars(const std::string& name) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.')) return false;
  }
  return true;
}

// A name as it appears in a path: as is when it is plain, else JSON-quoted so
// that control characters and spaces cannot garble the output line.
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

// W&B's rule for parameter names.
bool valid_parameter_name(const std::string& name) {
  if (name.empty()) return false;
  const unsigned char first = name[0];
  if (!(std::isalpha(first) || first == '_')) return false;
  for (unsigned char c : name) {
    if (!(std::isalnum(c) || c == '_' || c == '.' || c == '-') || c >= 0x80) return false;
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

std::string list_of(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

std::string unknown_key_message(const std::string& key, const std::vector<std::string>& allowed) {
  std::string best;
  size_t best_distance = 3;
  if (key.size() < 64) {
    for (const auto& k : allowed) {
      const size_t d = edit_distance(key, k);
      if (d < best_distance) best_distance = d, best = k;
    }
  }
  std::string m = "unknown key";
  if (!best.empty()) m += " (did you mean '" + best + "'?)";
  return m + "; expected one of: " + list_of(allowed);
}

// ---- the text gates ----------------------------------------------------------

struct LineColumn {
  size_t line = 1, column = 1;
};
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

// Offset of the first byte that breaks UTF-8 (overlong forms, surrogates and
// code points above U+10FFFF included), or npos.
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

// Offset of the bracket that first exceeds `limit` levels of nesting, or npos.
size_t first_too_deep(std::string_view s, int limit) {
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

// ---- the checker --------------------------------------------------------------

class Checker {
 public:
  std::vector<Problem> problems;
  size_t dropped = 0;

  void add(const std::string& path, std::string message) {
    if (problems.size() >= kMaxProblems) {
      ++dropped;
      return;
    }
    problems.push_back({path, std::move(message)});
  }

  // Typed getters: each records a problem and returns nullopt when the value
  // is not what the format says.
  std::optional<double> number(const json& v, const std::string& path) {
    if (!v.is_number()) {
      add(path, "expected a number, found " + found(v));
      return std::nullopt;
    }
    const double d = v.get<double>();
    if (!std::isfinite(d)) {
      add(path, "expected a finite number, found a number beyond the range of a double");
      return std::nullopt;
    }
    return d;
  }
  std::optional<int64_t> integer(const json& v, const std::string& path, int64_t lo, int64_t hi,
                                 const std::string& what) {
    const std::string expected = "expected " + what;
    if (!v.is_number_integer()) {
      add(path, expected + ", found " + found(v));
      return std::nullopt;
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      add(path, expected + ", found " + found(v) + " (too large)");
      return std::nullopt;
    }
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) {
      add(path, expected + ", found " + found(v));
      return std::nullopt;
    }
    return i;
  }
  std::optional<std::string> string(const json& v, const std::string& path, bool non_empty) {
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
  std::optional<std::string> choice(const json& v, const std::string& path, const std::vector<std::string>& choices) {
    if (!v.is_string() || std::find(choices.begin(), choices.end(), v.get<std::string>()) == choices.end()) {
      std::string quoted;
      for (size_t i = 0; i < choices.size(); ++i) quoted += (i ? (i + 1 == choices.size() ? " or " : ", ") : "") + ("\"" + choices[i] + "\"");
      add(path, "expected " + quoted + ", found " + found(v));
      return std::nullopt;
    }
    return v.get<std::string>();
  }
  void only_keys(const json& object, const std::string& path, const std::vector<std::string>& allowed) {
    for (auto it = object.begin(); it != object.end(); ++it) {
      if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
        add(join(path, it.key()), unknown_key_message(it.key(), allowed));
      }
    }
  }
};

struct DistributionInfo {
  Distribution distribution;
  std::vector<std::string> keys;  // allowed keys besides "distribution"
};

const std::map<std::string, DistributionInfo>& distributions() {
  static const std::map<std::string, DistributionInfo> m = {
      {"constant", {Distribution::kConstant, {"value"}}},
      {"categorical", {Distribution::kCategorical, {"values"}}},
      {"categorical_w_probabilities", {Distribution::kCategoricalWithProbabilities, {"values", "probabilities"}}},
      {"int_uniform", {Distribution::kIntUniform, {"min", "max"}}},
      {"uniform", {Distribution::kUniform, {"min", "max"}}},
      {"q_uniform", {Distribution::kQUniform, {"min", "max", "q"}}},
      {"log_uniform_values", {Distribution::kLogUniformValues, {"min", "max"}}},
      {"inv_log_uniform_values", {Distribution::kInvLogUniformValues, {"min", "max"}}},
      {"q_log_uniform_values", {Distribution::kQLogUniformValues, {"min", "max", "q"}}},
      {"normal", {Distribution::kNormal, {"mu", "sigma"}}},
      {"q_normal", {Distribution::kQNormal, {"mu", "sigma", "q"}}},
      {"log_normal", {Distribution::kLogNormal, {"mu", "sigma"}}},
      {"q_log_normal", {Distribution::kQLogNormal, {"mu", "sigma", "q"}}},
      {"beta", {Distribution::kBeta, {"a", "b"}}},
      {"q_beta", {Distribution::kQBeta, {"a", "b", "q"}}},
  };
  return m;
}

std::vector<std::string> distribution_names() {
  std::vector<std::string> names;
  for (const auto& [name, info] : distributions()) names.push_back(name);
  return names;
}

bool is_gridable(Distribution d) {
  return d == Distribution::kConstant || d == Distribution::kCategorical || d == Distribution::kIntUniform ||
         d == Distribution::kQUniform;
}

// Parses one parameter's settings into `leaf` (names/dotted already set).
// Returns false when problems were recorded.
bool parse_leaf(Checker& ck, const json& config, const std::string& path, Leaf& leaf) {
  const size_t problems_before = ck.problems.size() + ck.dropped;
  Distribution d;
  if (config.contains("distribution")) {
    const json& dv = config["distribution"];
    const std::string dpath = join(path, "distribution");
    if (!dv.is_string()) {
      ck.add(dpath, "expected a distribution name (" + list_of(distribution_names()) + "), found " + found(dv));
      return false;
    }
    const std::string name = dv.get<std::string>();
    auto it = distributions().find(name);
    if (it == distributions().end()) {
      if (name == "log_uniform" || name == "inv_log_uniform" || name == "q_log_uniform") {
        ck.add(dpath, "expected a distribution name, found \"" + name +
                          "\", W&B's deprecated form whose min and max are exponents; use \"" + name +
                          "_values\" with min and max as the values themselves");
      } else {
        ck.add(dpath, "expected a distribution name (" + list_of(distribution_names()) + "), found " + found(dv));
      }
      return false;
    }
    d = it->second.distribution;
  } else if (config.contains("value")) {
    d = Distribution::kConstant;
  } else if (config.contains("values") && config.contains("probabilities")) {
    d = Distribution::kCategoricalWithProbabilities;
  } else if (config.contains("values")) {
    d = Distribution::kCategorical;
  } else if (config.contains("min") && config.contains("max")) {
    // W&B's inference: two JSON integers make int_uniform, anything else uniform.
    d = (config["min"].is_number_integer() && config["max"].is_number_integer()) ? Distribution::kIntUniform
                                                                                 : Distribution::kUniform;
  } else if (config.contains("min") || config.contains("max")) {
    ck.add(path, std::string("expected both min and max, found only ") + (config.contains("min") ? "min" : "max"));
    return false;
  } else if (config.contains("mu") || config.contains("sigma") || config.contains("q") || config.contains("a") ||
             config.contains("b") || config.contains("probabilities")) {
    ck.add(path, "expected a \"distribution\" key: mu, sigma, q, a, b and probabilities only mean something with one "
                 "(e.g. normal, q_uniform, beta)");
    return false;
  } else {
    ck.add(path, "expected a parameter: one of value, values, min and max, distribution, or a nested parameters "
                 "block; found " + found(config));
    return false;
  }
  leaf.distribution = d;
  const std::string dname = distribution_name(d);
  std::vector<std::string> allowed = distributions().at(dname).keys;
  allowed.insert(allowed.begin(), "distribution");
  for (auto it = config.begin(); it != config.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
      ck.add(join(path, it.key()), "unknown key for distribution " + dname + "; expected one of: " + list_of(allowed));
    }
  }
  auto required = [&](const char* key) -> const json* {
    if (!config.contains(key)) {
      ck.add(path, std::string("expected key ") + key + " (distribution " + dname + "), found none");
      return nullptr;
    }
    return &config[key];
  };
  auto optional_number = [&](const char* key, double fallback) -> std::optional<double> {
    if (!config.contains(key)) return fallback;
    return ck.number(config[key], join(path, key));
  };

  switch (d) {
    case Distribution::kConstant:
      if (const json* v = required("value")) leaf.value = *v;
      break;
    case Distribution::kCategorical:
    case Distribution::kCategoricalWithProbabilities: {
      const json* v = required("values");
      if (!v) break;
      if (!v->is_array() || v->empty()) {
        ck.add(join(path, "values"), "expected a non-empty array of values, found " + found(*v));
        break;
      }
      for (const auto& item : *v) {
        leaf.values.push_back(item);
        bool seen = false;
        for (const auto& kept : leaf.grid_values) {
          if (kept == item) {
            seen = true;
            break;
          }
        }
        if (!seen) leaf.grid_values.push_back(item);
      }
      if (d == Distribution::kCategoricalWithProbabilities) {
        const json* p = required("probabilities");
        if (!p) break;
        const std::string ppath = join(path, "probabilities");
        if (!p->is_array()) {
          ck.add(ppath, "expected an array of probabilities, found " + found(*p));
          break;
        }
        if (p->size() != v->size()) {
          ck.add(ppath, "expected " + std::to_string(v->size()) + " probabilities (one per value), found " +
                            std::to_string(p->size()));
          break;
        }
        double sum = 0;
        bool ok = true;
        for (size_t i = 0; i < p->size(); ++i) {
          auto x = ck.number((*p)[i], index_path(ppath, i));
          if (!x) {
            ok = false;
            continue;
          }
          if (*x < 0) {
            ck.add(index_path(ppath, i), "expected a probability >= 0, found " + found((*p)[i]));
            ok = false;
            continue;
          }
          sum += *x;
          leaf.cumulative.push_back(sum);
        }
        if (ok && std::fabs(sum - 1.0) > kProbabilitySumTolerance) {
          std::ostringstream s;
          s.precision(17);
          s << sum;
          ck.add(ppath, "expected probabilities that sum to 1, found a sum of " + s.str());
        }
      }
      break;
    }
    case Distribution::kIntUniform: {
      const json* lo = required("min");
      const json* hi = required("max");
      if (!lo || !hi) break;
      const auto range = std::numeric_limits<int64_t>::max() / 2;
      auto a = ck.integer(*lo, join(path, "min"), -range, range, "an integer (int_uniform)");
      auto b = ck.integer(*hi, join(path, "max"), -range, range, "an integer (int_uniform)");
      if (!a || !b) break;
      if (*a >= *b) {
        ck.add(join(path, "max"), "expected max > min (" + std::to_string(*a) + "), found " + std::to_string(*b));
        break;
      }
      leaf.int_min = *a, leaf.int_max = *b;
      leaf.min = static_cast<double>(*a), leaf.max = static_cast<double>(*b);
      leaf.integer_output = true;
      break;
    }
    case Distribution::kUniform:
    case Distribution::kQUniform:
    case Distribution::kLogUniformValues:
    case Distribution::kInvLogUniformValues:
    case Distribution::kQLogUniformValues: {
      const json* lo = required("min");
      const json* hi = required("max");
      if (!lo || !hi) break;
      auto a = ck.number(*lo, join(path, "min"));
      auto b = ck.number(*hi, join(path, "max"));
      if (!a || !b) break;
      const bool logarithmic = d == Distribution::kLogUniformValues || d == Distribution::kInvLogUniformValues ||
                               d == Distribution::kQLogUniformValues;
      if (logarithmic && *a <= 0) {
        ck.add(join(path, "min"), "expected a number > 0 (" + dname + " takes logarithms), found " + found(*lo));
        break;
      }
      if (*a >= *b) {
        ck.add(join(path, "max"), "expected max > min (" + found(*lo) + "), found " + found(*hi));
        break;
      }
      if (!std::isfinite(*b - *a)) {
        ck.add(path, "expected max - min to be a finite number, found bounds too far apart for a double");
        break;
      }
      leaf.min = *a, leaf.max = *b;
      if (lo->is_number_integer() && hi->is_number_integer()) {
        leaf.int_min = lo->get<int64_t>(), leaf.int_max = hi->get<int64_t>();
      }
      break;
    }
    case Distribution::kNormal:
    case Distribution::kQNormal:
    case Distribution::kLogNormal:
    case Distribution::kQLogNormal: {
      auto mu = optional_number("mu", 0.0);
      auto sigma = optional_number("sigma", 1.0);
      if (!mu || !sigma) break;
      if (*sigma <= 0) {
        ck.add(join(path, "sigma"), "expected a standard deviation > 0, found " + found(config["sigma"]));
        break;
      }
      leaf.mu = *mu, leaf.sigma = *sigma;
      const double reach = *mu + kNormalReach * *sigma;
      if (!std::isfinite(reach) || !std::isfinite(*mu - kNormalReach * *sigma)) {
        ck.add(path, "expected mu and sigma whose draws stay finite (|mu| + 9 sigma below the largest double)");
      } else if ((d == Distribution::kLogNormal || d == Distribution::kQLogNormal) && reach > kMaxExpArgument) {
        ck.add(path, "expected mu + 9 sigma <= 709 so that exp() of a draw stays finite, found " + std::to_string(reach));
      }
      break;
    }
    case Distribution::kBeta:
    case Distribution::kQBeta: {
      auto a = optional_number("a", 1.0);
      auto b = optional_number("b", 1.0);
      if (a && *a <= 0) ck.add(join(path, "a"), "expected a shape parameter > 0, found " + found(config["a"]));
      if (b && *b <= 0) ck.add(join(path, "b"), "expected a shape parameter > 0, found " + found(config["b"]));
      if (!a || !b || *a <= 0 || *b <= 0) break;
      leaf.a = *a, leaf.b = *b;
      break;
    }
  }

  const bool quantized = d == Distribution::kQUniform || d == Distribution::kQLogUniformValues ||
                         d == Distribution::kQNormal || d == Distribution::kQLogNormal || d == Distribution::kQBeta;
  if (quantized) {
    bool q_integer = false;
    if (config.contains("q")) {
      const json& qv = config["q"];
      auto q = ck.number(qv, join(path, "q"));
      if (q && *q <= 0) ck.add(join(path, "q"), "expected a quantum q > 0, found " + found(qv));
      if (q && *q > 0) {
        leaf.q = *q;
        q_integer = qv.is_number_integer();
        if (q_integer) leaf.int_q = qv.get<int64_t>();
      }
    } else {
      leaf.q = 1.0;  // W&B's default is the float 1.0: results stay floats
    }
    // The largest magnitude a draw can reach, to check that value / q and an
    // integer result stay representable.
    double reach = 0;
    switch (d) {
      case Distribution::kQUniform:
      case Distribution::kQLogUniformValues: reach = std::max(std::fabs(leaf.min), std::fabs(leaf.max)); break;
      case Distribution::kQNormal: reach = std::fabs(leaf.mu) + kNormalReach * leaf.sigma; break;
      case Distribution::kQLogNormal: reach = std::exp(std::min(leaf.mu + kNormalReach * leaf.sigma, kMaxExpArgument)); break;
      default: reach = 1.0; break;
    }
    if (!std::isfinite(reach / leaf.q) || reach / leaf.q > 1e300) {
      ck.add(join(path, "q"), "expected q large enough that value / q stays finite, found " + found(config.value("q", json(1.0))));
    }
    // Integer results only where q and the bounds (if the distribution has
    // any) are JSON integers (docs/sweep-format.md).
    const bool has_bounds = d == Distribution::kQUniform || d == Distribution::kQLogUniformValues;
    const bool bounds_integer =
        !has_bounds || (config.contains("min") && config["min"].is_number_integer() && config.contains("max") &&
                        config["max"].is_number_integer());
    leaf.integer_output = q_integer && bounds_integer;
    if (leaf.integer_output && reach + leaf.q > kMaxIntegerMagnitude) {
      ck.add(path, "expected integer results within +-9e18, found a distribution that reaches beyond (use a float q)");
    }
  }
  return ck.problems.size() + ck.dropped == problems_before;
}

// Walks a `parameters` block; appends leaves in sorted, depth-first order.
void parse_block(Checker& ck, const json& block, const std::string& path, const std::vector<std::string>& prefix,
                 int depth, std::vector<Leaf>& leaves) {
  if (!block.is_object()) {
    ck.add(path, "expected an object of parameters ({\"name\": {...}}), found " + found(block));
    return;
  }
  if (block.empty()) {
    ck.add(path, "expected at least one parameter, found an empty object");
    return;
  }
  if (depth > kMaxParameterDepth) {
    ck.add(path, "expected at most " + std::to_string(kMaxParameterDepth) +
                     " levels of nested parameters blocks, found more; flatten the deepest ones");
    return;
  }
  for (auto it = block.begin(); it != block.end(); ++it) {  // nlohmann keeps keys sorted
    const std::string& name = it.key();
    const std::string here = join(path, name);
    if (!valid_parameter_name(name)) {
      ck.add(here, "expected a parameter name of letters, digits, '_', '.' or '-' that starts with a letter or '_', "
                   "found " + found(json(name)));
      continue;
    }
    const json& config = it.value();
    if (!config.is_object()) {
      ck.add(here, "expected an object describing the parameter (e.g. {\"values\": [1, 2]}), found " + found(config));
      continue;
    }
    std::vector<std::string> names = prefix;
    names.push_back(name);
    if (config.contains("parameters")) {
      for (auto k = config.begin(); k != config.end(); ++k) {
        if (k.key() != "parameters") {
          ck.add(join(here, k.key()), "unknown key beside a nested parameters block; a nested parameter holds only "
                                      "\"parameters\"");
        }
      }
      parse_block(ck, config["parameters"], join(here, "parameters"), names, depth + 1, leaves);
      continue;
    }
    Leaf leaf;
    leaf.names = names;
    for (size_t i = 0; i < names.size(); ++i) leaf.dotted += (i ? "." : "") + names[i];
    leaf.stream = numeric::fnv1a64(leaf.dotted);
    if (parse_leaf(ck, config, here, leaf)) leaves.push_back(std::move(leaf));
  }
}

// Checks the macros of one command element against what the sweep provides.
void check_command_element(Checker& ck, const std::string& element, const std::string& path, bool has_program) {
  static const std::set<std::string> kMacros = {"env", "interpreter", "program", "args", "args_no_hyphens",
                                                "args_no_boolean_flags", "args_json", "args_json_file",
                                                "args_append_hydra", "args_override_hydra"};
  if (element.size() > 3 && element.rfind("${", 0) == 0 && element.back() == '}' &&
      element.find("${", 2) == std::string::npos && element.rfind("${envvar:", 0) != 0) {
    const std::string name = element.substr(2, element.size() - 3);
    if (!kMacros.count(name)) {
      ck.add(path, "expected a known macro (${env}, ${interpreter}, ${program}, ${args}, ${args_no_hyphens}, "
                   "${args_no_boolean_flags}, ${args_json}, ${args_json_file}, ${envvar:NAME}), found " + found(json(element)));
    } else if (name == "program" && !has_program) {
      ck.add(path, "${program} needs the sweep's program key, which is not set");
    }
  }
  size_t at = 0;
  while ((at = element.find("${envvar:", at)) != std::string::npos) {
    const size_t close = element.find('}', at);
    const std::string name = close == std::string::npos ? "" : element.substr(at + 9, close - at - 9);
    bool valid = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
    for (unsigned char c : name) valid = valid && (std::isalnum(c) || c == '_');
    if (!valid) {
      ck.add(path, "expected ${envvar:NAME} with NAME of letters, digits and '_', found " + found(json(element)));
      break;
    }
    at = close + 1;
  }
}

// The grid product with overflow caught; nullopt (and a problem) past the limit.
std::optional<std::vector<int64_t>> grid_radix_checked(Checker& ck, const std::vector<Leaf>& leaves,
                                                       const std::string& why) {
  std::vector<int64_t> radix;
  double product = 1;  // exact below 2^53, and the limit is far below
  for (const Leaf& leaf : leaves) {
    double r;
    if (leaf.distribution == Distribution::kIntUniform) {
      r = static_cast<double>(leaf.int_max) - static_cast<double>(leaf.int_min) + 1.0;
    } else if (leaf.distribution == Distribution::kQUniform) {
      r = std::ceil((leaf.max - leaf.min) / leaf.q);
    } else if (leaf.distribution == Distribution::kConstant) {
      r = 1;
    } else {
      r = static_cast<double>(leaf.grid_values.size());
    }
    product *= r;
    radix.push_back(r > static_cast<double>(kMaxGridTrials) ? kMaxGridTrials + 1 : static_cast<int64_t>(r));
  }
  if (product > static_cast<double>(kMaxGridTrials)) {
    std::ostringstream s;
    s.precision(3);
    s << product;
    ck.add("parameters", "expected at most " + std::to_string(kMaxGridTrials) + " trials in the " + why +
                             ", found a product of " + s.str() + "; use fewer values or method random with run_cap");
    return std::nullopt;
  }
  return radix;
}

void parse_metric(Checker& ck, const json& m, SweepSpec& spec) {
  if (!m.is_object()) {
    ck.add("metric", "expected an object like {\"name\": \"val_loss\", \"goal\": \"minimize\"}, found " + found(m));
    return;
  }
  ck.only_keys(m, "metric", {"name", "goal", "target", "impute", "impute_while_running"});
  Metric metric;
  bool ok = true;
  if (!m.contains("name")) {
    ck.add("metric", "expected key name (the metric to optimize), found none");
    ok = false;
  } else if (auto n = ck.string(m["name"], "metric.name", true)) {
    metric.name = *n;
  } else {
    ok = false;
  }
  if (m.contains("goal")) {
    auto g = ck.choice(m["goal"], "metric.goal", {"minimize", "maximize"});
    if (g) metric.goal = *g == "maximize" ? Goal::kMaximize : Goal::kMinimize;
    else ok = false;
  }
  if (m.contains("target")) ok = ck.number(m["target"], "metric.target").has_value() && ok;
  if (m.contains("impute")) ok = ck.choice(m["impute"], "metric.impute", {"latest", "best", "worst"}).has_value() && ok;
  if (m.contains("impute_while_running")) {
    ok = ck.choice(m["impute_while_running"], "metric.impute_while_running", {"latest", "best", "worst", "false"})
             .has_value() && ok;
  }
  if (ok) spec.metric = metric;
}

void parse_early_terminate(Checker& ck, const json& e, SweepSpec& spec) {
  const std::string p = "early_terminate";
  if (!e.is_object()) {
    ck.add(p, "expected an object like {\"type\": \"hyperband\", \"min_iter\": 3}, found " + found(e));
    return;
  }
  ck.only_keys(e, p, {"type", "min_iter", "max_iter", "s", "eta", "strict"});
  json normalized = json::object();
  bool ok = true;
  if (!e.contains("type")) {
    ck.add(p, "expected key type (\"hyperband\"), found none");
    ok = false;
  } else if (ck.choice(e["type"], p + ".type", {"hyperband"})) {
    normalized["type"] = "hyperband";
  } else {
    ok = false;
  }
  const int64_t big = int64_t{1} << 40;
  if (e.contains("min_iter")) {
    if (auto v = ck.integer(e["min_iter"], p + ".min_iter", 1, big, "an integer >= 1")) normalized["min_iter"] = *v;
    else ok = false;
  }
  if (e.contains("max_iter")) {
    if (auto v = ck.integer(e["max_iter"], p + ".max_iter", 1, big, "an integer >= 1")) normalized["max_iter"] = *v;
    else ok = false;
  }
  if (e.contains("s")) {
    auto v = ck.number(e["s"], p + ".s");
    if (v && (*v < 0 || *v != std::floor(*v) || *v > 64)) {
      ck.add(p + ".s", "expected a whole number of brackets between 0 and 64, found " + found(e["s"]));
      ok = false;
    } else if (v) {
      normalized["s"] = e["s"];
    } else {
      ok = false;
    }
  }
  normalized["eta"] = 3;
  if (e.contains("eta")) {
    auto v = ck.number(e["eta"], p + ".eta");
    if (v && *v <= 1) {
      ck.add(p + ".eta", "expected a number > 1, found " + found(e["eta"]));
      ok = false;
    } else if (v) {
      normalized["eta"] = e["eta"];
    } else {
      ok = false;
    }
  }
  normalized["strict"] = true;
  if (e.contains("strict")) {
    if (e["strict"].is_boolean()) normalized["strict"] = e["strict"];
    else ck.add(p + ".strict", "expected true or false, found " + found(e["strict"])), ok = false;
  }
  if (!e.contains("min_iter") && !(e.contains("max_iter") && e.contains("s"))) {
    ck.add(p, "expected min_iter, or both max_iter and s (hyperband needs its brackets), found neither");
    ok = false;
  }
  if (ok) spec.early_terminate = normalized;
}

void parse_resources(Checker& ck, const json& r, SweepSpec& spec) {
  if (!r.is_object()) {
    ck.add("resources", "expected an object like {\"gpus\": 1, \"cpus\": 2}, found " + found(r));
    return;
  }
  ck.only_keys(r, "resources", {"gpus", "gpu_memory_fraction", "cpus"});
  if (r.contains("gpus")) {
    if (auto v = ck.integer(r["gpus"], "resources.gpus", 0, 1024, "a whole number of GPUs from 0 to 1024")) {
      spec.resources.gpus = static_cast<int>(*v);
    }
  }
  if (r.contains("gpu_memory_fraction")) {
    auto v = ck.number(r["gpu_memory_fraction"], "resources.gpu_memory_fraction");
    if (v && (*v <= 0 || *v > 1)) {
      ck.add("resources.gpu_memory_fraction", "expected a share of one GPU in (0, 1], found " + found(r["gpu_memory_fraction"]));
    } else if (v) {
      spec.resources.gpu_memory_fraction = *v;
    }
  }
  if (r.contains("cpus")) {
    if (auto v = ck.integer(r["cpus"], "resources.cpus", 1, 4096, "a whole number of CPUs from 1 to 4096")) {
      spec.resources.cpus = static_cast<int>(*v);
    }
  }
  if (spec.resources.gpus > 0 && spec.resources.gpu_memory_fraction > 0) {
    ck.add("resources", "expected either gpus (whole GPUs) or gpu_memory_fraction (a share of one GPU), found both");
  }
}

// Explicit trials: each an object of parameter values; constants from
// `parameters` are merged in. Returns the merged params.
std::vector<json> parse_trials(Checker& ck, const json& t, const std::vector<Leaf>& constants) {
  std::vector<json> trials;
  if (!t.is_array() || t.empty()) {
    ck.add("trials", "expected a non-empty array of trials ([{\"lr\": 0.1}, {\"lr\": 0.01}]), found " + found(t));
    return trials;
  }
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string here = index_path("trials", i);
    const json& trial = t[i];
    if (!trial.is_object()) {
      ck.add(here, "expected an object of parameter values, found " + found(trial));
      continue;
    }
    json params = json::object();
    bool ok = true;
    for (auto it = trial.begin(); it != trial.end(); ++it) {
      if (!valid_parameter_name(it.key())) {
        ck.add(join(here, it.key()), "expected a parameter name of letters, digits, '_', '.' or '-' that starts with a "
                                     "letter or '_', found " + found(json(it.key())));
        ok = false;
        continue;
      }
      params[it.key()] = it.value();
    }
    for (const Leaf& c : constants) {
      json* slot = &params;
      bool clash = false;
      for (size_t k = 0; k + 1 < c.names.size(); ++k) {
        json& next = (*slot)[c.names[k]];
        if (next.is_null()) next = json::object();
        if (!next.is_object()) {
          clash = true;
          break;
        }
        slot = &next;
      }
      if (clash || slot->contains(c.names.back())) {
        ck.add(join(here, c.names[0]), "expected each name set once, found it both in this trial and as a constant in "
                                       "parameters (" + c.dotted + ")");
        ok = false;
        continue;
      }
      (*slot)[c.names.back()] = c.value;
    }
    if (ok && params.empty()) ck.add(here, "expected at least one parameter value, found an empty object"), ok = false;
    if (ok) trials.push_back(std::move(params));
  }
  return trials;
}

}  // namespace

ParseOutcome parse_single_parameter(const json& config, Leaf* out) {
  Checker ck;
  Leaf leaf;
  leaf.names = {"value"};
  leaf.dotted = "value";
  leaf.stream = numeric::fnv1a64(leaf.dotted);
  if (!config.is_object()) ck.add("", "expected an object describing the parameter, found " + found(config));
  else parse_leaf(ck, config, "", leaf);
  ParseOutcome outcome;
  outcome.problems = ck.problems;
  if (outcome.problems.empty() && out) *out = leaf;
  return outcome;
}

ParseOutcome parse_sweep(std::string_view text) {
  ParseOutcome outcome;
  Checker ck;
  auto fail = [&](std::string message) {
    outcome.problems.push_back({"", std::move(message)});
    return outcome;
  };
  if (text.size() > kMaxFileBytes) {
    return fail("expected a sweep file of at most " + std::to_string(kMaxFileBytes) +
                " bytes (1 MiB), found a larger one; is this really a sweep file?");
  }
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return fail("expected a JSON object, found an empty file");
  }
  if (size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
    const LineColumn lc = line_column(text, bad);
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
    return fail("expected UTF-8 text, found the byte " + std::string(byte) + " at line " + std::to_string(lc.line) +
                ", column " + std::to_string(lc.column) + "; save the file as UTF-8");
  }
  if (size_t deep = first_too_deep(text, kMaxJsonDepth); deep != std::string_view::npos) {
    const LineColumn lc = line_column(text, deep);
    return fail("expected JSON nested at most " + std::to_string(kMaxJsonDepth) + " levels deep, found deeper nesting at line " +
                std::to_string(lc.line) + ", column " + std::to_string(lc.column));
  }

  // JSON syntax; the callback tracks where it is to report duplicate keys,
  // which nlohmann (like Python) would otherwise resolve silently.
  struct Frame {
    bool array = false;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  auto frame_path = [&frames]() {
    std::string p;
    for (size_t i = 0; i + 1 < frames.size(); ++i) {
      p = frames[i].array ? index_path(p, frames[i].index - 1) : join(p, frames[i].key);
    }
    return p;
  };
  json root;
  try {
    root = json::parse(
        text.begin(), text.end(),
        [&](int, json::parse_event_t event, json& parsed) {
          switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
              if (!frames.empty() && frames.back().array) ++frames.back().index;
              frames.push_back(Frame{event == json::parse_event_t::array_start, 0, "", {}});
              break;
            case json::parse_event_t::object_end:
            case json::parse_event_t::array_end:
              if (!frames.empty()) frames.pop_back();
              break;
            case json::parse_event_t::key: {
              Frame& f = frames.back();
              f.key = parsed.get<std::string>();
              if (!f.keys.insert(f.key).second) {
                frames.push_back(Frame{});  // so frame_path includes f.key
                ck.add(frame_path(), "expected each key once in an object, found a duplicate (JSON keeps only the last)");
                frames.pop_back();
              }
              break;
            }
            case json::parse_event_t::value:
              if (!frames.empty() && frames.back().array) ++frames.back().index;
              break;
          }
          return true;
        },
        /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    std::string what = e.what();
    const size_t at = what.find("] ");
    if (at != std::string::npos) what = what.substr(at + 2);
    return fail("expected valid JSON, found a " + what);
  }

  if (!root.is_object()) {
    ck.add("", "expected a JSON object at the top level ({\"method\": ..., \"parameters\": ...}), found " + found(root));
    outcome.problems = ck.problems;
    return outcome;
  }

  SweepSpec spec;
  auto space = std::make_shared<ParameterSpace>();

  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& key = it.key();
    if (key == "job" || key == "image_uri" || key == "scheduler" || key == "metrics") {
      ck.add(path_name(key), "W&B's " + key + " key (Launch, custom schedulers, multi-objective search) is not supported "
                             "by swept; remove it");
    } else if (std::find(kTopLevelKeys.begin(), kTopLevelKeys.end(), key) == kTopLevelKeys.end()) {
      ck.add(path_name(key), unknown_key_message(key, kTopLevelKeys));
    }
  }

  const bool has_trials = root.contains("trials");
  bool method_ok = false;
  if (root.contains("method")) {
    const json& m = root["method"];
    if (m.is_string() && (m.get<std::string>() == "bayes" || m.get<std::string>() == "custom")) {
      ck.add("method", "expected \"grid\" or \"random\", found " + found(m) +
                           (m.get<std::string>() == "bayes" ? ": Bayesian search is not supported yet" : ": custom search is not supported"));
    } else if (auto v = ck.choice(m, "method", {"grid", "random"})) {
      spec.method = *v == "random" ? Method::kRandom : Method::kGrid;
      method_ok = true;
    }
  } else if (has_trials) {
    spec.method = Method::kGrid;
    method_ok = true;
  } else {
    ck.add("method", "expected \"grid\" or \"random\", found nothing (the key is required)");
  }

  if (root.contains("name")) {
    if (auto v = ck.string(root["name"], "name", false)) spec.name = *v;
  }
  if (root.contains("description")) {
    if (auto v = ck.string(root["description"], "description", false)) spec.description = *v;
  }
  for (const char* key : {"apiVersion", "entity", "project"}) {
    if (root.contains(key)) ck.string(root[key], key, false);
  }
  if (root.contains("kind")) ck.choice(root["kind"], "kind", {"sweep"});
  if (root.contains("controller")) {
    const json& c = root["controller"];
    if (!c.is_object()) {
      ck.add("controller", "expected an object like {\"type\": \"local\"}, found " + found(c));
    } else {
      ck.only_keys(c, "controller", {"type"});
      if (!c.contains("type")) ck.add("controller", "expected key type (\"local\" or \"cloud\"), found none");
      else ck.choice(c["type"], "controller.type", {"local", "cloud"});
    }
  }
  if (root.contains("metric")) parse_metric(ck, root["metric"], spec);
  if (root.contains("run_cap")) {
    if (auto v = ck.integer(root["run_cap"], "run_cap", 1, std::numeric_limits<int64_t>::max(), "a positive integer")) {
      spec.run_cap = *v;
    }
  }
  if (root.contains("program")) {
    if (auto v = ck.string(root["program"], "program", true)) spec.program = *v;
  }
  if (root.contains("command")) {
    const json& c = root["command"];
    if (!c.is_array() || c.empty()) {
      ck.add("command", "expected a non-empty array of strings (the argv, with macros), found " + found(c));
    } else {
      for (size_t i = 0; i < c.size(); ++i) {
        const std::string here = index_path("command", i);
        if (auto s = ck.string(c[i], here, false)) {
          check_command_element(ck, *s, here, root.contains("program"));
          spec.command.push_back(*s);
        }
      }
    }
  } else if (!root.contains("program")) {
    // The default command `swept-train ${args}` needs nothing more.
  }
  if (root.contains("early_terminate")) {
    parse_early_terminate(ck, root["early_terminate"], spec);
    if (!root.contains("metric")) {
      ck.add("metric", "expected a metric (early_terminate compares runs on it), found none");
    }
  }
  if (root.contains("resources")) parse_resources(ck, root["resources"], spec);
  if (root.contains("max_parallel")) {
    if (auto v = ck.integer(root["max_parallel"], "max_parallel", 1, 1000000, "a positive integer (omit it for no limit)")) {
      spec.max_parallel = static_cast<int>(*v);
    }
  }
  if (root.contains("seed")) {
    const json& s = root["seed"];
    if (s.is_number_unsigned() || (s.is_number_integer() && s.get<int64_t>() >= 0)) {
      spec.seed = s.get<uint64_t>();
    } else {
      ck.add("seed", "expected an integer from 0 to 18446744073709551615, found " + found(s));
    }
  }
  if (root.contains("max_retries")) {
    if (auto v = ck.integer(root["max_retries"], "max_retries", 0, 1000, "an integer from 0 to 1000")) {
      spec.max_retries = static_cast<int>(*v);
    }
  }
  if (root.contains("timeout_s")) {
    auto v = ck.number(root["timeout_s"], "timeout_s");
    if (v && *v <= 0) ck.add("timeout_s", "expected a number of seconds > 0 (omit it for no limit), found " + found(root["timeout_s"]));
    else if (v) spec.timeout_s = *v;
  }
  if (root.contains("order")) {
    if (auto v = ck.choice(root["order"], "order", {"sequential", "random"})) {
      space->random_order = *v == "random";
      if (method_ok && spec.method == Method::kRandom) {
        ck.add("order", "expected order only with method grid or explicit trials (random search has no order to "
                        "shuffle; see without_replacement), found it with method random");
      }
    }
  }
  if (root.contains("without_replacement")) {
    const json& w = root["without_replacement"];
    if (!w.is_boolean()) {
      ck.add("without_replacement", "expected true or false, found " + found(w));
    } else {
      space->without_replacement = w.get<bool>();
      if (space->without_replacement && method_ok && spec.method != Method::kRandom) {
        ck.add("without_replacement", "expected it only with method random (a grid never repeats), found it with method grid");
      }
    }
  }

  // Parameters.
  const size_t before_parameters = ck.problems.size() + ck.dropped;
  if (root.contains("parameters")) {
    parse_block(ck, root["parameters"], "parameters", {}, 1, space->leaves);
  } else if (!has_trials) {
    ck.add("parameters", "expected an object of parameters to sweep (or a trials list), found nothing");
  }
  const bool parameters_ok = ck.problems.size() + ck.dropped == before_parameters;

  if (has_trials) {
    if (method_ok && spec.method == Method::kRandom) {
      ck.add("trials", "expected trials with method grid or no method (trials are listed, not drawn), found method random");
    }
    for (const Leaf& leaf : space->leaves) {
      if (leaf.distribution != Distribution::kConstant) {
        ck.add(join("parameters", leaf.dotted), "expected only constants ({\"value\": ...}) beside a trials list, found "
                                                "distribution " + std::string(distribution_name(leaf.distribution)));
      }
    }
    space->explicit_trials = parse_trials(ck, root["trials"], space->leaves);
    space->explicit_list = true;
  } else if (parameters_ok && method_ok) {
    const bool enumerate = spec.method == Method::kGrid || space->without_replacement;
    if (enumerate) {
      bool all_gridable = true;
      for (const Leaf& leaf : space->leaves) {
        const std::string here = join("parameters", leaf.dotted);
        if (leaf.distribution == Distribution::kCategoricalWithProbabilities) {
          ck.add(here + ".probabilities", std::string("expected no probabilities in ") +
                                              (spec.method == Method::kGrid ? "a grid (every value is tried once)"
                                                                            : "sampling without replacement") +
                                              ", found them; remove probabilities or use method random");
          all_gridable = false;
        } else if (!is_gridable(leaf.distribution)) {
          ck.add(here, std::string("expected a distribution that can be enumerated (constant, categorical, int_uniform, "
                                   "q_uniform) for ") +
                           (spec.method == Method::kGrid ? "method grid" : "sampling without replacement") + ", found " +
                           distribution_name(leaf.distribution) + " (continuous); use method random or list values");
          all_gridable = false;
        }
      }
      if (all_gridable) {
        if (auto radix = grid_radix_checked(ck, space->leaves, spec.method == Method::kGrid ? "grid" : "space sampled without replacement")) {
          space->radix = *radix;
          space->grid_size = 1;
          for (int64_t r : *radix) space->grid_size *= r;
        }
      }
    }
  }

  outcome.problems = std::move(ck.problems);
  if (ck.dropped > 0) {
    outcome.problems.push_back({"", "... and " + std::to_string(ck.dropped) + " more problems; fix these first"});
  }
  if (outcome.problems.empty()) {
    spec.space = std::move(space);
    outcome.spec = std::move(spec);
  }
  return outcome;
}

}  // namespace swept::sweeps
