// parameters.h: one parameter's settings -> a Leaf, and the `parameters`
// block -> leaves. parse_leaf runs in named steps: choose the distribution
// (explicit, inferred the W&B way, or a deprecated form rewritten), check its
// keys, then read its values by family (categorical, integer range, bounded,
// normal, beta), then its quantum q.
#include "sweeps/parameters.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_map>

#include "sweeps/numeric.h"

namespace swept::sweeps {

using json = nlohmann::json;

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

bool check_parameter_name(Checker& ck, const std::string& name, const std::string& path) {
  if (valid_parameter_name(name)) return true;
  bool usable = !name.empty() && name[0] != '-';
  for (unsigned char c : name) {
    usable = usable && c > 0x20 && c < 0x7F && c != '=' && c != '"' && c != '\'' && c != '`' && c != '$' && c != '\\';
  }
  if (!usable) {
    ck.add(path, "expected a parameter name of letters, digits, '_', '.' or '-' that starts with a letter or '_', "
                 "found " + found(json(name)));
    return false;
  }
  ck.warn(path, "a parameter name outside W&B's rule (letters, digits, '_', '.', '-', starting with a letter or '_'); "
                "W&B's agent passes it on as written, and so does swept");
  return true;
}

bool is_gridable(Distribution d) {
  return d == Distribution::kConstant || d == Distribution::kCategorical || d == Distribution::kIntUniform ||
         d == Distribution::kQUniform;
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

// A hash under which values equal by nlohmann's == (3 and 3.0, objects with
// the same members) collide: numbers hash by their double value.
uint64_t value_hash(const json& v) {
  uint64_t h = static_cast<uint64_t>(v.type() == json::value_t::number_integer || v.type() == json::value_t::number_unsigned
                                         ? json::value_t::number_float
                                         : v.type());
  auto mix_in = [&h](uint64_t x) { h = numeric::mix64(h ^ x); };
  switch (v.type()) {
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: {
      double d = v.get<double>();
      if (d == 0) d = 0;  // -0.0 == 0.0
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      mix_in(bits);
      break;
    }
    case json::value_t::boolean: mix_in(v.get<bool>() ? 1 : 2); break;
    case json::value_t::string: mix_in(numeric::fnv1a64(v.get_ref<const std::string&>())); break;
    case json::value_t::array:
      for (const auto& item : v) mix_in(value_hash(item));
      break;
    case json::value_t::object:
      for (auto it = v.begin(); it != v.end(); ++it) mix_in(numeric::fnv1a64(it.key()) ^ value_hash(it.value()));
      break;
    default: break;
  }
  return h;
}

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


// ---- parse_leaf's steps -------------------------------------------------------

// W&B's deprecated forms, whose min and max are natural-log exponents, as the
// `_values` form with the same distribution: log_uniform(a, b) draws exp(U(a, b)),
// which is log_uniform_values(e^a, e^b); inv_log_uniform(a, b) draws exp(-U(a, b)),
// which is inv_log_uniform_values(e^-b, e^-a) (1/X log-uniform); q_log_uniform
// rounds log_uniform's draw to q. Returns the rewritten settings, or nullopt
// with a problem.
std::optional<json> rewrite_deprecated(Checker& ck, const json& config, const std::string& path, const std::string& name) {
  const std::string replacement = name + "_values";
  if (!config.contains("min") || !config.contains("max")) {
    ck.add(path, "expected min and max (natural-log exponents) for W&B's deprecated " + name + ", found " +
                     (config.contains("min") ? "only min" : config.contains("max") ? "only max" : "neither"));
    return std::nullopt;
  }
  auto a = ck.number(config["min"], join(path, "min"));
  auto b = ck.number(config["max"], join(path, "max"));
  if (!a || !b) return std::nullopt;
  if (*a >= *b) {
    ck.add(join(path, "max"), "expected max > min (" + found(config["min"]) + "), found " + found(config["max"]));
    return std::nullopt;
  }
  if (std::fabs(*a) > kMaxExpArgument || std::fabs(*b) > kMaxExpArgument) {
    ck.add(path, "expected exponents within +-709 (" + name + "'s min and max are natural logarithms), found " +
                     found(config[std::fabs(*a) > kMaxExpArgument ? "min" : "max"]));
    return std::nullopt;
  }
  json rewritten = config;
  rewritten["distribution"] = replacement;
  const bool inverse = name == "inv_log_uniform";
  rewritten["min"] = inverse ? std::exp(-*b) : std::exp(*a);
  rewritten["max"] = inverse ? std::exp(-*a) : std::exp(*b);
  const std::string lo = rewritten["min"].dump(), hi = rewritten["max"].dump();
  ck.warn(join(path, "distribution"), "W&B's deprecated " + name + " (min and max are natural-log exponents): read as " +
                                          replacement + " with min " + lo + " and max " + hi + "; write that instead");
  ck.note(join(path, "distribution"), name + " min " + found(config["min"]) + " max " + found(config["max"]),
          replacement + " min " + lo + " max " + hi, "a deprecated distribution whose bounds are exponents");
  return rewritten;
}

// Step 1: which distribution, as the file says or as W&B infers it. May
// replace `config` (deprecated forms). nullopt when problems were recorded.
std::optional<Distribution> choose_distribution(Checker& ck, const json*& config, const std::string& path, json& storage) {
  const json& c = *config;
  if (c.contains("distribution")) {
    const json& dv = c["distribution"];
    const std::string dpath = join(path, "distribution");
    if (!dv.is_string()) {
      ck.add(dpath, "expected a distribution name (" + list_of(distribution_names()) + "), found " + found(dv));
      return std::nullopt;
    }
    const std::string name = dv.get<std::string>();
    if (name == "log_uniform" || name == "inv_log_uniform" || name == "q_log_uniform") {
      auto rewritten = rewrite_deprecated(ck, c, path, name);
      if (!rewritten) return std::nullopt;
      storage = std::move(*rewritten);
      config = &storage;
      return distributions().at(name + "_values").distribution;
    }
    auto it = distributions().find(name);
    if (it == distributions().end()) {
      ck.add(dpath, "expected a distribution name (" + list_of(distribution_names()) + "), found " + found(dv));
      return std::nullopt;
    }
    return it->second.distribution;
  }
  if (c.contains("value")) return Distribution::kConstant;
  if (c.contains("values") && c.contains("probabilities")) return Distribution::kCategoricalWithProbabilities;
  if (c.contains("values")) return Distribution::kCategorical;
  if (c.contains("min") && c.contains("max")) {
    // W&B's inference: two integers make int_uniform, anything else uniform
    // (1 and 10 are int_uniform, 1.0 and 10 uniform).
    return (c["min"].is_number_integer() && c["max"].is_number_integer()) ? Distribution::kIntUniform
                                                                          : Distribution::kUniform;
  }
  if (c.contains("min") || c.contains("max")) {
    ck.add(path, std::string("expected both min and max, found only ") + (c.contains("min") ? "min" : "max"));
  } else if (c.contains("mu") || c.contains("sigma") || c.contains("q") || c.contains("a") || c.contains("b") ||
             c.contains("probabilities")) {
    ck.add(path, "expected a \"distribution\" key: mu, sigma, q, a, b and probabilities only mean something with one "
                 "(e.g. normal, q_uniform, beta)");
  } else {
    ck.add(path, "expected a parameter: one of value, values, min and max, distribution, or a nested parameters "
                 "block; found " + found(c));
  }
  return std::nullopt;
}

// Step 2: only the keys the distribution takes.
void check_leaf_keys(Checker& ck, const json& config, const std::string& path, Distribution d) {
  const std::string dname = distribution_name(d);
  std::vector<std::string> allowed = distributions().at(dname).keys;
  allowed.insert(allowed.begin(), "distribution");
  for (auto it = config.begin(); it != config.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
      ck.add(join(path, it.key()), "unknown key for distribution " + dname + "; expected one of: " + list_of(allowed));
    }
  }
}

const json* required(Checker& ck, const json& config, const std::string& path, const char* key, Distribution d) {
  if (!config.contains(key)) {
    ck.add(path, std::string("expected key ") + key + " (distribution " + distribution_name(d) + "), found none");
    return nullptr;
  }
  return &config[key];
}

// The values of a numeric parameter: when a values list holds numbers, its
// strings that are decimal numbers are those numbers too (with a warning, as
// W&B's server reads them); a list of strings stays strings.
json numeric_values(Checker& ck, const json& values, const std::string& path) {
  bool any_number = false, all_numeric = true;
  for (const json& item : values) {
    any_number = any_number || item.is_number();
    all_numeric = all_numeric && (item.is_number() || (item.is_string() && decimal_number(item.get<std::string>())));
  }
  if (!any_number || !all_numeric) return values;
  json out = json::array();
  for (size_t i = 0; i < values.size(); ++i) out.push_back(*ck.numeric(values[i], index_path(path, i)));
  return out;
}

void parse_categorical(Checker& ck, const json& config, const std::string& path, Distribution d, Leaf& leaf) {
  const json* raw = required(ck, config, path, "values", d);
  if (!raw) return;
  if (!raw->is_array() || raw->empty()) {
    ck.add(join(path, "values"), "expected a non-empty array of values, found " + found(*raw));
    return;
  }
  const json values = numeric_values(ck, *raw, join(path, "values"));
  // Dedup in O(n) expected: bucket by a hash that equal values share, then
  // compare with nlohmann's == inside the bucket.
  std::unordered_map<uint64_t, std::vector<size_t>> buckets;
  for (const auto& item : values) {
    leaf.values.push_back(item);
    auto& bucket = buckets[value_hash(item)];
    bool seen = false;
    for (size_t k : bucket) seen = seen || leaf.grid_values[k] == item;
    if (!seen) {
      bucket.push_back(leaf.grid_values.size());
      leaf.grid_values.push_back(item);
    }
  }
  if (d != Distribution::kCategoricalWithProbabilities) return;
  const json* p = required(ck, config, path, "probabilities", d);
  if (!p) return;
  const std::string ppath = join(path, "probabilities");
  if (!p->is_array()) {
    ck.add(ppath, "expected an array of probabilities, found " + found(*p));
    return;
  }
  if (p->size() != values.size()) {
    ck.add(ppath, "expected " + std::to_string(values.size()) + " probabilities (one per value), found " + std::to_string(p->size()));
    return;
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
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, sum).ptr;  // shortest round trip
    ck.add(ppath, "expected probabilities that sum to 1, found a sum of " + std::string(buf, end));
  }
}

void parse_int_uniform(Checker& ck, const json& config, const std::string& path, Leaf& leaf) {
  const json* lo = required(ck, config, path, "min", Distribution::kIntUniform);
  const json* hi = required(ck, config, path, "max", Distribution::kIntUniform);
  if (!lo || !hi) return;
  const auto range = std::numeric_limits<int64_t>::max() / 2;
  auto a = ck.integer(*lo, join(path, "min"), -range, range, "an integer (int_uniform)");
  auto b = ck.integer(*hi, join(path, "max"), -range, range, "an integer (int_uniform)");
  if (!a || !b) return;
  if (*a >= *b) {
    ck.add(join(path, "max"), "expected max > min (" + std::to_string(*a) + "), found " + std::to_string(*b));
    return;
  }
  leaf.int_min = *a, leaf.int_max = *b;
  leaf.min = static_cast<double>(*a), leaf.max = static_cast<double>(*b);
  leaf.integer_output = true;
}

// uniform, q_uniform and the log-uniform family: min < max, finite.
void parse_bounded(Checker& ck, const json& config, const std::string& path, Distribution d, Leaf& leaf) {
  const json* lo = required(ck, config, path, "min", d);
  const json* hi = required(ck, config, path, "max", d);
  if (!lo || !hi) return;
  auto a = ck.number(*lo, join(path, "min"));
  auto b = ck.number(*hi, join(path, "max"));
  if (!a || !b) return;
  const bool logarithmic = d == Distribution::kLogUniformValues || d == Distribution::kInvLogUniformValues ||
                           d == Distribution::kQLogUniformValues;
  if (logarithmic && *a <= 0) {
    ck.add(join(path, "min"), "expected a number > 0 (" + std::string(distribution_name(d)) + " takes logarithms), found " + found(*lo));
    return;
  }
  if (*a >= *b) {
    ck.add(join(path, "max"), "expected max > min (" + found(*lo) + "), found " + found(*hi));
    return;
  }
  if (!std::isfinite(*b - *a)) {
    ck.add(path, "expected max - min to be a finite number, found bounds too far apart for a double");
    return;
  }
  leaf.min = *a, leaf.max = *b;
  if (lo->is_number_integer() && hi->is_number_integer()) {
    leaf.int_min = lo->get<int64_t>(), leaf.int_max = hi->get<int64_t>();
  }
}

void parse_normal(Checker& ck, const json& config, const std::string& path, Distribution d, Leaf& leaf) {
  auto optional_number = [&](const char* key, double fallback) -> std::optional<double> {
    if (!config.contains(key)) return fallback;
    return ck.number(config[key], join(path, key));
  };
  auto mu = optional_number("mu", 0.0);
  auto sigma = optional_number("sigma", 1.0);
  if (!mu || !sigma) return;
  if (*sigma <= 0) {
    ck.add(join(path, "sigma"), "expected a standard deviation > 0, found " + found(config["sigma"]));
    return;
  }
  leaf.mu = *mu, leaf.sigma = *sigma;
  const double reach = *mu + kNormalReach * *sigma;
  if (!std::isfinite(reach) || !std::isfinite(*mu - kNormalReach * *sigma)) {
    ck.add(path, "expected mu and sigma whose draws stay finite (|mu| + 9 sigma below the largest double)");
  } else if ((d == Distribution::kLogNormal || d == Distribution::kQLogNormal) && reach > kMaxExpArgument) {
    ck.add(path, "expected mu + 9 sigma <= 709 so that exp() of a draw stays finite, found " + std::to_string(reach));
  }
}

void parse_beta(Checker& ck, const json& config, const std::string& path, Leaf& leaf) {
  auto shape = [&](const char* key) -> std::optional<double> {
    if (!config.contains(key)) return 1.0;
    auto v = ck.number(config[key], join(path, key));
    // Above 1e6 log B(a, b) cancels catastrophically in double precision.
    constexpr double kMaxShape = 1e6;
    if (v && (*v <= 0 || *v > kMaxShape)) {
      ck.add(join(path, key), "expected a shape parameter in (0, 1e6], found " + found(config[key]));
      return std::nullopt;
    }
    return v;
  };
  auto a = shape("a");
  auto b = shape("b");
  if (!a || !b) return;
  leaf.a = *a, leaf.b = *b;
}

bool is_quantized(Distribution d) {
  return d == Distribution::kQUniform || d == Distribution::kQLogUniformValues || d == Distribution::kQNormal ||
         d == Distribution::kQLogNormal || d == Distribution::kQBeta;
}

// The last step of a q_ distribution: q, and whether results are integers.
void parse_quantum(Checker& ck, const json& config, const std::string& path, Distribution d, Leaf& leaf) {
  bool q_integer = false;
  if (config.contains("q")) {
    const json& raw = config["q"];
    auto q = ck.number(raw, join(path, "q"));
    const json qv = raw.is_string() ? decimal_number(raw.get<std::string>()).value_or(raw) : raw;
    if (q && *q <= 0) ck.add(join(path, "q"), "expected a quantum q > 0, found " + found(raw));
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
  // any) are integers (docs/sweep-format.md).
  const bool has_bounds = d == Distribution::kQUniform || d == Distribution::kQLogUniformValues;
  const bool bounds_integer = !has_bounds || (config.contains("min") && config["min"].is_number_integer() &&
                                              config.contains("max") && config["max"].is_number_integer());
  leaf.integer_output = q_integer && bounds_integer;
  if (leaf.integer_output && reach + leaf.q > kMaxIntegerMagnitude) {
    ck.add(path, "expected integer results within +-9e18, found a distribution that reaches beyond (use a float q)");
  }
}

}  // namespace

bool parse_leaf(Checker& ck, const json& original, const std::string& path, Leaf& leaf) {
  const size_t problems_before = ck.count();
  const json* config = &original;
  json rewritten;
  const auto d = choose_distribution(ck, config, path, rewritten);
  if (!d) return false;
  leaf.distribution = *d;
  check_leaf_keys(ck, *config, path, *d);
  switch (*d) {
    case Distribution::kConstant:
      if (const json* v = required(ck, *config, path, "value", *d)) leaf.value = *v;
      break;
    case Distribution::kCategorical:
    case Distribution::kCategoricalWithProbabilities: parse_categorical(ck, *config, path, *d, leaf); break;
    case Distribution::kIntUniform: parse_int_uniform(ck, *config, path, leaf); break;
    case Distribution::kUniform:
    case Distribution::kQUniform:
    case Distribution::kLogUniformValues:
    case Distribution::kInvLogUniformValues:
    case Distribution::kQLogUniformValues: parse_bounded(ck, *config, path, *d, leaf); break;
    case Distribution::kNormal:
    case Distribution::kQNormal:
    case Distribution::kLogNormal:
    case Distribution::kQLogNormal: parse_normal(ck, *config, path, *d, leaf); break;
    case Distribution::kBeta:
    case Distribution::kQBeta: parse_beta(ck, *config, path, leaf); break;
  }
  if (is_quantized(*d)) parse_quantum(ck, *config, path, *d, leaf);
  return ck.count() == problems_before;
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
    if (!check_parameter_name(ck, name, here)) continue;
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
  outcome.warnings = ck.warnings;
  if (outcome.problems.empty() && out) *out = leaf;
  return outcome;
}

}  // namespace swept::sweeps
