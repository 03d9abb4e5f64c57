// Warm starts: the `warm_start` key, and which earlier trials fit a sweep's
// space (warm_start.h).
#include "sweeps/warm_start.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "sweeps/checks.h"
#include "sweeps/space.h"
#include "sweeps/trial.h"

namespace swept::sweeps {
namespace {

using nlohmann::json;

// A value as a CSV export writes it: text bare, numbers to 6 digits, the
// rest as JSON (cli's param_value_text, which sweeps/ cannot include).
std::string as_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
    return buf;
  }
  return v.dump();
}

// The key of a point of the grid: every number to 6 digits, so that a value
// read back from a CSV export finds the point it was.
std::string point_key(const json& v) {
  if (v.is_number()) return "#" + as_text(v);
  if (v.is_object()) {
    std::string s = "{";
    for (auto it = v.begin(); it != v.end(); ++it) s += json(it.key()).dump() + ":" + point_key(it.value()) + ",";
    return s + "}";
  }
  if (v.is_array()) {
    std::string s = "[";
    for (const auto& e : v) s += point_key(e) + ",";
    return s + "]";
  }
  return v.dump();
}

bool same_value(const json& candidate, const json& allowed, bool text_values) {
  if (candidate == allowed) return true;
  if (candidate.is_number() && allowed.is_number()) return point_key(candidate) == point_key(allowed);
  return text_values && as_text(candidate) == as_text(allowed);
}

bool is_q(Distribution d) {
  return d == Distribution::kQUniform || d == Distribution::kQLogUniformValues || d == Distribution::kQNormal ||
         d == Distribution::kQLogNormal || d == Distribution::kQBeta;
}

// Whether `v` is a value `leaf` may take; says why not in `why`. A
// categorical's value (or the constant) is taken as the sweep spells it, in
// `spelled`, so that a value read from text ("1") is the sweep's ("1" or 1).
bool leaf_fits(const Leaf& leaf, const json& v, bool text_values, std::string* why, json* spelled) {
  const std::string at = "parameters." + leaf.dotted + ": ";
  *spelled = leaf.distribution == Distribution::kIntUniform && v.is_number() ? json(int64_t(v.get<double>())) : v;
  switch (leaf.distribution) {
    case Distribution::kConstant:
      if (!same_value(v, leaf.value, text_values)) {
        *why = at + found(v) + " is not its value " + found(leaf.value);
        return false;
      }
      *spelled = leaf.value;
      return true;
    case Distribution::kCategorical:
    case Distribution::kCategoricalWithProbabilities:
      for (const json& allowed : leaf.grid_values) {
        if (!same_value(v, allowed, text_values)) continue;
        *spelled = allowed;
        return true;
      }
      *why = at + found(v) + " is not among its values";
      return false;
    default: break;
  }
  if (!v.is_number()) {
    *why = at + "expected a number, found " + found(v);
    return false;
  }
  const double x = v.get<double>();
  if (!std::isfinite(x)) {
    *why = at + "expected a finite number";
    return false;
  }
  if ((leaf.integer_output || leaf.distribution == Distribution::kIntUniform) && x != std::floor(x)) {
    *why = at + found(v) + " is not an integer";
    return false;
  }
  double lo = -INFINITY, hi = INFINITY;
  switch (leaf.distribution) {
    case Distribution::kIntUniform: lo = double(leaf.int_min), hi = double(leaf.int_max); break;
    case Distribution::kUniform:
    case Distribution::kQUniform:
    case Distribution::kLogUniformValues:
    case Distribution::kInvLogUniformValues:
    case Distribution::kQLogUniformValues: lo = leaf.min, hi = leaf.max; break;
    case Distribution::kBeta:
    case Distribution::kQBeta: lo = 0, hi = 1; break;
    case Distribution::kLogNormal:
    case Distribution::kQLogNormal: lo = 0; break;
    default: break;  // normal: any number
  }
  const double slack = is_q(leaf.distribution) ? leaf.q : 0;
  if (x < lo - slack || x > hi + slack) {
    std::ostringstream s;
    s << at << found(v) << " is outside [" << lo << ", " << hi << "]";
    *why = s.str();
    return false;
  }
  return true;
}

const json* at_path(const json& params, const std::vector<std::string>& names) {
  const json* p = &params;
  for (const auto& n : names) {
    if (!p->is_object() || !p->contains(n)) return nullptr;
    p = &(*p)[n];
  }
  return p;
}

bool walks_points(const SweepSpec& spec) { return spec.space->explicit_list || spec.method == Method::kGrid; }

}  // namespace

std::optional<json> fit_to_space(const SweepSpec& spec, const json& params, bool text_values, std::string* why) {
  const ParameterSpace& space = *spec.space;
  json out = json::object();
  for (const Leaf& leaf : space.leaves) {
    const json* v = at_path(params, leaf.names);
    if (!v) {
      *why = "parameters." + leaf.dotted + ": missing";
      return std::nullopt;
    }
    json spelled;
    if (!leaf_fits(leaf, *v, text_values, why, &spelled)) return std::nullopt;
    set_nested(out, leaf.names, std::move(spelled));
  }
  if (!space.explicit_list) return out;
  // An explicit list: the trial's own top-level names, as one of its trials has them.
  for (const json& t : space.explicit_trials) {
    bool all = true;
    for (auto it = t.begin(); it != t.end() && all; ++it)
      all = params.contains(it.key()) && same_value(params[it.key()], it.value(), text_values);
    if (all) return t;
  }
  *why = "not one of the sweep's explicit trials";
  return std::nullopt;
}

std::string WarmPlan::summary(const std::string& metric) const {
  std::string s = std::to_string(seeds.size()) + " of " + std::to_string(offered) + " earlier trials fit";
  if (skipped() == 0) return s;
  s += "; " + std::to_string(skipped()) + " skipped:";
  std::string parts;
  auto part = [&](int64_t n, const std::string& what) {
    if (n > 0) parts += (parts.empty() ? " " : ", ") + std::to_string(n) + " " + what;
  };
  part(outside_space, "outside this sweep's space (first: " + first_outside + ")");
  part(without_value, "without a final value of " + metric + " (not completed, or never reported it)");
  part(duplicates, "at a grid point already seeded");
  return s + parts;
}

WarmPlan plan_warm_start(const SweepSpec& spec, const std::vector<WarmCandidate>& candidates) {
  WarmPlan plan;
  plan.offered = static_cast<int64_t>(candidates.size());
  std::vector<std::pair<size_t, json>> fitting;  // candidate, fitted params
  for (size_t i = 0; i < candidates.size(); ++i) {
    const WarmCandidate& c = candidates[i];
    if (!c.value || !std::isfinite(*c.value)) {
      ++plan.without_value;
      continue;
    }
    std::string why;
    auto fitted = fit_to_space(spec, c.params, c.text_values, &why);
    if (!fitted) {
      if (plan.outside_space++ == 0) plan.first_outside = c.origin + ": " + why;
      continue;
    }
    fitting.emplace_back(i, std::move(*fitted));
  }
  std::map<std::string, int64_t> points;  // grid point -> index
  if (walks_points(spec) && !fitting.empty()) {
    const int64_t n = trial_count(spec).value_or(0);
    for (int64_t i = 0; i < n; ++i) points.emplace(point_key(trial_at(spec, i).params), i);
  }
  std::map<int64_t, bool> taken;
  for (auto& [i, params] : fitting) {
    WarmPlan::Seed seed{std::move(params), *candidates[i].value, std::nullopt, candidates[i].origin};
    if (walks_points(spec)) {
      auto p = points.find(point_key(seed.params));
      if (p == points.end()) {
        if (plan.outside_space++ == 0) plan.first_outside = seed.origin + ": not a point of this grid";
        continue;
      }
      if (taken[p->second]) {
        ++plan.duplicates;
        continue;
      }
      taken[p->second] = true;
      seed.grid_index = p->second;
      seed.params = trial_at(spec, p->second).params;  // the grid's own spelling of the point
    }
    plan.seeds.push_back(std::move(seed));
  }
  return plan;
}

WarmCandidate candidate_from_row(const TrialRow& row, const std::string& metric, const std::string& origin_prefix) {
  WarmCandidate c;
  c.params = row.params;
  c.origin = origin_prefix + ", trial " + std::to_string(row.id);
  const bool result = row.state == TrialState::kCompleted || row.state == TrialState::kImported;
  if (auto it = row.latest.find(metric); result && it != row.latest.end()) c.value = it->second;
  return c;
}

void parse_warm_start(Checker& ck, const json& root, SweepSpec& spec) {
  const json& w = root["warm_start"];
  const std::string p = "warm_start";
  if (!w.is_object() || w.size() != 1 || !(w.contains("sweep") || w.contains("file"))) {
    ck.add(p, "expected {sweep: ID} (a sweep in the same database) or {file: PATH} (a CSV or JSON file `swept "
              "export` wrote), found " + found(w));
    return;
  }
  WarmStartSource source;
  if (w.contains("sweep")) {
    auto id = ck.integer(w["sweep"], p + ".sweep", 1, INT64_MAX, "a sweep id (a positive integer)");
    if (!id) return;
    source.sweep = *id;
  } else {
    auto file = ck.string(w["file"], p + ".file", /*non_empty=*/true);
    if (!file) return;
    source.file = *file;
  }
  if (!root.contains("metric")) {
    ck.add(p, "expected a metric (a warm start seeds the search with earlier values of it), found none");
    return;
  }
  spec.warm_start = std::move(source);
}

}  // namespace swept::sweeps
