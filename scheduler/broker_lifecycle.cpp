// Broker, the trial lifecycle: how a live trial ends (finished, lost,
// cancelled) and how the broker lets go of it. See broker.h; the states move
// only as next_trial_state (common/states.h) says. Split from broker.cpp
// for size; the socket-free lifecycle unit issue 17 asks for is not done yet.
#include <string>

#include "common/log.h"
#include "scheduler/broker.h"

namespace swept::scheduler {

using namespace swept::protocol;

namespace {

std::string to_s(int64_t v) { return std::to_string(v); }

// What a TRIAL_EXITED means for the trial: the event (the process ended
// with an outcome, or the agent lost it) and the reason shown.
TrialEvent event_for_exit(const TrialExited& e, std::string* reason) {
  TrialEvent event = TrialEvent::finish(TrialState::kFailed);
  std::string why;
  switch (e.cause) {
    case ExitCause::kExited:
      if (e.exit_code.value_or(1) == 0) event = TrialEvent::finish(TrialState::kCompleted);
      why = "exit code " + std::to_string(e.exit_code.value_or(-1));
      break;
    case ExitCause::kSignaled: why = "killed by signal " + std::to_string(e.signal.value_or(0)); break;
    case ExitCause::kTimeout: why = "timed out"; break;
    case ExitCause::kLaunchFailed:
      why = "could not start";
      if (e.host_fault) event = {TrialEventKind::kRequeue};  // its host's fault, not the trial's
      break;
    case ExitCause::kStopped: event = TrialEvent::finish(TrialState::kStopped); why = name(TrialState::kStopped); break;
    // The agent stopped it because the agent itself stops (drained before a
    // Slurm time limit, or told to stop): not the trial's doing, so it goes
    // back to the queue without spending a retry (docs/protocol.md).
    case ExitCause::kAgentShutdown: event = {TrialEventKind::kRequeue}; why = "its agent shut down"; break;
    case ExitCause::kNotRunning: event = {TrialEventKind::kLose}; why = "its agent was not running it"; break;
  }
  *reason = e.reason.empty() ? why : e.reason;
  return event;
}

}  // namespace

Status Broker::on_trial_exited(Session& s, const TrialExited& e, bool from_register) {
  // Its agent is shutting down or draining: dispatch() stops placing trials
  // there at once, so the trial requeued below does not go straight back to it.
  if (e.cause == ExitCause::kAgentShutdown) s.draining = true;
  std::string reason;
  TrialEvent event = event_for_exit(e, &reason);
  const bool lost = event.kind == TrialEventKind::kLose || event.kind == TrialEventKind::kRequeue;
  auto it = live_.find(e.trial_id);
  if (it != live_.end() && it->second.agent == s.name && it->second.attempt == e.attempt) {
    if (event.kind == TrialEventKind::kRequeue && e.cause == ExitCause::kLaunchFailed) {  // a host fault
      SWEPT_RETURN_IF_ERROR(requeue_live(e.trial_id, "agent " + s.name + " could not start it: " + reason));
      SWEPT_RETURN_IF_ERROR(note_host_fault(s.name, reason));
      stat_host_requeues_++;
    } else if (lost && it->second.lease_wait) {
      // Its agent was lost and stopped it when its lease ran out: a loss like
      // any lost agent's (it spends a retry, so max_retries still bounds a
      // trial that keeps taking its hosts down).
      SWEPT_RETURN_IF_ERROR(lose_live(e.trial_id, reason));
    } else if (event.kind == TrialEventKind::kRequeue) {  // not the trial's doing: its agent drains
      SWEPT_RETURN_IF_ERROR(requeue_live(e.trial_id, reason));
    } else if (lost)
      SWEPT_RETURN_IF_ERROR(lose_live(e.trial_id, reason));
    else
      SWEPT_RETURN_IF_ERROR(finish_live(e.trial_id, event.outcome, &e, reason));
    if (e.cause != ExitCause::kLaunchFailed) note_host_ok(s.name);  // its process ran: the host works
  } else if (it == live_.end() || it->second.attempt != e.attempt) {
    SWEPT_RETURN_IF_ERROR(ensure_tx());
    auto rec = store_.trial_record(e.trial_id);
    std::optional<TrialState> late;  // a given-up attempt's result (queued or lost -> outcome)
    if (rec.ok() && rec->attempts == e.attempt && !lost && rec->state != TrialState::kRunning)
      late = next_trial_state(rec->state, event, 0);
    if (late && runner_.is_running(rec->sweep_id)) {
      // Given up while its agent was away (requeued, or lost with no retries
      // left), but it finished: its result stands.
      runner_.forget_queued(rec->sweep_id, rec->id);
      SWEPT_RETURN_IF_ERROR(store_.end_attempt(e.trial_id, e.attempt, *late, e.exit_code, reason, e.ended_at));
      SWEPT_RETURN_IF_ERROR(store_.set_trial_state(e.trial_id, *late, e.exit_code, reason, e.ended_at));
      stat_finished_++;
      SWEPT_RETURN_IF_ERROR(runner_.maybe_complete(rec->sweep_id));
      dirty_ = true;
      log::info("trial " + to_s(e.trial_id) + " finished on " + s.name + " while given up: recorded as " + std::string(name(*late)));
    } else if (rec.ok() && rec->attempts != e.attempt) {
      // A superseded attempt: history only.
      SWEPT_RETURN_IF_ERROR(store_.end_attempt(e.trial_id, e.attempt, TrialState::kLost, e.exit_code,
                                               "ended after it was superseded: " + reason, e.ended_at));
    }
    // else: the same attempt, already final (a repeated TRIAL_EXITED): nothing to do.
  }
  if (!from_register) send_later(s.routing_id, ExitAck{e.trial_id, e.attempt});
  return Status::Ok();
}

Status Broker::finish_live(int64_t trial_id, TrialState state, const TrialExited* e,
                           std::string reason) {
  auto it = live_.find(trial_id);
  if (it == live_.end()) return Status::Ok();
  // Stopped for its sweep's early_terminate rule (by this scheduler, or by
  // one before a restart: the decision is on record): early_stopped, not
  // stopped. A process that ended by itself first keeps its own outcome.
  if (early_stop_decided(it->second) && state == TrialState::kStopped) {
    state = next_trial_state(TrialState::kRunning, TrialEvent::finish(TrialState::kEarlyStopped), 0).value();
    reason = it->second.early_stop_reason.empty() ? "early-stopped: decided before a scheduler restart (see stop_reason)"
                                                  : it->second.early_stop_reason;
  }
  if (it->second.cancelled) SWEPT_RETURN_IF_ERROR(write_start(it->second));
  LiveTrial lt = take_live(it);
  if (e && e->cause == ExitCause::kExited && lt.start_started_at > 0 && e->ended_at >= lt.start_started_at) {
    // How long this sweep's trials run (queue_successors()): a moving average.
    double run = e->ended_at - lt.start_started_at;
    auto [m, fresh] = mean_run_seconds_.try_emplace(lt.sweep_id, run);
    if (!fresh) m->second += 0.2 * (run - m->second);
  }
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  double ended = e && e->ended_at > 0 ? e->ended_at : clock_.wall_seconds();
  std::optional<int> code = e ? e->exit_code : std::nullopt;
  if (lt.cancelled) {
    SWEPT_RETURN_IF_ERROR(store_.end_attempt(trial_id, lt.attempt, TrialState::kStopped, code, reason, ended));
  } else {
    // A start not written yet goes in with the end (a short trial's
    // TRIAL_STARTED usually arrives in the same turn as its TRIAL_EXITED).
    std::optional<store::Writer::StartRecord> start;
    if (lt.start_env_json) {
      start = store::Writer::StartRecord{std::move(*lt.start_env_json), lt.start_started_at};
      pending_starts_.erase(trial_id);
    }
    const store::Writer::StartRecord* with = start ? &*start : nullptr;
    SWEPT_RETURN_IF_ERROR(store_.end_attempt(trial_id, lt.attempt, state, code, reason, ended, with));
    SWEPT_RETURN_IF_ERROR(store_.set_trial_state(trial_id, state, code, reason, ended, with));
    // A diverged trial that still exited 0: its last finite value is no
    // result, so it must not be best; with none it counts as the worst.
    if (state == TrialState::kCompleted && e && e->diverged) SWEPT_RETURN_IF_ERROR(store_.clear_metric_value(trial_id));
  }
  stat_finished_++;
  runner_.trial_ended(lt.sweep_id);
  runner_.note_trial_state(lt.sweep_id, trial_id, lt.cancelled ? TrialState::kStopped : state);
  if (state == TrialState::kCompleted && !lt.cancelled)
    SWEPT_RETURN_IF_ERROR(runner_.check_metric_reported(lt.sweep_id, trial_id));
  SWEPT_RETURN_IF_ERROR(runner_.maybe_complete(lt.sweep_id));
  dirty_ = true;
  return Status::Ok();
}

Status Broker::lose_live(int64_t trial_id, const std::string& reason) {
  auto it = live_.find(trial_id);
  if (it == live_.end()) return Status::Ok();
  // Being stopped by its sweep's rule: the decision stands, it is not rerun.
  if (early_stop_decided(it->second)) return finish_live(trial_id, TrialState::kStopped, nullptr, reason);
  SWEPT_RETURN_IF_ERROR(write_start(it->second));
  LiveTrial lt = take_live(it);
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  double now = clock_.wall_seconds();
  // An attempt the agent never confirmed did not run: say so in the history.
  std::string attempt_reason = lt.started ? reason : "never started: " + reason;
  SWEPT_RETURN_IF_ERROR(store_.end_attempt(trial_id, lt.attempt, TrialState::kLost, std::nullopt, attempt_reason, now));
  // Retries spent: the attempts so far, less those requeued at no cost.
  // Never confirmed started: the attempt did not run, so it costs no retry.
  auto free_attempts = store_.count_attempts(trial_id, TrialState::kQueued);
  if (!free_attempts.ok()) return free_attempts.status();
  const int retries_left = lt.started ? lt.max_retries - (lt.attempt - *free_attempts) + 1 : 1;
  const TrialState next = next_trial_state(TrialState::kRunning, {TrialEventKind::kLose}, retries_left).value();
  if (lt.cancelled) {
    runner_.trial_ended(lt.sweep_id);
  } else if (next == TrialState::kQueued) {
    SWEPT_RETURN_IF_ERROR(store_.set_trial_state(trial_id, next, std::nullopt, "requeued: " + reason, std::nullopt));
    runner_.requeue(lt.sweep_id, trial_id);
    log::info("trial " + to_s(trial_id) + " lost (" + reason + "): requeued");
  } else {
    // Final: `lost`, not `failed`: the trial did not fail, its host went away.
    std::string why = reason + "; no retries left (max_retries " + std::to_string(lt.max_retries) + ")";
    SWEPT_RETURN_IF_ERROR(store_.set_trial_state(trial_id, next, std::nullopt, why, now));
    runner_.trial_ended(lt.sweep_id);
    log::info("trial " + to_s(trial_id) + " lost: " + why);
  }
  SWEPT_RETURN_IF_ERROR(runner_.maybe_complete(lt.sweep_id));
  dirty_ = true;
  return Status::Ok();
}

Status Broker::requeue_live(int64_t trial_id, const std::string& reason) {
  auto it = live_.find(trial_id);
  if (it == live_.end()) return Status::Ok();
  // Being stopped by its sweep's rule: the decision stands, it is not rerun.
  if (early_stop_decided(it->second)) return finish_live(trial_id, TrialState::kStopped, nullptr, reason);
  SWEPT_RETURN_IF_ERROR(write_start(it->second));
  LiveTrial lt = take_live(it);
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  const double now = clock_.wall_seconds();
  if (lt.cancelled) {  // already `stopped` in the store: the attempt ends so too
    SWEPT_RETURN_IF_ERROR(store_.end_attempt(trial_id, lt.attempt, TrialState::kStopped, std::nullopt, reason, now));
    runner_.trial_ended(lt.sweep_id);
  } else {
    // The attempt ended not by the trial's doing. Its own state in the
    // history is `queued`: that is how a later loss knows it spent no retry
    // (lose_live counts them), after a restart too.
    const TrialState next = next_trial_state(TrialState::kRunning, {TrialEventKind::kRequeue}, 0).value();
    const std::string why = std::string(lt.started ? "" : "never started; ") + "requeued (costs no retry): " + reason;
    SWEPT_RETURN_IF_ERROR(store_.end_attempt(trial_id, lt.attempt, next, std::nullopt, why, now));
    SWEPT_RETURN_IF_ERROR(store_.set_trial_state(trial_id, next, std::nullopt, why, std::nullopt));
    runner_.requeue(lt.sweep_id, trial_id);
    log::info("trial " + std::to_string(trial_id) + " requeued without spending a retry: " + reason);
  }
  SWEPT_RETURN_IF_ERROR(runner_.maybe_complete(lt.sweep_id));
  dirty_ = true;
  return Status::Ok();
}

Status Broker::on_agent_gone(std::string routing_id, const std::string& why, AgentState new_state) {
  auto it = sessions_.find(routing_id);
  if (it == sessions_.end()) return Status::Ok();
  std::string name = it->second.name;
  const int64_t last_heard_ms = it->second.last_heard_ms;
  sessions_.erase(it);
  if (auto n = routing_by_name_.find(name); n != routing_by_name_.end() && n->second == routing_id)
    routing_by_name_.erase(n);
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_RETURN_IF_ERROR(store_.set_agent_state(name, new_state, clock_.wall_seconds()));
  std::vector<int64_t> ids;
  for (const auto& [id, lt] : live_)
    if (lt.agent == name) ids.push_back(id);
  if (new_state == AgentState::kLost) {
    // Silent, not gone: it may still be running them. They stay live (their
    // places held) until its lease is over, when it has stopped them: then
    // they are requeued (check_timers). Back before that, it keeps them.
    const int64_t requeue_at = last_heard_ms + lease_ms() + lease_margin_ms();
    for (int64_t id : ids) {
      live_[id].lease_wait = true;
      live_[id].await_deadline_ms = requeue_at;
    }
    dirty_ = true;
    return Status::Ok();
  }
  for (int64_t id : ids) SWEPT_RETURN_IF_ERROR(lose_live(id, "agent " + name + " lost: " + why));
  dirty_ = true;
  return Status::Ok();
}

// ---- clients ----

Status Broker::cancel_sweep(int64_t sweep_id, const std::string& reason, int64_t* count) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  auto r = runner_.cancel(sweep_id, reason);
  if (!r.ok()) return r.status();
  *count = *r;
  std::vector<int64_t> ids;
  for (const auto& [id, lt] : live_)
    if (lt.sweep_id == sweep_id && !lt.cancelled) ids.push_back(id);
  for (int64_t id : ids) {
    SWEPT_RETURN_IF_ERROR(cancel_trial(id, reason));
    ++*count;
  }
  dirty_ = true;
  return Status::Ok();
}

Status Broker::cancel_trial(int64_t trial_id, const std::string& reason) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  auto it = live_.find(trial_id);
  if (it != live_.end()) {
    LiveTrial& lt = it->second;
    if (lt.cancelled) return Status::Ok();
    lt.cancelled = true;
    const TrialState stopped = next_trial_state(TrialState::kRunning, {TrialEventKind::kCancel}, 0).value();
    SWEPT_RETURN_IF_ERROR(store_.set_trial_state(trial_id, stopped, std::nullopt, reason, clock_.wall_seconds()));
    if (auto n = routing_by_name_.find(lt.agent); n != routing_by_name_.end())
      send_later(n->second, StopTrial{trial_id, lt.attempt, reason});
    return Status::Ok();
  }
  auto rec = store_.trial_record(trial_id);
  if (!rec.ok()) return rec.status();
  // Not live: only a queued trial can still be cancelled (a running one is live).
  auto stopped = rec->state == TrialState::kQueued ? next_trial_state(rec->state, {TrialEventKind::kCancel}, 0)
                                                   : std::nullopt;
  if (stopped) {
    runner_.forget_queued(rec->sweep_id, trial_id);
    SWEPT_RETURN_IF_ERROR(store_.set_trial_state(trial_id, *stopped, std::nullopt, reason, clock_.wall_seconds()));
    SWEPT_RETURN_IF_ERROR(runner_.maybe_complete(rec->sweep_id));
    return Status::Ok();
  }
  return Status::FailedPrecondition("trial " + to_s(trial_id) + " is already " + std::string(name(rec->state)));
}

Broker::LiveTrial Broker::take_live(std::unordered_map<int64_t, LiveTrial>::iterator it) {
  LiveTrial lt = std::move(it->second);
  live_.erase(it);
  // Its successor now holds the place; a successor that ends first frees it.
  if (auto s = live_.find(lt.successor); lt.successor && s != live_.end()) s->second.after = 0;
  if (auto b = live_.find(lt.after); lt.after && b != live_.end()) b->second.successor = 0;
  return lt;
}

}  // namespace swept::scheduler
