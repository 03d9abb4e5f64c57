// parse_search_settings(): the sweep file's `method`, `metric` and the
// optional `bayes`/`tpe` blocks, read into SearchSettings with every problem
// naming its field. Kept apart from the searchers so that the sweep parser
// (swept_sweeps) can check a bayes/tpe file without linking the models
// (swept_search: Eigen, LBFGS++).
#include <algorithm>
#include <cmath>

#include "sweeps/search/search.h"

namespace swept::sweeps::search {
namespace {

using nlohmann::json;

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

// A string setting that must be one of `choices`; *index gets its position.
Status read_choice(const json& block, const std::string& prefix, const char* key,
                   std::initializer_list<const char*> choices, int* index) {
  if (!block.contains(key)) return Status::Ok();
  const json& v = block[key];
  int i = 0;
  std::string list;
  for (const char* c : choices) {
    if (v.is_string() && v.get<std::string>() == c) {
      *index = i;
      return Status::Ok();
    }
    list += std::string(list.empty() ? "\"" : ", \"") + c + "\"";
    ++i;
  }
  return bad(prefix + "." + key, "expected one of " + list + ", found " + v.dump());
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

}  // namespace

const char* method_name(SearchMethod method) {
  switch (method) {
    case SearchMethod::kBayes: return "bayes";
    case SearchMethod::kTpe: return "tpe";
    case SearchMethod::kNsga2: return "nsga2";
  }
  return "tpe";
}

int startup_trials(const SearchSettings& s) {
  switch (s.method) {
    case SearchMethod::kBayes: return std::max(2, s.bayes.n_startup_trials);
    case SearchMethod::kTpe: return s.tpe.n_startup_trials;
    case SearchMethod::kNsga2: return s.nsga2.population_size;
  }
  return s.tpe.n_startup_trials;
}

Result<SearchSettings> parse_search_settings(const json& sweep) {
  SearchSettings s;
  if (!sweep.is_object()) return bad("", "expected a sweep object");
  const json method = sweep.value("method", json());
  if (method == "bayes") s.method = SearchMethod::kBayes;
  else if (method == "tpe") s.method = SearchMethod::kTpe;
  else if (method == "nsga2") s.method = SearchMethod::kNsga2;
  else return bad("method", "expected \"bayes\", \"tpe\" or \"nsga2\" for adaptive search, found " + method.dump());
  const std::string name = method.get<std::string>();
  // Several objectives (`metrics:`, read by the sweep parser into
  // SweepSpec::objectives): no single goal or impute here.
  const bool several = sweep.contains("metrics") && !sweep.contains("metric");
  if (!several && (!sweep.contains("metric") || !sweep["metric"].is_object() || !sweep["metric"].contains("name")))
    return bad("metric", name + " learns from a metric; add metric: {name: ..., goal: minimize|maximize}");
  const json& m = several ? json::object() : sweep["metric"];
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
                                               "constant_liar", "bandwidth", "below_weights"}));
    SWEPT_RETURN_IF_ERROR(read_int(t, "tpe", "n_startup_trials", 1, 100000, &s.tpe.n_startup_trials));
    SWEPT_RETURN_IF_ERROR(read_int(t, "tpe", "n_ei_candidates", 1, 100000, &s.tpe.n_ei_candidates));
    SWEPT_RETURN_IF_ERROR(read_double(t, "tpe", "prior_weight", 1e-9, 1e9, &s.tpe.prior_weight));
    SWEPT_RETURN_IF_ERROR(read_bool(t, "tpe", "consider_magic_clip", &s.tpe.consider_magic_clip));
    SWEPT_RETURN_IF_ERROR(read_bool(t, "tpe", "constant_liar", &s.tpe.constant_liar));
    int bandwidth = s.tpe.bandwidth == TpeBandwidth::kScott ? 0 : 1;
    SWEPT_RETURN_IF_ERROR(read_choice(t, "tpe", "bandwidth", {"scott", "optuna"}, &bandwidth));
    s.tpe.bandwidth = bandwidth == 0 ? TpeBandwidth::kScott : TpeBandwidth::kOptuna;
    int below = s.tpe.below_weights == TpeBelowWeights::kImprovement ? 0 : 1;
    SWEPT_RETURN_IF_ERROR(read_choice(t, "tpe", "below_weights", {"improvement", "optuna"}, &below));
    s.tpe.below_weights = below == 0 ? TpeBelowWeights::kImprovement : TpeBelowWeights::kOptuna;
  }
  if (sweep.contains("bayes")) {
    if (s.method != SearchMethod::kBayes) return bad("bayes", "settings for method: bayes, but the method is " + name);
    const json& b = sweep["bayes"];
    SWEPT_RETURN_IF_ERROR(only_keys(b, "bayes", {"n_startup_trials", "max_model_trials", "n_candidates", "xi", "additive"}));
    SWEPT_RETURN_IF_ERROR(read_int(b, "bayes", "n_startup_trials", 2, 100000, &s.bayes.n_startup_trials));
    SWEPT_RETURN_IF_ERROR(read_int(b, "bayes", "max_model_trials", 8, 2000, &s.bayes.max_model_trials));
    SWEPT_RETURN_IF_ERROR(read_int(b, "bayes", "n_candidates", 16, 100000, &s.bayes.n_candidates));
    SWEPT_RETURN_IF_ERROR(read_double(b, "bayes", "xi", 0, 10, &s.bayes.xi));
    SWEPT_RETURN_IF_ERROR(read_bool(b, "bayes", "additive", &s.bayes.additive));
  }
  if (sweep.contains("nsga2")) {
    if (s.method != SearchMethod::kNsga2) return bad("nsga2", "settings for method: nsga2, but the method is " + name);
    const json& g = sweep["nsga2"];
    SWEPT_RETURN_IF_ERROR(only_keys(g, "nsga2", {"population_size", "crossover_prob", "swapping_prob", "mutation_prob"}));
    SWEPT_RETURN_IF_ERROR(read_int(g, "nsga2", "population_size", 2, 100000, &s.nsga2.population_size));
    SWEPT_RETURN_IF_ERROR(read_double(g, "nsga2", "crossover_prob", 0, 1, &s.nsga2.crossover_prob));
    SWEPT_RETURN_IF_ERROR(read_double(g, "nsga2", "swapping_prob", 0, 1, &s.nsga2.swapping_prob));
    if (g.contains("mutation_prob") && !g["mutation_prob"].is_null()) {
      double p = 0;
      SWEPT_RETURN_IF_ERROR(read_double(g, "nsga2", "mutation_prob", 0, 1, &p));
      s.nsga2.mutation_prob = p;
    }
  }
  return s;
}

}  // namespace swept::sweeps::search
