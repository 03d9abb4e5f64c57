// From JSON to a typed stopping Rule: the sweep file's `early_terminate` (swept's
// keys, W&B's for hyperband) and the Optuna pruner objects of the conformance
// vectors. Every refusal names the field and says what would work.
#include <cmath>
#include <string>

#include "sweeps/stopping/stopping.h"

namespace swept::sweeps::stopping {
namespace {

using nlohmann::json;

Status bad(const std::string& path, const std::string& message) {
  return Status::InvalidArgument(path + ": " + message);
}

// A number field; absent keeps `*out`.
Status read_number(const json& obj, const std::string& key, const std::string& prefix, double* out) {
  if (!obj.contains(key)) return Status::Ok();
  const json& v = obj[key];
  if (!v.is_number()) return bad(prefix + "." + key, "expected a number, found " + v.dump());
  *out = v.get<double>();
  if (!std::isfinite(*out)) return bad(prefix + "." + key, "expected a finite number, found " + v.dump());
  return Status::Ok();
}

// A whole-number field >= `min`; absent keeps `*out`.
Status read_integer(const json& obj, const std::string& key, const std::string& prefix, int64_t min, int64_t* out) {
  if (!obj.contains(key)) return Status::Ok();
  const json& v = obj[key];
  const std::string path = prefix + "." + key;
  if (!v.is_number() || v.is_boolean()) return bad(path, "expected a whole number >= " + std::to_string(min) + ", found " + v.dump());
  const double d = v.get<double>();
  if (d != std::floor(d) || std::fabs(d) > 9e15)
    return bad(path, "expected a whole number >= " + std::to_string(min) + ", found " + v.dump());
  if (d < static_cast<double>(min))
    return bad(path, "expected a whole number >= " + std::to_string(min) + ", found " + v.dump() +
                         (key == "reduction_factor" ? " (a factor below 2 never halves anything)" : ""));
  *out = static_cast<int64_t>(d);
  return Status::Ok();
}

Status only_keys(const json& obj, const std::string& prefix, std::initializer_list<const char*> keys) {
  for (const auto& [k, v] : obj.items()) {
    bool known = false;
    for (const char* key : keys) known = known || k == key;
    if (!known) {
      std::string list;
      for (const char* key : keys) list += std::string(list.empty() ? "" : ", ") + key;
      return bad(prefix + "." + k, "unknown key; expected one of " + list);
    }
  }
  return Status::Ok();
}

Result<HyperbandSettings> parse_hyperband(const json& e) {
  const std::string p = "early_terminate";
  SWEPT_RETURN_IF_ERROR(only_keys(e, p, {"type", "min_iter", "max_iter", "s", "eta", "strict"}));
  HyperbandSettings h;
  SWEPT_RETURN_IF_ERROR(read_number(e, "eta", p, &h.eta));
  if (!(h.eta > 1)) return bad(p + ".eta", "expected a number > 1 (the factor between bands), found " + e["eta"].dump());
  if (e.contains("strict")) {
    if (!e["strict"].is_boolean()) return bad(p + ".strict", "expected true or false, found " + e["strict"].dump());
    h.strict = e["strict"].get<bool>();
  }
  if (e.contains("min_iter")) {
    double v = 0;
    SWEPT_RETURN_IF_ERROR(read_number(e, "min_iter", p, &v));
    if (v < 1) return bad(p + ".min_iter", "expected a number >= 1 (iterations before the first band), found " + e["min_iter"].dump());
    h.min_iter = v;
  }
  if (e.contains("max_iter")) {
    double v = 0;
    SWEPT_RETURN_IF_ERROR(read_number(e, "max_iter", p, &v));
    if (h.min_iter && v <= *h.min_iter)
      return bad(p + ".max_iter", "expected a number > min_iter (" + e["min_iter"].dump() + "), found " + e["max_iter"].dump());
    if (v < 1) return bad(p + ".max_iter", "expected a number >= 1, found " + e["max_iter"].dump());
    if (!e.contains("s")) return bad(p + ".s", "max_iter needs s (how many bands below max_iter); found none");
    SWEPT_RETURN_IF_ERROR(read_integer(e, "s", p, 1, &h.s));
    if (v / h.eta < 1)
      return bad(p + ".max_iter", "max_iter / eta is below 1, so no band fits; raise max_iter or lower eta");
    h.max_iter = v;
  }
  if (!h.min_iter && !h.max_iter) return bad(p, "expected min_iter, or both max_iter and s (hyperband needs its bands), found neither");
  return h;
}

Result<AshaSettings> parse_asha(const json& e, const std::string& p) {
  AshaSettings a;
  if (e.contains("min_resource")) {
    const json& m = e["min_resource"];
    if (m.is_string()) {
      if (m.get<std::string>() != "auto") return bad(p + ".min_resource", "expected \"auto\" or a whole number >= 1, found " + m.dump());
    } else {
      int64_t v = 0;
      SWEPT_RETURN_IF_ERROR(read_integer(e, "min_resource", p, 1, &v));
      a.min_resource = v;
    }
  }
  SWEPT_RETURN_IF_ERROR(read_integer(e, "reduction_factor", p, 2, &a.reduction_factor));
  SWEPT_RETURN_IF_ERROR(read_integer(e, "min_early_stopping_rate", p, 0, &a.min_early_stopping_rate));
  SWEPT_RETURN_IF_ERROR(read_integer(e, "bootstrap_count", p, 0, &a.bootstrap_count));
  if (a.bootstrap_count > 0 && !a.min_resource)
    return bad(p + ".bootstrap_count", "needs a fixed min_resource (\"auto\" is estimated from finished trials, too late to bootstrap)");
  return a;
}

Result<PercentileSettings> parse_percentile(const json& e, const std::string& p, bool with_percentile) {
  PercentileSettings s;
  if (with_percentile) {
    s.percentile = 25;  // never defaulted by Optuna; the vectors always give it
    SWEPT_RETURN_IF_ERROR(read_number(e, "percentile", p, &s.percentile));
    if (s.percentile < 0 || s.percentile > 100) return bad(p + ".percentile", "expected a number in [0, 100], found " + e["percentile"].dump());
  }
  SWEPT_RETURN_IF_ERROR(read_integer(e, "n_startup_trials", p, 0, &s.n_startup_trials));
  SWEPT_RETURN_IF_ERROR(read_integer(e, "n_warmup_steps", p, 0, &s.n_warmup_steps));
  SWEPT_RETURN_IF_ERROR(read_integer(e, "interval_steps", p, 1, &s.interval_steps));
  SWEPT_RETURN_IF_ERROR(read_integer(e, "n_min_trials", p, 1, &s.n_min_trials));
  return s;
}

Result<ThresholdSettings> parse_threshold(const json& e, const std::string& p) {
  ThresholdSettings t;
  bool any = false;
  for (const char* key : {"lower", "upper"}) {
    if (!e.contains(key) || e[key].is_null()) continue;
    double* out = std::string(key) == "lower" ? &t.lower : &t.upper;
    SWEPT_RETURN_IF_ERROR(read_number(e, key, p, out));
    any = true;
  }
  if (!any) return bad(p, "expected lower, upper or both; found neither");
  if (t.lower > t.upper) return bad(p + ".lower", "expected lower <= upper");
  SWEPT_RETURN_IF_ERROR(read_integer(e, "n_warmup_steps", p, 0, &t.n_warmup_steps));
  SWEPT_RETURN_IF_ERROR(read_integer(e, "interval_steps", p, 1, &t.interval_steps));
  return t;
}

Result<OptunaHyperbandSettings> parse_optuna_hyperband(const json& e, const std::string& p) {
  OptunaHyperbandSettings h;
  SWEPT_RETURN_IF_ERROR(read_integer(e, "min_resource", p, 1, &h.min_resource));
  SWEPT_RETURN_IF_ERROR(read_integer(e, "reduction_factor", p, 2, &h.reduction_factor));
  SWEPT_RETURN_IF_ERROR(read_integer(e, "bootstrap_count", p, 0, &h.bootstrap_count));
  if (e.contains("max_resource") && !(e["max_resource"].is_string() && e["max_resource"] == "auto")) {
    if (e["max_resource"].is_string()) return bad(p + ".max_resource", "expected \"auto\" or a whole number, found " + e["max_resource"].dump());
    int64_t v = 0;
    SWEPT_RETURN_IF_ERROR(read_integer(e, "max_resource", p, 1, &v));
    h.max_resource = v;
  }
  if (h.bootstrap_count > 0 && !h.max_resource)
    return bad(p + ".bootstrap_count", "needs a fixed max_resource (\"auto\" is known only once a trial has finished)");
  return h;
}

Result<Rule> parse_pruner_at(const json& e, Goal goal, const std::string& p);

Result<PatientSettings> parse_patient(const json& e, Goal goal, const std::string& p) {
  PatientSettings s;
  if (!e.contains("patience")) return bad(p + ".patience", "expected a whole number >= 0, found none");
  SWEPT_RETURN_IF_ERROR(read_integer(e, "patience", p, 0, &s.patience));
  SWEPT_RETURN_IF_ERROR(read_number(e, "min_delta", p, &s.min_delta));
  if (s.min_delta < 0) return bad(p + ".min_delta", "expected a number >= 0, found " + e["min_delta"].dump());
  if (e.contains("wrapped_pruner") && !e["wrapped_pruner"].is_null()) {
    auto inner = parse_pruner_at(e["wrapped_pruner"], goal, p + ".wrapped_pruner");
    if (!inner.ok()) return inner.status();
    s.wrapped = std::make_shared<const Rule>(std::move(inner).value());
  }
  return s;
}

Result<Rule> parse_pruner_at(const json& e, Goal goal, const std::string& p) {
  if (!e.is_object() || !e.contains("type") || !e["type"].is_string())
    return bad(p, "expected an object with a type, found " + e.dump());
  const std::string type = e["type"].get<std::string>();
  Rule rule;
  rule.goal = goal;
  auto take = [&rule](RuleType t, auto&& r) -> Result<Rule> {
    if (!r.ok()) return r.status();
    rule.type = t;
    rule.settings = std::move(r).value();
    return rule;
  };
  if (type == "median") return take(RuleType::kMedian, parse_percentile(e, p, false));
  if (type == "percentile") return take(RuleType::kPercentile, parse_percentile(e, p, true));
  if (type == "successive_halving") return take(RuleType::kAsha, parse_asha(e, p));
  if (type == "threshold") return take(RuleType::kThreshold, parse_threshold(e, p));
  if (type == "patient") return take(RuleType::kPatient, parse_patient(e, goal, p));
  if (type == "hyperband") return take(RuleType::kOptunaHyperband, parse_optuna_hyperband(e, p));
  return bad(p + ".type", "expected median, percentile, successive_halving, threshold, patient or hyperband, found \"" + type + "\"");
}

}  // namespace

const char* rule_type_name(RuleType type) {
  switch (type) {
    case RuleType::kHyperband: return "hyperband";
    case RuleType::kAsha: return "asha";
    case RuleType::kMedian: return "median";
    case RuleType::kPercentile: return "percentile";
    case RuleType::kThreshold: return "threshold";
    case RuleType::kPatient: return "patient";
    case RuleType::kOptunaHyperband: return "optuna_hyperband";
  }
  return "?";
}

Result<Rule> parse_rule(const json& e, const std::optional<Metric>& metric) {
  const std::string p = "early_terminate";
  if (!e.is_object())
    return bad(p, "expected an object like {\"type\": \"hyperband\", \"min_iter\": 3}, found " + e.dump());
  if (!metric) return bad("metric", "early_terminate compares trials on a metric; add metric: {name: ..., goal: ...}");
  if (!e.contains("type") || !e["type"].is_string())
    return bad(p + ".type", "expected \"hyperband\", \"asha\" or \"median\"");
  const std::string type = e["type"].get<std::string>();
  Rule rule;
  rule.goal = metric->goal;
  if (type == "hyperband") {
    auto h = parse_hyperband(e);
    if (!h.ok()) return h.status();
    rule.type = RuleType::kHyperband;
    rule.settings = std::move(h).value();
    return rule;
  }
  if (type == "asha") {
    SWEPT_RETURN_IF_ERROR(only_keys(e, p, {"type", "min_resource", "reduction_factor", "min_early_stopping_rate", "bootstrap_count"}));
    auto a = parse_asha(e, p);
    if (!a.ok()) return a.status();
    rule.type = RuleType::kAsha;
    rule.settings = std::move(a).value();
    return rule;
  }
  if (type == "median") {
    SWEPT_RETURN_IF_ERROR(only_keys(e, p, {"type", "n_startup_trials", "n_warmup_steps", "interval_steps", "n_min_trials"}));
    auto m = parse_percentile(e, p, false);
    if (!m.ok()) return m.status();
    rule.type = RuleType::kMedian;
    rule.settings = std::move(m).value();
    return rule;
  }
  return bad(p + ".type", "expected \"hyperband\", \"asha\" or \"median\", found \"" + type + "\"");
}

Result<Rule> parse_optuna_pruner(const json& pruner, Goal goal, const std::string& study_name) {
  auto rule = parse_pruner_at(pruner, goal, "pruner");
  if (rule.ok() && rule->type == RuleType::kOptunaHyperband) std::get<OptunaHyperbandSettings>(rule->settings).study_name = study_name;
  return rule;
}

}  // namespace swept::sweeps::stopping
