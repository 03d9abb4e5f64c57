// suggest(): history to search coordinates, imputation of failed trials, the
// startup phase, the model, and the reported fall-back to random when the
// model cannot be used. (The sweep-file settings are read in settings.cpp.)
#include "sweeps/search/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sweeps/search/models.h"
#include "sweeps/space.h"
#include "sweeps/trial.h"

namespace swept::sweeps::search {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Status bad(const std::string& path, const std::string& message) { return Status::InvalidArgument(path + ": " + message); }

}  // namespace

// A random point for trial `index`: exactly random search's trial (same seed,
// same streams), so a bayes or tpe sweep starts as `method: random` would.
json random_params(const SweepSpec& spec, int64_t index) {
  SweepSpec random = spec;
  random.method = Method::kRandom;
  return trial_at(random, index).params;
}

json ModelState::to_json() const {
  json j = {{"method", method}, {"mode", mode}, {"n_finished", n_finished}, {"n_failed", n_failed},
            {"n_pending", n_pending}, {"n_model", n_model}};
  if (!note.empty()) j["note"] = note;
  if (n_infeasible > 0) j["n_infeasible"] = n_infeasible;
  if (std::isfinite(best)) j["best"] = best;
  if (mode == "model") {
    j["acquisition"] = acquisition;
    if (method == "nsga2") {
      j["generation"] = generation;
      j["population"] = population;
    } else if (method == "bayes") {
      j["lengthscales"] = lengthscales;
      j["signal_variance"] = signal_variance;
      j["noise_variance"] = noise_variance;
      j["additive_weight"] = additive_weight;
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

Result<Suggestion> suggest(const SearchSettings& settings, const SweepSpec& spec, const SearchHistory& history,
                           int64_t index) {
  if (!spec.space) return Status::InvalidArgument("the sweep has no parameter space");
  const char* method = method_name(settings.method);
  if (spec.space->explicit_list)
    return bad("trials", std::string(method) + " searches a parameter space; an explicit trials list has nothing to search");
  if (settings.method == SearchMethod::kNsga2 || is_multi_objective(spec) || !spec.constraints.empty())
    return suggest_multi(settings, spec, history, index);
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
    auto x = to_point(enc, o.params);
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
    if (auto x = to_point(enc, p)) in.pending.push_back(std::move(*x));

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
  out.params = to_params(enc, *point);
  return out;
}

}  // namespace swept::sweeps::search
