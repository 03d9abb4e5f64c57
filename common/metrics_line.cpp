#include "common/metrics_line.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace swept {

std::optional<MetricsRecord> parse_metrics_line(std::string_view line) {
  if (line.size() > kMaxMetricLineBytes) return std::nullopt;
  size_t b = line.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos || line[b] != '{') return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;

  MetricsRecord rec;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "step") {
      if (v.is_number_unsigned()) {
        rec.step = static_cast<int64_t>(v.get<uint64_t>());
      } else if (v.is_number_integer() && v.get<int64_t>() >= 0) {
        rec.step = v.get<int64_t>();
      } else if (v.is_number_float() && v.get<double>() >= 0 &&
                 v.get<double>() == std::floor(v.get<double>()) && v.get<double>() < 9e15) {
        rec.step = static_cast<int64_t>(v.get<double>());
      } else {
        return std::nullopt;
      }
      continue;
    }
    if (key == "final") {
      rec.final = v.is_boolean() && v.get<bool>();
      continue;
    }
    if (key == "diverged") {
      rec.diverged = v.is_boolean() && v.get<bool>();
      continue;
    }
    if (!v.is_number() || key.empty()) continue;
    double d = v.get<double>();
    if (!std::isfinite(d)) continue;
    rec.values.emplace_back(key, d);
  }
  return rec;
}

}  // namespace swept
