// The read model's sweeps (reader.h): summaries with their counts, the one
// "best" and the never-reported metric, a sweep's columns and sampled
// points, and the live snapshot. Trials are read in reader_trials.cpp,
// agents in reader_agents.cpp, the protocol's rows in reader_rows.cpp. Each
// query names the index of store/schema.sql it relies on, so that a schema
// change can be checked against them.
#include "store/reader.h"

#include <algorithm>
#include <set>

#include "common/params.h"
#include "store/reader_internal.h"
#include "store/schema.h"

namespace swept::store {

using nlohmann::json;

// Parameter name -> its key path, from the first trials of the sweep (trials
// of one sweep share their keys: they come from one sweep file).
Result<std::map<std::string, std::vector<std::string>>> param_paths(Connection& db, int64_t sweep_id) {
  std::map<std::string, std::vector<std::string>> out;
  // Index: UNIQUE (sweep_id, idx).
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare("SELECT params FROM trials WHERE sweep_id = ? ORDER BY idx LIMIT 20"));
  stmt.bind(1, sweep_id);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) break;
    json params = json::parse(stmt.text(0), nullptr, false);
    for (auto& p : flatten_params(params)) out.emplace(std::move(p.name), std::move(p.path));
  }
  return out;
}

// Metric names of the sweep: the distinct names of trial_latest, walked with
// the (name, value) index one name at a time (each step is one index seek),
// each kept if a trial of this sweep reported it.
Result<std::vector<std::string>> metric_names(Connection& db, int64_t sweep_id) {
  std::vector<std::string> out;
  SWEPT_ASSIGN_OR_RETURN(next, db.prepare("SELECT min(name) FROM trial_latest WHERE name > ?"));
  SWEPT_ASSIGN_OR_RETURN(
      used, db.prepare("SELECT 1 FROM trials t JOIN trial_latest l ON l.trial_id = t.id "
                       "WHERE t.sweep_id = ? AND l.name = ? LIMIT 1"));
  std::string last;
  for (int guard = 0; guard < 1000; ++guard) {
    next.reset();
    next.bind(1, std::string_view(last));
    SWEPT_ASSIGN_OR_RETURN(row, next.step());
    if (!row || next.is_null(0)) break;
    std::string name = next.text(0);
    used.reset();
    used.bind(1, sweep_id).bind(2, std::string_view(name));
    SWEPT_ASSIGN_OR_RETURN(found, used.step());
    if (found) out.push_back(name);
    last = name;
  }
  return out;
}

namespace {

// The states whose trials may be "best" (common/states.h), as a quoted SQL
// list built from the table's counts_for_best column.
std::string best_states_sql() {
  return sql_state_list([](const TrialStateInfo& s) { return s.counts_for_best; });
}

// The sweep's best trial: the one definition (reader.h, "Best"), the first
// feasible one in the metric's order (reader.h, "Constraints"). Index:
// trials_by_sweep_metric (sweep_id, metric_value).
Status fill_best(Connection& db, SweepRow& sw, const SweepGoals& goals) {
  if (!sw.metric_name) return Status::Ok();
  SWEPT_ASSIGN_OR_RETURN(infeasible, infeasible_trials(db, sw, goals));
  bool maximize = sw.metric_goal && *sw.metric_goal == "maximize";
  std::string sql = std::string("SELECT id, metric_value, params FROM trials WHERE sweep_id = ? AND ") +
                    "metric_value IS NOT NULL AND state IN (" + best_states_sql() + ") ORDER BY metric_value " +
                    (maximize ? "DESC" : "ASC") + ", id LIMIT ?";
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare(sql));
  // Enough rows to pass every infeasible trial: the first beyond them is feasible.
  stmt.bind(1, sw.id).bind(2, static_cast<int64_t>(infeasible.size()) + 1);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) break;
    if (infeasible.count(stmt.int64(0))) continue;
    json params = json::parse(stmt.text(2), nullptr, false);
    sw.best = BestTrial{stmt.int64(0), stmt.real(1), params.is_object() ? params : json::object()};
    break;
  }
  return Status::Ok();
}

// "A metric never reported" (reader.h), for a summary with its counts and best.
Status fill_metric_missing(Connection& db, SweepRow& sw) {
  const int64_t completed = sw.counts[TrialState::kCompleted];
  // A best among trials the sweep ran answers at once; a warm start's
  // imported trials (issue 28) are another sweep's reports, not its own.
  const bool best_is_own = sw.best && sw.counts[TrialState::kImported] == 0;
  if (!sw.metric_name || best_is_own || completed < kMetricMissingAfter) return Status::Ok();
  // Index: trials_by_sweep_metric (sweep_id, metric_value).
  SWEPT_ASSIGN_OR_RETURN(any, db.prepare("SELECT 1 FROM trials WHERE sweep_id = ? AND metric_value IS NOT NULL AND "
                                         "state <> ? LIMIT 1"));
  any.bind(1, sw.id).bind(2, TrialState::kImported);
  SWEPT_ASSIGN_OR_RETURN(reported, any.step());
  if (reported) return Status::Ok();
  // The names the first completed trials reported. Indexes:
  // trials_by_sweep_state, then trial_latest's primary key per trial.
  SWEPT_ASSIGN_OR_RETURN(names, db.prepare(
      "SELECT DISTINCT l.name FROM trial_latest l WHERE l.trial_id IN (SELECT id FROM trials WHERE sweep_id = ? AND "
      "state = ? ORDER BY id LIMIT ?) ORDER BY l.name LIMIT 100"));
  names.bind(1, sw.id).bind(2, TrialState::kCompleted).bind(3, kMetricMissingNamesFrom);
  MetricMissing missing;
  missing.completed = completed;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, names.step());
    if (!row) break;
    missing.reported.push_back(names.text(0));
  }
  sw.metric_missing = std::move(missing);
  return Status::Ok();
}

// Counts per state. Index: trials_by_sweep_state (covering).
Status fill_counts(Connection& db, std::vector<SweepRow>& sweeps, std::optional<int64_t> only) {
  std::map<int64_t, SweepRow*> by_id;
  for (auto& sw : sweeps) by_id[sw.id] = &sw;
  std::string sql = "SELECT sweep_id, state, count(*) FROM trials ";
  if (only) sql += "WHERE sweep_id = ? ";
  sql += "GROUP BY sweep_id, state";
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare(sql));
  if (only) stmt.bind(1, *only);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) break;
    auto it = by_id.find(stmt.int64(0));
    auto state = trial_state_named(stmt.text(1));
    if (it != by_id.end() && state) it->second->counts[*state] = stmt.int64(2);
  }
  return Status::Ok();
}

}  // namespace

// Sweep rows with their best trial (unless `with_best` is false) and
// constraints; with `with_counts`, also the counts per state (one scan of the
// trials_by_sweep_state index range), the never-reported metric and, with
// `with_front`, the Pareto front.
Result<std::vector<SweepRow>> read_sweeps(Connection& db, std::optional<int64_t> only, bool with_counts,
                                          bool with_front, bool with_best) {
  std::vector<SweepRow> out;
  std::string sql = std::string("SELECT ") + kSweepColumns + " FROM sweeps ";
  sql += only ? "WHERE id = ?" : "ORDER BY id DESC";
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare(sql));
  if (only) stmt.bind(1, *only);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) break;
    out.push_back(read_sweep_row(stmt));
  }
  if (with_counts) SWEPT_RETURN_IF_ERROR(fill_counts(db, out, only));
  for (auto& sw : out) {
    const auto goals = sweep_goals(sw);
    if (with_best) SWEPT_RETURN_IF_ERROR(fill_best(db, sw, *goals));
    fill_constraints(sw, *goals);
    if (with_counts && with_front) SWEPT_RETURN_IF_ERROR(fill_front(db, sw, *goals));
    if (with_counts) SWEPT_RETURN_IF_ERROR(fill_metric_missing(db, sw));
  }
  return out;
}

namespace {

// Every stride-th trial of the sweep (by idx, from its lowest: a warm
// start's imported trials have negative indices) that has a metric value,
// plus the `best_count` best ones, with params and metric_value. The best
// ones are ranked as "best" is (reader.h): among the trials that count for
// best and are feasible, so a running, failed or infeasible trial with a
// better value is never drawn as one of them. With constraints, every
// sampled trial that counts for best says whether it is feasible.
Result<SweepPoints> sample_points(Connection& db, const SweepRow& sw, int64_t max_points, int64_t best_count) {
  SweepPoints out;
  out.metric_name = sw.metric_name;
  out.metric_goal = sw.metric_goal;
  SWEPT_ASSIGN_OR_RETURN(paths, param_paths(db, sw.id));
  for (const auto& [name, _] : paths) out.params.push_back(name);
  // Index: UNIQUE (sweep_id, idx): one seek.
  SWEPT_ASSIGN_OR_RETURN(lowest, db.prepare("SELECT min(idx) FROM trials WHERE sweep_id = ?"));
  lowest.bind(1, sw.id);
  SWEPT_ASSIGN_OR_RETURN(has_lowest, lowest.step());
  const int64_t first = has_lowest && !lowest.is_null(0) ? std::min<int64_t>(0, lowest.int64(0)) : 0;
  out.population = sw.next_index - first;
  if (out.population <= 0) {
    out.population = 0;
    return out;
  }
  out.stride = std::max<int64_t>(1, (out.population + max_points - 1) / max_points);
  std::set<int64_t> seen;
  // The sampled indices first, first + stride, ... are generated and each looked
  // up in UNIQUE (sweep_id, idx): one seek per sample, no scan of the sweep.
  std::string sql = std::string("WITH RECURSIVE k(i) AS (SELECT ?5 UNION ALL SELECT i + ?1 FROM k WHERE i + ?1 < ?2) SELECT ") +
                    kTrialColumns +
                    " FROM k CROSS JOIN trials t ON t.sweep_id = ?3 AND t.idx = k.i WHERE t.metric_value IS NOT NULL LIMIT ?4";
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare(sql));
  stmt.bind(1, out.stride).bind(2, sw.next_index).bind(3, sw.id).bind(4, max_points).bind(5, first);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) break;
    out.points.push_back(read_trial_row(stmt));
    seen.insert(out.points.back().id);
  }
  const auto goals = sweep_goals(sw);
  // The constraints each judged trial violates (only those that violate one).
  std::map<int64_t, std::vector<std::string>> violations;
  if (!goals->constraints.empty()) {
    std::vector<std::string> names;
    for (const auto& c : goals->constraints) names.push_back(c.name);
    SWEPT_ASSIGN_OR_RETURN(judged, completed_values(db, sw.id, names));
    for (const auto& t : judged)
      if (auto v = violated_constraints(*goals, t.values); !v.empty()) violations.emplace(t.id, std::move(v));
  }
  if (best_count > 0) {
    bool maximize = sw.metric_goal && *sw.metric_goal == "maximize";
    // Index: trials_by_sweep_metric (sweep_id, metric_value). Enough rows to
    // pass every infeasible trial.
    std::string best_sql = std::string("SELECT ") + kTrialColumns +
                           " FROM trials t WHERE t.sweep_id = ? AND t.metric_value IS NOT NULL AND t.state IN (" +
                           best_states_sql() + ") ORDER BY t.metric_value " + (maximize ? "DESC" : "ASC") +
                           ", t.id LIMIT ?";
    SWEPT_ASSIGN_OR_RETURN(best, db.prepare(best_sql));
    best.bind(1, sw.id).bind(2, best_count + static_cast<int64_t>(violations.size()));
    int64_t taken = 0;
    while (taken < best_count) {
      SWEPT_ASSIGN_OR_RETURN(row, best.step());
      if (!row) break;
      if (violations.count(best.int64(0))) continue;
      ++taken;
      if (seen.insert(best.int64(0)).second) out.points.push_back(read_trial_row(best));
    }
  }
  if (!goals->constraints.empty()) {
    for (auto& p : out.points) {
      if (!info(p.state).counts_for_best) continue;  // judged once completed
      auto it = violations.find(p.id);
      p.feasible = it == violations.end();
      if (it != violations.end()) p.violated = it->second;
    }
  }
  return out;
}

}  // namespace

Result<std::vector<SweepRow>> list_sweeps(Connection& db) {
  SWEPT_ASSIGN_OR_RETURN(schema, db.has_schema());
  if (!schema) return std::vector<SweepRow>{};
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  return read_sweeps(db, std::nullopt);
}

Result<SweepRow> get_sweep_in_txn(Connection& db, int64_t sweep_id, bool with_counts, bool with_best) {
  SWEPT_ASSIGN_OR_RETURN(schema, db.has_schema());
  if (!schema) return Status::NotFound("sweep " + std::to_string(sweep_id) + " does not exist (the database has no sweeps yet)");
  SWEPT_ASSIGN_OR_RETURN(sweeps, read_sweeps(db, sweep_id, with_counts, /*with_front=*/true, with_best));
  if (sweeps.empty()) return Status::NotFound("sweep " + std::to_string(sweep_id) + " does not exist; `swept status` (or GET /api/sweeps) lists them");
  return sweeps.front();
}

Result<SweepRow> get_sweep(Connection& db, int64_t sweep_id) {
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  return get_sweep_in_txn(db, sweep_id);
}

Result<SweepColumns> sweep_columns(Connection& db, int64_t sweep_id) {
  SweepColumns cols;
  SWEPT_ASSIGN_OR_RETURN(paths, param_paths(db, sweep_id));
  for (const auto& [name, _] : paths) cols.params.push_back(name);
  SWEPT_ASSIGN_OR_RETURN(metrics, metric_names(db, sweep_id));
  cols.metrics = std::move(metrics);
  return cols;
}

Result<SweepPoints> sweep_points(Connection& db, int64_t sweep_id, int64_t max_points, int64_t best_count) {
  if (max_points < 1 || max_points > 20000) return Status::InvalidArgument("limit must be between 1 and 20000");
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  // Without the summary's best: sample_points ranks the best ones itself,
  // and computing both would judge every trial's constraints twice.
  SWEPT_ASSIGN_OR_RETURN(sweep, get_sweep_in_txn(db, sweep_id, /*with_counts=*/false, /*with_best=*/false));
  return sample_points(db, sweep, max_points, best_count);
}

Result<LiveSnapshot> live_snapshot(Connection& db, size_t max_running) {
  LiveSnapshot snap;
  SWEPT_ASSIGN_OR_RETURN(schema, db.has_schema());
  if (!schema) return snap;
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  // Without fronts: a front changes only when a trial completes, which the
  // counts show, and computing every sweep's front on every poll is not free.
  SWEPT_ASSIGN_OR_RETURN(sweeps, read_sweeps(db, std::nullopt, /*with_counts=*/true, /*with_front=*/false));
  snap.sweeps = std::move(sweeps);
  // Index: trials_by_state.
  SWEPT_ASSIGN_OR_RETURN(running, db.prepare("SELECT id, sweep_id FROM trials WHERE state = ?2 ORDER BY id LIMIT ?1"));
  running.bind(2, TrialState::kRunning);
  running.bind(1, static_cast<int64_t>(max_running));
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, running.step());
    if (!row) break;
    snap.running[running.int64(0)] = running.int64(1);
  }
  SWEPT_ASSIGN_OR_RETURN(max_id, db.prepare("SELECT max(id) FROM trials"));
  SWEPT_ASSIGN_OR_RETURN(has_max, max_id.step());
  if (has_max && !max_id.is_null(0)) snap.max_trial_id = max_id.int64(0);
  return snap;
}

}  // namespace swept::store
