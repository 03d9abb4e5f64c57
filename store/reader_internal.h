// The steps the read model's files share (reader.cpp: sweeps;
// reader_trials.cpp: trials). Private to store/: callers outside it use
// reader.h. Each runs inside the caller's read transaction.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/reader.h"
#include "store/rows.h"
#include "store/sqlite.h"
#include "sweeps/metric.h"

namespace swept::store {

// Parameter name -> its key path, from the first trials of the sweep.
Result<std::map<std::string, std::vector<std::string>>> param_paths(Connection& db, int64_t sweep_id);
// The metric names some trial of the sweep reported, sorted.
Result<std::vector<std::string>> metric_names(Connection& db, int64_t sweep_id);

// What the read model needs of a sweep's file (reader.h, "Constraints" and
// "Several objectives"): its objectives (its one metric, or its `metrics:`;
// empty without a metric) and its constraints.
struct SweepGoals {
  std::vector<sweeps::Metric> objectives;
  std::vector<sweeps::Constraint> constraints;
  bool multi_objective() const { return objectives.size() > 1; }
};
// The goals of `sw`, from its spec (parsed once per spec text in this
// process; thread-safe). A spec that does not parse gives the row's metric
// alone. Never null.
std::shared_ptr<const SweepGoals> sweep_goals(const SweepRow& sw);

// A completed trial's final values (trial_latest) of the metrics asked for.
struct TrialValues {
  int64_t id = 0, idx = 0;
  std::map<std::string, double> values;
  nlohmann::json params;  // only when asked for
};
// The sweep's trials that count for "best" (completed) with their final
// values of `names`, by idx; every such trial, also one without any of them.
Result<std::vector<TrialValues>> completed_values(Connection& db, int64_t sweep_id, const std::vector<std::string>& names,
                                                  bool with_params = false);
// The constraints `values` violates (their names, in the sweep's order);
// empty when feasible.
std::vector<std::string> violated_constraints(const SweepGoals& goals, const std::map<std::string, double>& values);
// Ids of the sweep's completed trials that violate a constraint.
Result<std::set<int64_t>> infeasible_trials(Connection& db, const SweepRow& sw, const SweepGoals& goals);
// Sets `feasible` and `violated` on the completed rows (their `latest` read)
// of a sweep with constraints.
void mark_feasibility(const SweepGoals& goals, std::vector<TrialRow>& rows);
// The summary's constraints.
void fill_constraints(SweepRow& sw, const SweepGoals& goals);
// The summary's front of a sweep with several objectives.
Status fill_front(Connection& db, SweepRow& sw, const SweepGoals& goals);

// Sweep rows (one, or all newest first) with their best trial (unless
// `with_best` is false: a caller that ranks trials itself) and
// constraints; with `with_counts`, also the counts per state, the
// never-reported metric and (with `with_front`) the Pareto front.
Result<std::vector<SweepRow>> read_sweeps(Connection& db, std::optional<int64_t> only, bool with_counts = true,
                                          bool with_front = true, bool with_best = true);
// One sweep, or NotFound saying how to list them.
Result<SweepRow> get_sweep_in_txn(Connection& db, int64_t sweep_id, bool with_counts = true, bool with_best = true);

}  // namespace swept::store
