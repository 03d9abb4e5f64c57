// Broker, the agent registry: who may send what on a keyed scheduler,
// registration (one agent per connection, one key per name, duplicates
// refused, a reconnect taking over at once, the lifecycle reconciling what
// the agent reports), agents going away, host faults and quarantine, and
// the forgetting of agents long gone (docs/protocol.md, "Security",
// "Reconciliation", "Host faults and quarantine" and QUERY_AGENTS). See
// broker.h.
//
// A launch failure its agent blames on the host (TRIAL_EXITED `host_fault`:
// the trial's directory cannot be made, the disk is full, the host refuses a
// process) is not the trial's: the trial goes back to the queue (kRequeue)
// without spending a retry, and the agent's streak of such failures grows.
// At BrokerOptions::quarantine_after in a row, or when the agent's own
// self-check of its work directory fails, the agent is quarantined: placement
// no longer sees it, the reason is stored (agents.quarantine) for `swept
// agents` and the dashboard. A self-check that passes after one that failed,
// or RELEASE_AGENT from an operator, lifts it. Without this one black-hole
// host fails a whole sweep in seconds while healthy agents stand idle.
#include <algorithm>
#include <set>
#include <string>

#include "common/log.h"
#include "scheduler/broker.h"

namespace swept::scheduler {

using namespace swept::protocol;

namespace {
// How often the rows of long-gone agents are looked for.
constexpr int64_t kForgetEveryMs = 60000;
}  // namespace

// ---- who may send what (keyed schedulers) ----

Result<bool> Broker::authorized(const std::string& routing_id, const Message& m, const std::string& user_id,
                                const std::string& request_id) {
  current_key_ = user_id;
  const bool agent_kind = std::holds_alternative<Register>(m) || std::holds_alternative<Heartbeat>(m) ||
                          std::holds_alternative<TrialStarted>(m) || std::holds_alternative<Metrics>(m) ||
                          std::holds_alternative<TrialExited>(m) || std::holds_alternative<Disconnect>(m);
  std::optional<KeyRing::Entry> entry;
  if (!user_id.empty()) entry = options_.keys->find(user_id);
  if (!entry) {  // revoked since its handshake (or, defensively, no ZAP User-Id at all)
    stat_dropped_++;
    if (Session* s = session_by_routing(routing_id)) {
      std::string name = s->name;
      log::warn("agent " + name + ": its key is no longer authorized; session dropped");
      send_later(routing_id, RegisterReject{"unauthorized", "this agent's key is no longer authorized", 0});
      SWEPT_RETURN_IF_ERROR(on_agent_gone(routing_id, "its key was revoked", AgentState::kGone));
      key_by_name_.erase(name);
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
  // Validate what placement will rely on.
  std::string bad;
  std::set<int> indices;
  if (r.name.empty() || r.name.size() > 200) bad = "REGISTER.name: must be 1 to 200 characters";
  if (r.slots < 0) bad = "REGISTER.slots: must be 0 or more";
  for (const auto& g : r.gpus)
    if (!indices.insert(g.index).second || g.index < 0)
      bad = "REGISTER.gpus: index " + std::to_string(g.index) + " is negative or appears twice";
  if (!bad.empty()) {
    stat_dropped_++;
    send_later(routing_id, RegisterReject{"bad_request", bad, 0});
    log::warn("refused REGISTER from " + r.name + ": " + bad);
    return Status::Ok();
  }
  // One connection registers one agent: a second name on it is refused (a
  // peer cannot fill the registry from one socket; docs/protocol.md).
  if (auto bound = name_by_routing_.find(routing_id); bound != name_by_routing_.end() && bound->second != r.name) {
    stat_dropped_++;
    send_later(routing_id, RegisterReject{"one_agent_per_connection",
                                          "this connection already registered agent \"" + bound->second +
                                              "\"; one connection registers one agent: open a new connection for \"" +
                                              r.name + "\"",
                                          0});
    refused_log_.write(clock_.now_ms(), "refused REGISTER for agent " + r.name + ": its connection registered agent " +
                                            bound->second);
    return Status::Ok();
  }
  const int64_t now = clock_.now_ms();
  const int64_t liveness_ms = int64_t{options_.heartbeat_ms} * options_.liveness;

  // On a keyed scheduler a name belongs to the first key that registers it
  // (until that key is revoked): another key cannot take it over, live or not.
  if (options_.keys) {
    const std::string& key = current_key_;
    auto [owner, fresh] = key_by_name_.emplace(r.name, key);
    if (!fresh && owner->second != key && !options_.keys->find(owner->second)) owner->second = key;  // revoked
    if (!fresh && owner->second != key) {
      stat_dropped_++;
      send_later(routing_id, RegisterReject{"name_taken",
                                            "the agent name \"" + r.name +
                                                "\" belongs to another key; give this agent another --name",
                                            0});
      log::warn("refused REGISTER for agent " + r.name + ": the name belongs to another key");
      return Status::Ok();
    }
  }
  // A name held by another live connection: a duplicate, refused loudly.
  if (auto it = routing_by_name_.find(r.name); it != routing_by_name_.end() && it->second != routing_id) {
    Session* old = session_by_routing(it->second);
    // The same agent process (host and pid) on a new connection is a
    // reconnect, not a duplicate: it takes over at once.
    bool same_process = old && old->host == r.host && old->pid == r.pid;
    if (old && !same_process && now - old->last_heard_ms < liveness_ms) {
      stat_dropped_++;
      send_later(routing_id, RegisterReject{"duplicate_name",
                                            "an agent named \"" + r.name + "\" (host " + old->host +
                                                ") is already connected; give this one another --name",
                                            liveness_ms});
      log::warn("refused a second agent named " + r.name + " from host " + r.host);
      return Status::Ok();
    }
    // Its predecessor went silent: this connection takes over its trials.
    if (old) sessions_.erase(it->second);
    routing_by_name_.erase(it);
  }
  Session& s = sessions_[routing_id];
  s.routing_id = routing_id;
  s.name = r.name;
  s.host = r.host;
  s.session = r.session;
  s.slots = r.slots;
  s.pid = r.pid;
  s.gpus = r.gpus;
  s.start_after = std::find(r.features.begin(), r.features.end(), "start_after") != r.features.end();
  // Whether it is leaving is what this REGISTER says (a reconnect on the
  // same connection keeps the session), not what it reports stopped: trials
  // its lease stopped end agent_shutdown too, by an agent that stays.
  note_draining(s, r.draining);
  if (options_.keys) s.key = current_key_;
  s.last_heard_ms = now;
  routing_by_name_[r.name] = routing_id;
  name_by_routing_[routing_id] = r.name;
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_RETURN_IF_ERROR(store_.upsert_agent(r.name, r.host, r.slots, r.gpus, clock_.wall_seconds(), r.containment));
  SWEPT_RETURN_IF_ERROR(note_health(s, r.healthy, r.health));

  // Reconcile what the agent runs with what the store says (docs/protocol.md):
  // the lifecycle's; an unconfirmed start waits a liveness period more.
  auto rec = lifecycle_.reconcile(r.name, r.running, r.finished, now + liveness_ms);
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

void Broker::note_draining(Session& s, bool draining) {
  // A draining agent says so before it reports any trial it stops (its
  // HEARTBEAT comes first on the connection), so dispatch() stops placing
  // trials there at once and a trial requeued from it does not go straight
  // back. An agent_shutdown exit alone says nothing of the agent: its lease
  // ends trials so too, and that agent stays (protocol version 2).
  if (draining && !s.draining)
    log::info("agent " + s.name + " drains: it gets no more work; its trials come back as it stops them");
  s.draining = draining;
}

Status Broker::note_exit(Session& s, const TrialExited& e, TrialLifecycle::ExitOutcome outcome) {
  if (outcome == TrialLifecycle::ExitOutcome::kHostFault) {
    stat_host_requeues_++;
    return note_host_fault(s.name, e.reason.empty() ? std::string("could not start") : e.reason);
  }
  if (outcome == TrialLifecycle::ExitOutcome::kRan) note_host_ok(s.name);  // its process ran: the host works
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
  dirty_ = true;
  // Silent, not gone: it may still be running its trials. They keep their
  // places until its lease is over, when it has stopped them, and are
  // requeued then (check_timers). Back before that, it keeps them.
  if (new_state == AgentState::kLost) {
    lifecycle_.agent_silent(name, last_heard_ms + lease_ms() + lease_margin_ms());
    return Status::Ok();
  }
  return lifecycle_.agent_gone(name, why);
}

// ---- host faults and quarantine ----

Status Broker::note_host_fault(const std::string& agent, const std::string& reason) {
  const int streak = ++host_fault_streak_[agent];
  if (options_.quarantine_after <= 0 || streak < options_.quarantine_after || quarantined_.count(agent))
    return Status::Ok();
  return quarantine(agent, std::to_string(streak) + " host faults in a row, the last: " + reason, false);
}

Status Broker::note_health(Session& s, const std::optional<bool>& healthy, const std::string& health) {
  if (!healthy) return Status::Ok();  // an agent that does not check itself
  const bool changed = s.healthy != healthy;
  s.healthy = healthy;
  auto q = quarantined_.find(s.name);
  if (!*healthy) {
    if (q != quarantined_.end()) {
      q->second.saw_unhealthy = true;
      return Status::Ok();
    }
    if (options_.quarantine_after <= 0) return Status::Ok();
    return quarantine(s.name, "its self-check failed: " + (health.empty() ? std::string("no reason given") : health),
                      true);
  }
  if (q != quarantined_.end() && q->second.saw_unhealthy && changed)
    return lift_quarantine(s.name, "its self-check passes again");
  return Status::Ok();
}

Status Broker::quarantine(const std::string& agent, const std::string& reason, bool from_health) {
  quarantined_[agent] = Quarantine{reason, from_health};
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_RETURN_IF_ERROR(store_.set_agent_quarantine(agent, reason));
  log::warn("agent " + agent + " quarantined: " + reason + "; it gets no work until it reports healthy again or " +
            "`swept agents --release " + agent + "`");
  dirty_ = true;
  return Status::Ok();
}

Status Broker::lift_quarantine(const std::string& agent, const std::string& why) {
  if (!quarantined_.erase(agent)) return Status::Ok();
  host_fault_streak_.erase(agent);
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_RETURN_IF_ERROR(store_.set_agent_quarantine(agent, std::nullopt));
  log::info("agent " + agent + " released from quarantine: " + why);
  dirty_ = true;
  return Status::Ok();
}

Status Broker::on_release(const std::string& routing_id, const ReleaseAgent& r) {
  if (!quarantined_.count(r.name)) {
    send_later(routing_id, Error{r.request_id, "not_found",
                                 "agent \"" + r.name + "\" is not quarantined (swept agents --all lists every agent)"});
    return Status::Ok();
  }
  SWEPT_RETURN_IF_ERROR(lift_quarantine(r.name, "released by an operator"));
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
    if (auto q = quarantined_.find(n); q != quarantined_.end())
      quarantined += (quarantined.empty() ? "" : "; ") + n + " (" + q->second.reason + ")";
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

Status Broker::forget_old_agents() {
  const int64_t now = clock_.now_ms();
  // Once a minute, or more often when the retention is shorter (tests).
  const int64_t every_ms = std::min<int64_t>(kForgetEveryMs, options_.forget_agents_after_s * 500 + 100);
  if (last_forget_ms_ && now - *last_forget_ms_ < every_ms) return Status::Ok();
  last_forget_ms_ = now;
  // Connections whose agent went away may register again (one name each).
  std::erase_if(name_by_routing_, [&](const auto& kv) { return !sessions_.count(kv.first); });
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  auto n = store_.forget_agents(clock_.wall_seconds() - double(options_.forget_agents_after_s));
  if (!n.ok()) return n.status();
  if (*n > 0)
    log::info("forgot " + std::to_string(*n) + " agents gone for more than " +
              std::to_string(options_.forget_agents_after_s) + " s (their trials keep their names)");
  return Status::Ok();
}

}  // namespace swept::scheduler
