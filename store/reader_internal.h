// The steps the read model's files share (reader.cpp: sweeps;
// reader_trials.cpp: trials). Private to store/: callers outside it use
// reader.h. Each runs inside the caller's read transaction.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/reader.h"
#include "store/rows.h"
#include "store/sqlite.h"

namespace swept::store {

// Parameter name -> its key path, from the first trials of the sweep.
Result<std::map<std::string, std::vector<std::string>>> param_paths(Connection& db, int64_t sweep_id);
// The metric names some trial of the sweep reported, sorted.
Result<std::vector<std::string>> metric_names(Connection& db, int64_t sweep_id);

// Sweep rows (one, or all newest first) with their best trial; with
// `with_counts`, also the counts per state and the never-reported metric.
Result<std::vector<SweepRow>> read_sweeps(Connection& db, std::optional<int64_t> only, bool with_counts = true);
// One sweep, or NotFound saying how to list them.
Result<SweepRow> get_sweep_in_txn(Connection& db, int64_t sweep_id, bool with_counts = true);

}  // namespace swept::store
