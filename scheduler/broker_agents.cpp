// Broker, its side of the agents: who may send what on a keyed scheduler,
// REGISTER (the registry admits or refuses, the lifecycle reconciles what
// the agent reports), agents going away, what an exit says of a host, and
// operators releasing quarantined agents (docs/protocol.md, "Security",
// "Reconciliation", "Host faults and quarantine"). What the registry keeps
// and decides is in agent_registry.h; this file sends and logs. See broker.h.
#include <algorithm>
#include <set>
#include <string>

#include "common/log.h"
#include "scheduler/broker.h"

namespace swept::scheduler {

using namespace swept::protocol;

// ---- who may send what (keyed schedulers) ----

Result<bool> Broker::authorized(const std::string& routing_id, const Message& m, const std::string& user_id,
                                const std::string& request_id) {
  current_key_ = user_id;
  const bool agent_kind = std::holds_alternative<Register>(m) || std::holds_alternative<Heartbeat>(m) ||
                          std::holds_alternative<TrialStarted>(m) || std::holds_alternative<Metrics>(m) ||
                          std::holds_alternative<TrialExited>(m) || std::holds_alternative<Disconnect>(m) ||
                          std::holds_alternative<CheckpointPull>(m) || std::holds_alternative<CheckpointPart>(m);
  std::optional<KeyRing::Entry> entry;
  if (!user_id.empty()) entry = options_.keys->find(user_id);
  if (!entry) {  // revoked since its handshake (or, defensively, no ZAP User-Id at all)
    stat_dropped_++;
    if (AgentSession* s = agents_.by_routing(routing_id)) {
      std::string name = s->name;
      log::warn("agent " + name + ": its key is no longer authorized; session dropped");
      send_later(routing_id, RegisterReject{"unauthorized", "this agent's key is no longer authorized", 0});
      SWEPT_RETURN_IF_ERROR(on_agent_gone(routing_id, "its key was revoked", AgentState::kGone));
      agents_.forget_key(name);
    } else if (std::holds_alternative<Register>(m)) {
      send_later(routing_id, RegisterReject{"unauthorized", "this agent's key is not authorized", 0});
    } else if (!agent_kind) {
      send_later(routing_id, Error{request_id, "unauthorized", "this key is not authorized (any more)"});
    }
    return false;
  }
  if (agent_kind && !entry->may_register()) {
    stat_dropped_++;
    log::warn("refused " + std::string(kind_name(m)) + " from client key " + entry->label);
    if (std::holds_alternative<Register>(m))
      send_later(routing_id, RegisterReject{"forbidden",
                                            "this is a client key (" + entry->label +
                                                "): an agent needs a key in the scheduler's authorized agents/ folder",
                                            0});
    return false;
  }
  if (!agent_kind && !entry->may_command()) {
    stat_dropped_++;
    log::warn("refused " + std::string(kind_name(m)) + " from agent key " + entry->label);
    send_later(routing_id, Error{request_id, "forbidden",
                                 "this is an agent key (" + entry->label +
                                     "): it may not submit, cancel, retry or query; use a key from the scheduler's "
                                     "authorized clients/ folder"});
    return false;
  }
  return true;
}

// ---- agents ----

Status Broker::on_register(const std::string& routing_id, const Register& r) {
  SWEPT_ASSIGN_OR_RETURN(admission, agents_.admit(routing_id, r, current_key_));
  if (admission.reject) {
    stat_dropped_++;
    send_later(routing_id, std::move(*admission.reject));
    if (admission.throttled)
      refused_log_.write(clock_.now_ms(), admission.log_line);
    else
      log::warn(admission.log_line);
    return Status::Ok();
  }
  AgentSession& s = *admission.session;
  // Reconcile what the agent runs with what the store says (docs/protocol.md):
  // the lifecycle's; an unconfirmed start waits a liveness period more.
  const int64_t liveness_ms = int64_t{options_.heartbeat_ms} * options_.liveness;
  auto rec = lifecycle_.reconcile(r.name, r.running, r.finished, clock_.now_ms() + liveness_ms);
  if (!rec.ok()) return rec.status();
  for (size_t i = 0; i < r.finished.size() && i < rec->finished.size(); ++i)
    SWEPT_RETURN_IF_ERROR(note_exit(s, r.finished[i], rec->finished[i]));
  send_later(routing_id, RegisterAck{r.session, options_.heartbeat_ms, options_.liveness, std::move(rec->acked),
                                     lease_ms()});
  for (StopTrial& st : rec->stops) send_later(routing_id, std::move(st));  // after the ack: the agent knows us then
  log::info("agent " + r.name + " registered (host " + r.host + ", " + std::to_string(r.gpus.size()) + " GPUs, " +
            std::to_string(r.slots) + " slots, " + std::to_string(r.running.size()) + " running, " +
            std::to_string(r.finished.size()) + " finished while away)");
  dirty_ = true;
  return Status::Ok();
}

Status Broker::note_exit(AgentSession& s, const TrialExited& e, TrialLifecycle::ExitOutcome outcome) {
  if (outcome == TrialLifecycle::ExitOutcome::kHostFault) {
    stat_host_requeues_++;
    return agents_.note_host_fault(s.name, e.reason.empty() ? std::string("could not start") : e.reason);
  }
  if (outcome == TrialLifecycle::ExitOutcome::kRan) agents_.note_host_ok(s.name);  // its process ran: the host works
  return Status::Ok();
}

Status Broker::on_agent_gone(std::string routing_id, const std::string& why, AgentState new_state) {
  SWEPT_ASSIGN_OR_RETURN(gone, agents_.remove(routing_id, new_state));
  if (!gone) return Status::Ok();
  dirty_ = true;
  // Silent, not gone: it may still be running its trials. They keep their
  // places until its lease is over, when it has stopped them, and then
  // through the report window; requeued after that (check_timers). Back
  // before its lease is over, it keeps them; back within the window, it
  // reports how they ended.
  if (new_state == AgentState::kLost) {
    const int64_t lease_over = gone->last_heard_ms + lease_ms() + lease_margin_ms();
    lifecycle_.agent_silent(gone->name, lease_over + report_window_ms(), lease_over);
    return Status::Ok();
  }
  return lifecycle_.agent_gone(gone->name, why);
}

// ---- operators ----

Status Broker::on_release(const std::string& routing_id, const ReleaseAgent& r) {
  SWEPT_ASSIGN_OR_RETURN(released, agents_.release(r.name));
  if (!released) {
    send_later(routing_id, Error{r.request_id, "not_found",
                                 "agent \"" + r.name + "\" is not quarantined (swept agents --all lists every agent)"});
    return Status::Ok();
  }
  dirty_ = true;
  send_later(routing_id, Done{r.request_id, "released agent " + r.name + " from quarantine", 1});
  return Status::Ok();
}

void Broker::warn_all_held(const std::vector<std::string>& held) {
  std::string names;
  for (const std::string& n : held) names += (names.empty() ? "" : ", ") + n;
  if (names == held_warned_) return;  // said already (or nothing to say)
  held_warned_ = names;
  // Not "asks for more than any agent has": the agents are there, they are
  // held back. Say which, why, and what lifts it.
  std::string quarantined, draining;
  for (const std::string& n : held) {
    if (agents_.quarantined(n))
      quarantined += (quarantined.empty() ? "" : "; ") + n + " (" + agents_.quarantine_reason(n) + ")";
    else
      draining += (draining.empty() ? "" : ", ") + n;
  }
  {
    MutexLock lock(unplaceable_mutex_);
    all_quarantined_ = draining.empty() && !quarantined.empty()
                           ? "every registered agent is quarantined: " + quarantined
                           : std::string();
  }
  if (held.empty()) return;
  std::string msg = "trials wait: every registered agent is held back from new work";
  if (!quarantined.empty())
    msg += "; quarantined: " + quarantined +
           ". Release one with `swept agents --release NAME` once its host is fixed (a quarantine its failed "
           "self-check caused lifts by itself when the check passes again)";
  if (!draining.empty()) msg += "; draining (leaving, it takes no more work): " + draining;
  log::warn(msg);
}

}  // namespace swept::scheduler
