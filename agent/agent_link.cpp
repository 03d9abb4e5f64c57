// The agent's connection to the scheduler (agent/agent_loop.h): opening it,
// REGISTER and its answers, heartbeats both ways, the scheduler's silence
// judged against liveness, and reconnecting with backoff. Trials run on
// whatever the link does; only the lease (agent/lease.h) ends them.
#include <unistd.h>

#include <algorithm>
#include <variant>

#include "agent/agent_loop.h"

namespace swept::agent::loop {

namespace {

// REGISTER `containment` (docs/protocol.md): the mode, then the limits this
// agent sets in each trial's cgroup, e.g. "cgroup; limits memory,pids", or
// "subreaper; no limits" where the host offers none.
std::string containment_value(const Containment& c) {
  std::string limits = c.limiter() ? c.limiter()->enforced() : "";
  return std::string(containment_mode_name(c.mode())) + (limits.empty() ? "; no limits" : "; limits " + limits);
}

}  // namespace

void Agent::manage_link(int64_t now) {
  if (link_.is_open()) {
    if (auto failed = link_.handshake_failure()) {
      log::error("cannot connect to " + options_.scheduler_endpoint + ": " + *failed);
      link_.close(0);
      link_state_ = Link::kWaiting;
      if (!shutting_down_) begin_shutdown("the scheduler cannot be reached securely", kExitFailure);
      return;
    }
  }
  switch (link_state_) {
    case Link::kWaiting:
      if (now >= next_attempt_ms_ && !shutting_down_) connect(now);
      break;
    case Link::kRegistering:
      if (now - register_sent_ms_ >= liveness_ms()) receive_messages(now);  // an ACK may wait unread
      if (link_state_ == Link::kRegistering && now - register_sent_ms_ >= liveness_ms()) {
        log::warn("no REGISTER_ACK from " + options_.scheduler_endpoint + " within " +
                  std::to_string(liveness_ms()) + " ms; retrying");
        give_up_connection(now, /*failed_try=*/true);
      }
      break;
    case Link::kRegistered:
      // A long turn (a burst of output) must not pass for silence: what
      // arrived meanwhile counts, so read it before judging.
      if (now - last_heard_ms_ >= liveness_ms()) receive_messages(now);
      if (link_state_ == Link::kRegistered && now - last_heard_ms_ >= liveness_ms()) {
        log::warn("scheduler silent for " + std::to_string(now - last_heard_ms_) +
                  " ms: reconnecting (trials keep running)");
        give_up_connection(now, /*failed_try=*/false);
      }
      break;
  }
}

void Agent::connect(int64_t now) {
  Status s = link_.open(options_.scheduler_endpoint, name_, options_.keys);
  if (!s.ok()) {
    log::error("cannot open a connection to " + options_.scheduler_endpoint + ": " + s.ToString());
    give_up_connection(now, true);
    return;
  }
  send_register(now);
}

// Closes the socket; the next try comes after the backoff, which doubles
// after a failed try (up to the maximum) and restarts after a lost session.
void Agent::give_up_connection(int64_t now, bool failed_try) {
  link_.close(0);
  link_state_ = Link::kWaiting;
  if (!failed_try) backoff_.reset();  // a session was lost: start again from the first delay
  next_attempt_ms_ = now + backoff_.next_delay_ms();
  // The scheduler's values held for that session only.
  heartbeat_ms_ = options_.heartbeat_interval_ms;
  liveness_ = options_.liveness;
}

void Agent::send_register(int64_t now) {
  pr::Register reg;
  reg.name = name_;
  reg.host = host_;
  reg.session = link_.nonce();
  reg.pid = ::getpid();
  reg.slots = slots_;
  for (const Gpu& g : gpus_) {
    reg.gpus.push_back(pr::GpuInfo{g.index, g.uuid, g.name, static_cast<int64_t>(g.total_memory_bytes)});
  }
  reg.features = {"start_after", pr::kFeatureGang, pr::kFeatureCheckpointSegments, pr::kFeatureCheckpointFrames};
  resolve_advertised_address();  // at once when known already
  reg.addr = advertise_addr_;
  reg.ports_lo = options_.rendezvous_port_lo;
  reg.ports_hi = options_.rendezvous_port_hi;
  check_health_if_due(now);
  reg.healthy = health_problem_.empty();
  reg.health = health_problem_;
  reg.draining = shutting_down_;
  reg.containment = containment_value(*containment_);
  // Trials waiting for a place are not running: a new session forgets
  // them (docs/protocol.md, Reconciliation), and the scheduler requeues them.
  if (!waiting_.empty()) {
    log::info(std::to_string(waiting_.size()) + " trials waiting for a place are dropped on re-registering");
    waiting_.clear();
  }
  end_pulls(std::nullopt, "");  // likewise the trials whose checkpoint was being pulled
  for (auto& [key, t] : trials_) {
    if (t.running()) {
      reg.running.push_back(pr::RunningTrial{key.trial_id, key.attempt, t.pid, t.started_at});
      t.started_reported = true;
    } else {
      reg.finished.push_back(*t.exited);
    }
    // Nothing counts as sent on the new session until the ack says what arrived.
    t.sent_seq = 0;
    t.exit_sent = false;
  }
  link_state_ = Link::kRegistering;
  register_sent_ms_ = now;
  send(reg);
}

bool Agent::send(const pr::Message& message) {
  Status s = link_.send(message);
  if (!s.ok()) {
    log::warn(std::string("cannot send ") + pr::kind_name(message) + ": " + s.ToString());
    return false;
  }
  last_sent_ms_ = clock_.now_ms();
  return true;
}

void Agent::heartbeat_if_due(int64_t now) {
  // A node whose workers have ended waits for the scheduler's stop: its
  // heartbeat goes out on time even while other messages keep the link busy.
  const bool owed = now - last_heartbeat_ms_ >= heartbeat_ms_ &&
                    std::any_of(trials_.begin(), trials_.end(), [](const auto& kv) {
                      return kv.second.supervisor && kv.second.supervisor->workers_ended();
                    });
  if (now - last_sent_ms_ < heartbeat_ms_ && !owed) return;
  send_heartbeat();
}

// Carries the self-check and whether this agent is leaving (`draining`:
// the scheduler places nothing more here).
void Agent::send_heartbeat() {
  if (link_state_ != Link::kRegistered) return;
  pr::Heartbeat hb;
  hb.healthy = health_problem_.empty();
  hb.health = health_problem_;
  hb.draining = shutting_down_;
  for (const auto& [key, t] : trials_)
    if (t.supervisor && t.supervisor->workers_ended()) hb.workers_ended.push_back({key.trial_id, key.attempt});
  last_heartbeat_ms_ = clock_.now_ms();
  send(hb);
}

void Agent::receive_messages(int64_t now) {
  // The loop may have been frozen anywhere, even between two messages:
  // each is judged fresh or stale by the clock when it is handled.
  lease_.check_frozen(clock_.now_ms());
  if (!link_.is_open()) return;
  auto received = link_.receive_all();
  if (!received.ok()) {
    log::warn("receiving from the scheduler: " + received.status().ToString());
    return;
  }
  for (const pr::Decoded& d : *received) {
    lease_.check_frozen(clock_.now_ms());
    if (!link_.is_open()) break;  // what is left was read before a freeze: stale
    if (!d.ok()) {
      // Not a heartbeat: only well-formed messages prove the scheduler alive.
      log::warn("dropped a message from the scheduler (" + d.kind + "): " + d.error);
      if (d.failure == pr::DecodeFailure::kVersion && d.kind == "REGISTER_REJECT" && !shutting_down_) {
        // A scheduler of another swept version refused us: retrying cannot help.
        log::error("the scheduler at " + options_.scheduler_endpoint + " speaks another protocol version and " +
                   "refused this agent: run the same swept version on both sides");
        link_.close(0);
        link_state_ = Link::kWaiting;
        begin_shutdown("agent rejected by the scheduler", kExitFailure);
        break;
      }
      continue;
    }
    last_heard_ms_ = now;
    std::visit([&](const auto& m) { on(m, now); }, *d.message);
    if (!link_.is_open()) break;  // a handler gave up the connection
  }
}

void Agent::on(const pr::RegisterAck& ack, int64_t now) {
  if (link_state_ == Link::kRegistered) log::info("scheduler re-acknowledged the registration");
  link_state_ = Link::kRegistered;
  backoff_.reset();
  if (ack.heartbeat_ms > 0) heartbeat_ms_ = ack.heartbeat_ms;
  if (ack.liveness > 0) liveness_ = ack.liveness;
  lease_.renew(ack.lease_ms);  // 0: an older scheduler, no lease
  last_heard_ms_ = now;
  log::info("registered with " + options_.scheduler_endpoint + " as " + name_ + " (session " + link_.nonce() +
            ", " + std::to_string(running_count()) + " trials running)");
  apply_acks(ack.acked);
  // Re-send, per trial, what the scheduler has not stored, then the exit.
  // A trial started after the REGISTER left (a START_TRIAL that crossed
  // it) is announced now; the scheduler stops it if it gave it up.
  for (auto& [key, t] : trials_) {
    send_outbox(key, t);
  }
  // An unkeyed scheduler records an agent at its first message after
  // REGISTER (docs/protocol.md, "One agent per key"): say so now, not a
  // heartbeat later, when there was nothing else to say.
  if (trials_.empty()) send_heartbeat();
}

void Agent::on(const pr::RegisterReject& reject, int64_t now) {
  // Refusals that may pass: a name or key still held by a predecessor that
  // is going away, or an unkeyed scheduler's registration rate.
  if (reject.code == "duplicate_name" || reject.code == "key_in_use" || reject.code == "throttled") {
    const std::string advice = reject.code == "duplicate_name" ? " (give each agent its own --name)"
                               : reject.code == "key_in_use"   ? " (give each agent its own key)"
                                                               : "";
    (reject.code == "throttled" ? log::warn : log::error)(
        "scheduler refused this agent (" + reject.code + "): " + reject.message + "; retrying in " +
        std::to_string(std::max<int64_t>(reject.retry_after_ms, options_.reconnect_initial_ms)) + " ms" + advice);
    link_.close(0);
    link_state_ = Link::kWaiting;
    next_attempt_ms_ = now + std::max<int64_t>(reject.retry_after_ms, options_.reconnect_initial_ms);
    return;
  }
  log::error("scheduler rejected this agent (" + reject.code + "): " + reject.message);
  link_.close(0);
  link_state_ = Link::kWaiting;
  begin_shutdown("agent rejected by the scheduler", kExitFailure);
}

void Agent::on(const pr::Heartbeat& hb, int64_t) { apply_acks(hb.acked); }

void Agent::on(const pr::Disconnect& d, int64_t now) {
  // One REGISTER outstanding at a time. A restarted scheduler answers each
  // message queued on the old connection (heartbeats, metrics) with its own
  // DISCONNECT; re-registering for every one of them made 8-13 REGISTERs
  // per restart (issue 15). The REGISTER already sent answers them all.
  if (link_state_ == Link::kRegistering) {
    log::debug("scheduler asks to register again (" + d.reason + "): a REGISTER is already on its way");
    return;
  }
  log::info("scheduler asks to register again (" + d.reason + ")");
  if (!shutting_down_ || running_count() > 0) send_register(now);
}

void Agent::on(const pr::Error& e, int64_t) {
  log::warn("scheduler dropped a message of ours (" + e.code + "): " + e.message);
}

}  // namespace swept::agent::loop
