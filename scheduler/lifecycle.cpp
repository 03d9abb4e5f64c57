// TrialLifecycle: see lifecycle.h. The file follows a trial: recovery,
// dispatch and successors, what its agent reports (start, metrics, exit),
// how it ends (finish, lose, requeue), and cancellation. Re-registration,
// agents going away and deadlines are in lifecycle_agents.cpp. States move
// only as next_trial_state (common/states.h) says.
#include "scheduler/lifecycle.h"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/trial_dir.h"
#include "store/reader.h"

namespace swept::scheduler {

using namespace swept::protocol;

namespace {

std::string to_s(int64_t v) { return std::to_string(v); }

// The reason recorded for a trial stopped by its sweep's early_terminate
// rule: the state's display name ("early-stopped"), then why.
std::string early_stop_reason(const std::string& why) { return display_name(TrialState::kEarlyStopped) + ": " + why; }

// The end of an attempt in the history (Writer::end_trial); the caller adds
// the rest (reason, exit, the trial's own state).
store::Writer::TrialEnd attempt_end(int64_t trial_id, int attempt, TrialState attempt_state) {
  store::Writer::TrialEnd end;
  end.trial_id = trial_id;
  end.attempt = attempt;
  end.attempt_state = attempt_state;
  return end;
}

}  // namespace

// What a TRIAL_EXITED means for the trial: the event (the process ended
// with an outcome, or the agent lost it) and the reason shown.
TrialEvent TrialLifecycle::event_for_exit(const TrialExited& e, std::string* reason) {
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
    // Slurm time limit, or told to stop) or its lease ran out: not the
    // trial's doing, so it goes back to the queue without spending a retry
    // (a lease stop of a lost agent's trial is a loss: exited() says so;
    // docs/protocol.md).
    case ExitCause::kAgentShutdown: event = {TrialEventKind::kRequeue}; why = "its agent shut down"; break;
    case ExitCause::kNotRunning: event = {TrialEventKind::kLose}; why = "its agent was not running it"; break;
  }
  *reason = e.reason.empty() ? why : e.reason;
  return event;
}

const LiveTrial* TrialLifecycle::find(int64_t trial_id) const {
  auto it = live_.find(trial_id);
  return it == live_.end() ? nullptr : &it->second;
}

Status TrialLifecycle::ensure_tx() {
  if (store_.in_transaction()) return Status::Ok();
  return store_.begin();
}

LiveTrial TrialLifecycle::make_live(int64_t trial_id, int64_t sweep_id, int attempt, const std::string& agent) const {
  LiveTrial lt;
  lt.trial_id = trial_id;
  lt.sweep_id = sweep_id;
  lt.attempt = attempt;
  lt.agent = agent;
  if (auto t = terms_.find(sweep_id); t != terms_.end()) {
    lt.cpus = t->second.cpus;
    lt.max_retries = t->second.max_retries;
  }
  return lt;
}

void TrialLifecycle::on_sweep(const SweepNotice& notice) {
  const int64_t id = notice.terms.sweep_id;
  if (notice.running) {
    terms_[id] = notice.terms;
    ended_metric_.erase(id);
    return;
  }
  if (auto t = terms_.find(id); t != terms_.end()) {
    // Late batches of its trials still set trials.metric_value.
    ended_metric_[id] = t->second.metric;
    terms_.erase(t);
  }
  mean_run_seconds_.erase(id);
}

std::optional<std::string> TrialLifecycle::metric_of(int64_t sweep_id) {
  if (auto t = terms_.find(sweep_id); t != terms_.end()) return t->second.metric;
  if (auto m = ended_metric_.find(sweep_id); m != ended_metric_.end()) return m->second;
  // A sweep this scheduler never ran (it ended before a restart).
  std::optional<std::string> metric;
  auto sums = store::sweep_summaries(store_.connection(), sweep_id);
  if (sums.ok() && !sums->empty()) metric = sums->front().metric_name;
  ended_metric_[sweep_id] = metric;
  return metric;
}

void TrialLifecycle::ended(int64_t trial_id, int64_t sweep_id, TrialState state, bool was_running) {
  events_.push_back(TrialEnded{trial_id, sweep_id, state, was_running});
  changed_ = true;
}

// ---- after a restart ----

Result<size_t> TrialLifecycle::recover(const std::vector<RecoveredTrial>& running, int64_t grace_ms) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  const int64_t deadline = clock_.now_ms() + grace_ms;
  for (const RecoveredTrial& t : running) {
    LiveTrial lt = make_live(t.trial_id, t.sweep_id, t.attempt, t.agent);
    lt.gpus = t.gpus;
    lt.gpu_fraction = t.gpu_fraction;
    lt.started = t.started;
    lt.start_recorded = t.started;
    lt.stop_on_record = t.stop_decided;
    lt.interval_stop = t.pbt_interval_stop;
    lt.done_stop = t.pbt_done_stop;
    // A multi-node trial's other nodes wait for their agents as node 0 does
    // (reconcile keeps each one its agent reports running).
    for (size_t n = 1; n < t.nodes.size(); ++n) {
      lt.more_nodes.push_back(GangNode{t.nodes[n].agent, t.nodes[n].gpus, t.gpu_fraction, 0, true, false});
    }
    // Its processes (issue 30): servers, worker nodes, ports and slots as dispatched.
    if (t.gang) adopt_gang(lt, *t.gang);
    SWEPT_ASSIGN_OR_RETURN(seq, store_.metrics_seq(t.trial_id, t.attempt));
    lt.stored_seq = seq;
    lt.await_deadline_ms = deadline;
    live_[t.trial_id] = std::move(lt);
  }
  changed_ = true;
  return running.size();
}

// ---- dispatch ----

// Issue 30: which ports of which agents the trial holds, and whether it has
// servers to stop once its workers end.
void TrialLifecycle::note_gang_ports(LiveTrial& lt, const GangDispatch& gang, const std::string& node0) {
  auto agent_of = [&](size_t node) { return node == 0 ? node0 : gang.more_nodes[node - 1].first; };
  const size_t per_node = static_cast<size_t>(std::max(1, gang.procs_per_node));
  for (size_t r = 0; r < gang.worker_ports.size(); ++r) lt.ports.push_back({agent_of(r / per_node), gang.worker_ports[r]});
  for (size_t j = 0; j < gang.ps_node.size() && j < gang.ps_ports.size(); ++j)
    lt.ports.push_back({agent_of(static_cast<size_t>(gang.ps_node[j])), gang.ps_ports[j]});
  lt.servers = !gang.ps_node.empty();
  lt.worker_nodes = gang.worker_nodes > 0 ? gang.worker_nodes : static_cast<int>(gang.more_nodes.size()) + 1;
}

Status TrialLifecycle::dispatch(TrialToStart t, const std::string& agent, const Placement& placement,
                                int64_t before_id, const GangDispatch* gang) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  const int attempt = t.previous_attempts + 1;
  std::vector<TrialNode> nodes;  // a multi-node trial's, node 0 first
  if (gang && !gang->more_nodes.empty()) {
    nodes.push_back({agent, placement.gpus});
    for (const auto& [name, p] : gang->more_nodes) nodes.push_back({name, p.gpus});
  }
  const std::optional<GangRecord> record = gang ? std::optional(gang_record(*gang, placement)) : std::nullopt;
  SWEPT_RETURN_IF_ERROR(store_.start_attempt(t.trial_id, attempt, agent, placement.gpus, placement.gpu_fraction,
                                             clock_.wall_seconds(), nodes, record ? &*record : nullptr));
  auto terms = terms_.find(t.sweep_id);
  LiveTrial lt = make_live(t.trial_id, t.sweep_id, attempt, agent);
  lt.gpus = placement.gpus;
  lt.gpu_fraction = placement.gpu_fraction;
  lt.cpus = placement.cpus;

  StartTrial st;
  st.trial_id = t.trial_id;
  st.attempt = attempt;
  st.sweep_id = t.sweep_id;
  st.argv = std::move(t.argv);
  st.params = std::move(t.params);
  // The agent sets SWEPT_SWEEP_ID, SWEPT_TRIAL_ID, SWEPT_ATTEMPT and
  // SWEPT_PARAMS from the fields above; env holds only what the runner adds.
  st.env = std::move(t.env);
  st.workdir = trial_relative_dir(t.sweep_id, t.trial_id);
  st.gpus = placement.gpus;
  st.gpu_fraction = placement.gpu_fraction;
  st.timeout_s = terms != terms_.end() ? terms->second.timeout_s : 0;
  if (terms != terms_.end()) st.limits = terms->second.limits;
  st.checkpoint = t.checkpoint;
  if (st.checkpoint && st.checkpoint->from_trial_id) {
    // A pbt segment from a checkpoint that another agent holds: named, so
    // that this agent pulls it first (CHECKPOINT_PULL, issue 29).
    SWEPT_ASSIGN_OR_RETURN(place, store_.attempt_place(*st.checkpoint->from_trial_id, st.checkpoint->from_attempt));
    st.checkpoint->from_agent = place && place->agent != agent ? place->agent : "";
  }
  if (auto b = live_.find(before_id); before_id && b != live_.end()) {
    lt.after = before_id;
    b->second.successor = t.trial_id;
    st.after_trial_id = before_id;
    st.after_attempt = b->second.attempt;
    successors_++;
  }
  if (gang) {
    // One START_TRIAL per node, the same trial and attempt, each with its
    // place in the gang; node 0 (metrics, MASTER_ADDR) is `agent`.
    std::erase_if(gang_ended_, [&](const auto& k) { return k.first.first == t.trial_id; });
    lt.master_port = gang->master_port;
    const int all_nodes = static_cast<int>(gang->more_nodes.size()) + 1;
    const int nodes = gang->worker_nodes > 0 ? gang->worker_nodes : all_nodes;
    protocol::Gang g{nodes,        0,           gang->procs_per_node, gang->master_addr, gang->master_port,
                     gang->addrs, gang->worker_ports, gang->ps_node, gang->ps_ports};
    note_gang_ports(lt, *gang, agent);
    // A node's CPU quota (limits.cpus) counts its parameter servers, each
    // taking resources.cpus of its own (issue 30); a server's own node holds
    // its server alone.
    auto cpus_of = [&](int n) {
      int processes_cpus = n < nodes ? 1 : 0;
      for (int where : gang->ps_node) processes_cpus += where == n ? 1 : 0;
      return st.limits.cpus * processes_cpus;
    };
    for (int n = 1; n < all_nodes; ++n) {
      const auto& [name, p] = gang->more_nodes[static_cast<size_t>(n) - 1];
      lt.more_nodes.push_back(GangNode{name, p.gpus, p.gpu_fraction, p.cpus});
      StartTrial node = st;
      node.gpus = p.gpus;
      node.gpu_fraction = p.gpu_fraction;
      node.gang = g;
      node.gang->node_rank = n;
      node.limits.cpus = cpus_of(n);
      mail_.push_back({name, std::move(node)});
    }
    st.gang = g;
    st.limits.cpus = cpus_of(0);
  }
  live_[t.trial_id] = std::move(lt);
  mail_.push_back({agent, std::move(st)});
  dispatched_++;
  return Status::Ok();
}

std::vector<TrialLifecycle::SuccessorPlace> TrialLifecycle::successor_places(int64_t sweep_id,
                                                                           const std::set<std::string>& agents,
                                                                           int64_t available) const {
  std::vector<SuccessorPlace> places;
  // Only for short trials: a long trial's successor would only wait there,
  // holding a trial another agent could start.
  auto mean = mean_run_seconds_.find(sweep_id);
  if (mean == mean_run_seconds_.end() || mean->second > kSuccessorBelowSeconds) return places;
  std::vector<int64_t> ids;
  for (const auto& [id, lt] : live_) {
    if (lt.sweep_id != sweep_id || lt.after || lt.successor || lt.cancelled || lt.await_deadline_ms > 0) continue;
    if (agents.count(lt.agent)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  for (int64_t id : ids) {
    if (available-- <= 0) break;
    const LiveTrial& before = live_.at(id);
    places.push_back({id, before.agent, Placement{0, before.gpus, before.gpu_fraction, before.cpus}});
  }
  return places;
}

bool TrialLifecycle::successor_waits(const StartTrial& st) const {
  if (!st.after_trial_id) return false;
  auto before = live_.find(st.after_trial_id);
  return before != live_.end() && before->second.successor == st.trial_id;
}

// ---- what agents report ----

bool TrialLifecycle::started(const std::string& agent, const TrialStarted& m) {
  auto it = live_.find(m.trial_id);
  if (it == live_.end() || it->second.attempt != m.attempt) return false;
  const int node = it->second.node_of(agent);
  if (node < 0) return false;
  if (node > 0) {  // a gang's other node: node 0's start is the trial's record
    it->second.more_nodes[static_cast<size_t>(node) - 1].started = true;
    return true;
  }
  LiveTrial& lt = it->second;
  lt.await_deadline_ms = 0;
  if (lt.started) return true;
  lt.started = true;
  lt.start_env_json = nlohmann::json(m.env).dump();
  lt.start_started_at = m.started_at;
  lt.start_received_ms = clock_.now_ms();
  pending_starts_.insert(m.trial_id);
  return true;
}

Status TrialLifecycle::write_start(LiveTrial& lt) {
  if (!lt.start_env_json) return Status::Ok();
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_RETURN_IF_ERROR(store_.confirm_started(lt.trial_id, lt.attempt, *lt.start_env_json, lt.start_started_at));
  lt.start_recorded = true;
  lt.start_env_json.reset();
  pending_starts_.erase(lt.trial_id);
  return Status::Ok();
}

Status TrialLifecycle::write_starts(bool all) {
  const int64_t now = clock_.now_ms();
  for (auto id = pending_starts_.begin(); id != pending_starts_.end();) {
    auto it = live_.find(*id);
    ++id;  // write_start erases the current element
    if (it == live_.end()) continue;
    if (all || now - it->second.start_received_ms >= kStartWriteDelayMs) SWEPT_RETURN_IF_ERROR(write_start(it->second));
  }
  return Status::Ok();
}

std::optional<int64_t> TrialLifecycle::next_start_due_ms() const {
  std::optional<int64_t> due;
  for (int64_t id : pending_starts_) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    const int64_t at = it->second.start_received_ms + kStartWriteDelayMs;
    if (!due || at < *due) due = at;
  }
  return due;
}

Result<TrialLifecycle::MetricsOutcome> TrialLifecycle::metrics(const std::string& agent, const Metrics& m) {
  MetricsOutcome out;
  auto it = live_.find(m.trial_id);
  out.current = it != live_.end() && it->second.agent == agent && it->second.attempt == m.attempt;
  int64_t sweep_id = out.current ? it->second.sweep_id : 0;
  if (!out.current) {
    // A re-sent batch of an attempt that already ended (finished while the
    // scheduler was away) is still that trial's data: keep it.
    auto rec = store_.trial_record(m.trial_id);
    if (!rec.ok() || rec->attempts != m.attempt || rec->agent != agent) {
      log::debug("dropped metrics of trial " + to_s(m.trial_id) + " attempt " + std::to_string(m.attempt) +
                 " from " + agent + ": not its current attempt");
      out.current = false;
      return out;
    }
    sweep_id = rec->sweep_id;
  }
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  const std::optional<std::string> metric = metric_of(sweep_id);
  const int64_t t0_us = clock_.now_us();
  auto applied = store_.add_metrics(m, metric);
  out.ingest_us = clock_.now_us() - t0_us;
  if (!applied.ok()) return applied.status();
  if (!*applied) {
    out.current = false;
    return out;
  }
  out.rows = static_cast<int64_t>(m.records.size());
  out.sweep_id = sweep_id;
  if (!out.current) return out;
  LiveTrial& lt = it->second;
  lt.stored_seq = m.seq;
  // Early termination (issue 16): a trial whose decision a previous
  // scheduler recorded before it could stop it is sent STOP_TRIAL once; its
  // TRIAL_EXITED (cause stopped) ends it early_stopped. A new decision comes
  // from the runner through stop_early().
  if (!lt.early_stop && !lt.cancelled && lt.stop_on_record)
    send_early_stop(lt, early_stop_reason("decided before a scheduler restart"));
  return out;
}

void TrialLifecycle::stop_early(int64_t trial_id, const std::string& why) {
  auto it = live_.find(trial_id);
  if (it == live_.end() || it->second.early_stop || it->second.cancelled) return;
  send_early_stop(it->second, early_stop_reason(why));
}

void TrialLifecycle::stop_at_interval(int64_t trial_id, const std::string& why, bool done) {
  auto it = live_.find(trial_id);
  if (it == live_.end()) return;
  LiveTrial& lt = it->second;
  if (lt.early_stop || lt.cancelled || lt.interval_stop || lt.done_stop) return;
  (done ? lt.done_stop : lt.interval_stop) = true;
  mail_stop(lt, why);
}

void TrialLifecycle::send_early_stop(LiveTrial& lt, const std::string& reason) {
  lt.early_stop = true;
  lt.early_stop_reason = reason;
  mail_stop(lt, reason);
}

std::optional<StopTrial> TrialLifecycle::stop_owed(LiveTrial& lt) {
  if (lt.cancelled) return StopTrial{lt.trial_id, lt.attempt, "cancelled by the user"};
  if (lt.interval_stop || lt.done_stop)  // a pbt member's stop, owed again to a re-registering agent
    return StopTrial{lt.trial_id, lt.attempt, lt.done_stop ? "pbt: reached pbt.max_steps" : "pbt: at its interval"};
  if (!early_stop_decided(lt)) return std::nullopt;
  if (!lt.early_stop) {  // decided before a restart, not sent by this scheduler yet
    lt.early_stop = true;
    lt.early_stop_reason = early_stop_reason("decided before a scheduler restart");
  }
  return StopTrial{lt.trial_id, lt.attempt, lt.early_stop_reason};
}

Result<TrialLifecycle::ExitOutcome> TrialLifecycle::exited(const std::string& agent, const TrialExited& e) {
  std::string reason;
  TrialEvent event = event_for_exit(e, &reason);
  const bool lost = event.kind == TrialEventKind::kLose || event.kind == TrialEventKind::kRequeue;
  auto it = live_.find(e.trial_id);
  if (it != live_.end() && it->second.gang() && it->second.attempt == e.attempt && it->second.node_of(agent) >= 0)
    return gang_node_exited(it->second, it->second.node_of(agent), agent, e);
  if (it != live_.end() && it->second.agent == agent && it->second.attempt == e.attempt) {
    const LiveTrial& cur = it->second;
    if ((cur.interval_stop || cur.done_stop) && !cur.cancelled && e.cause == ExitCause::kStopped) {
      // A pbt member stopped as its runner asked: the segment's end, not the trial's.
      if (cur.done_stop) SWEPT_RETURN_IF_ERROR(finish(e.trial_id, TrialState::kCompleted, &e, "reached pbt.max_steps"));
      else SWEPT_RETURN_IF_ERROR(requeue(e.trial_id, kPbtIntervalReason, /*at_interval=*/true));
      return ExitOutcome::kRan;
    }
    if (event.kind == TrialEventKind::kRequeue && e.cause == ExitCause::kLaunchFailed) {  // a host fault
      SWEPT_RETURN_IF_ERROR(requeue(e.trial_id, "agent " + agent + " could not start it: " + reason));
      return ExitOutcome::kHostFault;
    }
    if (lost && it->second.lease_wait) {
      // Its agent was lost and stopped it when its lease ran out: a loss like
      // any lost agent's (it spends a retry, so max_retries still bounds a
      // trial that keeps taking its hosts down).
      SWEPT_RETURN_IF_ERROR(lose(e.trial_id, reason));
    } else if (event.kind == TrialEventKind::kRequeue) {  // not the trial's doing: its agent drains
      SWEPT_RETURN_IF_ERROR(requeue(e.trial_id, reason));
    } else if (lost) {
      SWEPT_RETURN_IF_ERROR(lose(e.trial_id, reason));
    } else {
      // A failed pbt member reruns while it has retries (lifecycle_pbt.cpp).
      Result<bool> retried = event.outcome == TrialState::kFailed ? retry_member(e.trial_id, e, reason) : false;
      if (!retried.ok()) return retried.status();
      if (!*retried) SWEPT_RETURN_IF_ERROR(finish(e.trial_id, event.outcome, &e, reason));
    }
    return e.cause == ExitCause::kLaunchFailed ? ExitOutcome::kLaunchFailed : ExitOutcome::kRan;
  }
  if (it != live_.end() && it->second.attempt == e.attempt) return ExitOutcome::kNotCurrent;  // another agent's
  // A node of a gang attempt that already ended as one: history only.
  if (gang_remains_exited(agent, e)) return ExitOutcome::kNotCurrent;
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  auto rec = store_.trial_record(e.trial_id);
  // The attempt is on record on another agent (a gang's other node): its
  // node 0's exit is the attempt's result, not this one.
  if (rec.ok() && rec->attempts == e.attempt && rec->agent && *rec->agent != agent) return ExitOutcome::kNotCurrent;
  std::optional<TrialState> late;  // a given-up attempt's result (queued or lost -> outcome)
  if (rec.ok() && rec->attempts == e.attempt && !lost && rec->state != TrialState::kRunning)
    late = next_trial_state(rec->state, event, 0);
  if (late && sweep_running(rec->sweep_id)) {
    SWEPT_RETURN_IF_ERROR(record_late_result(*rec, agent, e, *late, reason));
  } else if (rec.ok() && rec->attempts != e.attempt) {
    // A superseded attempt: history only.
    store::Writer::TrialEnd end = attempt_end(e.trial_id, e.attempt, TrialState::kLost);
    end.exit_code = e.exit_code;
    end.reason = "ended after it was superseded: " + reason;
    end.ended_at = e.ended_at;
    SWEPT_RETURN_IF_ERROR(store_.end_trial(end));
  }
  // else: the same attempt, already final (a repeated TRIAL_EXITED): nothing to do.
  return ExitOutcome::kNotCurrent;
}

Status TrialLifecycle::record_late_result(const TrialRow& rec, const std::string& agent,
                                          const TrialExited& e, TrialState late, const std::string& reason) {
  // Given up while its agent was away (requeued, or lost with no retries
  // left), but it finished: its result stands.
  store::Writer::TrialEnd end = attempt_end(e.trial_id, e.attempt, late);
  end.exit_code = e.exit_code;
  end.reason = reason;
  end.ended_at = e.ended_at;
  end.trial_state = late;
  end.trial_ended_at = e.ended_at;
  SWEPT_RETURN_IF_ERROR(store_.end_trial(end));
  if (!rec.started_at && e.started_at > 0) SWEPT_RETURN_IF_ERROR(store_.fill_started_at(rec.id, e.attempt, e.started_at));
  finished_++;
  ended(rec.id, rec.sweep_id, late, /*was_running=*/false);
  log::info("trial " + to_s(e.trial_id) + " finished on " + agent + " while given up: recorded as " +
            std::string(name(late)));
  return Status::Ok();
}

// ---- how a live trial ends ----

Status TrialLifecycle::finish(int64_t trial_id, TrialState state, const TrialExited* e, std::string reason) {
  auto it = live_.find(trial_id);
  if (it == live_.end()) return Status::Ok();
  // Stopped for its sweep's early_terminate rule (by this scheduler, or by
  // one before a restart: the decision is on record): early_stopped, not
  // stopped. A process that ended by itself first keeps its own outcome.
  if (early_stop_decided(it->second) && state == TrialState::kStopped) {
    state = next_trial_state(TrialState::kRunning, TrialEvent::finish(TrialState::kEarlyStopped), 0).value();
    reason = it->second.early_stop_reason.empty()
                 ? early_stop_reason("decided before a scheduler restart (see stop_reason)")
                 : it->second.early_stop_reason;
  }
  if (it->second.cancelled) SWEPT_RETURN_IF_ERROR(write_start(it->second));
  LiveTrial lt = take(it);
  if (e && e->cause == ExitCause::kExited && lt.start_started_at > 0 && e->ended_at >= lt.start_started_at) {
    // How long this sweep's trials run (queue_successors()): a moving average.
    double run = e->ended_at - lt.start_started_at;
    auto [m, fresh] = mean_run_seconds_.try_emplace(lt.sweep_id, run);
    if (!fresh) m->second += 0.2 * (run - m->second);
  }
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  const double ended_at = e && e->ended_at > 0 ? e->ended_at : clock_.wall_seconds();
  // One call records the attempt's end and the trial's: a cancelled trial
  // is already `stopped` (cancel_trial), so only its attempt ends here.
  store::Writer::TrialEnd end = attempt_end(trial_id, lt.attempt, lt.cancelled ? TrialState::kStopped : state);
  end.exit_code = e ? e->exit_code : std::nullopt;
  end.reason = reason;
  end.ended_at = ended_at;
  if (!lt.cancelled) {
    end.trial_state = state;
    end.trial_ended_at = ended_at;
    // A start not written yet goes in with the end (a short trial's
    // TRIAL_STARTED usually arrives in the same turn as its TRIAL_EXITED).
    if (lt.start_env_json) {
      end.start = store::Writer::StartRecord{std::move(*lt.start_env_json), lt.start_started_at};
      pending_starts_.erase(trial_id);
      lt.start_recorded = true;
    }
    // A diverged trial that still exited 0: its last finite value is no
    // result, so it must not be best; with none it counts as the worst.
    end.forget_metric_value = state == TrialState::kCompleted && e && e->diverged;
  }
  SWEPT_RETURN_IF_ERROR(store_.end_trial(end));
  if (lt.cancelled) SWEPT_RETURN_IF_ERROR(store_.fill_ended_at(trial_id, ended_at));  // no longer stopping
  // Its TRIAL_STARTED never reached the store (the scheduler was killed
  // before writing it, and the trial ended while it was away): the start
  // time its agent reports with the exit stands in.
  if (!lt.cancelled && !lt.start_recorded && e && e->started_at > 0)
    SWEPT_RETURN_IF_ERROR(store_.fill_started_at(trial_id, lt.attempt, e->started_at));
  finished_++;  // a run that ended with its process (stats: trials_finished)
  ended(trial_id, lt.sweep_id, lt.cancelled ? TrialState::kStopped : state, /*was_running=*/true);
  return Status::Ok();
}

Status TrialLifecycle::lose(int64_t trial_id, const std::string& reason) {
  auto taken = take_for_rerun(trial_id, reason);
  if (!taken.ok()) return taken.status();
  if (!*taken) return Status::Ok();
  LiveTrial lt = std::move(**taken);
  const double now = clock_.wall_seconds();
  // Retries spent: the attempts so far, less those requeued at no cost.
  // Never confirmed started: the attempt did not run, so it costs no retry.
  SWEPT_ASSIGN_OR_RETURN(free_attempts, store_.count_attempts(trial_id, TrialState::kQueued));
  const int retries_left = lt.started ? lt.max_retries - (lt.attempt - free_attempts) + 1 : 1;
  const TrialState next = next_trial_state(TrialState::kRunning, {TrialEventKind::kLose}, retries_left).value();
  // An attempt the agent never confirmed did not run: say so in the history.
  store::Writer::TrialEnd end = attempt_end(trial_id, lt.attempt, TrialState::kLost);
  end.reason = lt.started ? reason : "never started: " + reason;
  end.ended_at = now;
  if (lt.cancelled) {  // already `stopped` in the store: only the attempt ends
    SWEPT_RETURN_IF_ERROR(store_.end_trial(end));
    SWEPT_RETURN_IF_ERROR(store_.fill_ended_at(trial_id, now));
    ended(trial_id, lt.sweep_id, TrialState::kStopped, /*was_running=*/true);
    return Status::Ok();
  }
  end.trial_state = next;
  if (next == TrialState::kQueued) {
    end.trial_reason = "requeued: " + reason;
    SWEPT_RETURN_IF_ERROR(store_.end_trial(end));
    events_.push_back(TrialRequeued{trial_id, lt.sweep_id, false, lt.attempt});
    changed_ = true;
    log::info("trial " + to_s(trial_id) + " lost (" + reason + "): requeued");
    return Status::Ok();
  }
  // Final: `lost`, not `failed`: the trial did not fail, its host went away.
  std::string why = reason + "; no retries left (max_retries " + std::to_string(lt.max_retries) + ")";
  end.trial_reason = why;
  end.trial_ended_at = now;
  SWEPT_RETURN_IF_ERROR(store_.end_trial(end));
  ended(trial_id, lt.sweep_id, next, /*was_running=*/true);
  log::info("trial " + to_s(trial_id) + " lost: " + why);
  return Status::Ok();
}

Status TrialLifecycle::requeue(int64_t trial_id, const std::string& reason, bool at_interval) {
  auto taken = take_for_rerun(trial_id, reason);
  if (!taken.ok()) return taken.status();
  if (!*taken) return Status::Ok();
  LiveTrial lt = std::move(**taken);
  const double now = clock_.wall_seconds();
  if (lt.cancelled) {  // already `stopped` in the store: the attempt ends so too
    store::Writer::TrialEnd end = attempt_end(trial_id, lt.attempt, TrialState::kStopped);
    end.reason = reason;
    end.ended_at = now;
    SWEPT_RETURN_IF_ERROR(store_.end_trial(end));
    SWEPT_RETURN_IF_ERROR(store_.fill_ended_at(trial_id, now));
    ended(trial_id, lt.sweep_id, TrialState::kStopped, /*was_running=*/true);
    return Status::Ok();
  }
  // The attempt ended not by the trial's doing. Its own state in the
  // history is `queued`: that is how a later loss knows it spent no retry
  // (lose counts them), after a restart too.
  const TrialState next = next_trial_state(TrialState::kRunning, {TrialEventKind::kRequeue}, 0).value();
  store::Writer::TrialEnd end = attempt_end(trial_id, lt.attempt, next);
  end.reason = std::string(lt.started ? "" : "never started; ") + "requeued (costs no retry): " + reason;
  end.ended_at = now;
  end.trial_state = next;
  SWEPT_RETURN_IF_ERROR(store_.end_trial(end));
  events_.push_back(TrialRequeued{trial_id, lt.sweep_id, at_interval, lt.attempt});
  changed_ = true;
  log::info("trial " + to_s(trial_id) + " requeued without spending a retry: " + reason);
  return Status::Ok();
}

Result<std::optional<LiveTrial>> TrialLifecycle::take_for_rerun(int64_t trial_id, const std::string& reason) {
  auto it = live_.find(trial_id);
  if (it == live_.end()) return std::optional<LiveTrial>();
  // Being stopped by its sweep's rule: the decision stands, it is not rerun.
  if (early_stop_decided(it->second)) {
    SWEPT_RETURN_IF_ERROR(finish(trial_id, TrialState::kStopped, nullptr, reason));
    return std::optional<LiveTrial>();
  }
  SWEPT_RETURN_IF_ERROR(write_start(it->second));
  LiveTrial lt = take(it);
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  return std::optional<LiveTrial>(std::move(lt));
}

LiveTrial TrialLifecycle::take(std::unordered_map<int64_t, LiveTrial>::iterator it) {
  LiveTrial lt = std::move(it->second);
  live_.erase(it);
  if (lt.gang()) gang_taken(lt);  // lifecycle_gang.cpp
  // Its successor now holds the place; a successor that ends first frees it.
  if (auto s = live_.find(lt.successor); lt.successor && s != live_.end()) s->second.after = 0;
  if (auto b = live_.find(lt.after); lt.after && b != live_.end()) b->second.successor = 0;
  return lt;
}

// ---- clients ----

Result<int64_t> TrialLifecycle::cancel_live(int64_t sweep_id, const std::string& reason) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  std::vector<int64_t> ids;
  for (const auto& [id, lt] : live_)
    if (lt.sweep_id == sweep_id && !lt.cancelled) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (int64_t id : ids) SWEPT_RETURN_IF_ERROR(cancel_trial(id, reason));
  changed_ = true;
  return static_cast<int64_t>(ids.size());
}

Status TrialLifecycle::cancel_trial(int64_t trial_id, const std::string& reason) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  auto it = live_.find(trial_id);
  if (it != live_.end()) {
    LiveTrial& lt = it->second;
    if (lt.cancelled) return Status::Ok();
    lt.cancelled = true;
    const TrialState stopped = next_trial_state(TrialState::kRunning, {TrialEventKind::kCancel}, 0).value();
    // `stopped` at once, but not ended: its process has its grace to stop in
    // (shown as stopping), and it keeps its place until its exit comes.
    SWEPT_RETURN_IF_ERROR(store_.set_trial_state(trial_id, stopped, std::nullopt, reason, std::nullopt));
    mail_stop(lt, reason);
    changed_ = true;
    return Status::Ok();
  }
  auto rec = store_.trial_record(trial_id);
  if (!rec.ok()) return rec.status();
  // Not live: only a queued trial can still be cancelled (a running one is live).
  auto stopped = rec->state == TrialState::kQueued ? next_trial_state(rec->state, {TrialEventKind::kCancel}, 0)
                                                   : std::nullopt;
  if (stopped) {
    SWEPT_RETURN_IF_ERROR(store_.set_trial_state(trial_id, *stopped, std::nullopt, reason, clock_.wall_seconds()));
    ended(trial_id, rec->sweep_id, *stopped, /*was_running=*/false);
    return Status::Ok();
  }
  return Status::FailedPrecondition("trial " + to_s(trial_id) + " is already " + std::string(name(rec->state)));
}

// ---- heartbeats, housekeeping ----

std::map<std::string, std::vector<MetricsAck>> TrialLifecycle::take_metric_acks() {
  std::map<std::string, std::vector<MetricsAck>> acks;
  for (auto& [id, lt] : live_) {
    if (lt.stored_seq <= lt.acked_seq) continue;
    acks[lt.agent].push_back({id, lt.attempt, lt.stored_seq});
    lt.acked_seq = lt.stored_seq;
  }
  return acks;
}

}  // namespace swept::scheduler
