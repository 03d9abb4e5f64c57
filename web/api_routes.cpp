// The JSON API's endpoints, by resource: see api_routes.h and docs/api.md.
//
// Each handler reads as its steps; the order of the steps is part of the
// answer (the first failing one names the error), so it is kept as the API
// has always checked: parameters, then the path's id, then the values.
#include "web/api_routes.h"

#include <cstdint>
#include <string>
#include <vector>

#include "common/states.h"
#include "web/api_json.h"
#include "web/sweep_importance.h"

namespace swept::web {

using nlohmann::json;

namespace {

// The `limit` of the chart endpoints: points to return, 2,000 unless asked,
// at most 20,000.
Result<int64_t> chart_limit(const QueryParams& q) { return q.int64("limit", 2000, 1, 20000); }

// A list endpoint's body: {key: [to_json(item), ...]} from fetch(db), or an
// empty list while the database file does not exist yet (the dashboard may
// start before the scheduler has written anything).
template <typename Fetch, typename ToJson>
Result<json> json_list(store::ConnectionPool& pool, const char* key, Fetch&& fetch, ToJson&& to_json) {
  auto conn = pool.acquire();
  if (!conn.ok()) {
    if (conn.status().code() == StatusCode::kNotFound) return json{{key, json::array()}};
    return conn.status();
  }
  SWEPT_ASSIGN_OR_RETURN(items, fetch(**conn));
  json list = json::array();
  for (const auto& item : items) list.push_back(to_json(item));
  return json{{key, list}};
}

// The state tables of common/states.h as /api/info serves them. The
// dashboard takes the trial states' names and order from here, not from
// literals of its own. Sweeps and agents likewise: `final` (a sweep that
// will not run again) and `live` (an agent that takes work) are what the
// pages act on, and `tone` is how each is coloured (app.css styles tones
// only).
json state_tables() {
  json trial_states = json::array();
  for (const auto& s : kTrialStates)
    trial_states.push_back(
        {{"name", s.name}, {"label", display_name(s.state)}, {"final", s.final}, {"tone", name(s.tone)}});
  json sweep_states = json::array();
  for (size_t i = 0; i < kSweepStateCount; ++i) {
    const auto st = static_cast<SweepState>(i);
    sweep_states.push_back({{"name", name(st)}, {"final", st != SweepState::kRunning}, {"tone", name(tone(st))}});
  }
  json agent_states = json::array();
  for (size_t i = 0; i < kAgentStateCount; ++i) {
    const auto st = static_cast<AgentState>(i);
    agent_states.push_back({{"name", name(st)}, {"live", st == AgentState::kAlive}, {"tone", name(tone(st))}});
  }
  return json{{"trial_states", trial_states}, {"sweep_states", sweep_states}, {"agent_states", agent_states}};
}

void install_info_routes(Routes& routes, const ApiContext& api) {
  routes.get("/api/info", {}, [api](const QueryParams&) -> Result<json> {
    bool exists = false, schema = false;
    if (auto conn = api.pool.acquire(); conn.ok()) {
      exists = true;
      auto s = (*conn)->has_schema();
      schema = s.ok() && *s;
    }
    json body = state_tables();
    body["cancel"] = static_cast<bool>(api.options.cancel);
    body["poll_interval_ms"] = api.options.poll_interval_ms;
    body["database"] = {{"exists", exists}, {"schema", schema}};
    return body;
  });
}

// "queued, running, ... or lost": the states a filter may name.
std::string trial_state_list() {
  std::string list;
  for (size_t i = 0; i < kTrialStates.size(); ++i) {
    if (i) list += i + 1 == kTrialStates.size() ? " or " : ", ";
    list += kTrialStates[i].name;
  }
  return list;
}

// GET /api/sweeps/{id}/trials: one page of the sweep's trials, filtered by
// state, sorted, and paged as the query asks.
Result<json> trials_page(const ApiContext& api, const QueryParams& q) {
  // The id before the parameters: the order this endpoint has always had.
  SWEPT_ASSIGN_OR_RETURN(sweep_id, q.path_id("sweep id"));
  SWEPT_RETURN_IF_ERROR(q.allow_only({"state", "sort", "order", "limit", "offset"}));
  store::TrialQuery query;
  query.sweep_id = sweep_id;
  for (const auto& st : q.comma_list("state")) {
    auto state = trial_state_named(st);
    if (!state) return Status::InvalidArgument("unknown state '" + st + "'; use " + trial_state_list());
    query.states.push_back(*state);
  }
  if (auto sort = q.text("sort")) query.sort = *sort;
  if (auto order = q.text("order")) {
    if (*order != "asc" && *order != "desc")
      return Status::InvalidArgument("order must be asc or desc, got '" + *order + "'");
    query.descending = *order == "desc";
  }
  SWEPT_ASSIGN_OR_RETURN(limit, q.int64("limit", query.limit, 1, 1000));
  SWEPT_ASSIGN_OR_RETURN(offset, q.int64("offset", query.offset, 0, INT64_MAX / 2));
  query.limit = limit;
  query.offset = offset;
  SWEPT_ASSIGN_OR_RETURN(db, api.pool.acquire());
  SWEPT_ASSIGN_OR_RETURN(page, store::list_trials(*db, query, &api.param_sort_cache));
  return trial_page_json(page);
}

void install_sweep_routes(Routes& routes, const ApiContext& api) {
  routes.get_cached("/api/sweeps", {}, [api](const QueryParams&) -> Result<json> {
    return json_list(
        api.pool, "sweeps", [](auto& db) { return store::list_sweeps(db); },
        [](const auto& s) { return sweep_json(s); });
  });

  routes.get_cached(R"(/api/sweeps/(\d+))", {}, [api](const QueryParams& q) -> Result<json> {
    SWEPT_ASSIGN_OR_RETURN(id, q.path_id("sweep id"));
    SWEPT_ASSIGN_OR_RETURN(db, api.pool.acquire());
    SWEPT_ASSIGN_OR_RETURN(sweep, store::get_sweep(*db, id));
    return sweep_json(sweep);
  });

  routes.get_cached(R"(/api/sweeps/(\d+)/trials)", AllowedParams::checked_by_handler(),
                    [api](const QueryParams& q) { return trials_page(api, q); });

  routes.get_cached(R"(/api/sweeps/(\d+)/points)", {"limit"}, [api](const QueryParams& q) -> Result<json> {
    SWEPT_ASSIGN_OR_RETURN(id, q.path_id("sweep id"));
    SWEPT_ASSIGN_OR_RETURN(limit, chart_limit(q));
    SWEPT_ASSIGN_OR_RETURN(db, api.pool.acquire());
    SWEPT_ASSIGN_OR_RETURN(points, store::sweep_points(*db, id, limit));
    return points_json(points);
  });

  routes.get_cached(R"(/api/sweeps/(\d+)/history)", {"limit"}, [api](const QueryParams& q) -> Result<json> {
    SWEPT_ASSIGN_OR_RETURN(id, q.path_id("sweep id"));
    SWEPT_ASSIGN_OR_RETURN(limit, chart_limit(q));
    SWEPT_ASSIGN_OR_RETURN(db, api.pool.acquire());
    SWEPT_ASSIGN_OR_RETURN(history, store::optimization_history(*db, id, limit));
    return history_json(history);
  });

  routes.get_cached(R"(/api/sweeps/(\d+)/objectives)", {"limit"}, [api](const QueryParams& q) -> Result<json> {
    SWEPT_ASSIGN_OR_RETURN(id, q.path_id("sweep id"));
    SWEPT_ASSIGN_OR_RETURN(limit, chart_limit(q));
    SWEPT_ASSIGN_OR_RETURN(db, api.pool.acquire());
    SWEPT_ASSIGN_OR_RETURN(points, store::objective_points(*db, id, limit));
    return objective_points_json(points);
  });

  routes.get_cached(R"(/api/sweeps/(\d+)/importance)", {}, [api](const QueryParams& q) -> Result<json> {
    SWEPT_ASSIGN_OR_RETURN(id, q.path_id("sweep id"));
    SWEPT_ASSIGN_OR_RETURN(db, api.pool.acquire());
    SWEPT_ASSIGN_OR_RETURN(report, sweep_importance(*db, id, 2000));
    return importance_json(report);
  });
}

// GET /api/series: the metric's series of up to 50 trials, for the curves.
Result<json> series(const ApiContext& api, const QueryParams& q) {
  auto trials = q.text("trials");
  if (!trials)
    return Status::InvalidArgument("trials is required: a comma-separated list of trial ids, e.g. trials=1,2,3");
  std::vector<int64_t> ids;
  for (const auto& part : split_commas(*trials)) {
    SWEPT_ASSIGN_OR_RETURN(id, parse_int(part, "trial id in trials", 1, INT64_MAX));
    ids.push_back(id);
  }
  if (ids.empty() || ids.size() > 50) return Status::InvalidArgument("trials must list between 1 and 50 trial ids");
  SWEPT_ASSIGN_OR_RETURN(points, q.int64("points", 500, 3, 10000));
  const std::string metric = q.text("metric").value_or("");
  return json_list(
      api.pool, "series",
      [&](auto& db) { return store::metric_series(db, ids, metric, static_cast<size_t>(points)); },
      [](const auto& s) { return series_json(s); });
}

void install_trial_routes(Routes& routes, const ApiContext& api) {
  routes.get_cached(R"(/api/trials/(\d+))", {"points"}, [api](const QueryParams& q) -> Result<json> {
    SWEPT_ASSIGN_OR_RETURN(id, q.path_id("trial id"));
    SWEPT_ASSIGN_OR_RETURN(points, q.int64("points", 1000, 3, 10000));
    SWEPT_ASSIGN_OR_RETURN(db, api.pool.acquire());
    SWEPT_ASSIGN_OR_RETURN(detail, store::get_trial(*db, id, static_cast<size_t>(points)));
    return trial_detail_json(detail);
  });

  routes.get_cached("/api/series", {"trials", "metric", "points"},
                    [api](const QueryParams& q) { return series(api, q); });
}

void install_agent_routes(Routes& routes, const ApiContext& api) {
  // Answered fresh each time, as it always has been: not through the cache.
  routes.get("/api/agents", {}, [api](const QueryParams&) -> Result<json> {
    return json_list(
        api.pool, "agents", [](auto& db) { return store::list_agents(db); },
        [](const auto& a) { return agent_json(a); });
  });
}

// POST /api/sweeps/{id}/cancel and /api/trials/{id}/cancel, forwarded to
// the embedder's cancel function. They take any query parameter.
void install_cancel_routes(Routes& routes, const ApiContext& api) {
  auto cancel = [api](bool is_sweep) {
    return [api, is_sweep](const QueryParams& q) -> Result<json> {
      // A custom header forces a CORS preflight, which this server never
      // grants: other sites cannot make a browser send this request.
      if (q.header("X-Requested-With") != "swept")
        return Status::InvalidArgument("cancel requests must carry the header 'X-Requested-With: swept'");
      SWEPT_ASSIGN_OR_RETURN(id, q.path_id(is_sweep ? "sweep id" : "trial id"));
      SWEPT_RETURN_IF_ERROR(is_sweep ? api.options.cancel(id, std::nullopt) : api.options.cancel(std::nullopt, id));
      return json{{"cancelled", {{is_sweep ? "sweep_id" : "trial_id", id}}}};
    };
  };
  routes.post(R"(/api/sweeps/(\d+)/cancel)", AllowedParams::checked_by_handler(), cancel(true));
  routes.post(R"(/api/trials/(\d+)/cancel)", AllowedParams::checked_by_handler(), cancel(false));
}

}  // namespace

void install_api_routes(Routes& routes, const ApiContext& api) {
  install_info_routes(routes, api);
  install_sweep_routes(routes, api);
  install_trial_routes(routes, api);
  install_agent_routes(routes, api);
  if (api.options.cancel) install_cancel_routes(routes, api);
}

}  // namespace swept::web
