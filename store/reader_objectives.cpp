// The read model's objectives and constraints (reader.h, "Constraints" and
// "Several objectives"): a sweep's goals read from its file, the
// feasibility of its completed trials, the Pareto front and hypervolume of a
// sweep with several objectives, and the objective points of the front
// charts. The front itself is computed by sweeps/pareto.h (pure), so that
// the searchers and the read model share one definition of "non-dominated".
#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "common/mutex.h"
#include "common/params.h"
#include "store/reader.h"
#include "store/reader_internal.h"
#include "sweeps/pareto.h"
#include "sweeps/sweep.h"

namespace swept::store {

using nlohmann::json;

namespace {

// The goals of a spec that does not parse (or a row without one): the
// row's metric, as the sweeps table keeps it.
SweepGoals goals_from_row(const SweepRow& sw) {
  SweepGoals g;
  if (sw.metric_name) {
    sweeps::Metric m;
    m.name = *sw.metric_name;
    m.goal = sw.metric_goal && *sw.metric_goal == "maximize" ? sweeps::Goal::kMaximize : sweeps::Goal::kMinimize;
    g.objectives.push_back(std::move(m));
  }
  return g;
}

// Parsed goals by spec text. A sweep's spec never changes (schema.sql), and
// parsing a file costs far more than a read of its summary, so each text is
// parsed once per process. A text that does not parse is kept as null: its
// goals then come from each row (two rows may share such a text and differ).
// Bounded: when full, it starts over.
class GoalsCache {
 public:
  std::shared_ptr<const SweepGoals> get(const SweepRow& sw) {
    std::shared_ptr<const SweepGoals> goals;
    bool known = false;
    {
      MutexLock lock(mu_);
      auto it = by_text_.find(sw.spec);
      if (it != by_text_.end()) goals = it->second, known = true;
    }
    if (!known) {
      sweeps::ParseOutcome parsed = sweeps::parse_sweep(sw.spec);
      if (parsed.spec) {
        auto g = std::make_shared<SweepGoals>();
        g->objectives = parsed.spec->objectives;
        g->constraints = parsed.spec->constraints;
        goals = std::move(g);
      }
      MutexLock lock(mu_);
      if (by_text_.size() >= kMaxEntries) by_text_.clear();
      by_text_.emplace(sw.spec, goals);
    }
    return goals ? goals : std::make_shared<const SweepGoals>(goals_from_row(sw));
  }

 private:
  static constexpr size_t kMaxEntries = 256;
  Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const SweepGoals>> by_text_ SWEPT_GUARDED_BY(mu_);
};

std::string goal_name(sweeps::Goal g) { return g == sweeps::Goal::kMaximize ? "maximize" : "minimize"; }

std::vector<Objective> objectives_of(const SweepGoals& goals) {
  std::vector<Objective> out;
  for (const auto& m : goals.objectives) out.push_back({m.name, goal_name(m.goal)});
  return out;
}

std::vector<ConstraintBound> constraints_of(const SweepGoals& goals) {
  std::vector<ConstraintBound> out;
  for (const auto& c : goals.constraints) out.push_back({c.name, c.min, c.max});
  return out;
}

// Every objective's and constraint's metric name, once each.
std::vector<std::string> goal_metric_names(const SweepGoals& goals) {
  std::vector<std::string> names;
  for (const auto& m : goals.objectives) names.push_back(m.name);
  for (const auto& c : goals.constraints) names.push_back(c.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// A sweep with several objectives, evaluated: the trials with a final value
// of every objective, their values, feasibility and the front.
struct Evaluated {
  std::vector<TrialValues> trials;
  std::vector<std::vector<double>> values;  // [trial][objective]
  std::vector<bool> feasible;
  std::vector<size_t> front;  // indices into trials, ascending
  ParetoFront summary;
};

Result<Evaluated> evaluate(Connection& db, const SweepRow& sw, const SweepGoals& goals, bool with_params) {
  Evaluated e;
  e.summary.objectives = objectives_of(goals);
  SWEPT_ASSIGN_OR_RETURN(all, completed_values(db, sw.id, goal_metric_names(goals), with_params));
  std::vector<sweeps::Goal> directions;
  for (const auto& m : goals.objectives) directions.push_back(m.goal);
  for (auto& t : all) {
    std::vector<double> v;
    for (const auto& m : goals.objectives) {
      auto it = t.values.find(m.name);
      if (it == t.values.end()) break;
      v.push_back(it->second);
    }
    if (v.size() != goals.objectives.size()) continue;  // an objective never reported: not evaluated
    e.feasible.push_back(violated_constraints(goals, t.values).empty());
    e.values.push_back(std::move(v));
    e.trials.push_back(std::move(t));
  }
  e.summary.evaluated = static_cast<int64_t>(e.trials.size());
  e.summary.infeasible = std::count(e.feasible.begin(), e.feasible.end(), false);
  e.front = sweeps::pareto_front(e.values, directions, e.feasible);
  for (size_t i : e.front) e.summary.trial_ids.push_back(e.trials[i].id);
  std::sort(e.summary.trial_ids.begin(), e.summary.trial_ids.end());
  e.summary.reference = sweeps::reference_point(goals.objectives, e.values);
  std::vector<std::vector<double>> front_values;
  for (size_t i : e.front) front_values.push_back(e.values[i]);
  e.summary.hypervolume =
      front_values.empty() ? 0.0 : sweeps::hypervolume(front_values, directions, e.summary.reference);
  return e;
}

}  // namespace

std::shared_ptr<const SweepGoals> sweep_goals(const SweepRow& sw) {
  static GoalsCache* cache = new GoalsCache();  // never destroyed: readers may run during exit
  return cache->get(sw);
}

Result<std::vector<TrialValues>> completed_values(Connection& db, int64_t sweep_id, const std::vector<std::string>& names,
                                                  bool with_params) {
  // Indexes: trials_by_sweep_state (sweep_id, state), then trial_latest's
  // primary key (trial_id, name) per trial. The names go in as one bound
  // JSON array (json_each), so no name is ever spliced into the SQL.
  std::string sql = std::string("SELECT t.id, t.idx, ") + (with_params ? "t.params" : "NULL") +
                    ", l.name, l.value FROM trials t LEFT JOIN trial_latest l ON l.trial_id = t.id AND l.name IN "
                    "(SELECT value FROM json_each(?2)) WHERE t.sweep_id = ?1 AND t.state IN (" +
                    sql_state_list([](const TrialStateInfo& s) { return s.counts_for_best; }) + ") ORDER BY t.idx";
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare(sql));
  const std::string names_json = json(names).dump();
  stmt.bind(1, sweep_id).bind(2, std::string_view(names_json));
  std::vector<TrialValues> out;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) break;
    const int64_t id = stmt.int64(0);
    if (out.empty() || out.back().id != id) {
      TrialValues t;
      t.id = id;
      t.idx = stmt.int64(1);
      if (with_params) {
        t.params = json::parse(stmt.optional_text(2).value_or("{}"), nullptr, false);
        if (!t.params.is_object()) t.params = json::object();  // a damaged row: shown without its params
      }
      out.push_back(std::move(t));
    }
    if (auto name = stmt.optional_text(3)) out.back().values[*name] = stmt.real(4);
  }
  return out;
}

std::vector<std::string> violated_constraints(const SweepGoals& goals, const std::map<std::string, double>& values) {
  std::vector<std::string> out;
  for (const auto& c : goals.constraints) {
    auto it = values.find(c.name);
    // Never reported: NaN, which violates (sweeps::Constraint::violation).
    if (c.violation(it == values.end() ? NAN : it->second) > 0) out.push_back(c.name);
  }
  return out;
}

Result<std::set<int64_t>> infeasible_trials(Connection& db, const SweepRow& sw, const SweepGoals& goals) {
  std::set<int64_t> out;
  if (goals.constraints.empty()) return out;
  std::vector<std::string> names;
  for (const auto& c : goals.constraints) names.push_back(c.name);
  SWEPT_ASSIGN_OR_RETURN(trials, completed_values(db, sw.id, names));
  for (const auto& t : trials)
    if (!violated_constraints(goals, t.values).empty()) out.insert(t.id);
  return out;
}

void mark_feasibility(const SweepGoals& goals, std::vector<TrialRow>& rows) {
  if (goals.constraints.empty()) return;
  for (auto& r : rows) {
    if (!info(r.state).counts_for_best) continue;  // judged once completed
    r.violated = violated_constraints(goals, r.latest);
    r.feasible = r.violated.empty();
  }
}

void fill_constraints(SweepRow& sw, const SweepGoals& goals) { sw.constraints = constraints_of(goals); }

Status fill_front(Connection& db, SweepRow& sw, const SweepGoals& goals) {
  if (!goals.multi_objective()) return Status::Ok();
  SWEPT_ASSIGN_OR_RETURN(e, evaluate(db, sw, goals, /*with_params=*/false));
  sw.front = std::move(e.summary);
  return Status::Ok();
}

Result<ObjectivePoints> objective_points(Connection& db, int64_t sweep_id, int64_t max_points) {
  if (max_points < 1 || max_points > 20000) return Status::InvalidArgument("limit must be between 1 and 20000");
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  SWEPT_ASSIGN_OR_RETURN(sw, get_sweep_in_txn(db, sweep_id, /*with_counts=*/false));
  const auto goals = sweep_goals(sw);
  ObjectivePoints out;
  out.sweep_id = sw.id;
  out.objectives = objectives_of(*goals);
  out.constraints = constraints_of(*goals);
  SWEPT_ASSIGN_OR_RETURN(paths, param_paths(db, sw.id));
  for (const auto& [name, _] : paths) out.params.push_back(name);
  if (goals->objectives.empty()) return out;
  SWEPT_ASSIGN_OR_RETURN(e, evaluate(db, sw, *goals, /*with_params=*/true));
  std::vector<char> on_front(e.trials.size(), 0);
  // One objective: the "front" is the best (reader.h, "Best"), not every tie.
  if (goals->multi_objective()) {
    for (size_t i : e.front) on_front[i] = 1;
    out.front = e.summary;
  } else if (sw.best) {
    for (size_t i = 0; i < e.trials.size(); ++i) on_front[i] = e.trials[i].id == sw.best->trial_id;
  }
  out.total = static_cast<int64_t>(e.trials.size());
  out.stride = std::max<int64_t>(1, (out.total + max_points - 1) / max_points);
  for (size_t i = 0; i < e.trials.size(); ++i) {
    if (static_cast<int64_t>(i) % out.stride != 0 && !on_front[i]) continue;
    ObjectivePoint p;
    p.trial_id = e.trials[i].id;
    p.idx = e.trials[i].idx;
    p.values = e.values[i];
    p.violated = violated_constraints(*goals, e.trials[i].values);
    p.feasible = p.violated.empty();
    p.on_front = on_front[i];
    p.params = std::move(e.trials[i].params);
    out.points.push_back(std::move(p));
  }
  return out;
}

}  // namespace swept::store
