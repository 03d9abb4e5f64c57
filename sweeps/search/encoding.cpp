// Parameters to search coordinates and back (see encoding.h).
#include "sweeps/search/encoding.h"

#include <algorithm>
#include <cmath>

#include "sweeps/numeric.h"

namespace swept::sweeps::search {
namespace {

using nlohmann::json;

constexpr double kEdge = 1e-12;  // inverse CDFs of unbounded priors need u strictly inside (0, 1)

const json* get_nested(const json& params, const std::vector<std::string>& names) {
  const json* at = &params;
  for (const std::string& n : names) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(n);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

// The CDF of the leaf's distribution at x (the inverse of value_at_quantile
// up to its rounding).
double quantile_of(const Leaf& leaf, double x) {
  switch (leaf.distribution) {
    case Distribution::kIntUniform: {
      const double n = static_cast<double>(leaf.int_max) - static_cast<double>(leaf.int_min) + 1.0;
      return (std::round(x) - static_cast<double>(leaf.int_min) + 0.5) / n;
    }
    case Distribution::kUniform:
    case Distribution::kQUniform: return (x - leaf.min) / (leaf.max - leaf.min);
    case Distribution::kLogUniformValues:
    case Distribution::kInvLogUniformValues:  // 1/x log-uniform is x log-uniform on the same bounds
    case Distribution::kQLogUniformValues:
      if (x <= 0) return 0;
      return (std::log(x) - std::log(leaf.min)) / (std::log(leaf.max) - std::log(leaf.min));
    case Distribution::kNormal:
    case Distribution::kQNormal: return normal_cdf((x - leaf.mu) / leaf.sigma);
    case Distribution::kLogNormal:
    case Distribution::kQLogNormal:
      if (x <= 0) return 0;
      return normal_cdf((std::log(x) - leaf.mu) / leaf.sigma);
    case Distribution::kBeta:
    case Distribution::kQBeta: return numeric::incomplete_beta(std::clamp(x, 0.0, 1.0), leaf.a, leaf.b);
    default: return 0.5;
  }
}

}  // namespace

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

double uniform(uint64_t seed, int64_t index, uint64_t stream, uint64_t k) {
  return numeric::uniform_open01(seed, index, numeric::mix64(stream ^ numeric::mix64(k + 0x9e3779b97f4a7c15ULL)));
}

Encoding encode_space(const ParameterSpace& space) {
  Encoding e;
  e.space = &space;
  for (const Leaf& leaf : space.leaves) {
    if (leaf.distribution == Distribution::kConstant) continue;
    Dimension d;
    d.leaf = &leaf;
    d.categorical = leaf.distribution == Distribution::kCategorical ||
                    leaf.distribution == Distribution::kCategoricalWithProbabilities;
    if (d.categorical) {
      d.n_choices = leaf.grid_values.size();
      ++e.n_categorical;
    } else {
      if (leaf.distribution == Distribution::kIntUniform)
        d.cells = leaf.int_max - leaf.int_min + 1;
      ++e.n_numeric;
    }
    e.dims.push_back(d);
  }
  return e;
}

std::optional<std::vector<double>> to_point(const Encoding& e, const json& params) {
  std::vector<double> point;
  point.reserve(e.dims.size());
  for (const Dimension& d : e.dims) {
    const json* v = get_nested(params, d.leaf->names);
    if (!v) return std::nullopt;
    if (d.categorical) {
      size_t k = 0;
      while (k < d.n_choices && !(d.leaf->grid_values[k] == *v)) ++k;
      if (k == d.n_choices) return std::nullopt;
      point.push_back(static_cast<double>(k));
    } else {
      if (!v->is_number()) return std::nullopt;
      const double u = quantile_of(*d.leaf, v->get<double>());
      if (!std::isfinite(u)) return std::nullopt;
      point.push_back(std::clamp(u, 0.0, 1.0));
    }
  }
  return point;
}

json to_params(const Encoding& e, const std::vector<double>& point) {
  json params = json::object();
  size_t i = 0;
  for (const Leaf& leaf : e.space->leaves) {
    if (leaf.distribution == Distribution::kConstant) {
      set_nested(params, leaf.names, leaf.value);
      continue;
    }
    const Dimension& d = e.dims[i];
    const double x = point[i++];
    if (d.categorical) {
      const auto k = static_cast<size_t>(std::clamp(x, 0.0, static_cast<double>(d.n_choices - 1)));
      set_nested(params, leaf.names, leaf.grid_values[k]);
    } else {
      set_nested(params, leaf.names, value_at_quantile(leaf, std::clamp(x, kEdge, 1.0 - kEdge)));
    }
  }
  return params;
}

std::vector<double> snap(const Encoding& e, const std::vector<double>& point) {
  auto back = to_point(e, to_params(e, point));
  return back ? *back : point;
}

}  // namespace swept::sweeps::search
