// The parsed parameter tree (ParameterSpace, opaque outside sweeps/), the
// per-parameter value functions every searcher uses, and grid and random
// search's trials. Internal header.
//
// Invariants (established by parse_sweep, relied on everywhere else):
// - `leaves` are in depth-first order with names sorted (byte order) at each
//   nesting level; in a grid the last leaf varies fastest (W&B's order).
// - every number is finite; min < max where both exist; sigma, a, b, q > 0;
//   a grid's or a without-replacement space's product is <= kMaxGridTrials.
// - `grid_values` holds categorical values with duplicates removed, first
//   occurrence kept (nlohmann's ==: 3.0 == 3, true != 1, objects by content).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweeps/sweep.h"

namespace swept::sweeps {

enum class Distribution {
  kConstant,
  kCategorical,
  kCategoricalWithProbabilities,
  kIntUniform,
  kUniform,
  kQUniform,
  kLogUniformValues,
  kInvLogUniformValues,
  kQLogUniformValues,
  kNormal,
  kQNormal,
  kLogNormal,
  kQLogNormal,
  kBeta,
  kQBeta,
};

// W&B's name of a distribution ("q_log_uniform_values").
const char* distribution_name(Distribution d);

struct Leaf {
  std::vector<std::string> names;  // path from the top: {"optimizer", "beta1"}
  std::string dotted;              // "optimizer.beta1"
  Distribution distribution = Distribution::kConstant;
  nlohmann::json value;                     // kConstant
  std::vector<nlohmann::json> values;       // categorical kinds, as written (random draws)
  std::vector<nlohmann::json> grid_values;  // categorical, deduplicated (grid)
  std::vector<double> cumulative;           // kCategoricalWithProbabilities: running sums
  double min = 0, max = 0, mu = 0, sigma = 1, a = 1, b = 1, q = 1;
  int64_t int_min = 0, int_max = 0, int_q = 1;  // when the JSON numbers are integers
  bool integer_output = false;  // results are JSON integers (int_uniform; q-types per the format)
  uint64_t stream = 0;          // fnv1a64(dotted): this leaf's random stream
};

struct ParameterSpace {
  std::vector<Leaf> leaves;
  // Explicit `trials` (params as nested objects, constants merged in); when
  // non-empty, leaves holds only the constants and trials are walked in order.
  std::vector<nlohmann::json> explicit_trials;
  bool explicit_list = false;
  bool random_order = false;         // `order: "random"`
  bool without_replacement = false;  // random search as a seeded permutation of the grid
  std::vector<int64_t> radix;        // grid size per leaf (when the space is gridable)
  int64_t grid_size = 0;             // product of radix; 0 when not gridable
};

// Grid search (search/grid.cpp).
// How many values a gridable leaf takes in a grid (numpy.arange for q_uniform).
int64_t grid_radix(const Leaf& leaf);
// The grid's i-th value of a gridable leaf, 0 <= i < grid_radix(leaf).
nlohmann::json grid_value(const Leaf& leaf, int64_t i);
// Trial `index` of an explicit list, or of a grid (also random search without
// replacement), walked in order or by the seeded permutation. Precondition:
// the space is an explicit list or gridable (grid_size > 0).
nlohmann::json grid_trial_params(const SweepSpec& spec, int64_t index);

// Random search (search/random.cpp).
// The random-search value of a leaf at the uniform number u in (0, 1): W&B's
// HyperParameter.ppf, with our own inverse CDFs.
nlohmann::json value_at_quantile(const Leaf& leaf, double u);
// Trial `index` of random search: each leaf at its own seeded uniform.
nlohmann::json random_trial_params(const SweepSpec& spec, int64_t index);

// Sets params[names...] = value, creating nested objects on the way (expand.cpp).
void set_nested(nlohmann::json& params, const std::vector<std::string>& names, nlohmann::json value);

// Parses one parameter's settings as a sweep file would give them (for the
// conformance tests of the inverse CDFs). Problems are paths under `name`.
ParseOutcome parse_single_parameter(const nlohmann::json& config, Leaf* out);

}  // namespace swept::sweeps
