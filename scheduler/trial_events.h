// The vocabulary between the sweep runner and the trial lifecycle, which
// never call each other (scheduler/README.md, "How a trial flows"):
//
//   broker -> lifecycle -> LifecycleEvent -> runner -> TrialToStart -> placement -> broker
//                                              \-> SweepNotice -> lifecycle
//
// The runner makes trials (TrialToStart) and keeps the sweeps' queues; the
// broker places a trial and hands it to the lifecycle, which sends it and
// follows it to its end. What the lifecycle decided and recorded about a
// trial comes out of its outbox as a LifecycleEvent, and pass_events()
// (flow.h) gives each one to the runner once, in order. What the runner
// decides about whole sweeps (one starts running, one ends) comes out of the
// runner's outbox as a SweepNotice, which pass_events() gives the lifecycle:
// the terms under which the sweep's trials run (retries, CPU slots, metric).
//
// All of these are plain values: no references into either side.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/rows.h"
#include "common/states.h"

namespace swept::scheduler {

// What the lifecycle must know of a running sweep to follow its trials.
struct SweepTerms {
  int64_t sweep_id = 0;
  int max_retries = 0;
  int cpus = 0;                       // CPU slots a trial holds (0 when it takes GPUs)
  double timeout_s = 0;               // per trial; 0: none
  protocol::TrialLimits limits;       // resources.memory, pids, cpus: START_TRIAL `limits`
  std::optional<std::string> metric;  // the sweep's metric, kept in trials.metric_value
  bool pbt = false;                   // method pbt: a failed member is retried (lifecycle_pbt.cpp)
};

// A trial about to start, as the runner gives it: its parameters, its
// command, and the sweep's terms.
struct TrialToStart {
  int64_t trial_id = 0;
  int64_t sweep_id = 0;
  int64_t index = 0;
  int previous_attempts = 0;  // the new attempt is previous_attempts + 1
  nlohmann::json params;
  std::vector<std::string> argv;
  // A pbt member's segment (issue 29): its own checkpoint directory, maybe a
  // copy of an ended segment's (START_TRIAL `checkpoint`).
  std::optional<protocol::CheckpointSegment> checkpoint;
  // Variables for the trial's environment (START_TRIAL `env`): a pbt
  // member's SWEPT_PBT_STOP_STEP.
  std::map<std::string, std::string> env;
};

// A trial the store had as running when the scheduler started: it waits for
// its agent (TrialLifecycle::recover).
struct RecoveredTrial {
  int64_t trial_id = 0;
  int64_t sweep_id = 0;
  int attempt = 0;
  std::string agent;
  std::vector<int> gpus;
  double gpu_fraction = 0;
  bool started = false;       // its TRIAL_STARTED was recorded
  bool stop_decided = false;  // its sweep's early_terminate rule stopped it before the restart
  // A pbt member already past its interval (or pbt.max_steps) before the
  // restart: the stop is owed again, and its end is the segment's (issue 29).
  bool pbt_interval_stop = false;
  bool pbt_done_stop = false;
  std::vector<TrialNode> nodes;  // a multi-node trial's nodes, node 0 first (trials.nodes)
  // A multi-node trial's processes (attempts.gang, issue 30), or for an
  // attempt stored before schema 9 as its sweep's file lays them out (no
  // ports); nullopt for a one-node trial.
  std::optional<GangRecord> gang;
};

// ---- the lifecycle's events (to the runner) ----

// A trial reached a final state (completed, failed, stopped, early_stopped,
// lost). `was_running`: it was counted as running (out on an agent) until
// now; otherwise it ended from the queue (cancelled there, or a given-up
// attempt reported its result).
struct TrialEnded {
  int64_t trial_id = 0;
  int64_t sweep_id = 0;
  TrialState state = TrialState::kCompleted;
  bool was_running = true;
};
// A running trial went back to its sweep's queue (lost with retries left,
// or requeued at no cost); it runs again, first in line. `at_interval`: a
// pbt member's segment `attempt` ended at its interval, as the runner asked
// (stop_at_interval): it waits for its population's round, not in the queue.
// The reason an attempt that ended at its pbt interval is requeued with
// (in attempts.reason): how a restarted scheduler finds a member's complete
// segments (SweepRunner::rebuild_population).
inline constexpr const char* kPbtIntervalReason = "its segment ended at the pbt interval";
struct TrialRequeued {
  int64_t trial_id = 0;
  int64_t sweep_id = 0;
  bool at_interval = false;
  int attempt = 0;
  // A pbt member's segment failed (its program, or its checkpoint's copy or
  // pull), rather than being lost with its host: it reruns from its own
  // checkpoint, not from the donor's it was given (sweep_runner_pbt.cpp).
  bool failed = false;
};
// A queued trial is running again: its agent came back still running the
// attempt that had been given up.
struct TrialAdopted {
  int64_t trial_id = 0;
  int64_t sweep_id = 0;
};
// A queued trial may not start before `not_before_ms` (the lifecycle's
// clock; INT64_MAX: until another TrialHeld says when; 0: no longer held): a multi-node attempt ended while some of its ranks may
// still run (a silent node's, a stopped node's not yet confirmed), and its
// next attempt must never run beside them (issue 26). Given again whenever
// the time changes.
struct TrialHeld {
  int64_t trial_id = 0;
  int64_t sweep_id = 0;
  int64_t not_before_ms = 0;
};
using LifecycleEvent = std::variant<TrialEnded, TrialRequeued, TrialAdopted, TrialHeld>;

// ---- the runner's notices (to the lifecycle) ----

// A sweep runs (submitted, recovered, or taken up again by a retry) under
// `terms`; or it ended (completed or cancelled: `running` false, and
// terms.sweep_id names it): its trials still out end as they will, but
// nothing new of it starts or is adopted back.
struct SweepNotice {
  bool running = true;
  SweepTerms terms;
};

}  // namespace swept::scheduler
