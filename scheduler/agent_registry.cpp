// AgentRegistry: see agent_registry.h. The file follows an agent: it
// registers (or is refused), is heard, drains, fails its host's self-check
// or its launches and is quarantined or released, goes silent or away, and
// is forgotten.
//
// A launch failure its agent blames on the host (TRIAL_EXITED `host_fault`:
// the trial's directory cannot be made, the disk is full, the host refuses a
// process) is not the trial's: the lifecycle requeues the trial without
// spending a retry, and the agent's streak of such failures grows here. At
// quarantine_after in a row, or when the agent's own self-check of its work
// directory fails, the agent is quarantined: placement no longer sees it, the
// reason is stored (agents.quarantine) for `swept agents` and the dashboard.
// Without this one black-hole host fails a whole sweep in seconds while
// healthy agents stand idle.
#include "scheduler/agent_registry.h"

#include <algorithm>
#include <set>

#include "common/log.h"

namespace swept::scheduler {

using namespace swept::protocol;

namespace {
// How often the rows of long-gone agents are looked for.
constexpr int64_t kForgetEveryMs = 60000;

AgentRegistry::Admission refused(std::string reason, std::string message, int64_t retry_after_ms,
                                 std::string log_line, bool throttled = false) {
  AgentRegistry::Admission a;
  a.reject = RegisterReject{std::move(reason), std::move(message), retry_after_ms};
  a.log_line = std::move(log_line);
  a.throttled = throttled;
  return a;
}
}  // namespace

Status AgentRegistry::ensure_tx() {
  if (store_.in_transaction()) return Status::Ok();
  return store_.begin();
}

Status AgentRegistry::recover() {
  SWEPT_ASSIGN_OR_RETURN(on_record, store_.quarantined_agents());
  for (auto& [agent, reason] : on_record) quarantined_[agent] = Quarantine{std::move(reason), false};
  return Status::Ok();
}

// ---- registration ----

std::string AgentRegistry::invalid_register(const Register& r) {
  std::string bad;
  std::set<int> indices;
  if (r.name.empty() || r.name.size() > 200) bad = "REGISTER.name: must be 1 to 200 characters";
  if (r.slots < 0) bad = "REGISTER.slots: must be 0 or more";
  for (const auto& g : r.gpus)
    if (!indices.insert(g.index).second || g.index < 0)
      bad = "REGISTER.gpus: index " + std::to_string(g.index) + " is negative or appears twice";
  return bad;
}

std::optional<AgentRegistry::Admission> AgentRegistry::refusal(const std::string& routing_id, const Register& r,
                                                               const std::string& key) {
  if (std::string bad = invalid_register(r); !bad.empty())
    return refused("bad_request", bad, 0, "refused REGISTER from " + r.name + ": " + bad);
  // One connection registers one agent: a second name on it is refused (a
  // peer cannot fill the registry from one socket; docs/protocol.md).
  if (auto bound = name_by_routing_.find(routing_id); bound != name_by_routing_.end() && bound->second != r.name)
    return refused("one_agent_per_connection",
                   "this connection already registered agent \"" + bound->second +
                       "\"; one connection registers one agent: open a new connection for \"" + r.name + "\"",
                   0, "refused REGISTER for agent " + r.name + ": its connection registered agent " + bound->second,
                   /*throttled=*/true);
  // On a keyed scheduler a name belongs to the first key that registers it
  // (until that key is revoked): another key cannot take it over, live or not.
  if (options_.keys) {
    auto [owner, fresh] = key_by_name_.emplace(r.name, key);
    if (!fresh && owner->second != key && !options_.keys->find(owner->second)) owner->second = key;  // revoked
    if (!fresh && owner->second != key)
      return refused("name_taken",
                     "the agent name \"" + r.name + "\" belongs to another key; give this agent another --name", 0,
                     "refused REGISTER for agent " + r.name + ": the name belongs to another key");
  }
  // One live agent per key: a second name on a key that already holds its
  // share is refused, so that one key cannot offer phantom slots under any
  // number of names (issue 26). Its own name again is a reconnect or a
  // duplicate, decided below.
  if (options_.keys) {
    const auto entry = options_.keys->find(key);
    const int max_agents = entry ? entry->max_agents : 1;
    std::vector<std::string> holding;
    for (const auto& [rid, s] : sessions_)
      if (rid != routing_id && s.key == key && s.name != r.name) holding.push_back(s.name);
    if (int(holding.size()) >= max_agents) {
      const std::string label = entry ? entry->label : std::string("this key");
      const std::string max_file = label.size() > 4 ? label.substr(0, label.size() - 4) + ".max" : "NAME.max";
      return refused("key_in_use",
                     "this agent's key (" + label + ") already holds " +
                         (max_agents == 1 ? "agent \"" + holding.front() + "\""
                                          : std::to_string(holding.size()) + " live agents, its limit") +
                         "; one key registers one live agent: give each agent its own key (swept keygen, its .pub in "
                         "the authorized agents/ folder), or let this key hold a pool by writing how many into " +
                         max_file + " in the authorized folder",
                     liveness_ms(),
                     "refused REGISTER for agent " + r.name + " from host " + r.host + ": its key " + label +
                         " already holds " + std::to_string(holding.size()) + " live agent(s), the first " +
                         holding.front(),
                     /*throttled=*/true);
    }
  }
  // A name held by another live connection: a duplicate, refused loudly.
  inherited_.reset();
  if (auto it = routing_by_name_.find(r.name); it != routing_by_name_.end() && it->second != routing_id) {
    AgentSession* old = by_routing(it->second);
    // The same agent process (host and pid) on a new connection is a
    // reconnect, not a duplicate: it takes over at once.
    const bool same_process = old && old->host == r.host && old->pid == r.pid;
    if (old && !same_process && clock_.now_ms() - old->last_heard_ms < liveness_ms())
      return refused("duplicate_name",
                     "an agent named \"" + r.name + "\" (host " + old->host +
                         ") is already connected; give this one another --name",
                     liveness_ms(), "refused a second agent named " + r.name + " from host " + r.host);
    // Its predecessor went silent: this connection takes over its trials.
    if (old) {
      inherited_ = Inherited{old->recorded, old->fresh_row, old->ran_work};
      sessions_.erase(it->second);
    }
    routing_by_name_.erase(it);
  }
  // Unkeyed peers (loopback, --insecure) open new sessions at a bounded rate.
  if (!options_.keys && !inherited_ && !sessions_.count(routing_id) && !unkeyed_token())
    return refused("throttled",
                   "too many agents are registering at once on this unkeyed scheduler; this agent retries in 1 s", 1000,
                   "refused REGISTER for agent " + r.name + " from host " + r.host +
                       ": unkeyed registrations are over their rate (" +
                       std::to_string(int(options_.unkeyed_registers_per_s)) + " a second)",
                   /*throttled=*/true);
  return std::nullopt;
}

bool AgentRegistry::unkeyed_token() {
  const int64_t now = clock_.now_ms();
  const double burst = std::max(1, options_.unkeyed_register_burst);
  if (unkeyed_tokens_ < 0) unkeyed_tokens_ = burst, unkeyed_refill_ms_ = now;
  unkeyed_tokens_ =
      std::min(burst, unkeyed_tokens_ + double(now - unkeyed_refill_ms_) * options_.unkeyed_registers_per_s / 1000.0);
  unkeyed_refill_ms_ = now;
  if (unkeyed_tokens_ < 1) return false;
  unkeyed_tokens_ -= 1;
  return true;
}

Result<AgentRegistry::Admission> AgentRegistry::admit(const std::string& routing_id, const Register& r,
                                                       const std::string& key) {
  if (auto refusal_made = refusal(routing_id, r, key)) return std::move(*refusal_made);
  const bool existing = sessions_.count(routing_id) != 0;
  AgentSession& s = sessions_[routing_id];
  if (!existing && inherited_) {
    s.recorded = inherited_->recorded;
    s.fresh_row = inherited_->fresh_row;
    s.ran_work = inherited_->ran_work;
  }
  s.routing_id = routing_id;
  s.name = r.name;
  s.host = r.host;
  s.session = r.session;
  s.slots = r.slots;
  s.pid = r.pid;
  s.gpus = r.gpus;
  s.start_after = std::find(r.features.begin(), r.features.end(), "start_after") != r.features.end();
  s.gangs = std::find(r.features.begin(), r.features.end(), protocol::kFeatureGang) != r.features.end();
  s.segments = std::find(r.features.begin(), r.features.end(), protocol::kFeatureCheckpointSegments) != r.features.end();
  s.checkpoint_frames =
      std::find(r.features.begin(), r.features.end(), protocol::kFeatureCheckpointFrames) != r.features.end();
  s.addr = r.addr;
  s.ports_lo = r.ports_lo;
  s.ports_hi = r.ports_hi;
  // Whether it is leaving is what this REGISTER says (a reconnect on the
  // same connection keeps the session), not what it reports stopped: trials
  // its lease stopped end agent_shutdown too, by an agent that stays.
  note_draining(s, r.draining);
  if (options_.keys) s.key = key;
  s.last_heard_ms = clock_.now_ms();
  routing_by_name_[r.name] = routing_id;
  name_by_routing_[routing_id] = r.name;
  s.containment = r.containment;
  s.health = r.health;
  s.reported_healthy = r.healthy;
  if (!r.running.empty() || !r.finished.empty()) s.ran_work = true;
  // A keyed agent proved who it is in its handshake; an unkeyed one's row
  // waits for its next message (confirmed()), so raw REGISTERs make none.
  if (options_.keys || s.recorded) SWEPT_RETURN_IF_ERROR(record(s, r.healthy));
  changed_ = true;
  Admission a;
  a.session = &s;
  return a;
}

Status AgentRegistry::record(AgentSession& s, const std::optional<bool>& healthy) {
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  if (!s.recorded) {
    SWEPT_ASSIGN_OR_RETURN(known, store_.agent_known(s.name));
    s.fresh_row = !known;
  }
  SWEPT_RETURN_IF_ERROR(store_.upsert_agent(s.name, s.host, s.slots, s.gpus, clock_.wall_seconds(), s.containment));
  s.recorded = true;
  changed_ = true;
  return note_health(s, healthy, s.health);
}

Status AgentRegistry::confirmed(AgentSession& s, bool work) {
  if (work) s.ran_work = true;
  if (s.recorded) return Status::Ok();
  return record(s, s.reported_healthy);
}

// ---- who there is ----

AgentSession* AgentRegistry::by_routing(const std::string& routing_id) {
  auto it = sessions_.find(routing_id);
  return it == sessions_.end() ? nullptr : &it->second;
}

const AgentSession* AgentRegistry::by_name(const std::string& name) const {
  auto n = routing_by_name_.find(name);
  if (n == routing_by_name_.end()) return nullptr;
  auto it = sessions_.find(n->second);
  return it == sessions_.end() ? nullptr : &it->second;
}

std::vector<const AgentSession*> AgentRegistry::by_name_order() const {
  std::vector<const AgentSession*> out;
  for (const auto& [name, rid] : routing_by_name_)
    if (auto it = sessions_.find(rid); it != sessions_.end()) out.push_back(&it->second);
  return out;
}

std::vector<std::string> AgentRegistry::silent() const {
  const int64_t now = clock_.now_ms();
  std::vector<std::string> out;
  for (const auto& [rid, s] : sessions_)
    if (now - s.last_heard_ms > liveness_ms()) out.push_back(rid);
  return out;
}

Result<std::optional<AgentRegistry::Departed>> AgentRegistry::remove(const std::string& routing_id,
                                                                     AgentState new_state) {
  auto it = sessions_.find(routing_id);
  if (it == sessions_.end()) return std::optional<Departed>();
  Departed gone{it->second.name, it->second.last_heard_ms};
  const bool recorded = it->second.recorded;
  // A row made by this session for an agent that ran nothing goes with it:
  // nothing refers to it, and a stream of such agents would fill the table.
  const bool prune = recorded && it->second.fresh_row && !it->second.ran_work;
  sessions_.erase(it);
  if (auto n = routing_by_name_.find(gone.name); n != routing_by_name_.end() && n->second == routing_id)
    routing_by_name_.erase(n);
  changed_ = true;
  if (!recorded) return std::optional<Departed>(std::move(gone));
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  if (prune)
    SWEPT_RETURN_IF_ERROR(store_.forget_agent(gone.name));
  else
    SWEPT_RETURN_IF_ERROR(store_.set_agent_state(gone.name, new_state, clock_.wall_seconds()));
  return std::optional<Departed>(std::move(gone));
}

void AgentRegistry::excuse_stall(int64_t now_ms, int64_t stall_ms) {
  for (auto& [rid, s] : sessions_) s.last_heard_ms = std::min(now_ms, s.last_heard_ms + stall_ms);
}

void AgentRegistry::sent(const std::string& routing_id, int64_t now_ms) {
  if (auto it = sessions_.find(routing_id); it != sessions_.end()) it->second.last_sent_ms = now_ms;
}

// ---- health, host faults, quarantine ----

void AgentRegistry::note_draining(AgentSession& s, bool draining) {
  // A draining agent says so before it reports any trial it stops (its
  // HEARTBEAT comes first on the connection), so dispatch stops placing
  // trials there at once and a trial requeued from it does not go straight
  // back. An agent_shutdown exit alone says nothing of the agent: its lease
  // ends trials so too, and that agent stays (protocol version 2).
  if (draining && !s.draining)
    log::info("agent " + s.name + " drains: it gets no more work; its trials come back as it stops them");
  s.draining = draining;
}

Status AgentRegistry::note_host_fault(const std::string& agent, const std::string& reason) {
  const int streak = ++host_fault_streak_[agent];
  if (options_.quarantine_after <= 0 || streak < options_.quarantine_after || quarantined_.count(agent))
    return Status::Ok();
  return quarantine(agent, std::to_string(streak) + " host faults in a row, the last: " + reason, false);
}

Status AgentRegistry::note_health(AgentSession& s, const std::optional<bool>& healthy, const std::string& health) {
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

Result<bool> AgentRegistry::release(const std::string& agent) {
  if (!quarantined_.count(agent)) return false;
  SWEPT_RETURN_IF_ERROR(lift_quarantine(agent, "released by an operator"));
  return true;
}

std::string AgentRegistry::quarantine_reason(const std::string& agent) const {
  auto q = quarantined_.find(agent);
  return q == quarantined_.end() ? std::string() : q->second.reason;
}

Status AgentRegistry::quarantine(const std::string& agent, const std::string& reason, bool from_health) {
  quarantined_[agent] = Quarantine{reason, from_health};
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_RETURN_IF_ERROR(store_.set_agent_quarantine(agent, reason));
  log::warn("agent " + agent + " quarantined: " + reason + "; it gets no work until it reports healthy again or " +
            "`swept agents --release " + agent + "`");
  changed_ = true;
  return Status::Ok();
}

Status AgentRegistry::lift_quarantine(const std::string& agent, const std::string& why) {
  if (!quarantined_.erase(agent)) return Status::Ok();
  host_fault_streak_.erase(agent);
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_RETURN_IF_ERROR(store_.set_agent_quarantine(agent, std::nullopt));
  log::info("agent " + agent + " released from quarantine: " + why);
  changed_ = true;
  return Status::Ok();
}

// ---- housekeeping ----

Status AgentRegistry::forget_old_agents() {
  const int64_t now = clock_.now_ms();
  // Once a minute, or more often when the retention is shorter (tests).
  const int64_t every_ms = std::min<int64_t>(kForgetEveryMs, options_.forget_agents_after_s * 500 + 100);
  if (last_forget_ms_ && now - *last_forget_ms_ < every_ms) return Status::Ok();
  last_forget_ms_ = now;
  // Connections whose agent went away may register again (one name each).
  std::erase_if(name_by_routing_, [&](const auto& kv) { return !sessions_.count(kv.first); });
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_ASSIGN_OR_RETURN(n, store_.forget_agents(clock_.wall_seconds() - double(options_.forget_agents_after_s)));
  if (n > 0)
    log::info("forgot " + std::to_string(n) + " agents gone for more than " +
              std::to_string(options_.forget_agents_after_s) + " s (their trials keep their names)");
  return Status::Ok();
}

}  // namespace swept::scheduler
