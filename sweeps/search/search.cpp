// suggest(): history to search coordinates, imputation of failed trials, the
// startup phase, the model, and the reported fall-back to random when the
// model cannot be used. Also the sweep-file settings of both searchers.
#include "sweeps/search/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sweeps/search/models.h"
#include "sweeps/space.h"

namespace swept::sweeps::search {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Status bad(const std::string& path, const std::string& message) { return Status::InvalidArgument(path + ": " + message); }

Status read_int(const json& block, const std::string& prefix, const char* key, int min, int max, int* out) {
  if (!block.contains(key)) return Status::Ok();
  const json& v = block[key];
  const std::string range = "a whole number in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max)
    return bad(prefix + "." + key, "expected " + range + ", found " + v.dump());
  *out = static_cast<int>(v.get<int64_t>());
  return Status::Ok();
}

Status read_double(const json& block, const std::string& prefix, const char* key, double min, double max, double* out) {
  if (!block.contains(key)) return Status::Ok();
  const json& v = block[key];
  if (!v.is_number() || !(v.get<double>() >= min && v.get<double>() <= max))
    return bad(prefix + "." + key, "expected a number in [" + json(min).dump() + ", " + json(max).dump() + "], found " + v.dump());
  *out = v.get<double>();
  return Status::Ok();
}

Status read_bool(const json& block, const std::string& prefix, const char* key, bool* out) {
  if (!block.contains(key)) return Status::Ok();
  if (!block[key].is_boolean()) return bad(prefix + "." + key, "expected true or false, found " + block[key].dump());
  *out = block[key].get<bool>();
  return Status::Ok();
}

Status only_keys(const json& block, const std::string& prefix, std::initializer_list<const char*> keys) {
  if (!block.is_object()) return bad(prefix, "expected an object, found " + block.dump());
  for (const auto& item : block.items()) {
    const std::string& k = item.key();
    if (std::none_of(keys.begin(), keys.end(), [&](const char* key) { return k == key; })) {
      std::string list;
      for (const char* key : keys) list += std::string(list.empty() ? "" : ", ") + key;
      return bad(prefix + "." + k, "unknown key; expected one of " + list);
    }
  }
  return Status::Ok();
}

// A random point for trial `index`: exactly random search's trial (same seed,
// same streams), so a bayes or tpe sweep starts as `method: random` would.
json random_params(const SweepSpec& spec, int64_t index) {
  SweepSpec random = spec;
  random.method = Method::kRandom;
  return trial_at(random, index).params;
}

}  // namespace

json ModelState::to_json() const {
  json j = {{"method", method}, {"mode", mode}, {"n_finished", n_finished}, {"n_failed", n_failed},
            {"n_pending", n_pending}, {"n_model", n_model}};
  if (!note.empty()) j["note"] = note;
  if (std::isfinite(best)) j["best"] = best;
  if (mode == "model") {
    j["acquisition"] = acquisition;
    if (method == "bayes") {
      j["lengthscales"] = lengthscales;
      j["signal_variance"] = signal_variance;
      j["noise_variance"] = noise_variance;
      j["log_marginal_likelihood"] = log_marginal_likelihood;
      j["predicted_quantile"] = predicted_quantile;
      j["predicted_sd"] = predicted_sd;
    } else {
      j["n_below"] = n_below;
      j["n_above"] = n_above;
    }
  }
  return j;
}

Result<SearchSettings> parse_search_settings(const json& sweep) {
  SearchSettings s;
  if (!sweep.is_object()) return bad("", "expected a sweep object");
  const json method = sweep.value("method", json());
  if (method == "bayes") s.method = SearchMethod::kBayes;
  else if (method == "tpe") s.method = SearchMethod::kTpe;
  else return bad("method", "expected \"bayes\" or \"tpe\" for adaptive search, found " + method.dump());
  const std::string name = method.get<std::string>();
  if (!sweep.contains("metric") || !sweep["metric"].is_object() || !sweep["metric"].contains("name"))
    return bad("metric", name + " learns from a metric; add metric: {name: ..., goal: minimize|maximize}");
  const json& m = sweep["metric"];
  if (m.contains("goal")) {
    if (m["goal"] == "maximize") s.goal = Goal::kMaximize;
    else if (m["goal"] != "minimize") return bad("metric.goal", "expected \"minimize\" or \"maximize\", found " + m["goal"].dump());
  }
  if (m.contains("impute")) {
    if (!m["impute"].is_number() || !std::isfinite(m["impute"].get<double>()))
      return bad("metric.impute", "expected a finite number (the value given to failed trials), found " + m["impute"].dump());
    s.impute = m["impute"].get<double>();
  }
  if (sweep.contains("tpe")) {
    if (s.method != SearchMethod::kTpe) return bad("tpe", "settings for method: tpe, but the method is " + name);
    const json& t = sweep["tpe"];
    SWEPT_RETURN_IF_ERROR(only_keys(t, "tpe", {"n_startup_trials", "n_ei_candidates", "prior_weight", "consider_magic_clip",
                                               "consider_endpoints"}));
    SWEPT_RETURN_IF_ERROR(read_int(t, "tpe", "n_startup_trials", 1, 100000, &s.tpe.n_startup_trials));
    SWEPT_RETURN_IF_ERROR(read_int(t, "tpe", "n_ei_candidates", 1, 100000, &s.tpe.n_ei_candidates));
    SWEPT_RETURN_IF_ERROR(read_double(t, "tpe", "prior_weight", 1e-9, 1e9, &s.tpe.prior_weight));
    SWEPT_RETURN_IF_ERROR(read_bool(t, "tpe", "consider_magic_clip", &s.tpe.consider_magic_clip));
    SWEPT_RETURN_IF_ERROR(read_bool(t, "tpe", "consider_endpoints", &s.tpe.consider_endpoints));
  }
  if (sweep.contains("bayes")) {
    if (s.method != SearchMethod::kBayes) return bad("bayes", "settings for method: bayes, but the method is " + name);
    const json& b = sweep["bayes"];
    SWEPT_RETURN_IF_ERROR(only_keys(b, "bayes", {"n_startup_trials", "max_model_trials", "n_candidates", "xi"}));
    SWEPT_RETURN_IF_ERROR(read_int(b, "bayes", "n_startup_trials", 2, 100000, &s.bayes.n_startup_trials));
    SWEPT_RETURN_IF_ERROR(read_int(b, "bayes", "max_model_trials", 8, 2000, &s.bayes.max_model_trials));
    SWEPT_RETURN_IF_ERROR(read_int(b, "bayes", "n_candidates", 16, 100000, &s.bayes.n_candidates));
    SWEPT_RETURN_IF_ERROR(read_double(b, "bayes", "xi", 0, 10, &s.bayes.xi));
  }
  return s;
}

Result<Suggestion> suggest(const SearchSettings& settings, const SweepSpec& spec, const SearchHistory& history,
                           int64_t index) {
  if (!spec.space) return Status::InvalidArgument("the sweep has no parameter space");
  const char* method = settings.method == SearchMethod::kBayes ? "bayes" : "tpe";
  if (spec.space->explicit_list)
    return bad("trials", std::string(method) + " searches a parameter space; an explicit trials list has nothing to search");
  const Encoding enc = encode_space(*spec.space);
  const double sign = settings.goal == Goal::kMaximize ? -1.0 : 1.0;

  Suggestion out;
  ModelState& st = out.model;
  st.method = method;
  st.best = kNaN;
  st.n_finished = static_cast<int>(history.finished.size());
  st.n_pending = static_cast<int>(history.pending.size());

  // Finished trials in minimize space; failed, lost and diverged ones imputed.
  ModelInput in;
  in.encoding = &enc;
  in.seed = spec.seed;
  in.index = index;
  std::vector<char> failed;
  double worst = -std::numeric_limits<double>::infinity();
  for (const Observation& o : history.finished) {
    auto x = encode(enc, o.params);
    if (!x) continue;  // params the space cannot hold (an older version of the sweep): not evidence here
    const bool ok = o.value && std::isfinite(*o.value);
    in.x.push_back(std::move(*x));
    in.y.push_back(ok ? sign * *o.value : 0.0);
    failed.push_back(!ok);
    if (ok) {
      worst = std::max(worst, sign * *o.value);
      if (std::isnan(st.best) || sign * *o.value < sign * st.best) st.best = *o.value;
    }
  }
  const bool any_value = std::isfinite(worst);
  const double imputed = settings.impute ? sign * *settings.impute : worst;
  for (size_t i = 0; i < in.y.size(); ++i)
    if (failed[i]) in.y[i] = imputed, ++st.n_failed;
  for (const json& p : history.pending)
    if (auto x = encode(enc, p)) in.pending.push_back(std::move(*x));

  const int startup = settings.method == SearchMethod::kBayes ? std::max(2, settings.bayes.n_startup_trials)
                                                              : settings.tpe.n_startup_trials;
  if (static_cast<int>(history.finished.size()) < startup || enc.dims.empty()) {
    st.mode = "startup";
    st.note = enc.dims.empty() ? "every parameter is a constant" : "random until " + std::to_string(startup) + " trials have finished";
    out.params = random_params(spec, index);
    return out;
  }
  Result<std::vector<double>> point = Status::FailedPrecondition("");
  if (!any_value && !settings.impute) {
    point = Status::FailedPrecondition("no finished trial reported a finite value of the metric");
  } else if (settings.method == SearchMethod::kBayes) {
    point = gp_suggest(settings.bayes, in, &st);
  } else {
    point = tpe_suggest(settings.tpe, in, &st);
  }
  if (!point.ok()) {
    st.mode = "fallback";
    st.note = "random trial: the " + std::string(method) + " model could not be used: " + point.status().message();
    out.params = random_params(spec, index);
    return out;
  }
  st.mode = "model";
  out.params = decode(enc, *point);
  return out;
}

}  // namespace swept::sweeps::search
