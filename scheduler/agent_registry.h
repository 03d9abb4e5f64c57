// AgentRegistry: the agents the scheduler knows, socket-free (docs/protocol.md,
// "Registration", "Security", "Heartbeats", "Host faults and quarantine" and
// QUERY_AGENTS). The broker owns the socket and hands it what agents say;
// the registry decides who is registered and under which name, who is silent,
// who is held back from new work, and records it in the store. Time comes from
// the injected Clock only, so liveness, stalls and forgetting are tested by
// advancing a FakeClock (agent_registry_test.cpp).
//
// What it keeps:
//  - sessions, by the connection's routing id: one connection registers one
//    agent, and a name is held by one live connection. A REGISTER of a name
//    another live connection holds is refused (duplicate_name), unless it is
//    the same process (host and pid) on a new connection: a reconnect, which
//    takes over at once;
//  - on a keyed scheduler, the key that owns each name: the first key to
//    register a name keeps it until that key is revoked;
//  - quarantine (also in the store, agents.quarantine): an agent whose host
//    failed to start quarantine_after trials in a row, or whose self-check
//    failed, gets no new work until its self-check passes again (a quarantine
//    its check caused) or an operator releases it;
//  - one live agent per key (a pool key: up to its NAME.max), so that one
//    authorized key cannot offer phantom slots under any number of names;
//  - unkeyed peers (loopback, --insecure) register at a bounded rate, and
//    their row is written only once they have sent a second message (a
//    heartbeat): a flood of raw REGISTERs fills neither memory nor the store;
//  - what it takes to forget agents: the row of an agent that leaves having
//    run nothing, ever, at once; rows of agents long gone, once a minute.
//
// Errors: Status from the store. Every write opens the store's transaction
// when none is open; committing is the broker's.
// Thread safety: one thread (the broker's loop).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/protocol.h"
#include "common/states.h"
#include "common/status.h"
#include "scheduler/zap.h"
#include "store/writer.h"

namespace swept::scheduler {

// One registered agent, on one connection.
struct AgentSession {
  std::string routing_id;
  std::string name;
  std::string host;
  std::string session;
  int64_t pid = 0;
  int slots = 0;
  std::vector<protocol::GpuInfo> gpus;
  int64_t last_heard_ms = 0;
  int64_t last_sent_ms = 0;
  bool start_after = false;     // it implements START_TRIAL `after` (REGISTER features)
  bool gangs = false;           // it implements START_TRIAL `gang` (REGISTER feature "gang")
  bool segments = false;        // it implements START_TRIAL `checkpoint` (REGISTER feature "checkpoint_segments")
  bool checkpoint_frames = false;  // it reads a CHECKPOINT_PART's bytes from a 4th frame ("checkpoint_frames")
  std::string addr;             // where other hosts reach it (REGISTER `addr`; "" : its host name)
  int ports_lo = 0, ports_hi = 0;  // its rendezvous ports (REGISTER `rendezvous_ports`)
  std::string key;              // the Z85 public key it connected with; empty without CURVE
  std::optional<bool> healthy;  // its last self-check (REGISTER / HEARTBEAT); nullopt: none reported
  // It says it drains or shuts down (REGISTER / HEARTBEAT `draining`): it is
  // leaving, so nothing more is placed on it.
  bool draining = false;
  // Its row is in the store. An unkeyed agent's is written at its first
  // message after REGISTER (record()); until then nothing is placed on it.
  bool recorded = false;
  // The row did not exist before this session: if it leaves having run
  // nothing, the row goes with it.
  bool fresh_row = false;
  bool ran_work = false;         // it started, ran or reported a trial in this session
  std::string containment;       // REGISTER `containment`, for the deferred row
  std::string health;            // REGISTER `health`, for the deferred row
  std::optional<bool> reported_healthy;  // REGISTER `healthy`, for the deferred row
};

struct AgentRegistryOptions {
  int heartbeat_ms = 1000;
  int liveness = 5;          // heartbeats missed before an agent is lost
  int quarantine_after = 3;  // host faults in a row; 0: never quarantine
  int64_t forget_agents_after_s = 7 * 86400;
  std::shared_ptr<const KeyRing> keys;  // null: no authentication
  // New sessions of unkeyed peers: a token bucket of this many per second, up
  // to the burst; beyond it REGISTER is refused (`throttled`, retry after 1 s).
  double unkeyed_registers_per_s = 32;
  int unkeyed_register_burst = 64;
};

class AgentRegistry {
 public:
  // What a REGISTER came to: admitted (session set), or refused with the
  // REGISTER_REJECT to send and the line to log (`throttled`: through the
  // broker's throttled log, since a peer can repeat it at will).
  struct Admission {
    AgentSession* session = nullptr;
    std::optional<protocol::RegisterReject> reject;
    std::string log_line;
    bool throttled = false;
  };
  // An agent that went away (remove()).
  struct Departed {
    std::string name;
    int64_t last_heard_ms = 0;
  };

  // `store` and `clock` must outlive the registry.
  AgentRegistry(store::Writer& store, const Clock& clock, AgentRegistryOptions options)
      : store_(store), clock_(clock), options_(std::move(options)) {}

  // After a restart: the quarantines on record; nobody is connected.
  Status recover();

  // ---- registration ----
  // A REGISTER on connection `routing_id`, sent with `key` (empty without
  // CURVE): validated, the name's owner and duplicates checked, the session
  // made (or taken over), the agent's row and self-check stored.
  Result<Admission> admit(const std::string& routing_id, const protocol::Register& r, const std::string& key);
  // Any valid message from a registered agent counts as a heartbeat.
  void heard(AgentSession& s) { s.last_heard_ms = clock_.now_ms(); }
  // A message after REGISTER: the deferred row of an unkeyed agent is
  // written now (once), its self-check with it; `work` (TRIAL_STARTED,
  // METRICS, TRIAL_EXITED) says it runs trials.
  Status confirmed(AgentSession& s, bool work);
  // The agent's key was revoked: the name is free for another key.
  void forget_key(const std::string& name) { key_by_name_.erase(name); }

  // ---- who there is ----
  AgentSession* by_routing(const std::string& routing_id);
  const AgentSession* by_name(const std::string& name) const;
  bool connected(const std::string& name) const { return routing_by_name_.count(name) != 0; }
  // Every session, by agent name (the order placement sees them in).
  std::vector<const AgentSession*> by_name_order() const;
  bool empty() const { return sessions_.empty(); }
  // Connections whose agent missed `liveness` heartbeats.
  std::vector<std::string> silent() const;
  // An agent went away (silent: kLost; disconnected or revoked: kGone): its
  // session ends and its state is stored. nullopt when there was none.
  Result<std::optional<Departed>> remove(const std::string& routing_id, AgentState new_state);
  // The scheduler's loop was away `stall_ms` (Broker::excuse_stall): silence
  // is counted without that time, never past now.
  void excuse_stall(int64_t now_ms, int64_t stall_ms);
  // Something was sent to the connection now.
  void sent(const std::string& routing_id, int64_t now_ms);

  // ---- health, host faults, quarantine ----
  // The agent says it drains or not (REGISTER / HEARTBEAT).
  void note_draining(AgentSession& s, bool draining);
  // The agent's self-check as REGISTER or HEARTBEAT reports it: a failed one
  // quarantines it; one that passes after a failure lifts a quarantine it caused.
  Status note_health(AgentSession& s, const std::optional<bool>& healthy, const std::string& health);
  // One more launch failure that `agent` blames on its host; quarantined at the limit.
  Status note_host_fault(const std::string& agent, const std::string& reason);
  // A trial that `agent` did start: its host works.
  void note_host_ok(const std::string& agent) { host_fault_streak_.erase(agent); }
  // RELEASE_AGENT from an operator. False when it is not quarantined.
  Result<bool> release(const std::string& agent);
  bool quarantined(const std::string& agent) const { return quarantined_.count(agent) != 0; }
  // Why it is quarantined ("" when it is not).
  std::string quarantine_reason(const std::string& agent) const;
  // Agents not taking new work (quarantined or draining).
  bool held(const AgentSession& s) const { return !s.recorded || s.draining || quarantined(s.name); }

  // ---- housekeeping ----
  // Deletes the rows of agents gone longer than forget_agents_after_s (at
  // most once a minute) and frees connections whose agent went away.
  Status forget_old_agents();
  // Whether something changed since the last call that may allow a
  // dispatch (an agent came, went, or was released).
  bool take_changed() { return std::exchange(changed_, false); }

 private:
  struct Quarantine {
    std::string reason;
    bool saw_unhealthy = false;  // its agent reported a failed self-check since: a pass lifts it
  };
  // The REGISTER's fields that placement relies on: "" when sound.
  static std::string invalid_register(const protocol::Register& r);
  // Whether `name` may be registered on `routing_id` with `key`: the refusal if not.
  std::optional<Admission> refusal(const std::string& routing_id, const protocol::Register& r, const std::string& key);
  Status quarantine(const std::string& agent, const std::string& reason, bool from_health);
  Status lift_quarantine(const std::string& agent, const std::string& why);
  Status ensure_tx();
  // Writes the session's row (and self-check) to the store.
  Status record(AgentSession& s, const std::optional<bool>& healthy);
  // Whether a new unkeyed session may be made now (takes a token if so).
  bool unkeyed_token();
  int64_t liveness_ms() const { return int64_t{options_.heartbeat_ms} * options_.liveness; }

  store::Writer& store_;
  const Clock& clock_;
  AgentRegistryOptions options_;
  std::unordered_map<std::string, AgentSession> sessions_;  // by routing id
  std::map<std::string, std::string> routing_by_name_;     // agent name -> routing id
  std::map<std::string, std::string> key_by_name_;         // agent name -> the key that holds it (CURVE only)
  // The agent name each connection registered: one connection, one agent.
  std::unordered_map<std::string, std::string> name_by_routing_;
  std::map<std::string, Quarantine> quarantined_;  // by agent name (also in the store)
  std::map<std::string, int> host_fault_streak_;   // by agent name: host faults in a row
  std::optional<int64_t> last_forget_ms_;          // the last forget_old_agents() pass
  // What a session taken over by a reconnect (same process, new connection)
  // knew of its row, for the session that replaces it (refusal() -> admit()).
  struct Inherited {
    bool recorded, fresh_row, ran_work;
  };
  std::optional<Inherited> inherited_;
  double unkeyed_tokens_ = -1;                     // the bucket (-1: full, not yet used)
  int64_t unkeyed_refill_ms_ = 0;                  // when it was last refilled
  bool changed_ = false;
};

}  // namespace swept::scheduler
