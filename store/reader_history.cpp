// The read model's optimisation history (reader.h, optimization_history):
// the sweep's trials that count for "best", each with the best value so far
// in trial order and in completion order. Kept apart from reader.cpp for size.
#include <algorithm>

#include "store/reader.h"
#include "store/reader_internal.h"

namespace swept::store {

Result<OptimizationHistory> optimization_history(Connection& db, int64_t sweep_id, int64_t max_points) {
  if (max_points < 1 || max_points > 20000) return Status::InvalidArgument("limit must be between 1 and 20000");
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  SWEPT_ASSIGN_OR_RETURN(sweep, get_sweep(db, sweep_id));
  OptimizationHistory out;
  out.sweep_id = sweep.id;
  out.metric_name = sweep.metric_name;
  out.metric_goal = sweep.metric_goal;
  out.created_at = sweep.created_at;
  if (sweep.best) out.best = BestTrial{sweep.best->trial_id, sweep.best->value, nlohmann::json::object()};
  if (!sweep.metric_name) return out;
  const bool maximize = sweep.metric_goal && *sweep.metric_goal == "maximize";
  // Exactly the trials "best" ranks (reader.h): the best states, a value set.
  // Index: trials_by_sweep_state (sweep_id, state).
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare("SELECT id, idx, metric_value, ended_at FROM trials WHERE sweep_id = ? AND "
                                          "metric_value IS NOT NULL AND state IN (" + sql_state_list([](const TrialStateInfo& s) { return s.counts_for_best; }) + ") ORDER BY idx"));
  stmt.bind(1, sweep_id);
  // Infeasible trials are never best (reader.h, "Constraints"), so not points.
  SWEPT_ASSIGN_OR_RETURN(infeasible, infeasible_trials(db, sweep, *sweep_goals(sweep)));
  std::vector<HistoryPoint> all;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) break;
    if (infeasible.count(stmt.int64(0))) continue;
    HistoryPoint p;
    p.trial_id = stmt.int64(0);
    p.idx = stmt.int64(1);
    p.value = stmt.real(2);
    p.ended_at = stmt.optional_real(3);
    all.push_back(p);
  }
  out.total = static_cast<int64_t>(all.size());
  if (all.empty()) return out;

  // "Better" as best ranks it: lower (minimize) or higher (maximize) value,
  // ties to the lower trial id.
  auto better = [maximize](const HistoryPoint& a, const HistoryPoint& b) {
    if (a.value != b.value) return maximize ? a.value > b.value : a.value < b.value;
    return a.trial_id < b.trial_id;
  };
  std::vector<char> improves(all.size(), 0);
  // In trial order (idx).
  size_t best = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i == 0 || better(all[i], all[best])) best = i, improves[i] = 1;
    all[i].best_by_index = all[best].value;
  }
  // In completion order (ended_at, then id; a row without ended_at last).
  std::vector<size_t> by_time(all.size());
  for (size_t i = 0; i < all.size(); ++i) by_time[i] = i;
  std::stable_sort(by_time.begin(), by_time.end(), [&](size_t a, size_t b) {
    const auto& ea = all[a].ended_at;
    const auto& eb = all[b].ended_at;
    if (ea.has_value() != eb.has_value()) return ea.has_value();
    if (ea && *ea != *eb) return *ea < *eb;
    return all[a].trial_id < all[b].trial_id;
  });
  best = by_time.front();
  for (size_t k = 0; k < by_time.size(); ++k) {
    size_t i = by_time[k];
    if (k == 0 || better(all[i], all[best])) best = i, improves[i] = 1;
    all[i].best_by_time = all[best].value;
  }

  // At most about max_points: every stride-th trial (in idx order) and every
  // trial that improved the best in either order, so the staircases keep
  // their steps. Each kept point's best values are those of the whole sweep.
  out.stride = std::max<int64_t>(1, (out.total + max_points - 1) / max_points);
  int64_t improvements = 0;
  for (char c : improves) improvements += c;
  const int64_t improvement_stride = std::max<int64_t>(1, (improvements + max_points - 1) / max_points);
  int64_t seen_improvements = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    bool keep = static_cast<int64_t>(i) % out.stride == 0 || i + 1 == all.size();
    if (improves[i] && seen_improvements++ % improvement_stride == 0) keep = true;
    if (keep) out.points.push_back(all[i]);
  }
  return out;
}

}  // namespace swept::store
