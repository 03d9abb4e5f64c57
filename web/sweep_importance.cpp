// Parameter importance over the read model's sample: see sweep_importance.h.
#include "web/sweep_importance.h"

#include <cmath>

#include "common/params.h"

namespace swept::web {
namespace {

// The parameters of `trials` (nested params) as eta_squared.h takes them,
// for the flattened names `names`; the metric is left to the caller.
ImportanceInput input_for(const std::vector<std::string>& names, const std::vector<const nlohmann::json*>& trials) {
  ImportanceInput in;
  in.names = names;
  in.values.assign(names.size(), std::vector<ParamValue>(trials.size()));
  in.present.assign(names.size(), std::vector<bool>(trials.size(), false));
  for (size_t t = 0; t < trials.size(); ++t) {
    const nlohmann::json flat = flat_params_object(*trials[t]);  // the names are flattened ("opt.lr")
    for (size_t p = 0; p < names.size(); ++p) {
      auto it = flat.find(names[p]);
      if (it == flat.end()) continue;
      in.present[p][t] = true;
      if (it->is_number())
        in.values[p][t] = it->get<double>();
      else
        in.values[p][t] = it->dump();
    }
  }
  return in;
}

// One objective: the read model's evenly strided sample of trials with a
// value of the metric.
Status one_metric(store::Connection& db, int64_t sweep_id, int64_t max_trials, ImportanceReport& report) {
  SWEPT_ASSIGN_OR_RETURN(sample, store::sweep_points(db, sweep_id, max_trials, /*best_count=*/0));
  report.metric_name = sample.metric_name;
  report.population = sample.population;
  report.sampled = static_cast<int64_t>(sample.points.size());
  std::vector<const nlohmann::json*> params;
  for (const TrialRow& r : sample.points) params.push_back(&r.params);
  ImportanceInput in = input_for(sample.params, params);
  for (const TrialRow& r : sample.points) in.metric.push_back(r.metric_value.value_or(NAN));
  report.params = parameter_importance(in, 10);
  return Status::Ok();
}

// Several objectives: the completed trials with a value of every objective
// (store::objective_points: every k-th of them, plus the front), once per
// objective.
void each_objective(const store::ObjectivePoints& points, int64_t population, ImportanceReport& report) {
  std::vector<const store::ObjectivePoint*> sample;
  for (const auto& p : points.points) sample.push_back(&p);
  std::vector<const nlohmann::json*> params;
  for (const auto* p : sample) params.push_back(&p->params);
  report.population = population;
  report.sampled = static_cast<int64_t>(sample.size());
  for (size_t k = 0; k < points.objectives.size(); ++k) {
    ImportanceInput in = input_for(points.params, params);
    for (const auto* p : sample) in.metric.push_back(p->values[k]);
    report.objectives.push_back({points.objectives[k].name, points.objectives[k].goal, parameter_importance(in, 10)});
  }
  report.metric_name = report.objectives.front().metric;
  report.params = report.objectives.front().params;
}

}  // namespace

Result<ImportanceReport> sweep_importance(store::Connection& db, int64_t sweep_id, int64_t max_trials) {
  ImportanceReport report;
  SWEPT_ASSIGN_OR_RETURN(sweep, store::get_sweep(db, sweep_id));
  if (sweep.front) {
    SWEPT_ASSIGN_OR_RETURN(points, store::objective_points(db, sweep_id, max_trials));
    each_objective(points, sweep.next_index, report);
  } else {
    SWEPT_RETURN_IF_ERROR(one_metric(db, sweep_id, max_trials, report));
  }
  report.method =
      "correlation ratio eta^2 (R^2 of a one-way ANOVA) of the sweep's metric (with several objectives: of each "
      "objective) on each parameter; numeric parameters with more than 10 distinct values are grouped into 10 "
      "equal-count bins by rank; parameters that never changed are not listed; computed on the trials at every "
      "k-th index that have a metric value (with several objectives: the completed trials with every objective), "
      "k chosen so that at most " +
      std::to_string(max_trials) + " are sampled";
  return report;
}

}  // namespace swept::web
