// The searchers: trial i of a grid (mixed-radix decode, optionally through a
// seeded permutation), of an explicit list, or of random search (each leaf
// through its inverse CDF at a uniform number that depends only on
// (seed, i, the leaf's path)). Nothing is materialised: trial_at(i) costs
// O(parameters), so a scheduler can recompute any trial after a restart.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sweeps/numeric.h"
#include "sweeps/space.h"
#include "sweeps/sweep.h"

namespace swept::sweeps {

using json = nlohmann::json;

namespace {

// Keys that separate the random streams of the walk order from the draws.
constexpr uint64_t kOrderStream = 0x6f726465722d6b65ULL;  // "order-ke"

json number_result(const Leaf& leaf, double v) {
  if (leaf.integer_output) return json(static_cast<int64_t>(v));
  return json(v);
}

double quantize(const Leaf& leaf, double r) { return numeric::round_half_even(r / leaf.q) * leaf.q; }

// Sets params[names...] = value, creating nested objects on the way.
void set_nested(json& params, const std::vector<std::string>& names, json value) {
  json* slot = &params;
  for (size_t k = 0; k + 1 < names.size(); ++k) slot = &(*slot)[names[k]];
  (*slot)[names.back()] = std::move(value);
}

int64_t position_to_grid_index(const SweepSpec& spec, int64_t position, int64_t n) {
  const ParameterSpace& space = *spec.space;
  if (!space.random_order && !space.without_replacement) return position;
  const uint64_t key = numeric::mix64(spec.seed ^ kOrderStream);
  return static_cast<int64_t>(numeric::permute_index(static_cast<uint64_t>(position), static_cast<uint64_t>(n), key));
}

json grid_params(const ParameterSpace& space, int64_t grid_index) {
  json params = json::object();
  // Mixed radix with the last leaf varying fastest.
  std::vector<int64_t> digit(space.leaves.size());
  for (size_t k = space.leaves.size(); k-- > 0;) {
    digit[k] = grid_index % space.radix[k];
    grid_index /= space.radix[k];
  }
  for (size_t k = 0; k < space.leaves.size(); ++k) set_nested(params, space.leaves[k].names, grid_value(space.leaves[k], digit[k]));
  return params;
}

}  // namespace

int64_t grid_radix(const Leaf& leaf) {
  switch (leaf.distribution) {
    case Distribution::kConstant: return 1;
    case Distribution::kIntUniform: return leaf.int_max - leaf.int_min + 1;
    case Distribution::kQUniform: return static_cast<int64_t>(std::ceil((leaf.max - leaf.min) / leaf.q));
    default: return static_cast<int64_t>(leaf.grid_values.size());
  }
}

json grid_value(const Leaf& leaf, int64_t i) {
  switch (leaf.distribution) {
    case Distribution::kConstant: return leaf.value;
    case Distribution::kIntUniform: return json(leaf.int_min + i);
    case Distribution::kQUniform:
      // numpy.arange(min, max, q): integers when all three are, else
      // start + i * delta with delta = (start + q) - start.
      if (leaf.integer_output) return json(leaf.int_min + i * leaf.int_q);
      if (i == 0) return json(leaf.min);
      if (i == 1) return json(leaf.min + leaf.q);
      return json(leaf.min + static_cast<double>(i) * ((leaf.min + leaf.q) - leaf.min));
    default: return leaf.grid_values[static_cast<size_t>(i)];
  }
}

json value_at_quantile(const Leaf& leaf, double u) {
  switch (leaf.distribution) {
    case Distribution::kConstant: return leaf.value;
    case Distribution::kCategorical: {
      // scipy randint.ppf: the smallest k with (k + 1) / n >= u.
      const size_t n = leaf.values.size();
      double k = std::ceil(u * static_cast<double>(n)) - 1.0;
      k = std::clamp(k, 0.0, static_cast<double>(n - 1));
      return leaf.values[static_cast<size_t>(k)];
    }
    case Distribution::kCategoricalWithProbabilities: {
      // The first value whose running sum exceeds u; the last value with a
      // positive probability catches rounding when the sum is just below 1.
      size_t last_positive = 0;
      for (size_t i = 0; i < leaf.cumulative.size(); ++i) {
        if (i == 0 ? leaf.cumulative[0] > 0 : leaf.cumulative[i] > leaf.cumulative[i - 1]) last_positive = i;
      }
      for (size_t i = 0; i < leaf.cumulative.size(); ++i) {
        if (leaf.cumulative[i] > u) return leaf.values[i];
      }
      return leaf.values[last_positive];
    }
    case Distribution::kIntUniform: {
      // scipy randint.ppf(u, min, max + 1): min + ceil(u * n) - 1, in [min, max].
      const double n = static_cast<double>(leaf.int_max) - static_cast<double>(leaf.int_min) + 1.0;
      double offset = std::ceil(u * n) - 1.0;
      const uint64_t top = static_cast<uint64_t>(leaf.int_max - leaf.int_min);
      uint64_t k = offset <= 0 ? 0 : (offset >= static_cast<double>(top) ? top : static_cast<uint64_t>(offset));
      return json(static_cast<int64_t>(static_cast<uint64_t>(leaf.int_min) + k));
    }
    case Distribution::kUniform: return json(u * (leaf.max - leaf.min) + leaf.min);
    case Distribution::kQUniform: return number_result(leaf, quantize(leaf, u * (leaf.max - leaf.min) + leaf.min));
    case Distribution::kLogUniformValues: {
      const double lo = std::log(leaf.min), hi = std::log(leaf.max);
      return json(std::exp(u * (hi - lo) + lo));
    }
    case Distribution::kInvLogUniformValues: {
      // W&B: bounds log(1/max), log(1/min); value exp(-uniform.ppf(1 - u)).
      const double lo = std::log(1.0 / leaf.max), hi = std::log(1.0 / leaf.min);
      return json(std::exp(-((1.0 - u) * (hi - lo) + lo)));
    }
    case Distribution::kQLogUniformValues: {
      const double lo = std::log(leaf.min), hi = std::log(leaf.max);
      return number_result(leaf, quantize(leaf, std::exp(u * (hi - lo) + lo)));
    }
    case Distribution::kNormal: return json(numeric::normal_quantile(u) * leaf.sigma + leaf.mu);
    case Distribution::kQNormal: return number_result(leaf, quantize(leaf, numeric::normal_quantile(u) * leaf.sigma + leaf.mu));
    case Distribution::kLogNormal: return json(std::exp(leaf.sigma * numeric::normal_quantile(u)) * std::exp(leaf.mu));
    case Distribution::kQLogNormal:
      return number_result(leaf, quantize(leaf, std::exp(leaf.sigma * numeric::normal_quantile(u)) * std::exp(leaf.mu)));
    case Distribution::kBeta: return json(numeric::beta_quantile(u, leaf.a, leaf.b));
    case Distribution::kQBeta: return number_result(leaf, quantize(leaf, numeric::beta_quantile(u, leaf.a, leaf.b)));
  }
  return json();
}

std::optional<int64_t> trial_count(const SweepSpec& spec) {
  const ParameterSpace& space = *spec.space;
  std::optional<int64_t> n;
  if (space.explicit_list) n = static_cast<int64_t>(space.explicit_trials.size());
  else if (spec.method == Method::kGrid || space.without_replacement) n = space.grid_size;
  if (spec.run_cap) n = n ? std::min(*n, *spec.run_cap) : *spec.run_cap;
  return n;
}

Trial trial_at(const SweepSpec& spec, int64_t index) {
  const ParameterSpace& space = *spec.space;
  Trial trial;
  trial.index = index;
  if (space.explicit_list) {
    const auto n = static_cast<int64_t>(space.explicit_trials.size());
    const int64_t position = ((index % n) + n) % n;  // precondition says 0 <= index < n
    trial.params = space.explicit_trials[static_cast<size_t>(position_to_grid_index(spec, position, n))];
    return trial;
  }
  if (spec.method == Method::kGrid || space.without_replacement) {
    const int64_t n = space.grid_size;
    const int64_t position = ((index % n) + n) % n;
    trial.params = grid_params(space, position_to_grid_index(spec, position, n));
    return trial;
  }
  trial.params = json::object();
  for (const Leaf& leaf : space.leaves) {
    set_nested(trial.params, leaf.names, value_at_quantile(leaf, numeric::uniform_open01(spec.seed, index, leaf.stream)));
  }
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
  else s = space.without_replacement ? "random without replacement" : "random";
  if (space.random_order) s += " in random order";
  const int n = parameter_count(spec);
  s += ", " + std::to_string(n) + (n == 1 ? " parameter, " : " parameters, ");
  const auto count = trial_count(spec);
  s += count ? std::to_string(*count) + (*count == 1 ? " trial" : " trials") : "unbounded (no run_cap)";
  return s;
}

}  // namespace swept::sweeps
