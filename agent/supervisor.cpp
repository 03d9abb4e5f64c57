// TrialSupervisor: see supervisor.h for the contract and the directory layout.
//
// Exit is noticed without reaping first (waitid with WNOWAIT): while the
// leader is a zombie its pid stays reserved, so killing the rest of its
// process group by -pid cannot hit an unrelated process that reused the pid.
#include "agent/supervisor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "agent/checkpoint_copy.h"
#include "common/log.h"
#include "common/protocol.h"

namespace swept::agent {
namespace {

constexpr size_t kReadChunkBytes = 64 * 1024;
// Per service() call and stream, so that one chatty trial cannot starve the
// event loop (the rest is read on the next turn; the pipe is still readable).
constexpr int kReadChunksPerService = 4;
// Without pidfd (kernels before 5.3), exit is polled this often.
constexpr int64_t kExitPollMs = 50;
// After the trial exits, its pipes hold at most their capacity (64 KiB by
// default, 1 MiB at most) of what it wrote; reading is bounded a little
// above that, in case an escaped grandchild keeps writing to them.
constexpr int kDrainChunks = 32;

std::string format_number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

std::string signal_description(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return "killed by signal " + std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
}

// Writes all of `data`; returns 0, or the errno that stopped it (ENOSPC
// for a full disk, which write(2) may also report as a short write).
int write_all(int fd, std::string_view data, uint64_t* written) {
  while (fd >= 0 && !data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENOSPC;
    *written += static_cast<uint64_t>(n);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// A pbt segment starting from its own trial's segment j: the trial's other
// segment folders on this host are no longer needed (docs/checkpoints.md,
// "Old segments"), so they go; j stays (a donor's copy of it may be due this
// round), and the new one. A failure is logged, never fatal.
void prune_own_segments(const TrialLaunch& launch, const std::filesystem::path& dir) {
  const protocol::CheckpointSegment& seg = *launch.checkpoint;
  if (!seg.from_trial_id || *seg.from_trial_id != launch.trial_id) return;
  auto removed = prune_segments(dir.parent_path().string(), seg.from_attempt, launch.attempt);
  if (!removed.ok()) log::warn("trial " + std::to_string(launch.trial_id) + ": " + removed.status().message());
  else if (*removed > 0)
    log::info("trial " + std::to_string(launch.trial_id) + " attempt " + std::to_string(launch.attempt) + ": removed " +
              std::to_string(*removed) + " old segment folders");
}

// A pbt segment's checkpoint directory `dir`: empty, or a verified copy of
// the ended segment START_TRIAL named (a sibling trial of the same sweep,
// under the layout the scheduler sends: sweep-S/trial-T). Its size and the
// time it took go to the log, for the exploit cost (issue 29). A directory
// this same attempt left (an agent restarted before it launched) is made again.
Status prepare_segment(const TrialLaunch& launch, const std::filesystem::path& working_dir,
                       const std::filesystem::path& dir, const Clock& clock) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir.parent_path(), ec);
  if (ec) return Status::Unavailable("cannot create " + dir.parent_path().string() + ": " + ec.message());
  const protocol::CheckpointSegment& seg = *launch.checkpoint;
  if (!seg.from_trial_id) return Status::Ok();  // the first segment: the launcher makes it empty
  if (!seg.from_agent.empty()) {  // pulled from that agent and verified before the launch (agent_pull.cpp)
    fs::rename(dir.string() + ".pulled", dir, ec);
    if (ec) return Status::Unavailable("the checkpoint pulled for " + dir.string() + " is missing: " + ec.message());
    prune_own_segments(launch, dir);
    return Status::Ok();
  }
  const fs::path from = working_dir.parent_path() / ("trial-" + std::to_string(*seg.from_trial_id)) / "segments" /
                        std::to_string(seg.from_attempt);
  const int64_t t0 = clock.now_us();
  auto copied = copy_checkpoint(from.string(), dir.string());
  const std::string what = "trial " + std::to_string(launch.trial_id) + " attempt " + std::to_string(launch.attempt) +
                           ": checkpoint of trial " + std::to_string(*seg.from_trial_id) + " segment " +
                           std::to_string(seg.from_attempt);
  if (!copied.ok()) return copied.status().WithContext(what + " not copied");
  log::info(what + " copied and verified: " + std::to_string(copied->files) + " files, " +
            std::to_string(copied->bytes) + " bytes in " + std::to_string((clock.now_us() - t0) / 1000) + " ms");
  prune_own_segments(launch, dir);
  return Status::Ok();
}

}  // namespace

std::string LazyLogFile::append(std::string_view bytes) {
  if (bytes.empty() || failed_ || path_.empty()) return {};
  if (fd_ < 0) {
    // Append: every attempt's output stays, one after the other.
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (no_follow_ ? O_NOFOLLOW : 0), 0644);
    if (fd_ < 0) {
      failed_ = true;
      std::string why = "cannot open " + path_ + ": " + std::strerror(errno) + "; this trial's output is not kept there";
      log::warn(why);
      return "[swept: " + why + "]\n";
    }
  }
  bool capped = false;
  if (bytes.size() > max_bytes_ - written_) {
    bytes = bytes.substr(0, static_cast<size_t>(max_bytes_ - written_));
    capped = true;
  }
  if (int err = write_all(fd_, bytes, &written_); err != 0) {
    failed_ = true;
    std::string why = "writing " + path_ + " failed after " + std::to_string(written_) + " bytes (" +
                      std::strerror(err) + "); the rest of this trial's output is not in it";
    log::warn(why);
    return "[swept: " + why + "]\n";
  }
  if (capped) {
    failed_ = true;
    std::string why = path_ + " reached its cap of " + std::to_string(max_bytes_) +
                      " bytes; the rest of this trial's output is not in it";
    log::info(why);
    return "[swept: " + why + "]\n";
  }
  return {};
}

void LazyLogFile::close() { close_fd(fd_); }

std::vector<std::pair<std::string, std::string>> trial_environment(const TrialLaunch& launch,
                                                                   const std::string& checkpoint_dir) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"SWEPT_SWEEP_ID", std::to_string(launch.sweep_id)},
      {"SWEPT_TRIAL_ID", std::to_string(launch.trial_id)},
      {"SWEPT_ATTEMPT", std::to_string(launch.attempt)},
      {"SWEPT_PARAMS", launch.params_json},
  };
  auto set = [&env](const std::string& key, std::string value) {
    for (auto& [k, v] : env) {
      if (k == key) {
        v = std::move(value);
        return;
      }
    }
    env.emplace_back(key, std::move(value));
  };
  for (const auto& [k, v] : launch.extra_env) set(k, v);

  std::string visible;
  for (size_t i = 0; i < launch.gpu_indices.size(); ++i) {
    if (i) visible += ",";
    visible += std::to_string(launch.gpu_indices[i]);
  }
  // Empty means "no GPU" to CUDA: a CPU trial must not grab a GPU by default.
  set("CUDA_VISIBLE_DEVICES", visible);
  // Our indices are NVML's (PCI bus order); make CUDA count the same way.
  set("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  if (launch.gpu_memory_fraction > 0) set("SWEPT_GPU_MEMORY_FRACTION", format_number(launch.gpu_memory_fraction));
  set("SWEPT_CHECKPOINT_DIR", checkpoint_dir);
  for (const auto& [k, v] : launch.agent_env) set(k, v);
  return env;
}

bool names_params_file(const std::vector<std::string>& argv) {
  return std::any_of(argv.begin(), argv.end(),
                     [](const std::string& arg) { return arg.find(protocol::kParamsFileName) != std::string::npos; });
}

Status check_relative_workdir(const std::string& workdir) {
  std::filesystem::path p(workdir);
  if (workdir.empty() || p.is_absolute()) {
    return Status::InvalidArgument("trial workdir '" + workdir + "' must be a non-empty relative path");
  }
  for (const auto& part : p.lexically_normal()) {
    if (part == "..") return Status::InvalidArgument("trial workdir '" + workdir + "' must not contain '..'");
  }
  if (p.lexically_normal() == ".") return Status::InvalidArgument("trial workdir '" + workdir + "' names the root itself");
  return Status::Ok();
}

TrialSupervisor::TrialSupervisor(const TrialLaunch& launch, const SupervisorOptions& options, const Clock& clock)
    : launch_(launch), options_(options), clock_(clock), log_(options.log_batch_bytes) {}

std::unique_ptr<TrialSupervisor> TrialSupervisor::start(const TrialLaunch& launch, const SupervisorOptions& options,
                                                         Launcher& launcher, const Clock& clock) {
  std::unique_ptr<TrialSupervisor> supervisor(new TrialSupervisor(launch, options, clock));
  supervisor->prepare_and_launch(launcher);
  return supervisor;
}

void TrialSupervisor::prepare_and_launch(Launcher& launcher) {
  started_ms_ = clock_.now_ms();
  started_wall_ = clock_.wall_seconds();
  namespace fs = std::filesystem;
  std::string relative = trial_relative_dir(launch_.sweep_id, launch_.trial_id, launch_.workdir);
  Status ok = check_relative_workdir(relative);
  if (!ok.ok()) return fail_to_start(ok);
  fs::path working_dir = (fs::path(options_.workdir_root) / relative).lexically_normal();
  fs::path checkpoint_dir = working_dir / "checkpoints";
  working_dir_ = working_dir.string();
  if (launch_.checkpoint) {  // a pbt segment: a directory of its own, maybe a copy of an ended segment's
    checkpoint_dir = working_dir / "segments" / std::to_string(launch_.attempt);
    Status ready = prepare_segment(launch_, working_dir, checkpoint_dir, clock_);
    if (!ready.ok()) return fail_to_start(ready);
  }
  // The trial's own directories and parameter file are made by its process
  // before the exec (LaunchSpec::make_dirs), beside the agent's loop; the
  // sweep's directory, shared by its trials, here (a cheap EEXIST after the
  // first trial).
  fs::path parent = working_dir.parent_path();
  std::error_code ec;
  if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) fs::create_directories(parent, ec);
  if (ec) {
    return fail_to_start(Status::Unavailable("cannot create the trial directory " + parent.string() + ": " +
                                             ec.message()));  // the host's fault (docs/protocol.md)
  }
  stdout_log_.set_path((working_dir / (launch_.log_prefix + "stdout.log")).string());
  stdout_log_.set_limit(options_.max_output_log_bytes);
  stderr_log_.set_limit(options_.max_output_log_bytes);
  stderr_log_.set_path((working_dir / (launch_.log_prefix + "stderr.log")).string());

  environment_ = trial_environment(launch_, checkpoint_dir.string());
  LaunchSpec spec;
  spec.argv = launch_.argv;
  spec.working_dir = working_dir_;
  spec.env_overrides = environment_;
  spec.make_dirs = {working_dir_, checkpoint_dir.string()};
  if (options_.run_as) {
    spec.run_as = options_.run_as;
    stdout_log_.refuse_links();  // the trial owns its directory now
    stderr_log_.refuse_links();
    spec.env_overrides.emplace_back("USER", options_.run_as->name);
    spec.env_overrides.emplace_back("LOGNAME", options_.run_as->name);
    spec.env_overrides.emplace_back("HOME", options_.run_as->home);
  }
  if (!launch_.skip_params_file && names_params_file(launch_.argv)) {
    spec.file_path = (working_dir / protocol::kParamsFileName).string();
    spec.file_content = launch_.params_json + "\n";
  }
  if (options_.shared_container) {  // a node's process: the node's container
    container_ = *options_.shared_container;
    spec.more_cgroup_procs = container_.limits.procs_files;
    spec.cgroup_procs = Containment::procs_file(container_);
    spec.cgroup_fd = container_.cgroup_fd;
    spec.env_overrides.emplace_back(Containment::tag_variable(), container_.tag);
  } else if (options_.containment) {
    auto container = options_.containment->prepare(launch_.sweep_id, launch_.trial_id, launch_.attempt, launch_.limits);
    if (!container.ok()) return fail_to_start(container.status());
    container_ = *container;
    spec.more_cgroup_procs = container_.limits.procs_files;
    spec.cgroup_procs = Containment::procs_file(container_);
    spec.cgroup_fd = container_.cgroup_fd;
    spec.env_overrides.emplace_back(Containment::tag_variable(), container_.tag);
  }
  if (!container_.limits.warning.empty() && !options_.shared_container) {
    // A limit the sweep asked for that this host cannot set: the trial runs
    // without it (docs/deploy.md, "Trial limits"), and its record says so.
    const std::string line = "[swept: " + container_.limits.warning + "]\n";
    log_.append(line);
    if (std::string e = stderr_log_.append(line); !e.empty()) log_.append(e);
  }
  auto child = [&] {
    // Listed before any containment of this process may reap it (Containment::ReapHold).
    Containment::ReapHold hold;
    auto launched = launcher.launch(spec);
    if (launched.ok()) Containment::supervise(launched->pid);
    return launched;
  }();
  // The descriptor served its purpose (a shared one serves the node's next
  // process: its GangSupervisor closes it).
  if (!options_.shared_container) Containment::launched(container_);
  if (!child.ok()) {
    release_container();
    return fail_to_start(child.status());
  }
  child_ = *child;
  pid_ = child_.pid;
  container_.leader = pid_;
}

void TrialSupervisor::set_launch_failure(TrialResult& r, const Status& why) {
  r.end = TrialEnd::kLaunchFailed;
  r.host_fault = why.code() == StatusCode::kUnavailable;
  // The shell's conventions: 127 not found, 126 found but not executable.
  r.exit_code.reset();
  r.signal.reset();
  if (why.code() == StatusCode::kNotFound) r.exit_code = 127;
  if (why.code() == StatusCode::kFailedPrecondition) r.exit_code = 126;
  r.reason = why.message();
  std::string line = "swept: " + why.message() + "\n";
  stderr_log_.append(line);
  log_.append(line);
}

void TrialSupervisor::fail_to_start(const Status& why) {
  // The trial's directory is normally made by its process; one that never
  // started still gets it, so that its stderr.log says why.
  if (!working_dir_.empty()) ::mkdir(working_dir_.c_str(), 0755);
  TrialResult r;
  set_launch_failure(r, why);
  r.started_at = started_wall_;
  r.ended_at = clock_.wall_seconds();
  result_ = std::move(r);
  close_fds();
}

TrialSupervisor::~TrialSupervisor() {
  if (child_.pid > 0 && !result_) {
    signal_trial(SIGKILL);
    release_container();
    reap_child();
  }
  release_container();
  close_fds();
}

void TrialSupervisor::release_container() {
  if (options_.shared_container) return;  // the node's: its GangSupervisor releases it
  if (options_.containment && (!container_.cgroup_dir.empty() || !container_.tag.empty())) {
    // Read before its cgroups go: whether the OOM killer struck (finish() says so).
    if (oom_reason_.empty()) oom_reason_ = Containment::oom_reason(container_);
    options_.containment->kill_all_and_release(container_);
    container_ = TrialContainer{};
  }
}

void TrialSupervisor::close_fds() {
  close_fd(child_.stdout_fd);
  close_fd(child_.stderr_fd);
  close_fd(child_.pidfd);
  child_.exec.reset();  // callers have reaped the child (or it never existed)
  stdout_log_.close();
  stderr_log_.close();
}

std::vector<pid_t> TrialSupervisor::live_pids() const {
  if (result_ || pid_ <= 0) return {};
  return {pid_};
}

std::vector<int> TrialSupervisor::poll_fds() const {
  std::vector<int> fds;
  if (result_) return fds;
  // Not the exec pipe: a failed exec ends the child at once (pidfd), and a
  // successful one needs no answer before then; check_exit() reads it.
  for (int fd : {child_.stdout_fd, child_.stderr_fd, child_.pidfd}) {
    if (fd >= 0) fds.push_back(fd);
  }
  return fds;
}

int64_t TrialSupervisor::next_deadline_ms() const {
  if (result_) return INT64_MAX;
  int64_t deadline = INT64_MAX;
  if (!stopping() && launch_.timeout_s > 0) {
    deadline = started_ms_ + static_cast<int64_t>(launch_.timeout_s * 1000.0);
  }
  if (stopping() && !killed_) deadline = std::min(deadline, stop_requested_at_ms_ + grace_ms_);
  if (child_.pidfd < 0) deadline = std::min(deadline, clock_.now_ms() + kExitPollMs);
  return deadline;
}

void TrialSupervisor::service() {
  if (result_) return;
  if (child_.stdout_fd >= 0) read_stream(child_.stdout_fd, true, false);
  if (child_.stderr_fd >= 0) read_stream(child_.stderr_fd, false, false);
  int64_t now = clock_.now_ms();
  if (!stopping() && launch_.timeout_s > 0 && now - started_ms_ >= static_cast<int64_t>(launch_.timeout_s * 1000.0)) {
    stop("timed out after " + format_number(launch_.timeout_s) + " s", /*timed_out=*/true);
  }
  if (stopping() && !killed_ && now - stop_requested_at_ms_ >= grace_ms_) {
    log::info("trial " + std::to_string(launch_.trial_id) + " still running " + std::to_string(grace_ms_) +
              " ms after SIGTERM: sending SIGKILL to its process group");
    signal_trial(SIGKILL);
    killed_ = true;
  }
  check_exit();
}

void TrialSupervisor::request_stop(const std::string& reason, int grace_ms) {
  if (result_ || stopping()) return;
  check_exit();  // an end that came before this request is the trial's own
  if (result_) return;
  grace_ms_ = grace_ms >= 0 ? grace_ms : options_.stop_grace_ms;
  stop(reason, false);
}

// The keeper's signal came first: whatever the exit status says now is its doing.
void TrialSupervisor::stop_after_keeper(const std::string& reason, int grace_ms) {
  if (result_ || stopping()) return;
  grace_ms_ = grace_ms >= 0 ? grace_ms : options_.stop_grace_ms;
  stop(reason, false);
}

void TrialSupervisor::stop(const std::string& reason, bool timed_out) {
  if (result_ || stopping()) return;
  stop_requested_at_ms_ = clock_.now_ms();
  if (grace_ms_ < 0) grace_ms_ = options_.stop_grace_ms;
  stop_reason_ = reason;
  timed_out_ = timed_out;
  signal_trial(SIGTERM);
}

bool TrialSupervisor::read_stream(int& fd, bool is_stdout, bool drain) {
  char buf[kReadChunkBytes];
  const int budget = drain ? kDrainChunks : kReadChunksPerService;
  for (int chunk = 0; chunk < budget; ++chunk) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) {  // end of stream, or an error that will not go away
      close_fd(fd);
      return false;
    }
    std::string_view bytes(buf, static_cast<size_t>(n));
    if (is_stdout) {
      if (std::string lost = stdout_log_.append(bytes); !lost.empty()) log_.append(lost);
      stdout_lines_.feed(bytes, [this](std::string_view line, bool overlong) { on_stdout_line(line, overlong); });
    } else {
      std::string lost = stderr_log_.append(bytes);
      log_.append(bytes);
      if (!lost.empty()) log_.append("\n" + lost);
    }
  }
  return true;
}

void TrialSupervisor::on_stdout_line(std::string_view line, bool overlong) {
  if (!overlong && launch_.read_metrics) {
    if (auto record = parse_metrics_line(line)) {
      stepper_.apply(*record, pending_metrics_);
      if (pending_metrics_.size() > options_.max_pending_metrics) {
        dropped_metrics_ += pending_metrics_.size() - options_.max_pending_metrics;
        pending_metrics_.resize(options_.max_pending_metrics);
      }
      return;
    }
  }
  log_.append(line);
  log_.append(overlong ? "\n[swept: line longer than 1 MiB, cut here; the whole line is in " + launch_.log_prefix +
                            "stdout.log]\n"
                      : std::string("\n"));
}

void TrialSupervisor::check_exec() {
  if (!child_.exec) return;
  Status outcome = child_.exec->outcome();
  if (!outcome.ok()) exec_failure_ = outcome;  // finish() says why
  child_.exec.reset();  // the child is reaped: nothing runs on the watch's memory
}

void TrialSupervisor::check_exit() {
  if (result_ || child_.pid <= 0) return;
  siginfo_t info{};
  int rc = ::waitid(P_PID, static_cast<id_t>(child_.pid), &info, WEXITED | WNOHANG | WNOWAIT);
  if (rc != 0 && errno == ECHILD) {
    // Someone else reaped it (a process that sets SIGCHLD to SIG_IGN reaps
    // automatically): it is gone, its exit status with it.
    if (child_.stdout_fd >= 0) read_stream(child_.stdout_fd, true, /*drain=*/true);
    if (child_.stderr_fd >= 0) read_stream(child_.stderr_fd, false, /*drain=*/true);
    check_exec();
    release_container();
    {
      Containment::ReapHold hold;
      Containment::unsupervise(child_.pid);
    }
    return finish(std::nullopt);
  }
  if (rc != 0 || info.si_pid == 0) return;  // still running
  // The leader is a zombie: its pid (= the group id) cannot be reused yet.
  ::kill(-child_.pid, SIGKILL);
  release_container();  // and whatever left the group (setsid, double fork)
  if (child_.stdout_fd >= 0) read_stream(child_.stdout_fd, true, /*drain=*/true);
  if (child_.stderr_fd >= 0) read_stream(child_.stderr_fd, false, /*drain=*/true);
  int status = reap_child();
  check_exec();  // the child is gone: its end of the pipe is closed, this does not block
  finish(status);
}

int TrialSupervisor::reap_child() {
  // With its pid taken off the process-wide list in the same hold: no new
  // process that reuses the pid can be listed in between and then dropped.
  Containment::ReapHold hold;
  int status = 0;
  while (::waitpid(child_.pid, &status, 0) < 0 && errno == EINTR) {
  }
  Containment::unsupervise(child_.pid);
  return status;
}

void TrialSupervisor::finish(std::optional<int> wait_status) {
  stdout_lines_.finish([this](std::string_view line, bool overlong) { on_stdout_line(line, overlong); });
  TrialResult r;
  r.started_at = started_wall_;
  r.ended_at = clock_.wall_seconds();
  r.diverged = stepper_.saw_diverged();
  std::string how;
  if (!wait_status) {
    r.signal = 0;
    how = "exit status lost: the process was reaped outside the agent (is SIGCHLD ignored?)";
  } else if (WIFEXITED(*wait_status)) {
    r.exit_code = WEXITSTATUS(*wait_status);
    how = "exit code " + std::to_string(*r.exit_code);
  } else {
    r.signal = WIFSIGNALED(*wait_status) ? WTERMSIG(*wait_status) : 0;
    how = signal_description(*r.signal);
  }
  std::string forced = killed_ ? " (still running after SIGTERM and the grace period: killed)" : "";
  // Killed while stopping, by someone else (the lease keeper, whose SIGKILL
  // can come before ours): say so too.
  if (!killed_ && stopping() && r.signal == SIGKILL) forced = " (" + how + ")";
  if (exec_failure_) {
    set_launch_failure(r, *exec_failure_);  // as if found before the clone
  } else if (timed_out_) {
    r.end = TrialEnd::kTimedOut;
    r.reason = stop_reason_ + forced;
  } else if (stopping()) {
    r.end = TrialEnd::kStopped;
    r.reason = stop_reason_ + forced;
  } else {
    r.end = r.exit_code ? TrialEnd::kExited : TrialEnd::kSignaled;
    r.reason = how + (r.diverged ? " (diverged)" : "");
    // The OOM killer may have struck the trial's main process or a helper
    // (a data loader) whose loss made it fail: either way the cause is this.
    // (A node's shared container is still there; a trial's own was read at its release.)
    const std::string oom = oom_reason_.empty() ? Containment::oom_reason(container_) : oom_reason_;
    if (!oom.empty()) r.reason = oom + " (" + r.reason + ")";
  }
  result_ = std::move(r);
  child_.pid = -1;  // reaped: never signal it again
  close_fds();
}

void TrialSupervisor::signal_trial(int sig) {
  // A trial that left its group (setsid, setpgid) is still reached directly.
  if (::kill(-child_.pid, sig) != 0) ::kill(child_.pid, sig);
  // And every process it started that left the group (agent/containment.h).
  if (options_.containment) options_.containment->signal_all(container_, sig);
}

std::vector<MetricPoint> TrialSupervisor::take_metrics() {
  std::vector<MetricPoint> out;
  out.swap(pending_metrics_);
  return out;
}

}  // namespace swept::agent
