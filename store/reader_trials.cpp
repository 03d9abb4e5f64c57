// The read model's trials (reader.h): a sweep's trials paged and sorted
// (list_trials, in two phases: the ids of a page, then their rows), the
// parameter sort cache, one trial's detail and metric series. Each query
// names the index of store/schema.sql it relies on.
#include <algorithm>
#include <set>

#include "common/params.h"
#include "store/reader.h"
#include "store/reader_internal.h"
#include "store/schema.h"

namespace swept::store {

using nlohmann::json;

namespace {

// A JSON path for json_extract: $."a"."b". Keys holding '"' cannot be quoted
// in SQLite's path syntax, so sorting by them is refused.
Result<std::string> json_path(const std::vector<std::string>& keys, const std::string& name) {
  std::string path = "$";
  for (const auto& k : keys) {
    if (k.find('"') != std::string::npos)
      return Status::InvalidArgument("cannot sort by parameter '" + name + "': its name contains a double quote");
    path += ".\"" + k + "\"";
  }
  return path;
}


// Phase 2 of a page: the full rows of the chosen ids, in the chosen order.
Result<std::vector<TrialRow>> rows_by_id(Connection& db, const std::vector<int64_t>& ids) {
  std::vector<TrialRow> rows;
  if (ids.empty()) return rows;
  std::string sql = std::string("SELECT ") + kTrialColumns + " FROM trials t WHERE t.id IN (";
  for (size_t i = 0; i < ids.size(); ++i) sql += i ? ",?" : "?";
  sql += ")";
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare(sql));
  for (size_t i = 0; i < ids.size(); ++i) stmt.bind(static_cast<int>(i + 1), ids[i]);
  std::map<int64_t, TrialRow> by_id;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) break;
    TrialRow r = read_trial_row(stmt);
    by_id.emplace(r.id, std::move(r));
  }
  for (int64_t id : ids) {
    auto it = by_id.find(id);
    if (it != by_id.end()) rows.push_back(std::move(it->second));
  }
  return rows;
}

}  // namespace

Result<std::shared_ptr<const std::vector<ParamSortCache::Key>>> ParamSortCache::sorted(Connection& db, int64_t sweep_id,
                                                                                       const std::string& json_path) {
  MutexLock lock(mu_);  // one loader at a time: the first load is the expensive one
  auto key = std::make_pair(sweep_id, json_path);
  Entry& entry = entries_[key];
  entry.last_used = ++clock_;
  // Index: UNIQUE (sweep_id, idx) for the range; json_extract runs on new rows only.
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare("SELECT id, idx, CASE WHEN json_valid(params) THEN json_extract(params, ?) END, "
                                          "CASE WHEN json_valid(params) THEN json_type(params, ?) END FROM trials "
                                          "WHERE sweep_id = ? AND idx > ? ORDER BY idx"));
  stmt.bind(1, std::string_view(json_path)).bind(2, std::string_view(json_path)).bind(3, sweep_id).bind(4, entry.max_idx);
  std::vector<Key> added;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) break;
    Key k;
    k.id = stmt.int64(0);
    k.idx = stmt.int64(1);
    std::string type = stmt.is_null(3) ? "" : stmt.text(3);
    if (type == "integer" || type == "real") {
      k.kind = 0;
      k.number = stmt.real(2);
    } else if (type == "true" || type == "false") {
      k.kind = 0;
      k.number = type == "true" ? 1 : 0;
    } else if (!type.empty() && type != "null") {
      k.kind = 1;
      k.text = stmt.text(2);
    }
    added.push_back(std::move(k));
  }
  if (!added.empty() || !entry.keys) {
    auto merged = std::make_shared<std::vector<Key>>();
    if (entry.keys) *merged = *entry.keys;
    for (auto& k : added) {
      entry.max_idx = std::max(entry.max_idx, k.idx);
      merged->push_back(std::move(k));
    }
    std::sort(merged->begin(), merged->end(), [](const Key& a, const Key& b) {
      if (a.kind != b.kind) return a.kind < b.kind;
      if (a.kind == 0 && a.number != b.number) return a.number < b.number;
      if (a.kind == 1 && a.text != b.text) return a.text < b.text;
      return a.idx < b.idx;
    });
    entry.keys = std::move(merged);
  }
  auto result = entry.keys;
  while (entries_.size() > max_entries_) {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    entries_.erase(oldest);
  }
  return result;
}

namespace {

// The trials a page is drawn from: the sweep's, filtered by state. `where`
// is its SQL on `trials t`; bind() binds its parameters from `first` and
// returns the next free index.
struct PageFilter {
  const TrialQuery& q;
  std::string where = " WHERE t.sweep_id = ?";

  explicit PageFilter(const TrialQuery& query) : q(query) {
    if (q.states.empty()) return;
    where += " AND t.state IN (";
    for (size_t i = 0; i < q.states.size(); ++i) where += i ? ",?" : "?";
    where += ")";
  }
  int bind(Statement& st, int first) const {
    st.bind(first++, q.sweep_id);
    for (TrialState s : q.states) st.bind(first++, s);
    return first;
  }
  std::string direction() const { return q.descending ? " DESC" : " ASC"; }
};

// How phase 1 finds the ids of a page: an SQL order (`expr`, NULLs last
// when `nullable`, with an optional join on a metric's name) that
// ids_in_sql_order runs, or, when `expr` is empty, the ids a plan chose
// itself.
struct PageOrder {
  std::string expr;
  bool nullable = true;
  std::string join, join_name;
  std::vector<int64_t> ids;
};

// Total for the pager. Index: trials_by_sweep_state (covering).
Result<int64_t> count_matching(Connection& db, const PageFilter& f) {
  SWEPT_ASSIGN_OR_RETURN(count, db.prepare("SELECT count(*) FROM trials t" + f.where));
  f.bind(count, 1);
  SWEPT_ASSIGN_OR_RETURN(has_count, count.step());
  return has_count ? count.int64(0) : 0;
}

// A page sorted by a parameter, from the cache's sorted keys (kept to the
// filter's states). Ascending: as sorted. Descending: present values
// reversed, then the trials without the parameter (still last), by idx
// descending.
Result<std::vector<int64_t>> page_from_sorted_keys(Connection& db, const PageFilter& f,
                                                   const std::vector<ParamSortCache::Key>& keys) {
  const TrialQuery& q = f.q;
  std::set<int64_t> allowed;
  if (!q.states.empty()) {
    SWEPT_ASSIGN_OR_RETURN(st, db.prepare("SELECT t.id FROM trials t" + f.where));
    f.bind(st, 1);
    while (true) {
      SWEPT_ASSIGN_OR_RETURN(row, st.step());
      if (!row) break;
      allowed.insert(st.int64(0));
    }
  }
  size_t present = 0;
  while (present < keys.size() && keys[present].kind != 2) ++present;
  std::vector<size_t> order;
  order.reserve(keys.size());
  if (q.descending) {
    for (size_t i = present; i-- > 0;) order.push_back(i);
    for (size_t i = keys.size(); i-- > present;) order.push_back(i);
  } else {
    for (size_t i = 0; i < keys.size(); ++i) order.push_back(i);
  }
  std::vector<int64_t> ids;
  int64_t skipped = 0;
  for (size_t i : order) {
    if (!q.states.empty() && !allowed.count(keys[i].id)) continue;
    if (skipped++ < q.offset) continue;
    ids.push_back(keys[i].id);
    if (static_cast<int64_t>(ids.size()) >= q.limit) break;
  }
  return ids;
}

// sort=param:NAME: through the cache when there is one, else in SQL.
Result<PageOrder> order_by_param(Connection& db, const PageFilter& f, const std::string& name,
                                 const std::map<std::string, std::vector<std::string>>& paths,
                                 ParamSortCache* param_cache) {
  auto p = paths.find(name);
  if (p == paths.end())
    return Status::InvalidArgument("unknown parameter '" + name +
                                   "' in sort; the sweep's parameters are listed in columns.params");
  SWEPT_ASSIGN_OR_RETURN(path, json_path(p->second, name));
  PageOrder order;
  if (param_cache) {
    SWEPT_ASSIGN_OR_RETURN(sorted, param_cache->sorted(db, f.q.sweep_id, path));
    SWEPT_ASSIGN_OR_RETURN(ids, page_from_sorted_keys(db, f, *sorted));
    order.ids = std::move(ids);
    return order;
  }
  std::string literal;
  for (char c : path) literal += (c == '\'' ? std::string("''") : std::string(1, c));
  // A damaged row (params not JSON) sorts as a missing value, not an error.
  order.expr = "(CASE WHEN json_valid(t.params) THEN json_extract(t.params, '" + literal + "') END)";
  return order;
}

// Appends the ids a statement returns (its column 0).
Status append_ids(Statement& st, std::vector<int64_t>& ids) {
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    ids.push_back(st.int64(0));
  }
  return Status::Ok();
}

// sort=metric:NAME by walking trial_latest_by_name_value (name, value) in
// order, keeping this sweep's trials; past the trials with the metric,
// those without it follow, by idx.
Result<std::vector<int64_t>> metric_walk_page(Connection& db, const PageFilter& f, const std::string& name) {
  const TrialQuery& q = f.q;
  const std::string dir = f.direction();
  std::vector<int64_t> ids;
  SWEPT_ASSIGN_OR_RETURN(walk, db.prepare("SELECT t.id FROM trial_latest s CROSS JOIN trials t ON t.id = s.trial_id" +
                                          f.where + " AND s.name = ? ORDER BY s.value" + dir + ", t.idx" + dir +
                                          " LIMIT ? OFFSET ?"));
  int bi = f.bind(walk, 1);
  walk.bind(bi, std::string_view(name));
  walk.bind(bi + 1, q.limit);
  walk.bind(bi + 2, q.offset);
  SWEPT_RETURN_IF_ERROR(append_ids(walk, ids));
  if (static_cast<int64_t>(ids.size()) >= q.limit) return ids;
  int64_t with_metric = q.offset + static_cast<int64_t>(ids.size());
  if (ids.empty() && q.offset > 0) {
    SWEPT_ASSIGN_OR_RETURN(count_with, db.prepare(
        "SELECT count(*) FROM trials t" + f.where +
        " AND EXISTS (SELECT 1 FROM trial_latest s WHERE s.trial_id = t.id AND s.name = ?)"));
    int ci = f.bind(count_with, 1);
    count_with.bind(ci, std::string_view(name));
    SWEPT_ASSIGN_OR_RETURN(counted, count_with.step());
    with_metric = counted ? count_with.int64(0) : 0;
  }
  SWEPT_ASSIGN_OR_RETURN(rest, db.prepare(
      "SELECT t.id FROM trials t" + f.where +
      " AND NOT EXISTS (SELECT 1 FROM trial_latest s WHERE s.trial_id = t.id AND s.name = ?) ORDER BY t.idx" + dir +
      " LIMIT ? OFFSET ?"));
  int ri = f.bind(rest, 1);
  rest.bind(ri, std::string_view(name));
  rest.bind(ri + 1, q.limit - static_cast<int64_t>(ids.size()));
  rest.bind(ri + 2, std::max<int64_t>(0, q.offset - with_metric));
  SWEPT_RETURN_IF_ERROR(append_ids(rest, ids));
  return ids;
}

// sort=metric:NAME. Two plans. Walking the (name, value) index stops after
// about (offset + limit) * (all trials / matching trials) index entries:
// cheap for the first pages of a large sweep. Looking up trial_latest's
// primary key once per trial of the sweep costs the sweep's size. Take the
// cheaper estimate (or the plan the query forces).
Result<PageOrder> order_by_metric(Connection& db, const PageFilter& f, const std::string& name,
                                  const std::vector<std::string>& metrics, int64_t total, int64_t sweep_size) {
  const TrialQuery& q = f.q;
  if (std::find(metrics.begin(), metrics.end(), name) == metrics.end())
    return Status::InvalidArgument("unknown metric '" + name +
                                   "' in sort; the sweep's metrics are listed in columns.metrics");
  SWEPT_ASSIGN_OR_RETURN(max_id, db.prepare("SELECT max(id) FROM trials"));
  SWEPT_ASSIGN_OR_RETURN(has_max, max_id.step());
  const double all_trials = has_max && !max_id.is_null(0) ? static_cast<double>(max_id.int64(0)) : 0.0;
  const double walk_cost =
      static_cast<double>(q.offset + q.limit) * all_trials / static_cast<double>(std::max<int64_t>(1, total));
  const bool walk_plan = q.metric_plan == TrialQuery::MetricPlan::kAuto
                             ? walk_cost < static_cast<double>(sweep_size)
                             : q.metric_plan == TrialQuery::MetricPlan::kIndexWalk;
  PageOrder order;
  if (walk_plan) {
    SWEPT_ASSIGN_OR_RETURN(ids, metric_walk_page(db, f, name));
    order.ids = std::move(ids);
    return order;
  }
  order.join = " LEFT JOIN trial_latest s ON s.trial_id = t.id AND s.name = ?";
  order.join_name = name;
  order.expr = "s.value";
  return order;
}

// The plan for q.sort: a column, a parameter or a metric.
Result<PageOrder> page_order(Connection& db, const PageFilter& f,
                             const std::map<std::string, std::vector<std::string>>& paths,
                             const std::vector<std::string>& metrics, ParamSortCache* param_cache, int64_t total,
                             int64_t sweep_size) {
  const std::string& sort = f.q.sort;
  static const std::map<std::string, std::pair<std::string, bool>> kColumns = {  // expr, nullable
      {"id", {"t.id", false}},          {"idx", {"t.idx", false}},
      {"state", {"t.state", false}},    {"attempts", {"t.attempts", false}},
      {"agent", {"t.agent", true}},     {"metric", {"t.metric_value", true}},
      {"started_at", {"t.started_at", true}}, {"ended_at", {"t.ended_at", true}}};
  if (auto it = kColumns.find(sort); it != kColumns.end()) {
    PageOrder order;
    order.expr = it->second.first;
    order.nullable = it->second.second;
    return order;
  }
  if (sort.rfind("param:", 0) == 0) return order_by_param(db, f, sort.substr(6), paths, param_cache);
  if (sort.rfind("metric:", 0) == 0) return order_by_metric(db, f, sort.substr(7), metrics, total, sweep_size);
  return Status::InvalidArgument("unknown sort key '" + sort +
                                 "'; use id, idx, state, attempts, agent, metric, started_at, ended_at, "
                                 "param:NAME or metric:NAME");
}

// Phase 1 in SQL: the ids of the page in `order`. NULLs last in either
// direction; ties broken by idx for stable paging.
Result<std::vector<int64_t>> ids_in_sql_order(Connection& db, const PageFilter& f, const PageOrder& order) {
  const std::string dir = f.direction();
  std::string sql = " ORDER BY " + order.expr + dir + (order.nullable ? " NULLS LAST" : "") +
                    (order.expr == "t.idx" ? "" : ", t.idx" + dir);
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare("SELECT t.id FROM trials t" + order.join + f.where + sql + " LIMIT ? OFFSET ?"));
  int bi = 1;
  if (!order.join.empty()) stmt.bind(bi++, std::string_view(order.join_name));
  bi = f.bind(stmt, bi);
  stmt.bind(bi, f.q.limit);
  stmt.bind(bi + 1, f.q.offset);
  std::vector<int64_t> ids;
  SWEPT_RETURN_IF_ERROR(append_ids(stmt, ids));
  return ids;
}

}  // namespace

Result<TrialPage> list_trials(Connection& db, const TrialQuery& q, ParamSortCache* param_cache) {
  if (q.limit < 1 || q.limit > 1000) return Status::InvalidArgument("limit must be between 1 and 1000");
  if (q.offset < 0) return Status::InvalidArgument("offset must be 0 or more");
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  SWEPT_ASSIGN_OR_RETURN(sweep, get_sweep_in_txn(db, q.sweep_id, /*with_counts=*/false));
  TrialPage page;
  page.query = q;
  if (sweep.best) page.best_trial_id = sweep.best->trial_id;
  SWEPT_ASSIGN_OR_RETURN(paths, param_paths(db, q.sweep_id));
  for (const auto& [name, _] : paths) page.columns.params.push_back(name);
  SWEPT_ASSIGN_OR_RETURN(metrics, metric_names(db, q.sweep_id));
  page.columns.metrics = metrics;
  const PageFilter filter(q);
  SWEPT_ASSIGN_OR_RETURN(total, count_matching(db, filter));
  page.total = total;
  // Phase 1: the ids of the page, ordered; only ids and sort keys go through
  // the sorter. Phase 2 (rows_by_id) reads the full rows of those ids.
  SWEPT_ASSIGN_OR_RETURN(order, page_order(db, filter, paths, metrics, param_cache, page.total, sweep.next_index));
  std::vector<int64_t> ids = std::move(order.ids);
  if (!order.expr.empty()) {
    SWEPT_ASSIGN_OR_RETURN(sorted, ids_in_sql_order(db, filter, order));
    ids = std::move(sorted);
  }
  SWEPT_ASSIGN_OR_RETURN(rows, rows_by_id(db, ids));
  page.rows = std::move(rows);
  SWEPT_RETURN_IF_ERROR(fill_latest(db, page.rows));
  SWEPT_RETURN_IF_ERROR(fill_nodes(db, page.rows));
  mark_feasibility(*sweep_goals(sweep), page.rows);
  SWEPT_RETURN_IF_ERROR(fill_schedules(db, page.rows));
  return page;
}

Result<std::vector<MetricSeries>> metric_series(Connection& db, const std::vector<int64_t>& trial_ids,
                                                const std::string& metric, size_t max_points) {
  std::vector<MetricSeries> out;
  SWEPT_ASSIGN_OR_RETURN(schema, db.has_schema());
  if (!schema) return out;
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  // Primary keys: trial_latest (trial_id, name), metrics (trial_id, name, step).
  SWEPT_ASSIGN_OR_RETURN(names, db.prepare("SELECT name FROM trial_latest WHERE trial_id = ? ORDER BY name"));
  SWEPT_ASSIGN_OR_RETURN(points, db.prepare("SELECT step, value FROM metrics WHERE trial_id = ? AND name = ? ORDER BY step"));
  SWEPT_ASSIGN_OR_RETURN(version, read_schema_version(db));
  SWEPT_ASSIGN_OR_RETURN(stop, db.prepare(version >= 4 ? "SELECT stop_step, stop_reason FROM trials WHERE id = ? AND state = ?"
                                                       : "SELECT NULL, NULL WHERE 0 AND ? IS NULL AND ? IS NULL"));
  for (int64_t id : trial_ids) {
    std::optional<int64_t> stopped_step;
    std::optional<std::string> stopped_reason;
    stop.reset();
    stop.bind(1, id).bind(2, TrialState::kEarlyStopped);
    SWEPT_ASSIGN_OR_RETURN(stopped, stop.step());
    if (stopped) {
      stopped_step = stop.optional_int64(0);
      stopped_reason = stop.optional_text(1);
    }
    std::vector<std::string> wanted;
    if (metric.empty()) {
      names.reset();
      names.bind(1, id);
      while (true) {
        SWEPT_ASSIGN_OR_RETURN(row, names.step());
        if (!row) break;
        wanted.push_back(names.text(0));
      }
    } else {
      wanted.push_back(metric);
    }
    for (const auto& name : wanted) {
      MetricSeries series;
      series.trial_id = id;
      series.name = name;
      series.stopped_step = stopped_step;
      series.stopped_reason = stopped_reason;
      std::vector<SeriesPoint> all;
      points.reset();
      points.bind(1, id).bind(2, std::string_view(name));
      while (true) {
        SWEPT_ASSIGN_OR_RETURN(row, points.step());
        if (!row) break;
        all.push_back({points.int64(0), points.real(1)});
      }
      if (all.empty()) continue;
      series.total_points = static_cast<int64_t>(all.size());
      series.points = downsample_lttb(all, max_points);
      out.push_back(std::move(series));
    }
  }
  return out;
}

Result<TrialDetail> get_trial(Connection& db, int64_t trial_id, size_t max_points) {
  std::string missing = "trial " + std::to_string(trial_id) + " does not exist; GET /api/sweeps/ID/trials lists them";
  SWEPT_ASSIGN_OR_RETURN(schema, db.has_schema());
  if (!schema) return Status::NotFound(missing);
  TrialDetail d;
  {
    ReadTransaction txn(db);
    SWEPT_RETURN_IF_ERROR(txn.status());
    SWEPT_ASSIGN_OR_RETURN(version, read_schema_version(db));
    std::string sql = std::string("SELECT ") + kTrialColumns + ", t.env, t.created_at, s.name, s.metric_name, " +
                      (version >= 3 ? "t.suggestion" : "NULL") +
                      " FROM trials t JOIN sweeps s ON s.id = t.sweep_id WHERE t.id = ?";
    SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare(sql));
    stmt.bind(1, trial_id);
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) return Status::NotFound(missing);
    d.row = read_trial_row(stmt);
    constexpr int kMore = kTrialColumnCount;  // the columns after the row's
    if (auto env_text = stmt.optional_text(kMore)) {
      json env = json::parse(*env_text, nullptr, false);
      if (env.is_object())
        for (auto it = env.begin(); it != env.end(); ++it)
          d.env[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    }
    d.created_at = stmt.real(kMore + 1);
    d.sweep_name = stmt.text(kMore + 2);
    d.sweep_metric = stmt.optional_text(kMore + 3);
    if (auto text = stmt.optional_text(kMore + 4)) d.row.suggestion = json::parse(*text, nullptr, false);
    if (d.row.suggestion.is_discarded()) d.row.suggestion = nullptr;

    SWEPT_ASSIGN_OR_RETURN(log, trial_log_tail(db, trial_id));
    d.log_tail = std::move(log);

    SWEPT_ASSIGN_OR_RETURN(att, db.prepare(
        "SELECT attempt, agent, gpus, gpu_fraction, state, exit_code, reason, started_at, ended_at "
        "FROM attempts WHERE trial_id = ? ORDER BY attempt"));
    att.bind(1, trial_id);
    while (true) {
      SWEPT_ASSIGN_OR_RETURN(r, att.step());
      if (!r) break;
      AttemptRow a;
      a.attempt = att.int64(0);
      a.agent = att.text(1);
      a.gpus = decode_gpu_list<int64_t>(att.optional_text(2));
      a.gpu_fraction = att.optional_real(3);
      a.state = trial_state_named(att.text(4)).value_or(TrialState::kRunning);
      a.exit_code = att.optional_int64(5);
      a.reason = att.optional_text(6);
      a.started_at = att.real(7);
      a.ended_at = att.optional_real(8);
      d.attempts.push_back(std::move(a));
    }
    std::vector<TrialRow> one{d.row};
    SWEPT_RETURN_IF_ERROR(fill_latest(db, one));
    SWEPT_RETURN_IF_ERROR(fill_nodes(db, one));
    SWEPT_ASSIGN_OR_RETURN(sweep, get_sweep_in_txn(db, d.row.sweep_id, /*with_counts=*/false));
    mark_feasibility(*sweep_goals(sweep), one);
    SWEPT_RETURN_IF_ERROR(fill_schedules(db, one));
    d.row = std::move(one.front());
  }
  SWEPT_ASSIGN_OR_RETURN(series, metric_series(db, {trial_id}, "", max_points));
  d.series = std::move(series);
  return d;
}

}  // namespace swept::store
