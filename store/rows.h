// The one row reader of each table whose rows leave the store (common/rows.h:
// SweepRow, TrialRow). Every query that returns sweeps or trials selects the
// columns named here, in this order, and reads them with these functions:
// the writer's reads for the scheduler, the read model's for the dashboard
// and the CLI, and the protocol's rows alike. What a query adds (counts,
// latest values, a suggestion) it fills in after.
//
// Private to store/ (it names Statement): callers outside use writer.h and
// reader.h.
#pragma once

#include <vector>

#include "common/rows.h"
#include "common/status.h"
#include "store/sqlite.h"

namespace swept::store {

// The sweeps columns read_sweep_row reads, in its order (table `sweeps`,
// unaliased).
inline constexpr const char* kSweepColumns =
    "id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at, finished_at";
// One sweeps row; counts, best and metric_missing are left to the read model.
SweepRow read_sweep_row(const Statement& s);

// The trials columns read_trial_row reads, in its order (table `trials`
// aliased `t`).
inline constexpr const char* kTrialColumns =
    "t.id, t.sweep_id, t.idx, t.state, t.attempts, t.agent, t.gpus, t.gpu_fraction, t.exit_code, t.reason, "
    "t.metric_value, t.params, t.command, t.started_at, t.ended_at";
inline constexpr int kTrialColumnCount = 15;
// One trials row. Parameters or a command that do not decode leave the row
// readable (params {}, the command's strings) and say why in `damaged`,
// naming the trial and the column: the dashboard shows it; the scheduler's
// reads refuse the row with Corruption (sound_trial_row).
TrialRow read_trial_row(const Statement& s);
// The row, or Corruption when it was damaged: for the scheduler, which must
// not run a trial from a guess.
Result<TrialRow> sound_trial_row(const Statement& s);
// Attaches each row's latest metric values (trial_latest; one IN query).
Status fill_latest(Connection& db, std::vector<TrialRow>& rows);
// Attaches each multi-node row's nodes (trials.nodes; one IN query; none
// before schema 7).
Status fill_nodes(Connection& db, std::vector<TrialRow>& rows);
// Each pbt member's parameter schedule (pbt_lineage, schema 8), by round;
// nothing for other trials or an older file.
Status fill_schedules(Connection& db, std::vector<TrialRow>& rows);

}  // namespace swept::store
