// The agent's lease: see lease.h for when it ends and what each end does.
#include "agent/lease.h"

#include <algorithm>
#include <climits>

#include "common/log.h"

namespace swept::agent {

void Lease::check(int64_t now) {
  if (lease_ms_ <= 0 || expired_ || host_.shutting_down() || now < stop_at()) return;
  host_.read_messages(now);  // what arrived during a long turn counts
  if (expired_ || now < stop_at()) return;
  expire("lease expired: no word from the scheduler for " + std::to_string(now - host_.last_heard_ms()) +
             " ms (lease " + std::to_string(lease_ms_) + " ms)",
         now);
}

void Lease::start_keeper(const TrialsView& trials, bool real_clock) {
  trials_ = trials;
  if (!real_clock) return;
  auto keeper = LeaseKeeper::start(trials_);
  if (!keeper.ok()) {
    log::warn(keeper.status().message() + "; a frozen agent's trials will not be stopped at the end of its lease");
    return;
  }
  keeper_ = std::move(*keeper);
  keeper_seen_ = 0;
  log::info("lease keeper: pid " + std::to_string(keeper_->pid()));
}

void Lease::restart_keeper_if_gone() {
  if (!keeper_ || keeper_->alive()) return;
  log::warn("the lease keeper (pid " + std::to_string(keeper_->pid()) + ") is gone: starting another");
  keeper_.reset();
  start_keeper(trials_, /*real_clock=*/true);
  publish();
}

void Lease::publish() {
  if (!keeper_) return;
  int64_t term_at = INT64_MAX, kill_at = INT64_MAX;
  if (lease_ms_ > 0) {
    kill_at = host_.last_heard_ms() + lease_ms_ + keeper_slack_ms();
    // Once this loop has stopped the trials itself, the keeper only makes
    // sure of the SIGKILL (the loop could be frozen during the grace).
    if (!expired_) term_at = stop_at() + keeper_slack_ms();
  }
  keeper_->set_deadlines(term_at, kill_at);
  keeper_->set_trial_pids(host_.trial_pids());
}

// The keeper stopped trials while this loop could not act: they ended by
// their lease, and are reported so (cause agent_shutdown), as if this loop
// had stopped them.
void Lease::check_keeper(int64_t now) {
  if (!keeper_) return;
  uint32_t seen = keeper_->interventions();
  if (seen == keeper_seen_) return;
  keeper_seen_ = seen;
  if (expired_) return;  // this loop had stopped them already; the keeper made sure
  // (What arrived while it was frozen may have been read already: the
  // silence is not measured here.)
  expire("lease expired (lease " + std::to_string(lease_ms_) + " ms): stopped by the lease keeper while the "
         "agent could not act (stopped or frozen)", now, /*keeper_acted=*/true);
}

// A loop that wakes past its lease's stop time by more than the keeper's
// slack could not act meanwhile (stopped, frozen in a debugger, starved):
// its wait is capped at that time (the loop's wait_for_events). What waits
// unread on the socket is then stale: heartbeats that would renew a lease
// already over, START_TRIALs the scheduler has since given up and requeued.
// The lease is over (as the keeper judged, if trials ran), and the agent
// registers again: only the new REGISTER_ACK renews it.
void Lease::check_frozen(int64_t now) {
  if (lease_ms_ <= 0 || !host_.registered()) return;
  if (now <= stop_at() + keeper_slack_ms()) return;
  check_keeper(now);  // what the keeper did meanwhile is reported as its doing
  if (!expired_) {
    expire("lease expired: this agent could not act for " + std::to_string(now - host_.last_heard_ms()) +
               " ms (lease " + std::to_string(lease_ms_) + " ms; stopped, frozen or starved)",
           now);
  }
  log::warn("what the scheduler sent while this agent could not act is stale: registering again");
  host_.register_again(now);
}

// The SIGKILL comes at the lease's end, however late this loop noticed (a
// busy host): the grace runs to that end, not from now.
void Lease::expire(const std::string& reason, int64_t now, bool keeper_acted) {
  expired_ = true;
  const int64_t grace = std::clamp<int64_t>(host_.last_heard_ms() + lease_ms_ - now, 0, grace_ms());
  size_t n = host_.running_trials();
  if (n) {
    log::warn(reason + ": stopping " + std::to_string(n) + " trials, so that none runs on two hosts once the "
              "scheduler requeues them");
  }
  host_.stop_trials_for_lease(reason, grace, keeper_acted);
}

}  // namespace swept::agent
