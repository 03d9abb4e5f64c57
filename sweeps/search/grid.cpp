// Grid search: trial i of a grid is a mixed-radix number whose digits pick
// each leaf's value (the last leaf varying fastest, W&B's order), optionally
// through a seeded permutation of the positions (`order: random`, or random
// search without replacement, which walks the grid so). An explicit `trials`
// list is walked the same way, as a grid of one dimension. Nothing is
// materialised: trial i costs O(parameters), so a restarted scheduler can
// recompute any trial from (spec, i).
#include <cmath>

#include "sweeps/numeric.h"
#include "sweeps/space.h"

namespace swept::sweeps {

using json = nlohmann::json;

namespace {

// Keys the random stream of the walk order apart from random search's draws.
constexpr uint64_t kOrderStream = 0x6f726465722d6b65ULL;  // "order-ke"

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

json grid_trial_params(const SweepSpec& spec, int64_t index) {
  const ParameterSpace& space = *spec.space;
  if (space.explicit_list) {
    const auto n = static_cast<int64_t>(space.explicit_trials.size());
    const int64_t position = ((index % n) + n) % n;  // the precondition says 0 <= index < n
    return space.explicit_trials[static_cast<size_t>(position_to_grid_index(spec, position, n))];
  }
  const int64_t n = space.grid_size;
  const int64_t position = ((index % n) + n) % n;
  return grid_params(space, position_to_grid_index(spec, position, n));
}

}  // namespace swept::sweeps
