// TrialLifecycle, the agent's side of its trials (lifecycle.h): what a
// (re-)registering agent reports is reconciled with the live trials, and
// the trials of agents that went silent or away are kept until their
// deadlines or lost. The rest of a trial's life is in lifecycle.cpp.
#include "scheduler/lifecycle.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "common/log.h"

namespace swept::scheduler {

using namespace swept::protocol;

namespace {
std::string to_s(int64_t v) { return std::to_string(v); }
}  // namespace

// ---- an agent (re-)registers ----

Result<TrialLifecycle::Reconciled> TrialLifecycle::reconcile(const std::string& agent,
                                                             const std::vector<RunningTrial>& running,
                                                             const std::vector<TrialExited>& finished,
                                                             int64_t confirm_deadline_ms) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  Reconciled out;
  std::set<int64_t> reported;
  for (const RunningTrial& rt : running) {
    reported.insert(rt.trial_id);
    auto it = live_.find(rt.trial_id);
    if (it != live_.end() && it->second.attempt == rt.attempt && it->second.node_of(agent) > 0 &&
        !it->second.node_ended(it->second.node_of(agent))) {
      // A gang's other node, still running: it goes on (node 0 keeps the
      // trial's record, acks and deadlines); a stop decided meanwhile again.
      LiveTrial& lt = it->second;
      lt.more_nodes[static_cast<size_t>(lt.node_of(agent)) - 1].started = true;
      if (auto stop = stop_owed(lt)) out.stops.push_back(*stop);
      continue;
    }
    if (it != live_.end() && it->second.agent == agent && it->second.attempt == rt.attempt) {
      LiveTrial& lt = it->second;
      // A start the scheduler had not written when it stopped: its time at least.
      if (!lt.start_recorded && rt.started_at > 0) {
        SWEPT_RETURN_IF_ERROR(store_.fill_started_at(rt.trial_id, rt.attempt, rt.started_at));
        lt.start_recorded = true;
      }
      lt.started = true;
      lt.await_deadline_ms = 0;
      lt.lease_wait = false;  // back before its lease ran out: it goes on here
      lt.lease_over_ms = 0;
      lt.acked_seq = lt.stored_seq;
      out.acked.push_back({rt.trial_id, rt.attempt, lt.stored_seq});
      // Stopped by the user or by its sweep's rule while the agent was away
      // (or before it reconnected): the stop may never have reached it.
      if (auto stop = stop_owed(lt)) out.stops.push_back(*stop);
      continue;
    }
    auto rec = store_.trial_record(rt.trial_id);
    if (rec.ok() && it == live_.end() && rec->attempts == rt.attempt &&
        next_trial_state(rec->state, {TrialEventKind::kAdopt}, 0) && sweep_running(rec->sweep_id) &&
        rec->nodes.empty() && !gang_ended_.count({rt.trial_id, rt.attempt})) {
      // Given up while its agent was away, not restarted yet (a queued trial
      // of a running sweep waits in the runner's queue): take it back. Never
      // a gang's node: its attempt ended as one, its other ranks are stopped.
      LiveTrial lt = make_live(rec->id, rec->sweep_id, rt.attempt, agent);
      lt.gpus = rec->gpus;
      lt.gpu_fraction = rec->gpu_fraction.value_or(0);
      lt.started = true;
      lt.start_recorded = rec->started_at.has_value();
      events_.push_back(TrialAdopted{rec->id, rec->sweep_id});
      SWEPT_RETURN_IF_ERROR(store_.reopen_attempt(rec->id, rt.attempt, agent));
      auto seq = store_.metrics_seq(rec->id, rt.attempt);
      if (!seq.ok()) return seq.status();
      lt.stored_seq = lt.acked_seq = *seq;
      out.acked.push_back({rec->id, rt.attempt, *seq});
      auto [adopted, fresh] = live_.insert_or_assign(rec->id, std::move(lt));
      if (auto stop = stop_owed(adopted->second)) out.stops.push_back(*stop);
      log::info("trial " + to_s(rec->id) + " is still running on " + agent + ": adopted back");
      continue;
    }
    auto seq = store_.metrics_seq(rt.trial_id, rt.attempt);
    out.acked.push_back({rt.trial_id, rt.attempt, seq.ok() ? *seq : 0});
    out.stops.push_back({rt.trial_id, rt.attempt, "stale attempt: the trial was restarted elsewhere or stopped"});
    log::info("agent " + agent + " runs trial " + to_s(rt.trial_id) + " attempt " + std::to_string(rt.attempt) +
              ", which is no longer current: stopping it");
  }
  for (const TrialExited& f : finished) {
    reported.insert(f.trial_id);
    auto seq = store_.metrics_seq(f.trial_id, f.attempt);
    if (!seq.ok()) return seq.status();
    auto it = live_.find(f.trial_id);
    if (f.last_seq > *seq && it != live_.end() && it->second.agent == agent && it->second.attempt == f.attempt) {
      // Some of its METRICS batches are not stored (they were lost with the
      // agent's old connection). The agent re-sends them after this ack and
      // then its TRIAL_EXITED again (docs/protocol.md, "Reconciliation"):
      // the attempt ends then, with all its rows. Ending it now would drop
      // them, since batches of an ended attempt are not stored.
      LiveTrial& lt = it->second;
      lt.started = true;
      lt.await_deadline_ms = 0;  // its agent is back; lease_wait still says how its end counts
      lt.stored_seq = lt.acked_seq = *seq;
      out.acked.push_back({f.trial_id, f.attempt, *seq});
      out.finished.push_back(ExitOutcome::kAwaitingMetrics);
      continue;
    }
    auto outcome = exited(agent, f);
    if (!outcome.ok()) return outcome.status();
    out.finished.push_back(*outcome);
    out.acked.push_back({f.trial_id, f.attempt, *seq});
  }
  std::vector<int64_t> missing;
  for (auto& [id, lt] : live_) {
    if (reported.count(id)) continue;
    if (const int node = lt.node_of(agent); node > 0) {
      // A gang's node that its agent no longer runs: the attempt is broken.
      if (!lt.node_ended(node)) missing.push_back(id);
      continue;
    }
    if (lt.agent != agent) continue;
    if (!lt.started) {
      // Never confirmed: its START_TRIAL may have crossed this REGISTER (sent
      // on the agent's previous connection, read after). Wait a liveness
      // period for the agent's TRIAL_STARTED before requeueing it.
      lt.await_deadline_ms = confirm_deadline_ms;
      continue;
    }
    missing.push_back(id);
  }
  for (int64_t id : missing) {
    if (live_.at(id).lease_wait)  // its lease ran out on the agent: not the trial's fault
      SWEPT_RETURN_IF_ERROR(lose(id, "agent " + agent + " came back without it after its lease ran out"));
    else
      SWEPT_RETURN_IF_ERROR(lose(id, "agent " + agent + " came back without it"));
  }
  // Back: whatever it still runs goes on, and it has reported the rest.
  for (auto& [id, lt] : live_) lt.silent_nodes.erase(agent);
  gang_agent_back(agent, running);  // after `finished`: those nodes reported their end
  changed_ = true;
  return out;
}

// ---- agents going away, deadlines ----

void TrialLifecycle::agent_silent(const std::string& agent, int64_t until_ms, int64_t lease_over_ms) {
  // Its ranks of ended gang attempts are dead once its lease and margin are over.
  gang_agent_silent(agent, lease_over_ms > 0 ? lease_over_ms : until_ms);
  for (auto& [id, lt] : live_) {
    if (lt.gang() && lt.node_of(agent) >= 0 && !lt.node_ended(lt.node_of(agent))) {
      if (lt.held_failure) {
        // Another node failed just before: most likely because this host
        // died under it. Lost at the next check (the others are stopped,
        // the next attempt waits for this node's lease: refresh_holds).
        gang_losses_.push_back({id, "agent " + agent + " went silent after another node failed"});
        continue;
      }
      // Silent is often only frozen (SIGSTOP, a pause, a blip) while its
      // ranks and the collective run on: the attempt goes on, every node's
      // place held, until this node's lease is over (check_silent_gangs).
      lt.silent_nodes[agent] = {lease_over_ms > 0 ? lease_over_ms : until_ms, until_ms};
      continue;
    }
    if (lt.agent != agent) continue;
    lt.lease_wait = true;
    lt.await_deadline_ms = until_ms;
    lt.lease_over_ms = lease_over_ms;
  }
  changed_ = true;
}

Status TrialLifecycle::agent_gone(const std::string& agent, const std::string& reason) {
  std::vector<int64_t> ids;
  for (const auto& [id, lt] : live_)
    if (lt.agent == agent || (lt.gang() && lt.node_of(agent) > 0 && !lt.node_ended(lt.node_of(agent)))) ids.push_back(id);
  for (int64_t id : ids) SWEPT_RETURN_IF_ERROR(lose(id, "agent " + agent + " lost: " + reason));
  gang_agent_gone(agent);
  changed_ = true;
  return Status::Ok();
}

Status TrialLifecycle::check_deadlines(const std::function<bool(const std::string&)>& connected, int64_t lease_ms) {
  for (const auto& [id, why] : std::exchange(gang_losses_, {})) SWEPT_RETURN_IF_ERROR(lose(id, why));
  SWEPT_RETURN_IF_ERROR(settle_held_failures());
  SWEPT_RETURN_IF_ERROR(check_silent_gangs());
  refresh_holds();  // gang retries whose silent nodes' leases are over
  const int64_t now = clock_.now_ms();
  std::vector<int64_t> orphans, unconfirmed, leased;
  for (auto& [id, lt] : live_) {
    if (lt.lease_wait && lt.lease_over_ms > 0 && now > lt.lease_over_ms && !connected(lt.agent)) {
      // The agent, or its keeper, has stopped the trial by now; held only for
      // the agent's report of an end that came first (docs/protocol.md, "Leases").
      log::info("agent " + lt.agent + "'s lease is over: trial " + to_s(id) + " attempt " + to_s(lt.attempt) +
                " no longer runs there; it is requeued in " + to_s(std::max<int64_t>(lt.await_deadline_ms - now, 0)) +
                " ms unless the agent reports it first");
      lt.lease_over_ms = 0;  // said once
    }
    if (lt.await_deadline_ms <= 0 || now <= lt.await_deadline_ms) continue;
    const bool here = connected(lt.agent);
    if (lt.lease_wait && !here)
      leased.push_back(id);
    else if (!here)
      orphans.push_back(id);
    else if (!lt.started)
      unconfirmed.push_back(id);
  }
  for (int64_t id : orphans)
    SWEPT_RETURN_IF_ERROR(lose(id, "agent " + live_.at(id).agent + " did not come back after the scheduler restarted"));
  for (int64_t id : unconfirmed) SWEPT_RETURN_IF_ERROR(lose(id, "agent " + live_.at(id).agent + " never confirmed it"));
  for (int64_t id : leased)
    SWEPT_RETURN_IF_ERROR(lose(id, "agent " + live_.at(id).agent + " lost and its lease (" + std::to_string(lease_ms) +
                                       " ms) is over: it has stopped the trial, and did not come back to report it"));
  return Status::Ok();
}

void TrialLifecycle::postpone_deadlines(int64_t stall_ms) {
  for (auto& [id, lt] : live_) {
    if (lt.await_deadline_ms > 0) lt.await_deadline_ms += stall_ms;
    if (lt.lease_over_ms > 0) lt.lease_over_ms += stall_ms;
    for (auto& [agent, s] : lt.silent_nodes) {
      s.lease_over_ms += stall_ms;
      s.until_ms += stall_ms;
    }
  }
  // A held gang retry's silent nodes: their leases are counted the same way.
  for (auto& [agent, until] : silent_until_) until += stall_ms;
  for (auto& [key, r] : gang_ended_)
    for (auto& [agent, bound] : r.pending)
      if (bound != kUntilConfirmed) bound += stall_ms;
  refresh_holds();
}

}  // namespace swept::scheduler
