// Adaptive search: `method: bayes` (a Gaussian process with expected
// improvement) and `method: tpe` (Optuna-style multivariate tree-structured
// Parzen estimator). docs/sweep-format.md, "Adaptive search", is the user's
// contract; this is the scheduler's.
//
// Pure, like the rest of sweeps/: the finished trials (in completion order),
// the pending ones, the sweep's seed and the index of the trial to suggest go
// in; one suggestion comes out, with the model state that produced it. No
// state is kept between calls, so a restarted scheduler that feeds the same
// history in the same order gets the same suggestions.
//
// Both searchers work in the same coordinates (encoding.h): every numeric
// parameter through its prior's CDF onto (0, 1) (so log, int, q, normal and
// beta parameters keep their scale and their type), every categorical as a
// set of choices (one-hot in the GP, a categorical kernel in TPE). Failed,
// lost and diverged (NaN, infinite) trials count as the worst value seen, or
// as metric.impute when the sweep gives one.
// Thread safety: every function is pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "sweeps/sweep.h"

namespace swept::sweeps::search {

enum class SearchMethod { kBayes, kTpe, kNsga2 };

// TPE after Optuna's TPESampler with multivariate=True and constant_liar=True
// and Optuna's other defaults, except two documented choices that make the
// multivariate model work with few trials (docs/sweep-format.md, "method: tpe"):
// the bandwidth from each group's own spread (BOHB's rule; Optuna: a constant
// share of the range) and the "below" trials weighted by their improvement
// (weighted EI; Optuna: equal weights). Both have their Optuna setting.
// Optuna's consider_endpoints only shapes the univariate bandwidth, so it has
// no counterpart here.
enum class TpeBandwidth { kScott, kOptuna };
enum class TpeBelowWeights { kImprovement, kOptuna };

struct TpeSettings {
  int n_startup_trials = 10;   // random trials before the model
  int n_ei_candidates = 24;    // draws from l(x) scored by l(x)/g(x)
  double prior_weight = 1.0;   // weight of the prior kernel in each mixture (in "below": see below_weights)
  bool consider_magic_clip = true;   // bandwidth floor (high - low) / min(100, 1 + n)
  bool constant_liar = true;   // pending trials join the "above" group as the worst
  // scott: 1.06 sd n^(-1/(d+4)) per parameter, sd the group's spread (BOHB);
  // optuna: 0.2 n^(-1/(d+4)) of the range.
  TpeBandwidth bandwidth = TpeBandwidth::kScott;
  // improvement: "below" trial i weighs y_gamma - y_i, the prior their mean;
  // optuna: every "below" trial 1, the prior prior_weight.
  TpeBelowWeights below_weights = TpeBelowWeights::kImprovement;
  // gamma(n) = min(ceil(0.1 n), 25) trials in the "below" group;
  // "above" weights(n): 1 for n < 25, else a ramp from 1/n to 1 over the oldest n - 25 and 1 for the newest 25.
};

// The GP of method: bayes.
struct BayesSettings {
  int n_startup_trials = 10;      // random trials before the first fit (at least 2)
  int max_model_trials = 48;      // the GP's cap: the best half and the most recent half of this many (docs/sweep-format.md)
  int n_candidates = 1024;        // candidates scored by EI (half uniform, half near the best trials) before refinement
  int n_local_starts = 4;         // best candidates refined by shrinking local perturbations
  double xi = 0.0;                // EI's exploration margin, in normal-score units
  // The kernel: (1 - w) joint Matern + w additive (the mean of one Matern per
  // parameter), w fitted with the rest (docs/sweep-format.md); false: the joint alone.
  bool additive = true;
};

// method: nsga2, after Optuna's NSGAIISampler (3.1, Debian's) and its
// defaults: generations of population_size, uniform crossover, mutation by
// redrawing a parameter from its prior.
struct Nsga2Settings {
  int population_size = 50;
  double crossover_prob = 0.9;    // a child is crossed from parents (else copies one)
  double swapping_prob = 0.5;     // uniform crossover: each parameter from the second parent
  std::optional<double> mutation_prob;  // per parameter; nullopt = 1 / number of parameters (Optuna's None)
};

struct SearchSettings {
  SearchMethod method = SearchMethod::kTpe;
  Goal goal = Goal::kMinimize;
  std::optional<double> impute;  // metric.impute: the value of a failed trial
  TpeSettings tpe;
  BayesSettings bayes;
  Nsga2Settings nsga2;
};

// From a sweep file's JSON (the whole file): `method` ("bayes" or "tpe"),
// `metric` {name, goal, impute}, and the optional blocks `tpe` {n_startup_trials,
// n_ei_candidates, prior_weight, consider_magic_clip, constant_liar, bandwidth,
// below_weights} and
// `bayes` {n_startup_trials, max_model_trials, n_candidates, xi, additive}.
// Errors name the field: no metric ("metric: bayes learns from a metric ..."),
// a method that is not bayes/tpe, a setting out of range, an unknown key.
Result<SearchSettings> parse_search_settings(const nlohmann::json& sweep);

// "bayes", "tpe" or "nsga2".
const char* method_name(SearchMethod method);

// How many random trials open the sweep before the model is used: bayes'
// max(2, n_startup_trials), tpe's n_startup_trials, nsga2's first generation
// (population_size).
int startup_trials(const SearchSettings& settings);

// One finished trial, as the searcher sees it.
struct Observation {
  // A constructor rather than an aggregate, so that {params, value} stays complete.
  Observation() = default;
  Observation(nlohmann::json params_, std::optional<double> value_, std::vector<double> values_ = {},
              std::vector<double> violations_ = {})
      : params(std::move(params_)), value(value_), values(std::move(values_)), violations(std::move(violations_)) {}

  nlohmann::json params;        // nested, as the trial received them
  std::optional<double> value;  // the final metric in its own sign; nullopt = failed or lost
  // Several objectives (SweepSpec::objectives, in that order): each final
  // value in its own sign; empty, short or with a NaN = failed or lost. When
  // empty, a single-objective sweep reads `value`.
  std::vector<double> values;
  // SweepSpec::constraints, in that order: each Constraint::violation of the
  // trial's final values (> 0 violated; a missing metric is +inf). Empty =
  // none known: with constraints, the trial counts as infeasible.
  std::vector<double> violations;
};

struct SearchHistory {
  std::vector<Observation> finished;     // in completion order
  std::vector<nlohmann::json> pending;   // params of trials handed out and not finished
};

// What produced a suggestion: enough to explain it on the dashboard.
struct ModelState {
  std::string method;   // "bayes" | "tpe"
  std::string mode;     // "startup" (random until n_startup_trials), "model", "fallback"
  std::string note;     // for "fallback": why the model could not be used (never silent)
  int n_finished = 0;   // finished trials seen
  int n_failed = 0;     // of those, failed/lost/diverged (imputed)
  int n_pending = 0;    // pending trials taken into account
  int n_model = 0;      // points in the model (after the cap, fantasies included)
  double best = 0;      // best value seen, metric's sign (NaN when none)
  double acquisition = 0;  // log EI (bayes, normal-score units) or log l(x)/g(x) (tpe) of the suggestion
  // bayes: fitted hyperparameters (per parameter lengthscale, in encoded units)
  std::vector<double> lengthscales;
  double signal_variance = 0, noise_variance = 0;  // in normal-score units
  double additive_weight = 0;  // w of the kernel's additive part (0: joint kernel only)
  double log_marginal_likelihood = 0;  // at the fit, plus the lengthscale prior
  // At the suggestion: the predicted share of the model's trials that are
  // better (the GP models normal scores of the values' ranks), and the
  // predictive sd in those score units.
  double predicted_quantile = 0, predicted_sd = 0;
  // tpe
  int n_below = 0, n_above = 0;
  // nsga2: the generation the suggestion is bred from (-1: the first, random) and its size
  int generation = -1, population = 0;
  int n_infeasible = 0;  // with constraints: finished trials that violate one
  nlohmann::json to_json() const;
};

struct Suggestion {
  nlohmann::json params;  // nested, constants included, types as the sweep file says
  ModelState model;
};

// The suggestion for trial `index` of `spec` (spec.seed, index and the
// history make it reproducible). Several objectives, constraints or method
// nsga2 take the multi-objective searchers (multi.cpp, nsga2.cpp): nsga2
// after Optuna's NSGAIISampler, tpe after Optuna's multi-objective and
// constrained TPE, bayes on a random Chebyshev scalarisation per suggestion
// (ParEGO). Errors: a sweep with an explicit `trials` list, or a metric-less
// sweep. Never throws.
Result<Suggestion> suggest(const SearchSettings& settings, const SweepSpec& spec, const SearchHistory& history,
                           int64_t index);

}  // namespace swept::sweeps::search
