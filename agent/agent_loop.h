// The agent's event loop, declared for the four files that implement it; the
// rest of swept sees only agent.h. One thread, one zmq_poll over the scheduler
// socket and every trial's pipes and pidfd (docs/protocol.md is the contract).
// Its members are defined by job:
//   agent.cpp          the loop itself, waiting, the self-check, shutdown, and
//                      what the lease (agent/lease.h) asks of the loop
//   agent_link.cpp     the connection: registration, heartbeats, liveness,
//                      and the scheduler's messages about the session
//   agent_trials.cpp   the trials: START_TRIAL and STOP_TRIAL, successors
//                      waiting for a place, servicing, and each one's end
//   agent_metrics.cpp  metrics batches, their acknowledgement, and the
//                      per-trial outbox that keeps the order on the wire
//   agent_pull.cpp     pbt checkpoints pulled from (and sent to) other agents
//
// State the loop owns, and its invariants:
//  - `trials_`, keyed by (trial, attempt): a trial is *running* while it has a
//    supervisor whose process has not been reaped, and *finished* once its
//    TRIAL_EXITED record exists. A finished record stays until the scheduler
//    acknowledges it (EXIT_ACK), across any number of reconnections.
//  - Metrics leave a trial in METRICS batches numbered 1, 2, ... per attempt.
//    Every batch stays in `unacked` until the scheduler acknowledges its seq
//    (REGISTER_ACK / HEARTBEAT `acked`); after re-registering, the agent
//    re-sends what is above the acknowledged seq, then the exit record, so
//    the exit always follows its metrics on the wire.
//  - The link is Waiting (no socket, retry at `next_attempt_ms_`),
//    Registering (REGISTER sent, waiting for REGISTER_ACK) or Registered.
//    Only REGISTER is sent while Registering; everything else waits.
//  - Trials keep running whatever the link does; only a stop request
//    (STOP_TRIAL, a timeout, or the agent's own shutdown) ends them.
//  - `waiting_`: START_TRIALs with `after` whose predecessor still runs here,
//    at most one per predecessor. Not running and not in `trials_`: one
//    starts the moment its predecessor is reaped; a STOP_TRIAL or the
//    agent's shutdown ends it unstarted; a re-registration forgets it.
//  - `pulls_`: START_TRIALs whose checkpoint another agent holds, while it
//    is pulled (issue 29). Not in `trials_`: one starts when its checkpoint
//    is here and verified, or ends unstarted (launch_failed) when the pull
//    fails; a STOP_TRIAL or the agent's shutdown ends it unstarted; a
//    re-registration forgets it, as it forgets `waiting_`.
//  - TRIAL_STARTED leaves kStartedReportDelayMs after the launch, or ahead
//    of the trial's first METRICS or its TRIAL_EXITED if those come first.
// The lease (agent/lease.h) decides when the trials must stop for want of
// the scheduler, and owns the lease keeper; the loop is its LeaseHost.
//
// Thread safety: an Agent belongs to the thread that calls run_agent().
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/backoff.h"
#include "agent/checkpoint_transfer.h"
#include "agent/containment.h"
#include "agent/exit_journal.h"
#include "agent/gang_supervisor.h"
#include "agent/gpu_inventory.h"
#include "agent/launcher.h"
#include "agent/lease.h"
#include "agent/scheduler_link.h"
#include "agent/supervisor.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/protocol.h"

namespace swept::agent::loop {

namespace pr = protocol;

constexpr size_t kMaxRecordsPerBatch = 10000;  // docs/protocol.md, METRICS
// TRIAL_STARTED waits this long after the launch (docs/protocol.md), unless
// the trial's first METRICS or its TRIAL_EXITED leaves earlier: a short trial
// then costs the scheduler one wake-up and one turn instead of two.
constexpr int64_t kStartedReportDelayMs = 20;

struct TrialKey {
  int64_t trial_id = 0;
  int attempt = 0;
  auto operator<=>(const TrialKey&) const = default;
};

// "trial T attempt A", for the log.
inline std::string describe(const TrialKey& k) {
  return "trial " + std::to_string(k.trial_id) + " attempt " + std::to_string(k.attempt);
}

// One attempt of a trial that this agent was given, from its START_TRIAL
// until the scheduler acknowledges its exit: its supervisor while it runs,
// its metrics batches until acknowledged, and its exit record.
struct HostedTrial {
  std::unique_ptr<Supervision> supervisor;  // null once finished (or never started); a GangSupervisor for a gang node
  int64_t pid = 0;
  double started_at = 0;
  int64_t next_seq = 1;
  std::deque<pr::Metrics> unacked;  // oldest first
  size_t unacked_records = 0;
  int64_t sent_seq = 0;             // batches up to this seq went out on the current connection
  uint64_t dropped_records = 0;     // batches given up unacknowledged (kMaxUnackedRecordsPerTrial)
  uint64_t dropped_points_logged = 0;  // the supervisor's dropped points, as last logged
  int64_t last_batch_ms = 0;
  bool stopping_for_shutdown = false;
  bool started_reported = false;          // TRIAL_STARTED or REGISTER `running` told the scheduler
  int64_t launched_ms = 0;                // when its process was launched (TRIAL_STARTED is due after the delay)
  std::optional<pr::TrialExited> exited;  // kept until EXIT_ACK
  bool exit_sent = false;                 // on the current connection
  bool restored = false;                  // a previous agent's exit, from the exit journal
  bool workers_ended_told = false;        // a heartbeat went out at once when its workers ended (issue 30)

  bool running() const { return !exited.has_value(); }
};

enum class Link { kWaiting, kRegistering, kRegistered };

class Agent final : private LeaseHost {
 public:
  // `gpus`, `name`, `workdir` and `slots` are the options resolved by
  // run_agent(); `containment` is the mode chosen for this agent.
  Agent(const AgentOptions& options, std::vector<Gpu> gpus, std::string name, std::string workdir, int slots,
        std::unique_ptr<Containment> containment);

  // Trials from now on run as `user` (AgentOptions::run_as, resolved).
  void run_trials_as(RunAs user) {
    run_as_ = std::move(user);
    supervisor_options_.run_as = &*run_as_;
  }

  // The loop, until `stop` (or options.drain) and every trial has ended.
  // Returns run_agent()'s exit code.
  int run(const std::atomic<bool>& stop);

 private:
  // ---- agent.cpp: waiting, the self-check, shutdown ---------------------------
  void wait_for_events(int64_t now);
  void check_health_if_due(int64_t now);
  void resolve_advertised_address();
  void begin_shutdown(const std::string& reason, int exit_code);
  void finish_shutdown();
  // The main processes of trials not yet reaped (their supervisors reap them).
  std::vector<pid_t> live_leaders() const;

  // ---- agent.cpp: what the lease (agent/lease.h) asks of this loop ------------
  int64_t last_heard_ms() const override { return last_heard_ms_; }
  int heartbeat_ms() const override { return heartbeat_ms_; }
  bool registered() const override { return link_state_ == Link::kRegistered; }
  bool shutting_down() const override { return shutting_down_; }
  size_t running_trials() const override { return running_count(); }
  void read_messages(int64_t now) override;
  void register_again(int64_t now) override;
  std::vector<pid_t> trial_pids() const override;
  void stop_trials_for_lease(const std::string& reason, int64_t grace_ms, bool keeper_acted) override;

  // ---- agent_link.cpp: the connection -----------------------------------------
  int64_t liveness_ms() const { return static_cast<int64_t>(heartbeat_ms_) * liveness_; }
  void manage_link(int64_t now);
  void connect(int64_t now);
  // Closes the socket; the next try comes after the backoff, which doubles
  // after a failed try (up to the maximum) and restarts after a lost session.
  void give_up_connection(int64_t now, bool failed_try);
  void send_register(int64_t now);
  // Sends one message; false (logged) when the socket refuses it.
  bool send(const pr::Message& message);
  void heartbeat_if_due(int64_t now);
  void send_heartbeat();
  void receive_messages(int64_t now);
  void on(const pr::RegisterAck& ack, int64_t now);
  void on(const pr::RegisterReject& reject, int64_t now);
  void on(const pr::Heartbeat& hb, int64_t now);
  void on(const pr::Disconnect& d, int64_t now);
  void on(const pr::Error& e, int64_t now);
  template <typename Other>
  void on(const Other& m, int64_t) {
    log::warn(std::string("ignored a ") + pr::kind_name(pr::Message(m)) + " message: agents do not handle it");
  }

  // ---- agent_trials.cpp: the trials ---------------------------------------------
  void on(const pr::StartTrial& start, int64_t now);
  void on(const pr::StopTrial& stop, int64_t now);
  void on(const pr::ExitAck& ack, int64_t now);
  // Launches a trial now (or records why it cannot start); one whose
  // checkpoint another agent holds is pulled first, unless `pulled`.
  void start_trial(const TrialKey& key, const pr::StartTrial& start, int64_t now, bool pulled = false);
  void send_trial_started(const TrialKey& key, HostedTrial& t);
  void finish_without_start(const TrialKey& key, HostedTrial& t, pr::ExitCause cause, const std::string& reason);
  void service_trials(int64_t now);
  int waiting_index(const TrialKey& key) const;
  // `ended` has just ended: the trial waiting for its place starts now.
  void start_waiting_behind(const TrialKey& ended, int64_t now);
  void record_exit(const TrialKey& key, HostedTrial& t);
  // Exits a previous agent of this name left unacknowledged (ExitJournal):
  // finished trials again, reported on registering.
  void restore_exits(std::vector<PendingExit> left);
  size_t running_count() const;

  // ---- agent_pull.cpp: checkpoints moved between agents (issue 29) -----------
  // START_TRIAL names a checkpoint that another agent holds.
  static bool needs_pull(const pr::StartTrial& start);
  void begin_pull(const TrialKey& key, const pr::StartTrial& start, int64_t now);
  void on(const pr::CheckpointPull& pull, int64_t now);  // as the holder: answered at once
  void on(const pr::CheckpointPart& part, int64_t now);  // as the recipient
  // Pulls sent again, or given up.
  void service_pulls(int64_t now);
  // STOP_TRIAL for a trial still pulling: it ends unstarted (true), or it pulls nothing (false).
  bool stop_pull(const TrialKey& key, const std::string& reason);
  // Every pull ends: its trial ends unstarted with `cause`, or (nullopt) is just forgotten.
  void end_pulls(std::optional<pr::ExitCause> cause, const std::string& reason);

  // ---- agent_metrics.cpp: batches, acknowledgements, the outbox ---------------
  // Moves the supervisor's pending metrics and log into numbered batches.
  void make_batches(const TrialKey& key, HostedTrial& t, int64_t now);
  void bound_unacked(const TrialKey& key, HostedTrial& t);
  // Logs the metric points the supervisor had to drop since it was last
  // asked (SupervisorOptions::max_pending_metrics).
  void log_dropped_points(const TrialKey& key, HostedTrial& t);
  void apply_acks(const std::vector<pr::MetricsAck>& acks);
  // Sends, in order, the trial's TRIAL_STARTED if it is still due, the
  // batches not yet sent on this connection and then, once they are all out,
  // the exit record. Stops at the first refusal (a full queue) so that order
  // holds; the rest goes on a later turn.
  void send_outbox(const TrialKey& key, HostedTrial& t);

  AgentOptions options_;
  std::vector<Gpu> gpus_;
  std::string name_;
  std::string host_;
  int slots_;
  const Clock& clock_;
  PosixLauncher posix_launcher_;  // the default launcher_
  Launcher& launcher_;
  SupervisorOptions supervisor_options_;
  zmq::context_t own_context_;  // unused (no threads started) when the options bring one
  SchedulerLink link_;
  Link link_state_ = Link::kWaiting;
  int64_t next_attempt_ms_ = 0;  // the first try is at once
  int64_t register_sent_ms_ = 0;
  int64_t last_heard_ms_ = 0;
  int64_t last_sent_ms_ = 0;
  int64_t last_heartbeat_ms_ = 0;  // HEARTBEAT itself (workers_ended rides on it, issue 30)
  int heartbeat_ms_;
  int liveness_;
  Backoff backoff_;
  // Declared before trials_: their supervisors use it until destroyed.
  std::unique_ptr<Containment> containment_;
  std::optional<RunAs> run_as_;  // --run-as, resolved; supervisor_options_.run_as points here
  bool containment_pending_ = false;  // emptied cgroups or killed orphans still to collect
  Lease lease_;  // and its keeper, which stops trials through containment_
  std::map<TrialKey, HostedTrial> trials_;
  ExitJournal journal_;  // every exit in trials_ until its EXIT_ACK, for the next agent should this one die
  // START_TRIALs with `after`, waiting for that trial to end (at most one each).
  struct Waiting {
    TrialKey before;
    pr::StartTrial start;
  };
  std::vector<Waiting> waiting_;
  // START_TRIALs whose checkpoint is being pulled (agent_pull.cpp).
  struct Pulling {
    pr::StartTrial start;
    CheckpointFetch fetch;
    int64_t sent_ms = 0;      // the outstanding pull went out
    int64_t progress_ms = 0;  // the last part taken (or the start)
    int64_t began_ms = 0;
  };
  std::map<TrialKey, Pulling> pulls_;
  // As the holder: the transfers this agent is serving, by the puller's
  // (trial, attempt), only so that it can log each one's size and time when
  // its last byte goes out (serving keeps no other state: checkpoint_transfer.h).
  struct Serving {
    int64_t began_ms = 0;
    int64_t files = 0;
    int64_t bytes = 0;
    std::string last_path;  // the manifest's last non-empty file ("" : none)
    int64_t last_size = 0;
  };
  std::map<TrialKey, Serving> serving_;
  bool shutting_down_ = false;
  int exit_code_ = kExitOk;
  int64_t health_checked_ms_ = -1;  // never yet
  std::string health_problem_;     // "" while the self-check passes
  // Multi-node trials: the address REGISTER advertises ("" while unknown)
  // and the interface holding it ("" when none here does).
  std::string advertise_addr_;
  std::string gang_ifname_;
};

}  // namespace swept::agent::loop
