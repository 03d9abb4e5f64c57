// JSON of the dashboard's API (docs/api.md): see api_json.h.
#include "web/api_json.h"

#include <algorithm>
#include <cmath>

#include "common/params.h"

namespace swept::web {

using nlohmann::json;

namespace {
template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
json opt_number(const std::optional<double>& v) { return v ? number(*v) : json(nullptr); }
json state_names(const std::vector<TrialState>& states) {
  json a = json::array();
  for (TrialState s : states) a.push_back(name(s));
  return a;
}
}  // namespace

// One shape for a sweep summary, the SWEEPS reply's (common/protocol.h).
json sweep_json(const SweepRow& s) { return protocol::to_json(s); }

json trial_row_json(const TrialRow& r) {
  json metrics = json::object();
  for (const auto& [name, value] : r.latest) metrics[name] = number(value);
  json j = {{"id", r.id},
          {"sweep_id", r.sweep_id},
          {"index", r.index},
          {"state", name(r.state)},
          {"attempts", r.attempts},
          {"agent", opt(r.agent)},
          {"gpus", r.gpus},
          {"gpu_fraction", opt_number(r.gpu_fraction)},
          {"metric_value", opt_number(r.metric_value)},
          {"started_at", opt_number(r.started_at)},
          {"ended_at", opt_number(r.ended_at)},
          {"params", flat_params_object(r.params)},
          {"metrics", metrics}};
  if (r.damaged) j["damaged"] = *r.damaged;  // shown on the row; the page still answers
  if (stopping(r)) j["stopping"] = true;     // stopped by the user, its process not ended yet
  if (!r.nodes.empty()) j["nodes"] = nodes_json(r.nodes);  // a multi-node trial: every node, node 0 first
  if (r.feasible) {  // a completed trial of a sweep with constraints
    j["feasible"] = *r.feasible;
    j["violated"] = r.violated;
  }
  // A warm start's trial: where its result came from (its reason), for the
  // table's badge; the trial's page shows the reason itself.
  if (r.state == TrialState::kImported && r.reason) j["imported_from"] = *r.reason;
  // A pbt member's lineage, in the one shape the protocol's rows and
  // `swept export` give it (common/protocol_rows.cpp).
  if (!r.schedule.empty()) j["schedule"] = protocol::to_json(r)["schedule"];
  return j;
}

json trial_page_json(const store::TrialPage& p) {
  json rows = json::array();
  for (const auto& r : p.rows) rows.push_back(trial_row_json(r));
  return {{"sweep_id", p.query.sweep_id},
          {"total", p.total},
          {"limit", p.query.limit},
          {"offset", p.query.offset},
          {"sort", p.query.sort},
          {"order", p.query.descending ? "desc" : "asc"},
          {"states", state_names(p.query.states)},
          {"columns", {{"params", p.columns.params}, {"metrics", p.columns.metrics}}},
          {"best_trial_id", opt(p.best_trial_id)},
          {"trials", rows}};
}

json series_json(const store::MetricSeries& s) {
  json steps = json::array(), values = json::array();
  for (const auto& pt : s.points) {
    steps.push_back(pt.step);
    values.push_back(number(pt.value));
  }
  json j = {{"trial_id", s.trial_id},
            {"name", s.name},
            {"total_points", s.total_points},
            {"steps", steps},
            {"values", values}};
  // An early-stopped trial: where its sweep's rule stopped it (the chart's mark).
  if (s.stopped_step) j["stopped"] = {{"step", *s.stopped_step}, {"reason", s.stopped_reason.value_or("")}};
  return j;
}

json trial_detail_json(const store::TrialDetail& d) {
  json j = trial_row_json(d.row);
  j["sweep_name"] = d.sweep_name;
  j["sweep_metric"] = opt(d.sweep_metric);
  j["command"] = d.row.command;
  j["env"] = d.env;
  j["exit_code"] = opt(d.row.exit_code);
  j["reason"] = opt(d.row.reason);
  j["created_at"] = d.created_at;
  j["log_tail"] = d.log_tail;
  j["suggestion"] = d.row.suggestion;
  json attempts = json::array();
  for (const auto& a : d.attempts) {
    attempts.push_back({{"attempt", a.attempt},
                        {"agent", a.agent},
                        {"gpus", a.gpus},
                        {"gpu_fraction", opt_number(a.gpu_fraction)},
                        {"state", name(a.state)},
                        {"exit_code", opt(a.exit_code)},
                        {"reason", opt(a.reason)},
                        {"started_at", a.started_at},
                        {"ended_at", opt_number(a.ended_at)}});
  }
  j["attempt_history"] = attempts;
  json series = json::array();
  for (const auto& s : d.series) series.push_back(series_json(s));
  j["series"] = series;
  return j;
}

json agent_json(const AgentRow& a) {
  // Each GPU with the running trials that hold it (a share or the whole);
  // trials without GPUs are the agent's CPU trials.
  json gpus = json::array();
  for (const auto& g : a.gpus) {
    json holders = json::array();
    for (const auto& t : a.running)
      if (std::find(t.gpus.begin(), t.gpus.end(), g.index) != t.gpus.end())
        holders.push_back({{"trial_id", t.trial_id}, {"sweep_id", t.sweep_id}, {"fraction", opt_number(t.gpu_fraction)}});
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"name", g.name},
                    {"memory_bytes", g.memory_bytes},
                    {"trials", holders}});
  }
  json cpu_trials = json::array();
  for (const auto& t : a.running)
    if (t.gpus.empty()) cpu_trials.push_back(t.trial_id);
  return {{"name", a.name},
          {"host", a.host},
          {"state", name(a.state)},
          {"slots", a.slots},
          {"registered_at", a.registered_at},
          {"last_seen", a.last_seen},
          {"gpus", gpus},
          {"cpu_trials", cpu_trials},
          {"quarantine", a.quarantine ? json(*a.quarantine) : json(nullptr)},
          {"containment", a.containment ? json(*a.containment) : json(nullptr)}};
}

json points_json(const store::SweepPoints& p) {
  json points = json::array();
  for (const auto& r : p.points) {
    json point = {{"id", r.id}, {"index", r.index}, {"state", name(r.state)},
                  {"metric_value", opt_number(r.metric_value)}, {"params", flat_params_object(r.params)}};
    if (r.feasible) {  // a judged trial of a sweep with constraints, as on the trials page
      point["feasible"] = *r.feasible;
      point["violated"] = r.violated;
    }
    points.push_back(std::move(point));
  }
  return {{"params", p.params},
          {"metric", {{"name", opt(p.metric_name)}, {"goal", opt(p.metric_goal)}}},
          {"population", p.population},
          {"stride", p.stride},
          {"points", points}};
}

json history_json(const store::OptimizationHistory& h) {
  json points = json::array();
  for (const auto& p : h.points)
    points.push_back({{"trial_id", p.trial_id}, {"index", p.idx}, {"value", number(p.value)},
                      {"ended_at", opt_number(p.ended_at)}, {"best_by_index", number(p.best_by_index)},
                      {"best_by_time", number(p.best_by_time)}});
  json best = nullptr;
  if (h.best) best = {{"trial_id", h.best->trial_id}, {"value", number(h.best->value)}};
  return {{"sweep_id", h.sweep_id},
          {"metric", {{"name", opt(h.metric_name)}, {"goal", opt(h.metric_goal)}}},
          {"created_at", number(h.created_at)},
          {"total", h.total},
          {"stride", h.stride},
          {"best", best},
          {"points", points}};
}

json objective_points_json(const store::ObjectivePoints& p) {
  json objectives = json::array(), constraints = json::array(), points = json::array();
  for (const auto& o : p.objectives) objectives.push_back({{"name", o.name}, {"goal", o.goal}});
  for (const auto& c : p.constraints)
    constraints.push_back({{"name", c.name}, {"min", opt_number(c.min)}, {"max", opt_number(c.max)}});
  for (const auto& pt : p.points) {
    json values = json::array();
    for (double v : pt.values) values.push_back(number(v));
    points.push_back({{"trial_id", pt.trial_id}, {"index", pt.idx}, {"values", values}, {"feasible", pt.feasible},
                      {"violated", pt.violated}, {"on_front", pt.on_front}, {"params", flat_params_object(pt.params)}});
  }
  // The front's summary has the one shape of the sweep's (protocol.h).
  json front = nullptr;
  if (p.front) {
    SweepRow carrier;
    carrier.front = p.front;
    front = protocol::to_json(carrier)["front"];
  }
  return {{"sweep_id", p.sweep_id}, {"objectives", objectives}, {"constraints", constraints},
          {"front", front},         {"params", p.params},         {"total", p.total},
          {"stride", p.stride},     {"points", points}};
}

namespace {
json importance_params_json(const std::vector<ParameterImportance>& list) {
  json params = json::array();
  for (const auto& p : list)
    params.push_back({{"name", p.name}, {"eta_squared", number(p.eta_squared)}, {"groups", p.groups}, {"trials", p.trials}});
  return params;
}
}  // namespace

json importance_json(const ImportanceReport& r) {
  json j = {{"method", r.method},
            {"metric", opt(r.metric_name)},
            {"population", r.population},
            {"sampled", r.sampled},
            {"params", importance_params_json(r.params)}};
  if (!r.objectives.empty()) {  // several objectives: each one's importance
    json objectives = json::array();
    for (const auto& o : r.objectives)
      objectives.push_back({{"metric", o.metric}, {"goal", o.goal}, {"params", importance_params_json(o.params)}});
    j["objectives"] = std::move(objectives);
  }
  return j;
}

json error_json(const Status& s) {
  std::string code;
  switch (s.code()) {
    case StatusCode::kInvalidArgument: code = "invalid_argument"; break;
    case StatusCode::kNotFound: code = "not_found"; break;
    case StatusCode::kFailedPrecondition: code = "failed_precondition"; break;
    case StatusCode::kUnavailable: code = "unavailable"; break;
    case StatusCode::kResourceExhausted: code = "resource_exhausted"; break;
    case StatusCode::kIoError: code = "io_error"; break;
    case StatusCode::kCorruption: code = "corruption"; break;
    default: code = "internal"; break;
  }
  return {{"error", {{"code", code}, {"message", s.message()}}}};
}

int http_status_for(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kResourceExhausted: return 503;
    default: return 500;
  }
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace swept::web
