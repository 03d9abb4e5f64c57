// The agent's trials (agent/agent_loop.h): START_TRIAL (launched at once, or
// waiting for the place of a trial still running here), STOP_TRIAL, EXIT_ACK,
// servicing each trial's supervisor every turn, and the exit record that is
// kept for each one until the scheduler acknowledges it (and, in the exit
// journal, for the next agent should this one die first).
#include <algorithm>
#include <utility>

#include "agent/agent_loop.h"

namespace swept::agent::loop {

void Agent::on(const pr::StartTrial& start, int64_t now) {
  TrialKey key{start.trial_id, start.attempt};
  auto it = trials_.find(key);
  if (it != trials_.end() && it->second.restored) {
    // A previous agent ran this attempt; a scheduler that starts it again is
    // not the one it ran for (another database): that exit is not its.
    log::warn(describe(key) + ": started by the scheduler, yet a previous agent of this name had run it: its "
              "journaled exit belongs to another scheduler's database and is dropped");
    journal_.acknowledged(key.trial_id, key.attempt);
    trials_.erase(it);
    it = trials_.end();
  }
  if (lease_.expired() && it == trials_.end()) {
    // Sent before the lease ran out and read after: the scheduler may have
    // given it to another host since. Reported as not started (no retry
    // spent); the next REGISTER_ACK renews the lease.
    finish_without_start(key, trials_[key], pr::ExitCause::kAgentShutdown,
                         "lease expired before this START_TRIAL was read: not started");
    return;
  }
  if (it != trials_.end()) {  // a repeated START_TRIAL changes nothing
    if (it->second.running()) {
      send_trial_started(key, it->second);
    } else {
      it->second.exit_sent = false;
      send_outbox(it->first, it->second);
    }
    return;
  }
  if (waiting_index(key) >= 0 || pulls_.count(key)) return;  // already waiting for its turn, or its checkpoint
  if (start.after_trial_id > 0 && !shutting_down_) {
    // It takes the place of a trial still running here: it waits for that
    // trial's end (docs/protocol.md, START_TRIAL `after`).
    TrialKey before{start.after_trial_id, start.after_attempt};
    auto p = trials_.find(before);
    if (p != trials_.end() && p->second.supervisor) {
      bool taken = std::any_of(waiting_.begin(), waiting_.end(), [&](const Waiting& w) { return w.before == before; });
      if (!taken) {
        waiting_.push_back({before, start});
        return;
      }
      log::warn(describe(key) + " was sent to wait for " + describe(before) +
                ", for which another trial already waits: started at once");
    }
  }
  start_trial(key, start, now);
}

// Launches a trial now (or records why it cannot start).
void Agent::start_trial(const TrialKey& key, const pr::StartTrial& start, int64_t now, bool pulled) {
  if (!pulled && !shutting_down_ && needs_pull(start)) {  // its checkpoint is elsewhere (agent_pull.cpp)
    begin_pull(key, start, now);
    return;
  }
  HostedTrial& t = trials_[key];
  t.last_batch_ms = now;
  if (shutting_down_) {
    finish_without_start(key, t, pr::ExitCause::kAgentShutdown, "agent is shutting down");
    return;
  }
  for (int index : start.gpus) {
    bool known = std::any_of(gpus_.begin(), gpus_.end(), [&](const Gpu& g) { return g.index == index; });
    if (!known) {
      finish_without_start(key, t, pr::ExitCause::kLaunchFailed,
                           "GPU " + std::to_string(index) + " is not on agent " + name_ + " (" +
                               describe_gpus(gpus_) + ")");
      return;
    }
  }
  TrialLaunch launch;
  launch.sweep_id = start.sweep_id;
  launch.trial_id = start.trial_id;
  launch.attempt = start.attempt;
  launch.argv = start.argv;
  launch.extra_env = start.env;
  launch.params_json = start.params.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  launch.workdir = start.workdir;
  launch.gpu_indices = start.gpus;
  launch.gpu_memory_fraction = start.gpu_fraction;
  launch.timeout_s = start.timeout_s;
  launch.limits = start.limits;
  launch.checkpoint = start.checkpoint;
  if (start.gang) {  // one node of a multi-node trial: procs_per_node processes
    t.supervisor = GangSupervisor::start(launch, *start.gang, gang_ifname_, supervisor_options_, launcher_, clock_);
  } else {
    t.supervisor = TrialSupervisor::start(launch, supervisor_options_, launcher_, clock_);
  }
  t.pid = t.supervisor->pid();
  t.started_at = t.supervisor->started_at();
  t.launched_ms = now;
  if (t.supervisor->finished()) {  // could not launch: report it as the trial's end
    log::info(describe(key) + " could not start: " + t.supervisor->result().reason);
    record_exit(key, t);
    return;
  }
  log::debug(describe(key) + " started, pid " + std::to_string(t.pid));
  // TRIAL_STARTED goes out after kStartedReportDelayMs, or before the
  // trial's first METRICS or its exit, whichever comes first.
}

void Agent::on(const pr::StopTrial& stop, int64_t) {
  TrialKey key{stop.trial_id, stop.attempt};
  if (stop_pull(key, stop.reason)) return;
  if (int w = waiting_index(key); w >= 0) {  // never started: it ends here
    waiting_.erase(waiting_.begin() + w);
    finish_without_start(key, trials_[key], pr::ExitCause::kStopped,
                         stop.reason.empty() ? "stopped by the scheduler before it started" : stop.reason);
    return;
  }
  auto it = trials_.find(key);
  if (it == trials_.end()) {
    pr::TrialExited not_running;
    not_running.trial_id = stop.trial_id;
    not_running.attempt = stop.attempt;
    not_running.cause = pr::ExitCause::kNotRunning;
    not_running.reason = "not running on agent " + name_;
    not_running.ended_at = clock_.wall_seconds();
    if (link_state_ == Link::kRegistered) send(not_running);
    return;
  }
  HostedTrial& t = it->second;
  if (t.supervisor && !t.supervisor->finished()) {
    log::debug(describe(key) + ": stopping (" + stop.reason + ")");
    t.supervisor->request_stop(stop.reason.empty() ? "stopped by the scheduler" : stop.reason);
  }
  // Already finished: its TRIAL_EXITED is on its way or will be re-sent.
}

void Agent::on(const pr::ExitAck& ack, int64_t) {
  auto it = trials_.find(TrialKey{ack.trial_id, ack.attempt});
  if (it == trials_.end() || it->second.running()) {
    log::debug("EXIT_ACK for trial " + std::to_string(ack.trial_id) + " attempt " + std::to_string(ack.attempt) +
               " that has not exited here: ignored");
    return;
  }
  journal_.acknowledged(ack.trial_id, ack.attempt);
  trials_.erase(it);
}

void Agent::send_trial_started(const TrialKey& key, HostedTrial& t) {
  if (link_state_ != Link::kRegistered) return;  // announced after the REGISTER_ACK
  pr::TrialStarted started;
  started.trial_id = key.trial_id;
  started.attempt = key.attempt;
  started.pid = t.pid;
  started.started_at = t.started_at;
  started.workdir = t.supervisor->working_dir();
  if (t.supervisor->reports_environment())
    for (const auto& [k, v] : t.supervisor->environment()) started.env[k] = v;
  t.started_reported = send(started);
}

void Agent::finish_without_start(const TrialKey& key, HostedTrial& t, pr::ExitCause cause, const std::string& reason) {
  pr::TrialExited e;
  e.trial_id = key.trial_id;
  e.attempt = key.attempt;
  e.cause = cause;
  e.reason = reason;
  e.ended_at = clock_.wall_seconds();
  log::info(describe(key) + " not started: " + reason);
  t.exited = e;
  send_outbox(key, t);
}

void Agent::service_trials(int64_t now) {
  service_pulls(now);
  for (auto& [key, t] : trials_) {
    if (!t.supervisor) {
      if (t.exited && !t.exit_sent) send_outbox(key, t);  // an exit a full queue held back
      continue;
    }
    t.supervisor->service();
    // Its workers ended and its servers run (issue 30): the scheduler learns
    // it now, not at the next idle heartbeat; each heartbeat repeats it.
    if (!t.workers_ended_told && t.supervisor->workers_ended()) {
      t.workers_ended_told = true;
      send_heartbeat();
    }
    if (!t.started_reported && now - t.launched_ms >= kStartedReportDelayMs) send_trial_started(key, t);
    bool finished = t.supervisor->finished();
    size_t pending = t.supervisor->pending_metrics();
    bool due = now - t.last_batch_ms >= options_.metrics_flush_ms &&
               (pending > 0 || t.supervisor->has_pending_log());
    if (finished || due || pending >= kMaxRecordsPerBatch) make_batches(key, t, now);
    if (finished) {
      record_exit(key, t);
      start_waiting_behind(key, now);
    }
  }
}

int Agent::waiting_index(const TrialKey& key) const {
  for (size_t i = 0; i < waiting_.size(); ++i)
    if (waiting_[i].start.trial_id == key.trial_id && waiting_[i].start.attempt == key.attempt)
      return static_cast<int>(i);
  return -1;
}

// `ended` has just ended: the trial waiting for its place starts now.
void Agent::start_waiting_behind(const TrialKey& ended, int64_t now) {
  auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const Waiting& x) { return x.before == ended; });
  if (w == waiting_.end()) return;
  pr::StartTrial start = std::move(w->start);
  waiting_.erase(w);
  start_trial(TrialKey{start.trial_id, start.attempt}, start, now);
}

void Agent::record_exit(const TrialKey& key, HostedTrial& t) {
  const TrialResult& r = t.supervisor->result();
  pr::TrialExited e;
  e.trial_id = key.trial_id;
  e.attempt = key.attempt;
  e.exit_code = r.exit_code;
  e.signal = r.signal;
  e.reason = r.reason;
  e.ended_at = r.ended_at;
  if (r.end != TrialEnd::kLaunchFailed) e.started_at = r.started_at;  // it ran
  e.last_seq = t.next_seq - 1;
  e.diverged = r.diverged;
  switch (r.end) {
    case TrialEnd::kExited: e.cause = pr::ExitCause::kExited; break;
    case TrialEnd::kSignaled: e.cause = pr::ExitCause::kSignaled; break;
    case TrialEnd::kTimedOut:
      e.cause = pr::ExitCause::kTimeout;
      e.timed_out = true;
      break;
    case TrialEnd::kLaunchFailed:
      e.cause = pr::ExitCause::kLaunchFailed;
      e.host_fault = r.host_fault;  // the scheduler requeues it elsewhere, no retry spent
      break;
    case TrialEnd::kStopped:
      e.cause = t.stopping_for_shutdown ? pr::ExitCause::kAgentShutdown : pr::ExitCause::kStopped;
      break;
  }
  log::debug(describe(key) + " ended: " + pr::exit_cause_name(e.cause) + ", " + e.reason);
  if (!t.started_reported) send_trial_started(key, t);  // it comes before the exit
  t.supervisor.reset();  // reaped and closed: only the record remains
  // Kept on the host until EXIT_ACK, should this agent die first; a later
  // agent reports it only while the scheduler may still hold the attempt
  // (lease, margin and report window: under 3.1 leases; 0 without a lease).
  journal_.record(e, t.unacked, clock_.wall_seconds() + 4.0 * static_cast<double>(lease_.lease_ms()) / 1000.0);
  t.exited = std::move(e);
  send_outbox(key, t);
}

void Agent::restore_exits(std::vector<PendingExit> left) {
  for (PendingExit& p : left) {
    TrialKey key{p.exit.trial_id, p.exit.attempt};
    HostedTrial& t = trials_[key];
    t.next_seq = p.exit.last_seq + 1;
    for (pr::Metrics& m : p.unacked) {
      t.unacked_records += m.records.size();
      t.unacked.push_back(std::move(m));
    }
    t.started_reported = true;  // the previous agent said so, or the exit says when
    t.restored = true;
    log::info(describe(key) + " ended while a previous agent ran it (" + p.exit.reason + "): reported on registering");
    t.exited = std::move(p.exit);
  }
}

size_t Agent::running_count() const {
  return static_cast<size_t>(std::count_if(trials_.begin(), trials_.end(), [](const auto& kv) {
    return kv.second.running();
  }));
}

}  // namespace swept::agent::loop
