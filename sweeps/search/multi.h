// Internal to sweeps/search: the multi-objective searchers' common input and
// entry points (multi.cpp dispatches; nsga2.cpp breeds). Exposed here so that
// their tests can check each step against hand-computed cases.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "sweeps/search/models.h"

namespace swept::sweeps::search {

// The finished trials that have every objective, in completion order.
struct MultiInput {
  ModelInput base;                         // encoding, x (these trials), pending, seed, index; y unused
  std::vector<std::vector<double>> loss;   // per trial, per objective, minimisation form (maximised ones negated), finite
  // Per trial: the sum of its positive constraint violations (0 = feasible,
  // +inf = unknown), Optuna's 1-D violation. Empty = the sweep has no constraints.
  std::vector<double> violation;
};

// NSGA-II after Optuna's NSGAIISampler: the trials, in completion order, form
// generations of population_size; each generation joins the elite of the one
// before and the best population_size survive (non-dominated sorting, then
// crowding distance; constrained domination with constraints). The child of
// the last complete generation's elite: binary tournaments pick two parents,
// uniform crossover (crossover_prob; otherwise a copy of a random member), and
// each parameter redrawn from its prior with mutation_prob. Fails with
// FailedPrecondition before the first generation is complete.
Result<std::vector<double>> nsga2_suggest(const Nsga2Settings& settings, const MultiInput& in, ModelState* state);

// Optuna's (3.1) TPE split with several objectives or constraints: which
// trials are "below" (the best gamma(n) by constraint violation first, then
// by non-dominated rank, the last rank by greedy hypervolume subset
// selection), and their weights (hypervolume contributions, EPS for
// infeasible ones; 1 each with one objective). Returns below[i] per trial and
// the weights of the "below" trials in completion order.
struct TpeSplit {
  std::vector<char> below;
  std::vector<double> weights;
};
TpeSplit multi_objective_split(const MultiInput& in, size_t n_below);

// The ParEGO scalarisation of the trials for `method: bayes`: with weights w
// drawn uniformly from the simplex for this suggestion, each objective scaled
// to [0, 1] over the trials, s = max_k w_k f_k + 0.05 sum_k w_k f_k (Knowles
// 2006); an infeasible trial scores above every feasible one, ordered by its
// violation.
std::vector<double> parego_scalarise(const MultiInput& in, const std::vector<double>& weights);

}  // namespace swept::sweeps::search
