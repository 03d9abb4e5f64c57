// Parameter importance for the dashboard (GET /api/sweeps/{id}/importance,
// docs/api.md): eta^2 (eta_squared.h) over the sample of trials the read
// model returns (store::sweep_points). No SQL here.
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

struct ImportanceReport {
  std::string method;
  int64_t population = 0, sampled = 0;
  std::optional<std::string> metric_name;
  std::vector<ParameterImportance> params;
};

// Importance of each parameter for the sweep's metric over at most
// `max_trials` trials sampled evenly by index. NotFound for an unknown sweep.
Result<ImportanceReport> sweep_importance(store::Connection& db, int64_t sweep_id, int64_t max_trials);

}  // namespace swept::web
