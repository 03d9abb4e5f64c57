// Parameter importance for the dashboard (GET /api/sweeps/{id}/importance,
// docs/api.md): eta^2 (eta_squared.h) over the sample of trials the read
// model returns (store::sweep_points; for a sweep with several objectives,
// store::objective_points, once per objective). No SQL here.
// Thread safety: reentrant; the Connection belongs to the calling thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/reader.h"
#include "web/eta_squared.h"

namespace swept::web {

// The importance of each parameter for one objective of a sweep with several.
struct ObjectiveImportance {
  std::string metric, goal;
  std::vector<ParameterImportance> params;
};

struct ImportanceReport {
  std::string method;
  int64_t population = 0, sampled = 0;
  std::optional<std::string> metric_name;   // several objectives: the first one's
  std::vector<ParameterImportance> params;  // several objectives: the first one's
  // Several objectives: one entry per objective, in the file's order; empty otherwise.
  std::vector<ObjectiveImportance> objectives;
};

// Importance of each parameter for the sweep's metric (or each of its
// objectives) over at most `max_trials` trials sampled evenly by index.
// Parameters that never changed over the sampled trials are not listed.
// NotFound for an unknown sweep.
Result<ImportanceReport> sweep_importance(store::Connection& db, int64_t sweep_id, int64_t max_trials);

}  // namespace swept::web
