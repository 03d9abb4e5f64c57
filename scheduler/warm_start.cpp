// SweepRunner's warm starts (sweep_runner.h; docs/sweep-format.md "Warm
// starts"): which earlier trials a submitted sweep is offered, their import
// as `imported` trials, and the grid points the sweep then steps over.
// Which trials fit, and where, is sweeps/warm_start.h's.
#include <iterator>
#include <string>

#include "common/log.h"
#include "scheduler/sweep_runner.h"

namespace swept::scheduler {

Result<std::optional<std::vector<sweeps::WarmCandidate>>> SweepRunner::warm_candidates(const sweeps::SweepSpec& spec,
                                                                                      const WarmInput& warm) {
  using Candidates = std::vector<sweeps::WarmCandidate>;
  const bool from_flag = warm.sweep.has_value();
  std::optional<int64_t> sweep = from_flag ? warm.sweep : std::optional<int64_t>();
  if (!from_flag && spec.warm_start) sweep = spec.warm_start->sweep;
  if (!sweep && !(spec.warm_start && spec.warm_start->file)) return std::optional<Candidates>();
  const std::string field = from_flag ? "--warm-start" : sweep ? "warm_start.sweep" : "warm_start.file";
  // The parser refuses warm_start without a metric; --warm-start needs one too.
  if (!spec.metric)
    return Status::InvalidArgument(field + ": a warm start needs the sweep's metric (metric.name): the earlier "
                                           "trials seed the search with their values of it");
  if (!sweep) {
    // The file is read by the client (swept submit, swept run), never here.
    if (!warm.trials)
      return Status::InvalidArgument("warm_start.file: the trials of " + *spec.warm_start->file +
                                     " were not sent with the sweep; submit it with `swept submit`, which reads the "
                                     "file");
    return std::optional<Candidates>(*warm.trials);
  }
  auto rows = store::trial_rows(store_.connection(), *sweep);
  if (!rows.ok()) {
    if (rows.status().code() != StatusCode::kNotFound) return rows.status();
    return Status::InvalidArgument(field + ": there is no sweep " + std::to_string(*sweep) +
                                   " in this scheduler's database; `swept status` lists the sweeps");
  }
  Candidates out;
  for (const TrialRow& row : *rows)
    out.push_back(sweeps::candidate_from_row(row, spec.metric->name, "sweep " + std::to_string(*sweep)));
  return std::optional<Candidates>(std::move(out));
}

Result<std::string> SweepRunner::import_warm_start(Active& s, const std::vector<sweeps::WarmCandidate>& candidates) {
  const sweeps::WarmPlan plan = sweeps::plan_warm_start(s.spec, candidates);
  int64_t below = -1;  // outside a grid: indices -1, -2, ... in the candidates' order
  for (const auto& seed : plan.seeds) {
    const int64_t index = seed.grid_index ? *seed.grid_index : below--;
    SWEPT_RETURN_IF_ERROR(store_.insert_imported_trial(s.id, index, seed.params.dump(), s.spec.metric->name,
                                                       seed.value, seed.origin, clock_.wall_seconds())
                              .status());
    if (seed.grid_index) s.imported.insert(index);
  }
  SWEPT_RETURN_IF_ERROR(skip_imported(s));
  const std::string summary = "warm start: " + plan.summary(s.spec.metric->name);
  log::info("sweep " + std::to_string(s.id) + ": " + summary);
  return summary;
}

Status SweepRunner::skip_imported(Active& s) {
  const int64_t before = s.next_index;
  while (s.imported.count(s.next_index)) ++s.next_index;
  if (s.next_index == before) return Status::Ok();
  return store_.raise_next_index(s.id, s.next_index);
}

Result<std::optional<std::string>> SweepRunner::target_reached_by_own(const Active& s) {
  if (!s.spec.metric || !s.spec.metric->target) return std::optional<std::string>();
  // Imported trials are another sweep's results: they never end this one.
  SWEPT_ASSIGN_OR_RETURN(done, store_.trials_in_state(s.id, TrialState::kCompleted));
  for (const TrialRow& t : done)
    if (t.metric_value && s.spec.metric->reaches_target(*t.metric_value))
      return std::optional<std::string>("trial " + std::to_string(t.id) + " reached the target (metric.target)");
  return std::optional<std::string>();
}

}  // namespace swept::scheduler
