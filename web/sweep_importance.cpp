// Parameter importance over the read model's sample: see sweep_importance.h.
#include "web/sweep_importance.h"

#include <cmath>

#include "common/params.h"

namespace swept::web {
namespace {

double param_number_or_nan(const nlohmann::json& v) { return v.is_number() ? v.get<double>() : NAN; }

}  // namespace

Result<ImportanceReport> sweep_importance(store::Connection& db, int64_t sweep_id, int64_t max_trials) {
  ImportanceReport report;
  {
    auto sampled = store::sweep_points(db, sweep_id, max_trials, /*best_count=*/0);
    if (!sampled.ok()) return sampled.status();
    const store::SweepPoints& sample = *sampled;
    report.metric_name = sample.metric_name;
    report.population = sample.population;
    report.sampled = static_cast<int64_t>(sample.points.size());
    ImportanceInput in;
    in.names = sample.params;
    in.values.assign(in.names.size(), std::vector<ParamValue>(sample.points.size()));
    in.present.assign(in.names.size(), std::vector<bool>(sample.points.size(), false));
    for (size_t t = 0; t < sample.points.size(); ++t) {
      const TrialRow& r = sample.points[t];
      in.metric.push_back(r.metric_value.value_or(NAN));
      const nlohmann::json flat = flat_params_object(r.params);  // the names are flattened ("opt.lr")
      for (size_t p = 0; p < in.names.size(); ++p) {
        auto it = flat.find(in.names[p]);
        if (it == flat.end()) continue;
        in.present[p][t] = true;
        if (it->is_number()) {
          in.values[p][t] = param_number_or_nan(*it);
        } else {
          in.values[p][t] = it->dump();
        }
      }
    }
    report.params = parameter_importance(in, 10);
  }
  report.method =
      "correlation ratio eta^2 (R^2 of a one-way ANOVA) of the sweep's metric on each parameter; numeric "
      "parameters with more than 10 distinct values are grouped into 10 equal-count bins by rank; computed on "
      "the trials at every k-th index that have a metric value, k chosen so that at most " +
      std::to_string(max_trials) + " are sampled";
  return report;
}

}  // namespace swept::web
