// See flow.h. Each function is the few calls that carry one decision from
// one side to the other; none keeps state.
#include "scheduler/flow.h"

#include <utility>

namespace swept::scheduler {

Status pass_events(TrialLifecycle& lifecycle, SweepRunner& runner) {
  for (const LifecycleEvent& e : lifecycle.take_events()) SWEPT_RETURN_IF_ERROR(runner.on_event(e));
  for (const SweepNotice& n : runner.take_notices()) lifecycle.on_sweep(n);
  return Status::Ok();
}

Status start_next_trial(TrialLifecycle& lifecycle, SweepRunner& runner, int64_t sweep_id, const std::string& agent,
                        const Placement& placement, int64_t before, bool* started, const GangDispatch* gang) {
  *started = false;
  SWEPT_ASSIGN_OR_RETURN(next, runner.take_next(sweep_id));
  if (!next) {
    SWEPT_RETURN_IF_ERROR(runner.maybe_complete(sweep_id));
    return pass_events(lifecycle, runner);
  }
  SWEPT_RETURN_IF_ERROR(lifecycle.dispatch(std::move(*next), agent, placement, before, gang));
  *started = true;
  return Status::Ok();
}

Status queue_successors(TrialLifecycle& lifecycle, SweepRunner& runner, const std::set<std::string>& agents,
                        const std::set<int64_t>& unplaceable) {
  int64_t sweep_id = 0;
  int64_t available = 0;
  for (const SweepQueue& q : runner.queues()) {
    if (q.available <= 0 || unplaceable.count(q.sweep_id)) continue;
    if (sweep_id) return Status::Ok();  // more than one sweep waits
    sweep_id = q.sweep_id;
    available = q.available;
  }
  if (!sweep_id) return Status::Ok();
  // A gang's nodes start together, through placement: none waits behind a trial.
  if (runner.demand(sweep_id).gang()) return Status::Ok();
  for (const auto& place : lifecycle.successor_places(sweep_id, agents, available)) {
    bool started = false;
    SWEPT_RETURN_IF_ERROR(
        start_next_trial(lifecycle, runner, sweep_id, place.agent, place.placement, place.before, &started));
    if (!started) break;
  }
  return Status::Ok();
}

Status judge_metrics(TrialLifecycle& lifecycle, SweepRunner& runner, const TrialLifecycle::MetricsOutcome& stored,
                     const protocol::Metrics& batch) {
  // Every stored value joins its sweep's curves (a restarted scheduler
  // rebuilds them from the store, stopped trials' late values included); a
  // late batch of an ended attempt is judged no more.
  if (stored.rows == 0) return Status::Ok();
  SWEPT_ASSIGN_OR_RETURN(verdict, runner.observe_metrics(stored.sweep_id, batch.trial_id, batch.records));
  if (verdict && stored.current) lifecycle.stop_early(batch.trial_id, verdict->decision.reason);
  // A pbt member at its interval (or done) is stopped the same way (issue 29).
  if (!stored.current) return Status::Ok();
  SWEPT_ASSIGN_OR_RETURN(order, runner.observe_pbt(stored.sweep_id, batch.trial_id, batch.records));
  if (order) lifecycle.stop_at_interval(batch.trial_id, order->reason, order->done);
  return Status::Ok();
}

Result<int64_t> cancel_sweep(TrialLifecycle& lifecycle, SweepRunner& runner, int64_t sweep_id,
                             const std::string& reason) {
  SWEPT_ASSIGN_OR_RETURN(queued, runner.cancel(sweep_id, reason));
  SWEPT_RETURN_IF_ERROR(pass_events(lifecycle, runner));
  SWEPT_ASSIGN_OR_RETURN(live, lifecycle.cancel_live(sweep_id, reason));
  SWEPT_RETURN_IF_ERROR(pass_events(lifecycle, runner));
  return queued + live;
}

Result<size_t> recover(TrialLifecycle& lifecycle, SweepRunner& runner, int64_t grace_ms) {
  SWEPT_ASSIGN_OR_RETURN(running, runner.recover());
  SWEPT_RETURN_IF_ERROR(pass_events(lifecycle, runner));  // the sweeps' terms first
  return lifecycle.recover(running, grace_ms);
}

}  // namespace swept::scheduler
