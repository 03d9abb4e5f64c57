// Flat parameter names: a trial's parameters nest as in its sweep file
// ({"optimizer": {"lr": 0.1}}); tables, CSV columns and charts name them flat,
// keys joined with '.' ("optimizer.lr"). One definition for the dashboard's
// read model and the CLI. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace swept {

struct FlatParam {
  std::string name;               // "optimizer.lr"
  std::vector<std::string> path;  // {"optimizer", "lr"}: the keys to the value
  const nlohmann::json* value;    // into the flattened object
};

// Every leaf of `params` (a scalar, an array or an empty object), in key
// order. Not an object: none. The result points into `params`.
std::vector<FlatParam> flatten_params(const nlohmann::json& params);
// The same leaves as one object, flattened name -> value ({"opt.lr": 0.1}):
// the dashboard API's shape of a trial's parameters (docs/api.md).
nlohmann::json flat_params_object(const nlohmann::json& params);

}  // namespace swept
