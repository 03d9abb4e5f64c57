// The JSON shapes of docs/api.md, built from the typed query results of
// queries.h. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "store/reader.h"
#include "web/sweep_importance.h"

namespace swept::web {

nlohmann::json sweep_json(const SweepRow& sweep);
nlohmann::json trial_row_json(const TrialRow& row);
nlohmann::json trial_page_json(const store::TrialPage& page);
nlohmann::json trial_detail_json(const store::TrialDetail& detail);
nlohmann::json series_json(const store::MetricSeries& series);
nlohmann::json agent_json(const AgentRow& agent);
nlohmann::json points_json(const store::SweepPoints& points);
nlohmann::json history_json(const store::OptimizationHistory& history);
nlohmann::json importance_json(const ImportanceReport& report);
nlohmann::json objective_points_json(const store::ObjectivePoints& points);
// {"error": {"code": "not_found", "message": "..."}}
nlohmann::json error_json(const Status& status);
// HTTP status for a failed Status: 400, 404, 409, 503 or 500.
int http_status_for(const Status& status);
// Serializes for the wire: invalid UTF-8 (in logs, say) is replaced, never thrown on.
std::string dump_json(const nlohmann::json& j);

}  // namespace swept::web
