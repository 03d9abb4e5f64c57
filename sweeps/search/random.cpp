// Random search: each leaf's value is its distribution's inverse CDF at a
// uniform number that depends only on (seed, trial index, the leaf's path),
// so trial i is the same on any machine and after any restart, and adding a
// parameter leaves the others' draws alone. value_at_quantile is also the
// way back from the adaptive searchers' coordinates (encoding.h), so their
// suggestions have the types and rounding of a random trial.
#include <algorithm>
#include <cmath>

#include "sweeps/numeric.h"
#include "sweeps/space.h"

namespace swept::sweeps {

using json = nlohmann::json;

namespace {

json number_result(const Leaf& leaf, double v) {
  if (leaf.integer_output) return json(static_cast<int64_t>(v));
  return json(v);
}

double quantize(const Leaf& leaf, double r) { return numeric::round_half_even(r / leaf.q) * leaf.q; }

}  // namespace

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

json random_trial_params(const SweepSpec& spec, int64_t index) {
  json params = json::object();
  for (const Leaf& leaf : spec.space->leaves) {
    set_nested(params, leaf.names, value_at_quantile(leaf, numeric::uniform_open01(spec.seed, index, leaf.stream)));
  }
  return params;
}

}  // namespace swept::sweeps
