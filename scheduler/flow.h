// The one place where the trial lifecycle and the sweep runner meet, each
// through the other's outbox (trial_events.h): the broker calls these after
// every call into the lifecycle or the runner that may have decided
// something, and before anything reads the runner again, so that both see
// one order of events. Tests that drive the two without a broker call the
// same functions.
//
// Errors: Status from the store (the broker rolls its turn back).
// Thread safety: the broker's loop thread, as the two it joins.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "common/status.h"
#include "scheduler/lifecycle.h"
#include "scheduler/placement.h"
#include "scheduler/sweep_runner.h"

namespace swept::scheduler {

// Gives each of the lifecycle's events to the runner once, in order, then
// each of the runner's sweep notices to the lifecycle.
Status pass_events(TrialLifecycle& lifecycle, SweepRunner& runner);

// Starts the sweep's next trial on `agent` (as the successor of `before`
// when not 0; a gang's node 0 with `gang`): the runner gives the trial, the
// lifecycle sends it. *started false when the sweep had none to give (it
// may be complete now).
Status start_next_trial(TrialLifecycle& lifecycle, SweepRunner& runner, int64_t sweep_id, const std::string& agent,
                        const Placement& placement, int64_t before, bool* started,
                        const GangDispatch* gang = nullptr);

// Short trials of the one sweep that alone has trials waiting (a successor
// keeps its predecessor's place for the same sweep, so with several sweeps
// waiting the places go through placement and its fair order instead) get
// one successor per running trial, on the agents in `agents` (those that
// implement `after` and take work). `unplaceable`: sweeps placement cannot serve.
Status queue_successors(TrialLifecycle& lifecycle, SweepRunner& runner, const std::set<std::string>& agents,
                        const std::set<int64_t>& unplaceable);

// A stored METRICS batch (TrialLifecycle::metrics said where it went) is
// judged by its sweep's early_terminate rule; a stop goes to the trial when
// the batch is of its current attempt. A pbt member's batch of its current
// attempt may stop it at its interval (or done), the runner says.
Status judge_metrics(TrialLifecycle& lifecycle, SweepRunner& runner, const TrialLifecycle::MetricsOutcome& stored,
                     const protocol::Metrics& batch);

// Cancels a running sweep: its queued trials stopped by the runner, its live
// ones by the lifecycle (each sent STOP_TRIAL). Returns how many were stopped.
Result<int64_t> cancel_sweep(TrialLifecycle& lifecycle, SweepRunner& runner, int64_t sweep_id,
                             const std::string& reason);

// After a restart: the runner reloads the running sweeps, the lifecycle
// takes their running trials as live, each waiting `grace_ms` for its agent.
Result<size_t> recover(TrialLifecycle& lifecycle, SweepRunner& runner, int64_t grace_ms);

}  // namespace swept::scheduler
