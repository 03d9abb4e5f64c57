// The agent's event loop: one thread, one zmq_poll over the scheduler socket
// and every trial's pipes and pidfd (docs/protocol.md is the contract).
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
//  - TRIAL_STARTED leaves kStartedReportDelayMs after the launch, or ahead
//    of the trial's first METRICS or its TRIAL_EXITED if those come first.
// The lease (agent/lease.h) decides when the trials must stop for want of
// the scheduler, and owns the lease keeper; the loop is its LeaseHost.
#include "agent/agent.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <climits>
#include <deque>
#include <filesystem>
#include <map>
#include <thread>
#include <utility>

#include "agent/backoff.h"
#include "agent/gpu_inventory.h"
#include "agent/lease.h"
#include "agent/scheduler_link.h"
#include "agent/supervisor.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/protocol.h"

namespace swept::agent {
namespace {

namespace pr = protocol;

constexpr size_t kMaxRecordsPerBatch = 10000;  // docs/protocol.md, METRICS
// Unacknowledged records kept per trial while the scheduler is away (the
// protocol asks for at least 65,536); older batches are dropped beyond this.
constexpr size_t kMaxUnackedRecordsPerTrial = 262144;
constexpr int64_t kStopCheckMs = 100;      // how often the stop flag is looked at
constexpr int kDisconnectLingerMs = 2000;  // time for the last messages to leave
constexpr int64_t kContainmentRetryMs = 20;  // emptied cgroups are removed, killed orphans reaped, this often
// TRIAL_STARTED waits this long after the launch (docs/protocol.md), unless
// the trial's first METRICS or its TRIAL_EXITED leaves earlier: a short trial
// then costs the scheduler one wake-up and one turn instead of two.
constexpr int64_t kStartedReportDelayMs = 20;
// The self-check of the work directory (docs/protocol.md, "Host faults and
// quarantine"): how often, and the free space below which the host is
// reported unhealthy.
constexpr int64_t kHealthCheckMs = 2000;
constexpr uint64_t kMinFreeBytes = uint64_t{64} << 20;

// Whether trials can be started under `root`: a file can be created and
// written there, and the filesystem has kMinFreeBytes free. "" when so,
// else what is wrong.
std::string workdir_problem(const std::string& root) {
  const std::string probe = root + "/.swept-health-check";
  int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot create a file in the work directory " + root + ": " + std::strerror(errno);
  ssize_t n = ::write(fd, "x", 1);
  int write_errno = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  if (n != 1) return "cannot write in the work directory " + root + ": " + std::strerror(write_errno);
  struct statvfs fs {};
  if (::statvfs(root.c_str(), &fs) == 0) {
    uint64_t free_bytes = uint64_t{fs.f_bavail} * fs.f_frsize;
    if (free_bytes < kMinFreeBytes)
      return "only " + std::to_string(free_bytes >> 20) + " MiB free in the work directory " + root + " (below " +
             std::to_string(kMinFreeBytes >> 20) + " MiB)";
  }
  return "";
}

struct TrialKey {
  int64_t trial_id = 0;
  int attempt = 0;
  auto operator<=>(const TrialKey&) const = default;
};

std::string describe(const TrialKey& k) {
  return "trial " + std::to_string(k.trial_id) + " attempt " + std::to_string(k.attempt);
}

struct TrialState {
  std::unique_ptr<TrialSupervisor> supervisor;  // null once finished (or never started)
  int64_t pid = 0;
  double started_at = 0;
  int64_t next_seq = 1;
  std::deque<pr::Metrics> unacked;  // oldest first
  size_t unacked_records = 0;
  int64_t sent_seq = 0;             // batches up to this seq went out on the current connection
  uint64_t dropped_records = 0;
  int64_t last_batch_ms = 0;
  bool stopping_for_shutdown = false;
  bool started_reported = false;          // TRIAL_STARTED or REGISTER `running` told the scheduler
  int64_t launched_ms = 0;                // when its process was launched (TRIAL_STARTED is due after the delay)
  std::optional<pr::TrialExited> exited;  // kept until EXIT_ACK
  bool exit_sent = false;                 // on the current connection

  bool running() const { return !exited.has_value(); }
};

enum class Link { kWaiting, kRegistering, kRegistered };

class Agent final : private LeaseHost {
 public:
  Agent(const AgentOptions& options, std::vector<Gpu> gpus, std::string name, std::string workdir, int slots,
        std::unique_ptr<Containment> containment)
      : options_(options),
        gpus_(std::move(gpus)),
        name_(std::move(name)),
        slots_(slots),
        clock_(options.clock ? *options.clock : SteadyClock::instance()),
        launcher_(options.launcher ? *options.launcher : posix_launcher_),
        link_(options.zmq_context ? *options.zmq_context : own_context_),
        heartbeat_ms_(options.heartbeat_interval_ms),
        liveness_(options.liveness),
        backoff_(options.reconnect_initial_ms, options.reconnect_max_ms),
        containment_(std::move(containment)),
        lease_(*this, options.stop_grace_ms) {
    supervisor_options_.containment = containment_.get();
    supervisor_options_.workdir_root = std::move(workdir);
    supervisor_options_.stop_grace_ms = options.stop_grace_ms;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    host_ = host;
  }

  // The loop: read top to bottom, one turn per wake-up.
  int run(const std::atomic<bool>& stop) {
    log::info("agent " + name_ + ": " + describe_gpus(gpus_) + ", " + std::to_string(slots_) +
              " slots, workdir " + supervisor_options_.workdir_root + ", scheduler " + options_.scheduler_endpoint);
    log::info("trial containment: " + containment_->description());
    lease_.start_keeper(containment_->view(), /*real_clock=*/!options_.clock);
    while (true) {
      int64_t now = clock_.now_ms();
      const bool drain = options_.drain && options_.drain->load();
      if ((stop.load() || drain) && !shutting_down_)
        begin_shutdown(drain ? "agent " + name_ + " draining" : "agent shutting down", kExitOk);
      if (shutting_down_ && running_count() == 0) break;

      manage_link(now);
      wait_for_events(now);
      now = clock_.now_ms();
      lease_.check_keeper(now);  // before the trials it may have ended are serviced
      receive_messages(now);  // judges first whether the loop was frozen (Lease::check_frozen)
      service_trials(now);
      lease_.check(now);
      check_health_if_due(now);
      heartbeat_if_due(now);
      containment_pending_ = containment_->collect(live_leaders());
      lease_.publish();
    }
    finish_shutdown();
    return exit_code_;
  }

 private:
  // ---- the link --------------------------------------------------------------

  int64_t liveness_ms() const { return static_cast<int64_t>(heartbeat_ms_) * liveness_; }

  void manage_link(int64_t now) {
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

  void connect(int64_t now) {
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
  void give_up_connection(int64_t now, bool failed_try) {
    link_.close(0);
    link_state_ = Link::kWaiting;
    if (!failed_try) backoff_.reset();  // a session was lost: start again from the first delay
    next_attempt_ms_ = now + backoff_.next_delay_ms();
    // The scheduler's values held for that session only.
    heartbeat_ms_ = options_.heartbeat_interval_ms;
    liveness_ = options_.liveness;
  }

  void send_register(int64_t now) {
    pr::Register reg;
    reg.name = name_;
    reg.host = host_;
    reg.session = link_.nonce();
    reg.pid = ::getpid();
    reg.slots = slots_;
    for (const Gpu& g : gpus_) {
      reg.gpus.push_back(pr::GpuInfo{g.index, g.uuid, g.name, static_cast<int64_t>(g.total_memory_bytes)});
    }
    reg.features = {"start_after"};
    check_health_if_due(now);
    reg.healthy = health_problem_.empty();
    reg.health = health_problem_;
    reg.draining = shutting_down_;
    reg.containment = containment_mode_name(containment_->mode());
    // Trials waiting for a place are not running: a new session forgets
    // them (docs/protocol.md, Reconciliation), and the scheduler requeues them.
    if (!waiting_.empty()) {
      log::info(std::to_string(waiting_.size()) + " trials waiting for a place are dropped on re-registering");
      waiting_.clear();
    }
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

  bool send(const pr::Message& message) {
    Status s = link_.send(message);
    if (!s.ok()) {
      log::warn(std::string("cannot send ") + pr::kind_name(message) + ": " + s.ToString());
      return false;
    }
    last_sent_ms_ = clock_.now_ms();
    return true;
  }

  void heartbeat_if_due(int64_t now) {
    if (now - last_sent_ms_ < heartbeat_ms_) return;
    send_heartbeat();
  }

  // Carries the self-check and whether this agent is leaving (`draining`:
  // the scheduler places nothing more here).
  void send_heartbeat() {
    if (link_state_ != Link::kRegistered) return;
    pr::Heartbeat hb;
    hb.healthy = health_problem_.empty();
    hb.health = health_problem_;
    hb.draining = shutting_down_;
    send(hb);
  }

  // The work directory's self-check, every kHealthCheckMs; its result rides
  // on every HEARTBEAT and REGISTER, so that a quarantined agent whose disk
  // was fixed gets work again.
  void check_health_if_due(int64_t now) {
    if (health_checked_ms_ >= 0 && now - health_checked_ms_ < kHealthCheckMs) return;
    health_checked_ms_ = now;
    lease_.restart_keeper_if_gone();
    std::string problem = workdir_problem(supervisor_options_.workdir_root);
    if (problem != health_problem_)
      problem.empty() ? log::info("the work directory is healthy again") : log::warn("self-check: " + problem);
    health_problem_ = std::move(problem);
  }

  // ---- waiting -----------------------------------------------------------------

  void wait_for_events(int64_t now) {
    std::vector<zmq::pollitem_t> items;
    const bool wakeable = options_.wakeup && options_.wakeup->fd() >= 0;  // items[0] when so
    if (wakeable) items.push_back({nullptr, options_.wakeup->fd(), ZMQ_POLLIN, 0});
    if (link_.is_open()) {
      items.push_back({static_cast<void*>(link_.socket()), 0, ZMQ_POLLIN, 0});
      items.push_back({link_.watch_socket(), 0, ZMQ_POLLIN, 0});
    }
    int64_t deadline = now + kStopCheckMs;
    for (auto& [key, t] : trials_) {
      if (!t.supervisor) continue;
      for (int fd : t.supervisor->poll_fds()) items.push_back({nullptr, fd, ZMQ_POLLIN, 0});
      deadline = std::min(deadline, t.supervisor->next_deadline_ms());
      if (!t.started_reported && link_state_ == Link::kRegistered)
        deadline = std::min(deadline, t.launched_ms + kStartedReportDelayMs);
      if (t.supervisor->pending_metrics() > 0 || t.supervisor->has_pending_log()) {
        deadline = std::min(deadline, t.last_batch_ms + options_.metrics_flush_ms);
      }
    }
    switch (link_state_) {
      case Link::kWaiting:
        if (!shutting_down_) deadline = std::min(deadline, next_attempt_ms_);
        break;
      case Link::kRegistering: deadline = std::min(deadline, register_sent_ms_ + liveness_ms()); break;
      case Link::kRegistered:
        deadline = std::min({deadline, last_sent_ms_ + heartbeat_ms_, last_heard_ms_ + liveness_ms()});
        break;
    }
    if (containment_pending_) deadline = std::min(deadline, now + kContainmentRetryMs);
    if (lease_.running() && running_count() > 0) deadline = std::min(deadline, lease_.stop_at());
    long timeout = static_cast<long>(std::max<int64_t>(0, deadline - now));
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(timeout));
    } catch (const zmq::error_t& e) {
      // EINTR from a signal aimed at the process: just go round again.
      if (e.num() != EINTR) log::warn(std::string("zmq_poll: ") + e.what());
    }
    if (wakeable && items[0].revents) options_.wakeup->drain();
  }

  // ---- messages from the scheduler ---------------------------------------------

  void receive_messages(int64_t now) {
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

  void on(const pr::RegisterAck& ack, int64_t now) {
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
  }

  void on(const pr::RegisterReject& reject, int64_t now) {
    if (reject.code == "duplicate_name") {
      log::error("scheduler refused the name '" + name_ + "': " + reject.message + "; retrying in " +
                 std::to_string(reject.retry_after_ms) + " ms (give each agent its own --name)");
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

  void on(const pr::Heartbeat& hb, int64_t) { apply_acks(hb.acked); }

  void on(const pr::StartTrial& start, int64_t now) {
    TrialKey key{start.trial_id, start.attempt};
    auto it = trials_.find(key);
    if (lease_.expired() && it == trials_.end()) {
      // Sent before the lease ran out and read after: the scheduler may have
      // given it to another host since. Reported as not started (no retry
      // spent); the next REGISTER_ACK renews the lease.
      finish_without_start(key, trials_[key], pr::ExitCause::kAgentShutdown,
                           "lease expired before this START_TRIAL was read: not started");
      return;
    }
    if (it != trials_.end()) {  // a repeated START_TRIAL changes nothing
      if (it->second.running()) {
        send_trial_started(key, it->second);
      } else {
        it->second.exit_sent = false;
        send_outbox(it->first, it->second);
      }
      return;
    }
    if (waiting_index(key) >= 0) return;  // already waiting for its turn
    if (start.after_trial_id > 0 && !shutting_down_) {
      // It takes the place of a trial still running here: it waits for that
      // trial's end (docs/protocol.md, START_TRIAL `after`).
      TrialKey before{start.after_trial_id, start.after_attempt};
      auto p = trials_.find(before);
      if (p != trials_.end() && p->second.supervisor) {
        bool taken = std::any_of(waiting_.begin(), waiting_.end(), [&](const Waiting& w) { return w.before == before; });
        if (!taken) {
          waiting_.push_back({before, start});
          return;
        }
        log::warn(describe(key) + " was sent to wait for " + describe(before) +
                  ", for which another trial already waits: started at once");
      }
    }
    start_trial(key, start, now);
  }

  // Launches a trial now (or records why it cannot start).
  void start_trial(const TrialKey& key, const pr::StartTrial& start, int64_t now) {
    TrialState& t = trials_[key];
    t.last_batch_ms = now;
    if (shutting_down_) {
      finish_without_start(key, t, pr::ExitCause::kAgentShutdown, "agent is shutting down");
      return;
    }
    for (int index : start.gpus) {
      bool known = std::any_of(gpus_.begin(), gpus_.end(), [&](const Gpu& g) { return g.index == index; });
      if (!known) {
        finish_without_start(key, t, pr::ExitCause::kLaunchFailed,
                             "GPU " + std::to_string(index) + " is not on agent " + name_ + " (" +
                                 describe_gpus(gpus_) + ")");
        return;
      }
    }
    TrialLaunch launch;
    launch.sweep_id = start.sweep_id;
    launch.trial_id = start.trial_id;
    launch.attempt = start.attempt;
    launch.argv = start.argv;
    launch.extra_env = start.env;
    launch.params_json = start.params.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    launch.workdir = start.workdir;
    launch.gpu_indices = start.gpus;
    launch.gpu_memory_fraction = start.gpu_fraction;
    launch.timeout_s = start.timeout_s;
    t.supervisor = TrialSupervisor::start(launch, supervisor_options_, launcher_, clock_);
    t.pid = t.supervisor->pid();
    t.started_at = t.supervisor->started_at();
    t.launched_ms = now;
    if (t.supervisor->finished()) {  // could not launch: report it as the trial's end
      log::info(describe(key) + " could not start: " + t.supervisor->result().reason);
      record_exit(key, t);
      return;
    }
    log::debug(describe(key) + " started, pid " + std::to_string(t.pid));
    // TRIAL_STARTED goes out after kStartedReportDelayMs, or before the
    // trial's first METRICS or its exit, whichever comes first.
  }

  void on(const pr::StopTrial& stop, int64_t) {
    TrialKey key{stop.trial_id, stop.attempt};
    if (int w = waiting_index(key); w >= 0) {  // never started: it ends here
      waiting_.erase(waiting_.begin() + w);
      finish_without_start(key, trials_[key], pr::ExitCause::kStopped,
                           stop.reason.empty() ? "stopped by the scheduler before it started" : stop.reason);
      return;
    }
    auto it = trials_.find(key);
    if (it == trials_.end()) {
      pr::TrialExited not_running;
      not_running.trial_id = stop.trial_id;
      not_running.attempt = stop.attempt;
      not_running.cause = pr::ExitCause::kNotRunning;
      not_running.reason = "not running on agent " + name_;
      not_running.ended_at = clock_.wall_seconds();
      if (link_state_ == Link::kRegistered) send(not_running);
      return;
    }
    TrialState& t = it->second;
    if (t.supervisor && !t.supervisor->finished()) {
      log::debug(describe(key) + ": stopping (" + stop.reason + ")");
      t.supervisor->request_stop(stop.reason.empty() ? "stopped by the scheduler" : stop.reason);
    }
    // Already finished: its TRIAL_EXITED is on its way or will be re-sent.
  }

  void on(const pr::ExitAck& ack, int64_t) {
    auto it = trials_.find(TrialKey{ack.trial_id, ack.attempt});
    if (it == trials_.end() || it->second.running()) {
      log::debug("EXIT_ACK for trial " + std::to_string(ack.trial_id) + " attempt " + std::to_string(ack.attempt) +
                 " that has not exited here: ignored");
      return;
    }
    trials_.erase(it);
  }

  void on(const pr::Disconnect& d, int64_t now) {
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

  void on(const pr::Error& e, int64_t) {
    log::warn("scheduler dropped a message of ours (" + e.code + "): " + e.message);
  }

  template <typename Other>
  void on(const Other& m, int64_t) {
    log::warn(std::string("ignored a ") + pr::kind_name(pr::Message(m)) + " message: agents do not handle it");
  }

  void apply_acks(const std::vector<pr::MetricsAck>& acks) {
    for (const auto& a : acks) {
      auto it = trials_.find(TrialKey{a.trial_id, a.attempt});
      if (it == trials_.end()) continue;
      TrialState& t = it->second;
      while (!t.unacked.empty() && t.unacked.front().seq <= a.seq) {
        t.unacked_records -= t.unacked.front().records.size();
        t.unacked.pop_front();
      }
      t.sent_seq = std::max(t.sent_seq, a.seq);
    }
  }

  // ---- trials ------------------------------------------------------------------

  void send_trial_started(const TrialKey& key, TrialState& t) {
    if (link_state_ != Link::kRegistered) return;  // announced after the REGISTER_ACK
    pr::TrialStarted started;
    started.trial_id = key.trial_id;
    started.attempt = key.attempt;
    started.pid = t.pid;
    started.started_at = t.started_at;
    started.workdir = t.supervisor->working_dir();
    for (const auto& [k, v] : t.supervisor->environment()) started.env[k] = v;
    t.started_reported = send(started);
  }

  void finish_without_start(const TrialKey& key, TrialState& t, pr::ExitCause cause, const std::string& reason) {
    pr::TrialExited e;
    e.trial_id = key.trial_id;
    e.attempt = key.attempt;
    e.cause = cause;
    e.reason = reason;
    e.ended_at = clock_.wall_seconds();
    log::info(describe(key) + " not started: " + reason);
    t.exited = e;
    send_outbox(key, t);
  }

  void service_trials(int64_t now) {
    for (auto& [key, t] : trials_) {
      if (!t.supervisor) {
        if (t.exited && !t.exit_sent) send_outbox(key, t);  // an exit a full queue held back
        continue;
      }
      t.supervisor->service();
      if (!t.started_reported && now - t.launched_ms >= kStartedReportDelayMs) send_trial_started(key, t);
      bool finished = t.supervisor->finished();
      size_t pending = t.supervisor->pending_metrics();
      bool due = now - t.last_batch_ms >= options_.metrics_flush_ms &&
                 (pending > 0 || t.supervisor->has_pending_log());
      if (finished || due || pending >= kMaxRecordsPerBatch) make_batches(key, t, now);
      if (finished) {
        record_exit(key, t);
        start_waiting_behind(key, now);
      }
    }
  }

  int waiting_index(const TrialKey& key) const {
    for (size_t i = 0; i < waiting_.size(); ++i)
      if (waiting_[i].start.trial_id == key.trial_id && waiting_[i].start.attempt == key.attempt)
        return static_cast<int>(i);
    return -1;
  }

  // `ended` has just ended: the trial waiting for its place starts now.
  void start_waiting_behind(const TrialKey& ended, int64_t now) {
    auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const Waiting& x) { return x.before == ended; });
    if (w == waiting_.end()) return;
    pr::StartTrial start = std::move(w->start);
    waiting_.erase(w);
    start_trial(TrialKey{start.trial_id, start.attempt}, start, now);
  }

  // Moves the supervisor's pending metrics and log into numbered batches.
  void make_batches(const TrialKey& key, TrialState& t, int64_t now) {
    std::vector<MetricPoint> points = t.supervisor->take_metrics();
    PendingLog::Taken log = t.supervisor->take_log();
    t.last_batch_ms = now;
    if (points.empty() && log.text.empty() && log.dropped == 0) return;
    size_t next = 0;
    do {
      pr::Metrics batch;
      batch.trial_id = key.trial_id;
      batch.attempt = key.attempt;
      batch.seq = t.next_seq++;
      size_t end = std::min(points.size(), next + kMaxRecordsPerBatch);
      for (; next < end; ++next) {
        batch.records.push_back(pr::MetricRecord{points[next].step, std::move(points[next].name), points[next].value});
      }
      if (!log.text.empty() || log.dropped) {  // the log rides on the first batch
        batch.log = std::move(log.text);
        batch.log_dropped = static_cast<int64_t>(log.dropped);
        log = {};
      }
      t.unacked_records += batch.records.size();
      t.unacked.push_back(std::move(batch));
    } while (next < points.size());
    bound_unacked(key, t);
    send_outbox(key, t);
  }

  void bound_unacked(const TrialKey& key, TrialState& t) {
    uint64_t dropped_before = t.dropped_records;
    while (t.unacked_records > kMaxUnackedRecordsPerTrial && t.unacked.size() > 1) {
      t.dropped_records += t.unacked.front().records.size();
      t.unacked_records -= t.unacked.front().records.size();
      t.unacked.pop_front();
    }
    if (t.dropped_records != dropped_before) {
      log::warn(describe(key) + ": " + std::to_string(t.dropped_records) +
                " metric records dropped so far, unacknowledged while the scheduler is away");
    }
  }

  // Sends, in order, the trial's TRIAL_STARTED if it is still due, the
  // batches not yet sent on this connection and then, once they are all out,
  // the exit record. Stops at the first refusal (a full queue) so that order
  // holds; the rest goes on a later turn.
  void send_outbox(const TrialKey& key, TrialState& t) {
    if (link_state_ != Link::kRegistered) return;
    if (t.supervisor && !t.started_reported) {
      send_trial_started(key, t);
      if (!t.started_reported) return;
    }
    for (const pr::Metrics& batch : t.unacked) {
      if (batch.seq <= t.sent_seq) continue;
      if (!send(batch)) return;
      t.sent_seq = batch.seq;
    }
    if (t.exited && !t.exit_sent) t.exit_sent = send(*t.exited);
  }

  void record_exit(const TrialKey& key, TrialState& t) {
    const TrialResult& r = t.supervisor->result();
    pr::TrialExited e;
    e.trial_id = key.trial_id;
    e.attempt = key.attempt;
    e.exit_code = r.exit_code;
    e.signal = r.signal;
    e.reason = r.reason;
    e.ended_at = r.ended_at;
    e.last_seq = t.next_seq - 1;
    e.diverged = r.diverged;
    switch (r.end) {
      case TrialEnd::kExited: e.cause = pr::ExitCause::kExited; break;
      case TrialEnd::kSignaled: e.cause = pr::ExitCause::kSignaled; break;
      case TrialEnd::kTimedOut:
        e.cause = pr::ExitCause::kTimeout;
        e.timed_out = true;
        break;
      case TrialEnd::kLaunchFailed:
        e.cause = pr::ExitCause::kLaunchFailed;
        e.host_fault = r.host_fault;  // the scheduler requeues it elsewhere, no retry spent
        break;
      case TrialEnd::kStopped:
        e.cause = t.stopping_for_shutdown ? pr::ExitCause::kAgentShutdown : pr::ExitCause::kStopped;
        break;
    }
    log::debug(describe(key) + " ended: " + pr::exit_cause_name(e.cause) + ", " + e.reason);
    if (!t.started_reported) send_trial_started(key, t);  // it comes before the exit
    t.supervisor.reset();  // reaped and closed: only the record remains
    t.exited = std::move(e);
    send_outbox(key, t);
  }

  size_t running_count() const {
    return static_cast<size_t>(std::count_if(trials_.begin(), trials_.end(), [](const auto& kv) {
      return kv.second.running();
    }));
  }

  // ---- the lease (agent/lease.h): what it asks of this loop -----------------------

  int64_t last_heard_ms() const override { return last_heard_ms_; }
  int heartbeat_ms() const override { return heartbeat_ms_; }
  bool registered() const override { return link_state_ == Link::kRegistered; }
  bool shutting_down() const override { return shutting_down_; }
  size_t running_trials() const override { return running_count(); }
  void read_messages(int64_t now) override {
    if (link_.is_open()) receive_messages(now);
  }
  void register_again(int64_t now) override { give_up_connection(now, /*failed_try=*/false); }
  void stop_trials_for_lease(const std::string& reason, int64_t grace_ms) override {
    for (auto& [key, t] : trials_) {
      if (!t.supervisor || t.supervisor->finished()) continue;
      t.stopping_for_shutdown = true;  // reported as agent_shutdown: not the trial's doing
      t.supervisor->request_stop(reason, static_cast<int>(grace_ms));
    }
    for (Waiting& w : std::exchange(waiting_, {})) {
      TrialKey key{w.start.trial_id, w.start.attempt};
      finish_without_start(key, trials_[key], pr::ExitCause::kAgentShutdown, reason);
    }
  }

  // The main processes of trials not yet reaped (their supervisors reap them).
  std::vector<pid_t> live_leaders() const {
    std::vector<pid_t> pids;
    for (const auto& [key, t] : trials_) {
      if (t.supervisor && !t.supervisor->finished() && t.supervisor->pid() > 0) pids.push_back(t.supervisor->pid());
    }
    return pids;
  }

  // ---- shutdown ----------------------------------------------------------------

  void begin_shutdown(const std::string& reason, int exit_code) {
    shutting_down_ = true;
    exit_code_ = exit_code;
    // Said before any trial it stops is reported: the scheduler sends no
    // more work here (HEARTBEAT `draining`, docs/protocol.md "Draining").
    send_heartbeat();
    size_t n = running_count();
    if (n) log::info(reason + ": stopping " + std::to_string(n) + " trials");
    for (auto& [key, t] : trials_) {
      if (!t.supervisor) continue;
      t.stopping_for_shutdown = true;
      t.supervisor->request_stop(reason);
    }
    for (Waiting& w : std::exchange(waiting_, {})) {
      TrialKey key{w.start.trial_id, w.start.attempt};
      finish_without_start(key, trials_[key], pr::ExitCause::kAgentShutdown, reason);
    }
  }

  void finish_shutdown() {
    if (link_state_ == Link::kRegistered) {
      for (auto& [key, t] : trials_) send_outbox(key, t);
      send(pr::Disconnect{"agent " + name_ + " shutting down"});
    }
    link_.close(kDisconnectLingerMs);
    log::info("agent " + name_ + " stopped");
  }

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
  int heartbeat_ms_;
  int liveness_;
  Backoff backoff_;
  // Declared before trials_: their supervisors use it until destroyed.
  std::unique_ptr<Containment> containment_;
  bool containment_pending_ = false;  // emptied cgroups or killed orphans still to collect
  Lease lease_;  // and its keeper, which stops trials through containment_
  std::map<TrialKey, TrialState> trials_;
  // START_TRIALs with `after`, waiting for that trial to end (at most one each).
  struct Waiting {
    TrialKey before;
    pr::StartTrial start;
  };
  std::vector<Waiting> waiting_;
  bool shutting_down_ = false;
  int exit_code_ = kExitOk;
  int64_t health_checked_ms_ = -1;  // never yet
  std::string health_problem_;     // "" while the self-check passes
};

}  // namespace

Status validate_options(const AgentOptions& o) {
  if (o.scheduler_endpoint.find("://") == std::string::npos) {
    return Status::InvalidArgument("--scheduler '" + o.scheduler_endpoint +
                                   "' is not a ZeroMQ endpoint; write e.g. tcp://HOST:5555");
  }
  auto spec = parse_gpu_spec(o.gpus);
  if (!spec.ok()) return spec.status();
  if (o.slots < 0) return Status::InvalidArgument("--slots must be 0 (one per CPU) or more");
  if (o.heartbeat_interval_ms <= 0) return Status::InvalidArgument("the heartbeat interval must be more than 0 ms");
  if (o.liveness < 1) return Status::InvalidArgument("liveness must be at least 1 heartbeat");
  if (o.reconnect_initial_ms <= 0 || o.reconnect_max_ms < o.reconnect_initial_ms) {
    return Status::InvalidArgument("reconnect backoff: the first delay must be more than 0 and at most the maximum");
  }
  if (o.stop_grace_ms < 0) return Status::InvalidArgument("the stop grace period must be 0 ms or more");
  if (o.metrics_flush_ms <= 0) return Status::InvalidArgument("the metrics flush interval must be more than 0 ms");
  return Status::Ok();
}

int run_agent(const AgentOptions& options, const std::atomic<bool>& stop) {
  try {
    Status valid = validate_options(options);
    if (!valid.ok()) {
      log::error(valid.message());
      return kExitUsage;
    }
    auto gpus = discover_gpus(*parse_gpu_spec(options.gpus));
    if (!gpus.ok()) {
      log::error("GPU discovery failed: " + gpus.status().ToString() + "; use --gpus none to run without GPUs");
      return kExitFailure;
    }
    // Under Slurm (or any CUDA_VISIBLE_DEVICES), `auto` offers only the GPUs
    // this process was given, not every GPU of the node.
    if (parse_gpu_spec(options.gpus)->kind == GpuSpec::Kind::kAuto) {
      if (auto allocated = gpu_allocation([](const char* v) { return static_cast<const char*>(std::getenv(v)); })) {
        auto mine = restrict_to_allocation(*gpus, *allocated);
        if (!mine.ok()) {
          log::error(mine.status().message());
          return kExitUsage;
        }
        log::info("offering the " + std::to_string(mine->size()) + " GPUs of this allocation");
        *gpus = std::move(*mine);
      }
    }
    std::string name = options.name;
    if (name.empty()) {
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      name = host[0] ? host : "agent";
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path workdir = fs::absolute(options.workdir.empty() ? "swept-work" : options.workdir, ec);
    if (!ec) fs::create_directories(workdir, ec);
    if (ec) {
      log::error("cannot create the workdir " + workdir.string() + ": " + ec.message() + "; choose another with --workdir");
      return kExitFailure;
    }
    int slots = options.slots > 0
                    ? options.slots
                    : default_cpu_slots([](const char* v) { return static_cast<const char*>(std::getenv(v)); });
    auto containment = Containment::create(options.containment);
    if (!containment.ok()) {
      log::error(containment.status().message());
      return containment.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
    }
    Agent agent(options, std::move(*gpus), name, workdir.lexically_normal().string(), slots,
                std::move(*containment));
    return agent.run(stop);
  } catch (const std::exception& e) {
    log::error(std::string("agent: internal error: ") + e.what());
    return kExitInternal;
  }
}

}  // namespace swept::agent
