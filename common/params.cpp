// Flat parameter names: see params.h.
#include "common/params.h"

namespace swept {
namespace {

void walk(const nlohmann::json& value, std::vector<std::string>& path, std::vector<FlatParam>& out) {
  if (value.is_object() && !value.empty()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      path.push_back(it.key());
      walk(it.value(), path, out);
      path.pop_back();
    }
    return;
  }
  if (path.empty()) return;
  std::string name;
  for (const auto& key : path) {
    if (!name.empty()) name += '.';
    name += key;
  }
  out.push_back({std::move(name), path, &value});
}

}  // namespace

std::vector<FlatParam> flatten_params(const nlohmann::json& params) {
  std::vector<FlatParam> out;
  if (!params.is_object()) return out;
  std::vector<std::string> path;
  walk(params, path, out);
  return out;
}

nlohmann::json flat_params_object(const nlohmann::json& params) {
  nlohmann::json flat = nlohmann::json::object();
  for (const auto& p : flatten_params(params)) flat[p.name] = *p.value;
  return flat;
}

}  // namespace swept
