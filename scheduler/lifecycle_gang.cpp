// TrialLifecycle, multi-node trials (issue 25; lifecycle.h): a gang's
// attempt runs as one START_TRIAL per node, and ends as one. Every node must
// exit 0 for it to complete; the first node that fails, cannot start or
// loses its agent ends the attempt for all (take() sends the others
// STOP_TRIAL), as torchrun ends a job when one worker fails. A node whose
// agent is only silent is waited for until its lease is over, as a one-node
// trial is (check_silent_gangs; issue 26): a frozen agent's ranks run on. Its next
// attempt is held back until every rank of the ended one is known dead
// (issue 26; the remains part of this file). Its processes (workers,
// parameter servers, ports, slots) are stored with the attempt, so that a
// restarted scheduler adopts it whole (issue 30).
#include "scheduler/lifecycle.h"

#include <algorithm>
#include <string>

#include "common/log.h"
#include "store/rows.h"

namespace swept::scheduler {

using namespace swept::protocol;

void TrialLifecycle::mail_stop(LiveTrial& lt, const std::string& reason) {
  lt.stops_sent = true;
  if (!lt.node0_ended) mail_.push_back({lt.agent, StopTrial{lt.trial_id, lt.attempt, reason}});
  for (const GangNode& n : lt.more_nodes)
    if (!n.ended) mail_.push_back({n.agent, StopTrial{lt.trial_id, lt.attempt, reason}});
}

void TrialLifecycle::stop_servers_if_workers_ended(LiveTrial& lt) {
  if (!lt.servers || lt.servers_stop_sent || lt.stops_sent || lt.held_failure) return;
  for (int n = 0; n < lt.worker_nodes; ++n)
    if (!lt.node_ended(n) && !lt.workers_ended.count(n)) return;
  lt.servers_stop_sent = true;
  const std::string reason(kWorkersEndedStop);
  if (!lt.node0_ended) mail_.push_back({lt.agent, StopTrial{lt.trial_id, lt.attempt, reason}});
  for (const GangNode& n : lt.more_nodes)
    if (!n.ended) mail_.push_back({n.agent, StopTrial{lt.trial_id, lt.attempt, reason}});
}

void TrialLifecycle::gang_taken(LiveTrial& lt) {
  if (!lt.stops_sent) mail_stop(lt, "another node of its attempt ended");
  remember_gang_remains(lt);
  // The attempt's end is recorded in this turn: the nodes that ended before
  // it may forget their exits now (the broker sends these after its commit).
  if (lt.node0_ack_owed) mail_.push_back({lt.agent, ExitAck{lt.trial_id, lt.attempt}});
  for (const GangNode& n : lt.more_nodes)
    if (n.ack_owed) mail_.push_back({n.agent, ExitAck{lt.trial_id, lt.attempt}});
}

bool TrialLifecycle::hold_exit_ack(const std::string& agent, const TrialExited& e) {
  auto it = live_.find(e.trial_id);
  if (it == live_.end() || it->second.attempt != e.attempt || !it->second.gang()) return false;
  LiveTrial& lt = it->second;
  const int node = lt.node_of(agent);
  if (node < 0 || !lt.node_ended(node)) return false;
  (node == 0 ? lt.node0_ack_owed : lt.more_nodes[static_cast<size_t>(node) - 1].ack_owed) = true;
  return true;
}

void TrialLifecycle::workers_ended(const std::string& agent, const WorkersEnded& w) {
  auto it = live_.find(w.trial_id);
  if (it == live_.end() || it->second.attempt != w.attempt || !it->second.servers) return;
  LiveTrial& lt = it->second;
  const int node = lt.node_of(agent);
  if (node < 0 || lt.node_ended(node)) return;
  if (lt.servers_stop_sent) {  // said again: that node never got its stop
    mail_.push_back({agent, StopTrial{lt.trial_id, lt.attempt, std::string(kWorkersEndedStop)}});
    return;
  }
  lt.workers_ended.insert(node);
  stop_servers_if_workers_ended(lt);
}

Result<TrialLifecycle::ExitOutcome> TrialLifecycle::gang_node_exited(LiveTrial& lt, int node,
                                                                     const std::string& agent,
                                                                     const TrialExited& e) {
  if (lt.node_ended(node)) return ExitOutcome::kNotCurrent;  // a repeated report
  std::string reason;
  TrialEvent event = event_for_exit(e, &reason);
  // Its agent was silent and stopped it when its lease ran out: a loss, as
  // for a one-node trial (a retry spent), not a requeue at no cost.
  const bool was_silent = lt.silent_nodes.erase(agent) > 0;
  if (was_silent && event.kind == TrialEventKind::kRequeue && e.cause != ExitCause::kLaunchFailed)
    event.kind = TrialEventKind::kLose;
  if (node == 0) {
    lt.node0_ended = true;
    lt.node0_exit = e;
  } else {
    lt.more_nodes[static_cast<size_t>(node) - 1].ended = true;
  }
  const int64_t id = lt.trial_id;
  const std::string who = "node " + std::to_string(node) + " (agent " + agent + ")";
  const bool launch_failed = e.cause == ExitCause::kLaunchFailed;
  if (event.kind == TrialEventKind::kRequeue && launch_failed) {  // its host could not start it
    SWEPT_RETURN_IF_ERROR(requeue(id, who + " could not start it: " + reason));
    return ExitOutcome::kHostFault;
  }
  if (event.kind == TrialEventKind::kRequeue) {  // not the trial's doing: that agent drains
    SWEPT_RETURN_IF_ERROR(requeue(id, who + ": " + reason));
    return ExitOutcome::kRan;
  }
  if (event.kind == TrialEventKind::kLose) {
    SWEPT_RETURN_IF_ERROR(lose(id, who + ": " + reason));
    return launch_failed ? ExitOutcome::kLaunchFailed : ExitOutcome::kRan;
  }
  bool all = lt.node0_ended;
  for (const GangNode& n : lt.more_nodes) all = all && n.ended;
  if (event.outcome == TrialState::kFailed && !lt.silent_nodes.empty() && !lt.held_failure) {
    // A rank failed while another node's agent is silent: that host may be
    // down under it. The attempt ends now, lost (the others are stopped; the
    // retry waits for the silent node's lease, refresh_holds).
    SWEPT_RETURN_IF_ERROR(lose(id, who + ": " + reason + ", while agent " + lt.silent_nodes.begin()->first +
                                       " of another node was silent"));
    return launch_failed ? ExitOutcome::kLaunchFailed : ExitOutcome::kRan;
  }
  if (event.outcome == TrialState::kFailed && !all && !lt.held_failure) {
    // A rank failed, maybe because another host died under it: the others
    // are stopped now, the verdict waits for their exits or their agents'
    // loss (then the attempt is lost and retried, not failed).
    lt.held_failure = LiveTrial::HeldFailure{event.outcome, e, who + ": " + reason, clock_.now_ms() + gang_hold_ms_};
    mail_stop(lt, "another node of its attempt failed (" + who + ")");
    return launch_failed ? ExitOutcome::kLaunchFailed : ExitOutcome::kRan;
  }
  if (event.outcome != TrialState::kCompleted && !lt.held_failure) {
    // The last node failed, or a node was stopped: the attempt ends now, for every node.
    SWEPT_RETURN_IF_ERROR(finish(id, event.outcome, &e, who + ": " + reason));
    return launch_failed ? ExitOutcome::kLaunchFailed : ExitOutcome::kRan;
  }
  if (!all) {  // the others still run; only servers, maybe, which are stopped now
    stop_servers_if_workers_ended(lt);
    return ExitOutcome::kRan;
  }
  if (lt.held_failure) {  // every node has ended: the first failure is the verdict
    LiveTrial::HeldFailure held = *lt.held_failure;
    SWEPT_RETURN_IF_ERROR(finish(id, held.state, &held.exit, held.reason));
    return launch_failed ? ExitOutcome::kLaunchFailed : ExitOutcome::kRan;
  }
  // Every node exited 0: node 0's exit (its time, its metrics' end) is the trial's.
  const TrialExited last = lt.node0_exit.value_or(e);
  SWEPT_RETURN_IF_ERROR(finish(id, TrialState::kCompleted, &last, reason));
  return ExitOutcome::kRan;
}

Status TrialLifecycle::settle_held_failures() {
  const int64_t now = clock_.now_ms();
  std::vector<int64_t> due;
  for (const auto& [id, lt] : live_)
    if (lt.held_failure && now >= lt.held_failure->until_ms) due.push_back(id);
  for (int64_t id : due) {
    // No other node's host was found dead meanwhile: the rank's own failure.
    LiveTrial::HeldFailure held = *live_.at(id).held_failure;
    SWEPT_RETURN_IF_ERROR(finish(id, held.state, &held.exit, held.reason));
  }
  return Status::Ok();
}

Status TrialLifecycle::check_silent_gangs() {
  const int64_t now = clock_.now_ms();
  std::vector<std::pair<int64_t, std::string>> lost;
  for (const auto& [id, lt] : live_) {
    const int nodes = static_cast<int>(lt.more_nodes.size()) + 1;
    for (const auto& [agent, s] : lt.silent_nodes) {
      if (now <= s.lease_over_ms) continue;  // its ranks may run yet, the collective with them
      bool others_run = false;
      for (int n = 0; n < nodes; ++n)
        others_run = others_run || (!lt.node_ended(n) && !lt.silent_nodes.count(n == 0 ? lt.agent : lt.more_nodes[static_cast<size_t>(n) - 1].agent));
      if (others_run) {
        // Its ranks are dead by now (its agent or keeper SIGKILLed them), so
        // the others wait in broken collectives: stopped, the attempt lost.
        lost.push_back({id, "agent " + agent + " went silent and its lease is over: its ranks are stopped, " +
                                "so the other nodes' collectives are broken"});
        break;
      }
      if (now > s.until_ms) {  // every other node has ended: only its report was awaited
        lost.push_back({id, "agent " + agent + " lost and its lease is over: it did not come back to report its ranks"});
        break;
      }
    }
  }
  for (const auto& [id, why] : lost) SWEPT_RETURN_IF_ERROR(lose(id, why));
  return Status::Ok();
}

// ---- an ended attempt's ranks, and the next attempt held back (issue 26) ----

void TrialLifecycle::remember_gang_remains(const LiveTrial& lt) {
  GangRemains r;
  r.sweep_id = lt.sweep_id;
  auto pend = [&](const std::string& agent) {
    // A silent agent's ranks die by its lease's end; a connected one says so.
    auto s = silent_until_.find(agent);
    r.pending[agent] = s != silent_until_.end() ? s->second : kUntilConfirmed;
  };
  if (!lt.node0_ended) pend(lt.agent);
  for (const GangNode& n : lt.more_nodes)
    if (!n.ended) pend(n.agent);
  if (r.pending.empty()) return;
  gang_ended_[{lt.trial_id, lt.attempt}] = std::move(r);
  // Told before the event that queues it (lose, requeue): the runner never
  // sees it free.
  refresh_holds();
}

Result<size_t> TrialLifecycle::hold_recovered_gangs(int64_t until_ms) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_ASSIGN_OR_RETURN(sweeps, store_.sweeps_in_state(SweepState::kRunning));
  size_t held = 0;
  for (const SweepRow& sweep : sweeps) {
    SWEPT_ASSIGN_OR_RETURN(queued, store_.trials_in_state(sweep.id, TrialState::kQueued));
    // Only those that ran before (most queued trials never did) have nodes to read.
    std::vector<TrialRow> ran;
    for (TrialRow& t : queued)
      if (t.attempts >= 1) ran.push_back(std::move(t));
    SWEPT_RETURN_IF_ERROR(store::fill_nodes(store_.connection(), ran));
    for (const TrialRow& t : ran) {
      // trials.nodes are its last attempt's (set at each dispatch): those
      // agents may run its ranks until their leases are over.
      if (t.nodes.empty()) continue;
      GangRemains r;
      r.sweep_id = sweep.id;
      for (const TrialNode& n : t.nodes) r.pending[n.agent] = until_ms;
      gang_ended_[{t.id, t.attempts}] = std::move(r);
      ++held;
    }
  }
  if (held > 0)
    log::info(std::to_string(held) + " queued multi-node trials wait until every node of their last attempt is known "
              "stopped (its agent back without it) or its lease is over");
  refresh_holds();
  return held;
}

bool TrialLifecycle::gang_remains_exited(const std::string& agent, const TrialExited& e) {
  auto g = gang_ended_.find({e.trial_id, e.attempt});
  if (g == gang_ended_.end()) return false;
  g->second.pending.erase(agent);  // its ranks have ended: it reported them
  refresh_holds();
  return true;
}

void TrialLifecycle::gang_agent_silent(const std::string& agent, int64_t bound_ms) {
  silent_until_[agent] = bound_ms;
  for (auto& [key, r] : gang_ended_)
    if (auto p = r.pending.find(agent); p != r.pending.end()) p->second = bound_ms;
  refresh_holds();
}

void TrialLifecycle::gang_agent_gone(const std::string& agent) {
  // As its one-node trials are lost at once: a departed agent runs nothing.
  silent_until_.erase(agent);
  for (auto& [key, r] : gang_ended_) r.pending.erase(agent);
  refresh_holds();
}

void TrialLifecycle::gang_agent_back(const std::string& agent, const std::vector<RunningTrial>& running) {
  silent_until_.erase(agent);
  for (auto& [key, r] : gang_ended_) {
    const auto runs = [&, k = key](const RunningTrial& t) { return t.trial_id == k.first && t.attempt == k.second; };
    // Still running it (back before its lease ran out): it was sent a stop
    // and reports the end. Back without it: its ranks are gone. (A node it
    // reported in `finished` was taken out by gang_remains_exited.)
    if (std::any_of(running.begin(), running.end(), runs))
      r.pending[agent] = kUntilConfirmed;
    else
      r.pending.erase(agent);
  }
  refresh_holds();
}

void TrialLifecycle::refresh_holds() {
  const int64_t now = clock_.now_ms();
  for (auto it = gang_ended_.begin(); it != gang_ended_.end();) {
    GangRemains& r = it->second;
    int64_t not_before = 0;
    for (const auto& [agent, bound] : r.pending) not_before = std::max(not_before, bound);
    if (not_before <= now) not_before = 0;  // every rank known dead: released
    if (not_before != r.told) {
      events_.push_back(TrialHeld{it->first.first, r.sweep_id, not_before});
      const std::string which = "trial " + std::to_string(it->first.first) + " attempt " + std::to_string(it->first.second);
      if (not_before == 0) {
        changed_ = true;  // a trial may start now
        log::info(which + ": every rank is known stopped; the trial may run again");
      } else if (not_before != kUntilConfirmed) {
        log::info(which + ": a silent node's ranks run until its lease is over; the trial waits " +
                  std::to_string(not_before - now) + " ms before it may run again");
      }
      r.told = not_before;
    }
    // Kept while a node may still report (its late exit is history only).
    if (r.pending.empty() && r.told == 0)
      it = gang_ended_.erase(it);
    else
      ++it;
  }
}

std::optional<int64_t> TrialLifecycle::next_release_ms() const {
  std::optional<int64_t> next;
  for (const auto& [key, r] : gang_ended_)
    if (r.told > 0 && r.told != kUntilConfirmed && (!next || r.told < *next)) next = r.told;
  return next;
}

// ---- a gang's processes in the store, and their adoption after a restart (issue 30) ----

// What the store keeps of a dispatched gang's processes (attempts.gang):
// the TF_CONFIG tasks as protocol::Gang numbers them (worker r on node
// r / procs_per_node, server j on ps_node[j]), their ports, each node's slots.
GangRecord TrialLifecycle::gang_record(const GangDispatch& gang, const Placement& node0) {
  GangRecord g;
  g.worker_nodes = gang.worker_nodes > 0 ? gang.worker_nodes : static_cast<int>(gang.more_nodes.size()) + 1;
  g.master_port = gang.master_port;
  const int per_node = std::max(1, gang.procs_per_node);
  for (size_t r = 0; r < gang.worker_ports.size(); ++r)
    g.processes.push_back({"worker", static_cast<int>(r), static_cast<int>(r) / per_node, gang.worker_ports[r]});
  for (size_t j = 0; j < gang.ps_node.size() && j < gang.ps_ports.size(); ++j)
    g.processes.push_back({"ps", static_cast<int>(j), gang.ps_node[j], gang.ps_ports[j]});
  g.slots.push_back(node0.cpus);
  for (const auto& node : gang.more_nodes) g.slots.push_back(node.second.cpus);
  return g;
}

// The inverse after a restart: which nodes run workers, whether there are
// servers to stop once they end, the ports held, each node's CPU slots.
void TrialLifecycle::adopt_gang(LiveTrial& lt, const GangRecord& g) {
  const int all_nodes = static_cast<int>(lt.more_nodes.size()) + 1;
  auto agent_of = [&](int node) -> const std::string* {
    if (node == 0) return &lt.agent;
    return node < all_nodes ? &lt.more_nodes[static_cast<size_t>(node) - 1].agent : nullptr;
  };
  lt.master_port = g.master_port;
  for (const StoredGangProcess& p : g.processes)
    if (const std::string* name = agent_of(p.node); name && p.port > 0) lt.ports.push_back({*name, p.port});
  lt.servers = g.has_servers();
  lt.worker_nodes = std::clamp(g.worker_nodes, 1, all_nodes);
  for (size_t n = 0; n < g.slots.size() && n < static_cast<size_t>(all_nodes); ++n)
    (n == 0 ? lt.cpus : lt.more_nodes[n - 1].cpus) = g.slots[n];
}

}  // namespace swept::scheduler
