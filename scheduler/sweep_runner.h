// SweepRunner: the sweeps the scheduler is running, driven through sweeps/.
//
// It owns, per running sweep, the parsed spec, the queue of trials ready to
// start and the count of trials out on agents; it writes sweeps and trials to
// the store. Trials are generated lazily: trial `next_index` is computed with
// sweeps::trial_at (grid, random) or search::suggest (bayes, tpe) only when a
// place is free for it, so an unbounded random sweep or a grid of a million
// points costs nothing up front, and a restarted scheduler recomputes from
// (spec, next_index) alone. A bayes/tpe suggestion reads its history (ended
// trials in completion order, running ones as pending) from the store each
// time, and its model state is stored with the trial, so a restarted
// scheduler continues from the same history.
//
// It learns what happened to trials only from the lifecycle's events
// (on_event, trial_events.h), each given once by pass_events (flow.h), and
// says what it decided about whole sweeps (one runs, one ended) in its own
// outbox (take_notices), which pass_events hands to the lifecycle. It never
// calls the lifecycle, nor the lifecycle it.
//
// Early termination (issue 16): a sweep with early_terminate has an
// EarlyStopper (early_stop.h) holding its learning curves, told of each
// trial's state changes by the events and fed each stored METRICS batch by
// the broker (observe_metrics); a decision to stop is recorded in the store
// and returned, and the broker has the lifecycle send the stop. On recover()
// (and when retry reloads a sweep) the curves are rebuilt from the store.
//
// Warm starts (issue 28, warm_start.cpp): a sweep submitted with earlier
// trials imports those that fit its space, in the submit's transaction, as
// trials in state `imported` (a grid point at its index, anything else below
// index 0). The searchers' history holds them; a grid steps over its imported
// points; nothing dispatches them, and a restarted scheduler finds them
// stored rather than importing again.
//
// Invariants: a trial id is in at most one queue, at most once; `running`
// counts the sweep's trials the broker has out on agents (dispatched or
// adopted, not yet final or requeued); a sweep is completed exactly when every
// trial it will ever have exists and is final.
// Errors: Status from the store, InvalidArgument for a bad sweep file (one
// problem per line). Thread safety: one thread (the broker's loop).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "scheduler/early_stop.h"
#include "scheduler/pbt_population.h"
#include "scheduler/placement.h"
#include "scheduler/trial_events.h"
#include "store/reader.h"
#include "store/writer.h"
#include "sweeps/search/search.h"
#include "sweeps/sweep.h"
#include "sweeps/warm_start.h"

namespace swept::scheduler {

struct SubmitResult {
  int64_t sweep_id = 0;
  std::optional<int64_t> total_trials;
  std::optional<std::string> warm_start;  // a warm start's summary (sweeps::WarmPlan::summary)
};

// Where a sweep's warm start comes from besides its file's `warm_start` key
// (docs/sweep-format.md "Warm starts"): `swept submit --warm-start ID`, which
// wins over the key, and the trials of the file warm_start.file names, read
// by the client (the scheduler reads no files of a sweep's).
struct WarmInput {
  std::optional<int64_t> sweep;
  std::optional<std::vector<protocol::WarmTrial>> trials;
};

class SweepRunner {
 public:
  SweepRunner(store::Writer& store, const Clock& clock) : store_(store), clock_(clock) {}

  // Loads running sweeps and their queued (and lost) trials from the store
  // (a SweepRunning notice each). Returns the trials recorded as running,
  // for the lifecycle to wait for their agents.
  Result<std::vector<RecoveredTrial>> recover();

  // Parses, validates and records a sweep file. InvalidArgument lists every
  // problem ("parameters.lr.min: expected a number ..."), one per line.
  // A warm start (the file's warm_start, or `warm`) imports the earlier
  // trials that fit the sweep's space in the same transaction (warm_start.cpp):
  // InvalidArgument naming the field when its sweep does not exist, when the
  // file's trials were not sent, or when the sweep has no metric.
  Result<SubmitResult> submit(const std::string& text, const WarmInput& warm = {});

  // What placement needs: one queue per running sweep, in submission order.
  // A queued trial held back (TrialHeld) until a time not yet reached is
  // not counted available: placement finds no place for it, and take_next
  // passes it by.
  std::vector<SweepQueue> queues() const;
  bool has_work() const;  // any sweep with a trial ready to start

  // The next trial of `sweep_id` to start: its oldest queued trial that is
  // not held back, else a newly generated one (recorded in the store).
  // nullopt when it has none.
  // A generated trial whose command cannot be built is recorded as failed
  // and skipped. The returned trial counts as running.
  Result<std::optional<TrialToStart>> take_next(int64_t sweep_id);

  // What the lifecycle decided about a trial (trial_events.h), given once:
  // an ended trial leaves the running count (or the queue) and its curve
  // takes its final state, a requeued one goes to the front of its queue, an
  // adopted one leaves the queue and runs. The sweep completes when nothing
  // remains. Errors: Status from the store.
  Status on_event(const LifecycleEvent& event);
  // What the runner decided about sweeps since the last call, in order;
  // empties its outbox (pass_events gives them to the lifecycle).
  std::vector<SweepNotice> take_notices() { return std::exchange(notices_, {}); }

  // A stored METRICS batch of a trial: judged by the sweep's early_terminate
  // rule (none: nullopt). A decision to stop is recorded in the store
  // (trials.stop_*) and returned; the broker has the lifecycle send the stop.
  Result<std::optional<StopVerdict>> observe_metrics(int64_t sweep_id, int64_t trial_id,
                                                     const std::vector<protocol::MetricRecord>& records);

  // A stored METRICS batch of a pbt member (issue 29; sweep_runner_pbt.cpp):
  // whether to stop it now, at its interval or done at pbt.max_steps, and
  // why (the broker has the lifecycle send the stop: stop_at_interval).
  struct PbtStopOrder {
    bool done = false;
    std::string reason;
  };
  Result<std::optional<PbtStopOrder>> observe_pbt(int64_t sweep_id, int64_t trial_id,
                                                  const std::vector<protocol::MetricRecord>& records);

  // Marks the sweep completed when nothing remains; no-op otherwise.
  Status maybe_complete(int64_t sweep_id);

  // Cancel: every queued trial of the sweep becomes stopped; the sweep is
  // cancelled. Returns the number of queued trials stopped. The broker stops
  // the running ones.
  Result<int64_t> cancel(int64_t sweep_id, const std::string& reason);
  // Retry: the sweep's failed and lost trials go back to the queue (their
  // history kept in `attempts`), and its early-stopped ones too with
  // `early_stopped` (`swept retry --early-stopped`); a completed sweep runs
  // again. Returns how many.
  Result<int64_t> retry_failed(int64_t sweep_id, bool early_stopped = false);

  bool is_running(int64_t sweep_id) const { return sweeps_.count(sweep_id) != 0; }
  // How many sweeps have ended (completed or cancelled) since construction.
  int64_t ended_count() const { return ended_count_; }
  Demand demand(int64_t sweep_id) const;

 private:
  struct Active {
    int64_t id = 0;
    sweeps::SweepSpec spec;
    std::optional<int64_t> total;
    int64_t next_index = 0;
    std::deque<int64_t> queued;
    int running = 0;
    bool metric_seen = false;  // a trial has reported the metric (or the warning was given)
    std::optional<EarlyStopper> stopper;  // the sweep has early_terminate
    // method pbt: its members between rounds (members a restarted scheduler
    // did not create are not in it: they run to their end as plain trials).
    std::shared_ptr<PbtPopulation> population;
    // metric.target reached (by which trial, with which value): no trial is
    // created any more; the sweep completes once its running ones end.
    std::optional<std::string> target_reached;
    // Grid points a warm start imported (trials.idx >= 0, state imported):
    // never generated, next_index steps over them.
    std::set<int64_t> imported;
  };
  // A sweep's warm start (warm_start.cpp), in two steps so that a bad one
  // records nothing: the earlier trials it offers (nullopt: none), checked
  // before the sweep is recorded, then imported into the recorded sweep,
  // returning the summary.
  Result<std::optional<std::vector<sweeps::WarmCandidate>>> warm_candidates(const sweeps::SweepSpec& spec,
                                                                           const WarmInput& warm);
  Result<std::string> import_warm_start(Active& s, const std::vector<sweeps::WarmCandidate>& candidates);
  // Steps next_index over the imported grid points at it (stored too).
  Status skip_imported(Active& s);
  // Whether a trial this sweep ran (not an imported one) reached its target.
  Result<std::optional<std::string>> target_reached_by_own(const Active& s);
  // Whether a completed trial's stored value reaches the sweep's target; the
  // sweep then stops creating trials (its queued ones are stopped).
  Status check_target(Active& s, int64_t trial_id);
  // Stops the sweep's queued trials (they never start); returns how many.
  Result<int64_t> stop_queued(Active& s, const std::string& reason);
  // Builds the sweep's EarlyStopper when it has early_terminate; with
  // `load`, its curves from the store (recover, retry).
  Status make_stopper(Active& s, bool load);
  Result<std::optional<TrialToStart>> generate(Active& s);
  // method bayes/tpe: trial `index` from the history stored so far.
  Result<sweeps::search::Suggestion> suggest(const Active& s, int64_t index);
  Result<std::optional<TrialToStart>> load_queued(Active& s, int64_t trial_id);
  // ---- method pbt (sweep_runner_pbt.cpp) ----
  void make_population(Active& s);
  // After a restart: the population rebuilt from the store (members, their
  // segments, the round being gathered; the members waiting for it taken
  // out of the queue), and the stops owed to running members marked in `live`.
  Status rebuild_population(Active& s, std::vector<RecoveredTrial>& live);
  // A member was generated: it joins the population, its lineage starts.
  Status pbt_created(Active& s, TrialToStart& t);
  // A member's segment ended at its interval, or was lost: true when the
  // event is handled here (the member waits for its round, not queued).
  Result<bool> pbt_requeued(const TrialRequeued& e);
  Status pbt_ended(const TrialEnded& e);
  // Runs the sweep's round when it is ready: new parameters and commands
  // stored, lineage recorded, the waiting members queued.
  Status pbt_maybe_round(int64_t sweep_id);
  // The event handlers (on_event).
  Status on_trial_ended(const TrialEnded& e);
  void on_trial_requeued(const TrialRequeued& e);
  void on_trial_adopted(const TrialAdopted& e);
  // Whether a queued trial is held back now (TrialHeld, issue 26).
  bool held_back(int64_t trial_id) const;
  // A completed trial of the sweep: when the read model finds the sweep's
  // metric missing (store/reader.h: completed trials, none reported it),
  // says so in the log with the names they did report, once per sweep (a
  // restarted scheduler does not repeat it).
  Status check_metric_reported(int64_t sweep_id, int64_t trial_id);
  // Starts running the sweep: kept, and the lifecycle told its terms.
  void run(Active a);
  // The sweep ended (completed or cancelled): dropped, the lifecycle told.
  void end(std::map<int64_t, Active>::iterator it);
  SweepTerms terms(const Active& s) const;

  store::Writer& store_;
  const Clock& clock_;
  std::map<int64_t, Active> sweeps_;  // by id = submission order
  std::vector<SweepNotice> notices_;
  int64_t ended_count_ = 0;
  // Trials that may not start before a time (the clock's ms), by id: a gang
  // whose previous attempt's ranks may still run (TrialHeld). Dropped when
  // released (0) or when the trial starts.
  std::map<int64_t, int64_t> not_before_;
};

}  // namespace swept::scheduler
