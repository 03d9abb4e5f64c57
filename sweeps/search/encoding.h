// The coordinates both searchers work in. Internal to sweeps/search.
//
// A numeric parameter becomes u in (0, 1): its value's probability under the
// sweep's own distribution (the CDF; for log_uniform_values that is the log
// scale, for int_uniform the middle of the integer's cell, for normal Phi).
// The way back is value_at_quantile, the very function random search uses,
// so a suggestion has exactly the types and rounding of a random trial.
// A categorical parameter becomes the index of its value among the distinct
// values; the GP one-hot encodes it, TPE gives it a categorical kernel.
// Constants are not searched over.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweeps/space.h"

namespace swept::sweeps::search {

struct Dimension {
  const Leaf* leaf = nullptr;
  bool categorical = false;
  size_t n_choices = 0;  // categorical: distinct values (leaf->grid_values)
  int64_t cells = 0;     // numeric discrete (int, q): how many values; 0 = continuous
};

struct Encoding {
  const ParameterSpace* space = nullptr;
  std::vector<Dimension> dims;
  size_t n_numeric = 0, n_categorical = 0;
};

Encoding encode_space(const ParameterSpace& space);

// A trial's params as a point in the searchers' coordinates (named apart from
// protocol::encode, which is the wire's): dims.size() numbers, u in (0, 1) for numeric dims, the choice index
// for categorical ones. nullopt when params lack a parameter or hold a value
// the space cannot hold (a trial from another version of the sweep).
std::optional<std::vector<double>> to_point(const Encoding& e, const nlohmann::json& params);

// The way back: the params of a point (nested, constants included).
nlohmann::json to_params(const Encoding& e, const std::vector<double>& point);

// Snaps a point to what to_params would produce (numeric u to the middle of its
// cell for discrete parameters), so that the models compare like with like.
std::vector<double> snap(const Encoding& e, const std::vector<double>& point);

// A counter-based uniform in (0, 1): independent per (seed, index, stream, k).
double uniform(uint64_t seed, int64_t index, uint64_t stream, uint64_t k);

// Standard normal CDF.
double normal_cdf(double z);

}  // namespace swept::sweeps::search
