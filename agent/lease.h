// The agent's lease (docs/protocol.md, "Leases"): how long the agent's
// trials may run on while it hears nothing from the scheduler.
//
// REGISTER_ACK grants a lease of `lease_ms` (0 from an older scheduler: no
// lease). Every message heard from the scheduler renews it from that moment.
// If the agent hears nothing for the whole lease, the scheduler will give
// its trials to other hosts a margin after the lease's end; so before the
// end the agent stops them itself (SIGTERM `grace` before the end, SIGKILL
// at it: the grace is the trial's stop grace, at most half the lease), and
// reports them as agent_shutdown (not the trial's doing: no retry spent).
// The lease stays expired (no START_TRIAL is started, each is answered
// "not started") until the next REGISTER_ACK.
//
// Three ways the lease ends, each one function here:
//  - check(): the loop sees the stop time pass while it runs (the scheduler
//    is silent: a cut link, a dead or frozen scheduler);
//  - check_frozen(): the loop wakes past the stop time by more than the
//    keeper's slack, so it could not act meanwhile (the agent was stopped,
//    frozen in a debugger, starved); what waits on the socket is stale, so
//    it also drops the connection and registers again;
//  - check_keeper(): the lease keeper (agent/lease_keeper.h), a separate
//    process, stopped the trials while this loop could not; they are
//    reported as stopped by their lease, except those the keeper found
//    already ended by themselves, which keep their own end (issue 26).
// The keeper acts keeper_slack_ms() (a quarter heartbeat) after the agent
// would, at SIGTERM and at SIGKILL, so it only acts for an agent that could
// not, and still within the scheduler's margin (2 heartbeats after the
// agent's last message). publish() gives it the deadlines every turn.
//
// What belongs to the agent's loop (its link, its trials) is reached
// through LeaseHost, which the loop implements; the Lease owns the lease's
// length, whether it has expired, and the keeper.
// Thread safety: none; a Lease and its host live on the agent's one thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/containment.h"
#include "agent/lease_keeper.h"

namespace swept::agent {

// What the Lease asks of the agent's loop.
class LeaseHost {
 public:
  virtual ~LeaseHost() = default;
  // When the scheduler was last heard from (steady clock, ms).
  virtual int64_t last_heard_ms() const = 0;
  // The session's heartbeat interval (ms).
  virtual int heartbeat_ms() const = 0;
  // Whether REGISTER_ACK has been received on the current connection.
  virtual bool registered() const = 0;
  // Whether the agent is stopping (its own stop takes the trials down).
  virtual bool shutting_down() const = 0;
  // How many trials run now.
  virtual size_t running_trials() const = 0;
  // Reads what waits on the scheduler's socket, if one is open (it may renew
  // the lease, or end it: check_frozen() is called from there).
  virtual void read_messages(int64_t now) = 0;
  // The main pids of the trials running now (for the keeper's verdicts).
  virtual std::vector<pid_t> trial_pids() const = 0;
  // Stops every running trial (SIGTERM, SIGKILL after grace_ms) and ends the
  // ones waiting to start, each reported as agent_shutdown with `reason`;
  // but a trial that ended by itself before the stop keeps its own end.
  // `keeper_acted`: the lease keeper signalled the trials first, so a trial
  // already gone ended by its signal, unless keeper_found_ended(its pid).
  virtual void stop_trials_for_lease(const std::string& reason, int64_t grace_ms, bool keeper_acted) = 0;
  // Drops the connection (what was unread with it) and registers again.
  virtual void register_again(int64_t now) = 0;
};

class Lease {
 public:
  // `host` must outlive the Lease. `stop_grace_ms`: the agent's stop grace
  // (AgentOptions::stop_grace_ms).
  Lease(LeaseHost& host, int64_t stop_grace_ms) : host_(host), stop_grace_ms_(stop_grace_ms) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  // REGISTER_ACK: a new lease of `lease_ms` (0: none), not expired.
  void renew(int64_t lease_ms) {
    lease_ms_ = lease_ms;
    expired_ = false;
  }
  int64_t lease_ms() const { return lease_ms_; }
  // Whether the trials were stopped for the lease (until the next renew()).
  bool expired() const { return expired_; }
  // Whether a lease runs now, to be waited on: granted and not expired.
  bool running() const { return lease_ms_ > 0 && !expired_; }

  // The stop must be over (SIGKILL sent) when the lease ends: the scheduler
  // requeues the trials a margin after that.
  int64_t grace_ms() const { return std::min<int64_t>(stop_grace_ms_, lease_ms_ / 2); }
  // When the loop sends SIGTERM to its trials, given what it last heard.
  int64_t stop_at() const { return host_.last_heard_ms() + lease_ms_ - grace_ms(); }
  // How long after the loop the keeper acts.
  int64_t keeper_slack_ms() const { return host_.heartbeat_ms() / 4; }

  // Once per turn: the lease ran out while the loop was running.
  void check(int64_t now);
  // Before each message is handled: the loop could not act past its lease.
  void check_frozen(int64_t now);
  // Once per turn, before the trials are serviced: the keeper acted.
  void check_keeper(int64_t now);

  // Starts the lease keeper over `trials` (agent/lease_keeper.h). Not with
  // an injected clock (`real_clock` false: tests of the loop's timing), since
  // its deadlines are on the real monotonic clock. A keeper that cannot start
  // is logged; the agent runs without one.
  void start_keeper(const TrialsView& trials, bool real_clock);
  // A keeper that died is started again (the self-check's period).
  void restart_keeper_if_gone();
  // Once per turn: gives the keeper its deadlines and the trials' pids.
  void publish();
  // Whether the keeper, when it acted, found the trial of main pid `pid`
  // already ended by itself (LeaseKeeper::found_ended). False without a keeper.
  bool keeper_found_ended(pid_t pid) const { return keeper_ && keeper_->found_ended(pid); }

 private:
  // Stops every trial so that none runs on once the scheduler requeues it.
  void expire(const std::string& reason, int64_t now, bool keeper_acted = false);

  LeaseHost& host_;
  const int64_t stop_grace_ms_;
  int64_t lease_ms_ = 0;  // from REGISTER_ACK; kept while reconnecting
  bool expired_ = false;  // its trials were stopped; until the next ACK
  TrialsView trials_;     // what the keeper stops
  std::unique_ptr<LeaseKeeper> keeper_;  // null without one (an injected clock, or it could not start)
  uint32_t keeper_seen_ = 0;             // its interventions already acted on
};

}  // namespace swept::agent
