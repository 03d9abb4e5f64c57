// Broker, the agents' housekeeping: host faults and quarantine, and the
// forgetting of agents that went away (docs/protocol.md, "Host faults and
// quarantine" and QUERY_AGENTS). See broker.h.
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
#include <string>

#include "common/log.h"
#include "scheduler/broker.h"

namespace swept::scheduler {

using namespace swept::protocol;

namespace {
// How often the rows of long-gone agents are looked for.
constexpr int64_t kForgetEveryMs = 60000;
}  // namespace

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
