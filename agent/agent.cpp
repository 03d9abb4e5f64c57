// run_agent() and the agent's event loop itself (agent/agent_loop.h holds
// the loop's state and its invariants): one turn per wake-up, the wait for
// the next event, the work directory's self-check, shutdown, and what the
// lease asks of the loop. The connection, the trials and the metrics path
// are in agent_link.cpp, agent_trials.cpp and agent_metrics.cpp.
#include "agent/agent.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "agent/agent_loop.h"
#include "agent/rendezvous.h"

namespace swept::agent {
namespace loop {
namespace {

constexpr int64_t kStopCheckMs = 100;      // how often the stop flag is looked at
constexpr int kDisconnectLingerMs = 2000;  // time for the last messages to leave
constexpr int64_t kContainmentRetryMs = 20;  // emptied cgroups are removed, killed orphans reaped, this often
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

}  // namespace

Agent::Agent(const AgentOptions& options, std::vector<Gpu> gpus, std::string name, std::string workdir, int slots,
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
int Agent::run(const std::atomic<bool>& stop) {
  log::info("agent " + name_ + ": " + describe_gpus(gpus_) + ", " + std::to_string(slots_) +
            " slots, workdir " + supervisor_options_.workdir_root + ", scheduler " + options_.scheduler_endpoint);
  log::info("trial containment: " + containment_->description());
  if (const TrialLimiter* limiter = containment_->limiter()) log::info(limiter->description());
  if (run_as_) log::info("trials run as user " + run_as_->name + " (uid " + std::to_string(run_as_->uid) + ")");
  resolve_advertised_address();
  std::vector<PendingExit> left;
  journal_ = ExitJournal::open(supervisor_options_.workdir_root, name_, clock_.wall_seconds(), &left);
  restore_exits(std::move(left));
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

// The address REGISTER advertises and its interface (agent/rendezvous.h).
// Found once; while it cannot be (the scheduler's host does not resolve
// yet), tried again before each REGISTER, which meanwhile says none.
void Agent::resolve_advertised_address() {
  if (!advertise_addr_.empty()) return;
  if (!options_.advertise_addr.empty()) {
    advertise_addr_ = options_.advertise_addr;
  } else {
    auto local = local_address_toward(options_.scheduler_endpoint);
    if (!local.ok()) {
      log::warn("no address to advertise for multi-node trials yet (" + local.status().message() +
                "); set --advertise-addr");
      return;
    }
    advertise_addr_ = *local;
  }
  gang_ifname_ = interface_holding(advertise_addr_);
  log::info("multi-node trials: advertised address " + advertise_addr_ + " (interface " +
            (gang_ifname_.empty() ? std::string("unknown: GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME not set")
                                  : gang_ifname_) +
            "), rendezvous ports " + std::to_string(options_.rendezvous_port_lo) + "-" +
            std::to_string(options_.rendezvous_port_hi));
}

// The work directory's self-check, every kHealthCheckMs; its result rides
// on every HEARTBEAT and REGISTER, so that a quarantined agent whose disk
// was fixed gets work again.
void Agent::check_health_if_due(int64_t now) {
  if (health_checked_ms_ >= 0 && now - health_checked_ms_ < kHealthCheckMs) return;
  health_checked_ms_ = now;
  lease_.restart_keeper_if_gone();
  std::string problem = workdir_problem(supervisor_options_.workdir_root);
  if (problem != health_problem_)
    problem.empty() ? log::info("the work directory is healthy again") : log::warn("self-check: " + problem);
  health_problem_ = std::move(problem);
}

void Agent::wait_for_events(int64_t now) {
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

void Agent::read_messages(int64_t now) {
  if (link_.is_open()) receive_messages(now);
}

void Agent::register_again(int64_t now) { give_up_connection(now, /*failed_try=*/false); }

std::vector<pid_t> Agent::trial_pids() const {
  std::vector<pid_t> pids;
  for (const auto& [key, t] : trials_) {
    if (t.supervisor && !t.supervisor->finished()) pids.push_back(t.supervisor->pid());
  }
  return pids;
}

void Agent::stop_trials_for_lease(const std::string& reason, int64_t grace_ms, bool keeper_acted) {
  for (auto& [key, t] : trials_) {
    if (!t.supervisor || t.supervisor->finished()) continue;
    t.stopping_for_shutdown = true;  // reported as agent_shutdown: not the trial's doing
    // A trial that ended by itself before the stop (while this loop could
    // not reap it) keeps its own end: reported as stopped, it would be
    // requeued and run to its end twice. Gone after the keeper's signal, it
    // was the keeper's doing.
    if (keeper_acted && !lease_.keeper_found_ended(t.supervisor->pid()))
      t.supervisor->stop_after_keeper(reason, static_cast<int>(grace_ms));
    else
      t.supervisor->request_stop(reason, static_cast<int>(grace_ms));
  }
  for (Waiting& w : std::exchange(waiting_, {})) {
    TrialKey key{w.start.trial_id, w.start.attempt};
    finish_without_start(key, trials_[key], pr::ExitCause::kAgentShutdown, reason);
  }
  end_pulls(pr::ExitCause::kAgentShutdown, reason);
}

// The main processes of trials not yet reaped (their supervisors reap them).
std::vector<pid_t> Agent::live_leaders() const {
  std::vector<pid_t> pids;
  for (const auto& [key, t] : trials_) {
    if (t.supervisor) {
      for (pid_t p : t.supervisor->live_pids()) pids.push_back(p);
    }
  }
  return pids;
}

void Agent::begin_shutdown(const std::string& reason, int exit_code) {
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
  end_pulls(pr::ExitCause::kAgentShutdown, reason);
}

void Agent::finish_shutdown() {
  if (link_state_ == Link::kRegistered) {
    for (auto& [key, t] : trials_) send_outbox(key, t);
    send(pr::Disconnect{"agent " + name_ + " shutting down"});
  }
  link_.close(kDisconnectLingerMs);
  log::info("agent " + name_ + " stopped");
}

}  // namespace loop

Status validate_options(const AgentOptions& o) {
  if (o.scheduler_endpoint.find("://") == std::string::npos) {
    return Status::InvalidArgument("--scheduler '" + o.scheduler_endpoint +
                                   "' is not a ZeroMQ endpoint; write e.g. tcp://HOST:5555");
  }
  auto spec = parse_gpu_spec(o.gpus);
  if (!spec.ok()) return spec.status();
  if (o.slots < 0) return Status::InvalidArgument("--slots must be 0 (one per CPU) or more");
  if (!o.run_as.empty()) {
    if (auto user = resolve_run_as(o.run_as); !user.ok()) return user.status();
  }
  if (o.heartbeat_interval_ms <= 0) return Status::InvalidArgument("the heartbeat interval must be more than 0 ms");
  if (o.liveness < 1) return Status::InvalidArgument("liveness must be at least 1 heartbeat");
  if (o.reconnect_initial_ms <= 0 || o.reconnect_max_ms < o.reconnect_initial_ms) {
    return Status::InvalidArgument("reconnect backoff: the first delay must be more than 0 and at most the maximum");
  }
  if (o.stop_grace_ms < 0) return Status::InvalidArgument("the stop grace period must be 0 ms or more");
  if (o.metrics_flush_ms <= 0) return Status::InvalidArgument("the metrics flush interval must be more than 0 ms");
  if (!o.advertise_addr.empty()) {
    if (Status ok = check_advertise_addr(o.advertise_addr); !ok.ok()) return ok;
  }
  if (o.rendezvous_port_lo < 1 || o.rendezvous_port_hi > 65535 || o.rendezvous_port_lo > o.rendezvous_port_hi) {
    return Status::InvalidArgument("--rendezvous-ports " + std::to_string(o.rendezvous_port_lo) + "-" +
                                   std::to_string(o.rendezvous_port_hi) +
                                   " must be a port range LO-HI with 1 <= LO <= HI <= 65535");
  }
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
      auto allocated = options.gpu_allocation
                           ? options.gpu_allocation
                           : gpu_allocation([](const char* v) { return static_cast<const char*>(std::getenv(v)); });
      if (allocated) {
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
    std::optional<RunAs> run_as;
    if (!options.run_as.empty()) {
      auto user = resolve_run_as(options.run_as);
      if (!user.ok()) {
        log::error(user.status().message());
        return kExitUsage;
      }
      run_as = std::move(*user);
    }
    auto containment = Containment::create(options.containment);
    if (!containment.ok()) {
      log::error(containment.status().message());
      return containment.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
    }
    (*containment)->enable_limits(options.enforce_cpus);
    loop::Agent agent(options, std::move(*gpus), name, workdir.lexically_normal().string(), slots,
                std::move(*containment));
    if (run_as) agent.run_trials_as(std::move(*run_as));
    return agent.run(stop);
  } catch (const std::exception& e) {
    log::error(std::string("agent: internal error: ") + e.what());
    return kExitInternal;
  }
}

}  // namespace swept::agent
