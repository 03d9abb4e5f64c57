// What every method shares once the sweep is parsed: how many trials it has,
// trial i by method (grid and explicit lists: search/grid.cpp; random, and
// the draws of bayes and tpe before their models take over:
// search/random.cpp), and the one-line summary `swept validate` prints.
#include <algorithm>

#include "sweeps/pbt.h"
#include "sweeps/space.h"
#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace swept::sweeps {

using json = nlohmann::json;

void set_nested(json& params, const std::vector<std::string>& names, json value) {
  json* slot = &params;
  for (size_t k = 0; k + 1 < names.size(); ++k) slot = &(*slot)[names[k]];
  (*slot)[names.back()] = std::move(value);
}

std::optional<int64_t> trial_count(const SweepSpec& spec) {
  const ParameterSpace& space = *spec.space;
  std::optional<int64_t> n;
  if (space.explicit_list) n = static_cast<int64_t>(space.explicit_trials.size());
  else if (spec.method == Method::kGrid || space.without_replacement) n = space.grid_size;
  if (spec.run_cap) n = n ? std::min(*n, *spec.run_cap) : *spec.run_cap;
  if (spec.pbt) n = spec.pbt->population;  // one trial per member, its segments its attempts
  return n;
}

Trial trial_at(const SweepSpec& spec, int64_t index) {
  const ParameterSpace& space = *spec.space;
  Trial trial;
  trial.index = index;
  // Adaptive methods draw here as random search does (their chosen trials
  // come from search::suggest instead).
  const bool walk = space.explicit_list || spec.method == Method::kGrid || space.without_replacement;
  trial.params = walk ? grid_trial_params(spec, index) : random_trial_params(spec, index);
  return trial;
}

int parameter_count(const SweepSpec& spec) {
  const ParameterSpace& space = *spec.space;
  if (!space.explicit_list) return static_cast<int>(space.leaves.size());
  std::vector<std::string> names;
  for (const json& t : space.explicit_trials) {
    for (auto it = t.begin(); it != t.end(); ++it) {
      if (std::find(names.begin(), names.end(), it.key()) == names.end()) names.push_back(it.key());
    }
  }
  return static_cast<int>(names.size());
}

std::string describe(const SweepSpec& spec) {
  const ParameterSpace& space = *spec.space;
  std::string s;
  if (space.explicit_list) s = "explicit trials";
  else if (spec.method == Method::kGrid) s = "grid";
  else if (spec.method == Method::kBayes) s = "bayes (each trial chosen from earlier results)";
  else if (spec.method == Method::kTpe) s = "tpe (each trial chosen from earlier results)";
  else if (spec.method == Method::kNsga2) s = "nsga2 (each generation bred from the best of earlier ones)";
  else if (spec.pbt) s = "pbt (" + pbt::describe(*spec.pbt) + ")";
  else s = space.without_replacement ? "random without replacement" : "random";
  if (space.random_order) s += " in random order";
  if (is_multi_objective(spec)) s += ", " + std::to_string(spec.objectives.size()) + " objectives";
  const int n = parameter_count(spec);
  s += ", " + std::to_string(n) + (n == 1 ? " parameter, " : " parameters, ");
  const auto count = trial_count(spec);
  s += count ? std::to_string(*count) + (*count == 1 ? " trial" : " trials") : "unbounded (no run_cap)";
  const Resources& r = spec.resources;
  if (r.nodes > 1 || r.procs_per_node > 1 || r.ps > 0) {  // a multi-node sweep: say what each trial spans
    s += ", each on " + std::to_string(r.nodes) + (r.nodes == 1 ? " node" : " nodes");
    s += " x " + std::to_string(r.procs_per_node) + (r.procs_per_node == 1 ? " process" : " processes");
    if (r.ps > 0)
      s += " + " + std::to_string(r.ps) + (r.ps == 1 ? " parameter server" : " parameter servers") +
           (r.ps_nodes ? " on nodes of their own" : "");
  }
  return s;
}

}  // namespace swept::sweeps
