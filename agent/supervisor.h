// TrialSupervisor: the life of one trial process, from launch to its result.
//
// A supervisor prepares the trial's directories and environment, launches it
// through a Launcher, and then is driven by the agent's event loop: the loop
// polls poll_fds() (the stdout/stderr pipes and a pidfd that becomes readable
// at exit) and calls service() when any is ready or when next_deadline_ms()
// passes. service() never blocks.
//
// Directories: the scheduler names a trial's directory relative to the
// agent's workdir (START_TRIAL `workdir`, the same for every attempt):
//   <root>/<workdir>/               the working directory of every attempt;
//       swept-params.json           the trial's parameters (${args_json_file}),
//                                   written when the command names the file
//                                   (names_params_file)
//       stdout.log, stderr.log      everything the trial wrote, appended
//                                   attempt after attempt (created at the
//                                   first byte: absent when it wrote none)
//   <root>/<workdir>/checkpoints/   SWEPT_CHECKPOINT_DIR
//   <root>/<workdir>/segments/<attempt>/   SWEPT_CHECKPOINT_DIR of a pbt
//                                   member's segment, instead (checkpoint_copy.h)
//
// Invariants:
//  - the child is reaped exactly once, after every byte it wrote to its pipes
//    before exiting has been read;
//  - anything left in the trial's process group when its leader exits is
//    killed (SIGKILL), so no orphan keeps a GPU; with a Containment, so is
//    everything in the trial's container (processes that left the group);
//  - a stop sends SIGTERM to the whole group (and container), then SIGKILL
//    after the grace period; a second stop request changes nothing;
//  - memory stays bounded: at most one cut line (1 MiB) per stream, 64 KiB of
//    unsent log, and at most max_pending_metrics untaken points (newer ones
//    are dropped and counted: the agent takes points every few hundred ms,
//    so this only bites a trial printing millions of metrics at once).
// A launch failure (command not found, a bad workdir, ...) is not an error of
// start(): the supervisor is then finished at once with end kLaunchFailed,
// exit code 127 for a command that does not exist (as a shell would say) and
// 126 for one that cannot be executed.
// Thread safety: none; one supervisor belongs to one event loop.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/containment.h"
#include "common/protocol.h"
#include "agent/launcher.h"
#include "agent/output_reader.h"
#include "common/trial_dir.h"
#include "common/clock.h"

namespace swept::agent {

// What the scheduler asks the agent to run (START_TRIAL, typed).
struct TrialLaunch {
  int64_t sweep_id = 0;
  int64_t trial_id = 0;
  int attempt = 1;
  std::vector<std::string> argv;
  std::map<std::string, std::string> extra_env;  // from the scheduler
  std::string params_json = "{}";     // SWEPT_PARAMS, and swept-params.json (names_params_file)
  std::string workdir;                // relative to the agent's root; "" = sweep-S/trial-T
  std::vector<int> gpu_indices;       // CUDA_VISIBLE_DEVICES; empty: no GPU visible
  double gpu_memory_fraction = 0;     // > 0: SWEPT_GPU_MEMORY_FRACTION
  double timeout_s = 0;               // 0: no limit
  protocol::TrialLimits limits;       // set in its container (agent/limits.h); a gang's node: in GangSupervisor's
  // One process of a node of a multi-node trial (agent/gang_supervisor.h);
  // the defaults are a trial of one process.
  std::string log_prefix;      // "rank-3.": its logs are rank-3.stdout.log and rank-3.stderr.log
  bool read_metrics = true;    // false: every stdout line is log (a process whose RANK is not 0)
  bool skip_params_file = false;  // the node wrote swept-params.json once for all its processes
  // Set last, over the scheduler's env: torchrun's variables (agent/rendezvous.h).
  std::vector<std::pair<std::string, std::string>> agent_env;
  // A pbt member's segment (START_TRIAL `checkpoint`, issue 29): the
  // checkpoint directory is <root>/<workdir>/segments/<attempt>, filled with
  // a verified copy of the named ended segment's before the launch.
  std::optional<protocol::CheckpointSegment> checkpoint;
};

// How a trial's process ended (the agent maps this to docs/protocol.md's causes).
enum class TrialEnd { kExited, kSignaled, kTimedOut, kLaunchFailed, kStopped };

struct TrialResult {
  TrialEnd end = TrialEnd::kLaunchFailed;
  std::optional<int> exit_code;  // when it exited (127/126 for launch failures)
  std::optional<int> signal;     // when a signal ended it
  std::string reason;   // "exit code 1", "killed by signal 9 (SIGKILL)", "command not found: x", ...
  bool diverged = false;  // a metric line said {"diverged": true}
  // kLaunchFailed only: the host kept it from starting (the launcher's
  // Unavailable: its directory, disk, process limits), not the trial.
  bool host_fault = false;
  double started_at = 0;  // wall seconds
  double ended_at = 0;
};

struct SupervisorOptions {
  std::string workdir_root;        // absolute path
  int stop_grace_ms = 10000;       // SIGTERM -> SIGKILL
  size_t log_batch_bytes = 64 * 1024;
  size_t max_pending_metrics = 200000;
  // stdout.log and stderr.log each stop growing here (agent/README.md): a
  // trial cannot fill the agent's disk through its output.
  uint64_t max_output_log_bytes = uint64_t{1} << 30;
  // Keeps what the trial starts inside it (cgroup or subreaper sweep), so
  // that processes leaving its group (setsid, double fork) are signalled and
  // killed with it. Null: the process group only. Must outlive the supervisor.
  Containment* containment = nullptr;
  // A node of a multi-node trial runs one TrialSupervisor per process, all
  // in one container that its GangSupervisor prepares and releases. Set,
  // this supervisor launches its process in *shared_container (read at
  // start() only), signals the whole container when it stops (every process
  // of the node is being stopped then), and on its process's exit kills only
  // its own process group: the node's other processes run on. Null: the
  // supervisor prepares and releases a container of its own.
  const TrialContainer* shared_container = nullptr;
  // Non-null: trials run as this user (swept agent --run-as; agent/run_as.h),
  // their directories theirs. Must outlive the supervisor.
  const RunAs* run_as = nullptr;
};

// What the agent's loop sees of one trial while it runs: one process
// (TrialSupervisor, below) or the processes of one node of a multi-node
// trial (GangSupervisor, agent/gang_supervisor.h). Each member means what
// TrialSupervisor's says.
class Supervision {
 public:
  virtual ~Supervision() = default;
  virtual pid_t pid() const = 0;
  virtual double started_at() const = 0;
  virtual const std::string& working_dir() const = 0;
  virtual const std::vector<std::pair<std::string, std::string>>& environment() const = 0;
  // Whether TRIAL_STARTED carries environment(): the scheduler records node
  // 0's only, so a gang's other nodes leave it out (docs/protocol.md) rather
  // than make the scheduler parse ~20 variables it drops (issue 25's cost).
  virtual bool reports_environment() const { return true; }
  // The trial's processes its supervisors have not reaped yet (the
  // containment must not reap them: Containment::collect).
  virtual std::vector<pid_t> live_pids() const = 0;
  virtual std::vector<int> poll_fds() const = 0;
  virtual int64_t next_deadline_ms() const = 0;
  virtual void service() = 0;
  virtual void request_stop(const std::string& reason, int grace_ms = -1) = 0;
  // As request_stop, for a trial the lease keeper signalled while the agent
  // could not act: it ends stopped even when its process is already gone
  // (killed by the keeper, not ended by itself). A gang node: request_stop.
  virtual void stop_after_keeper(const std::string& reason, int grace_ms) { request_stop(reason, grace_ms); }
  virtual bool stopping() const = 0;
  // A node of a trial with parameter servers whose workers have all exited
  // 0 while its servers still run (GangSupervisor, issue 30); else false.
  virtual bool workers_ended() const { return false; }
  virtual bool finished() const = 0;
  virtual const TrialResult& result() const = 0;
  virtual std::vector<MetricPoint> take_metrics() = 0;
  virtual size_t pending_metrics() const = 0;
  virtual uint64_t dropped_metrics() const = 0;
  virtual PendingLog::Taken take_log() = 0;
  virtual bool has_pending_log() const = 0;
};

// A log file created at its first byte: a trial that prints nothing costs no
// file (creating files dominates the agent's cost for short trials). It stops
// growing at its cap. A write error (a full disk) loses log bytes, never the
// trial. Either way append() returns, once, a line saying so, which the
// supervisor puts in the trial's own log (its record in the database).
class LazyLogFile {
 public:
  LazyLogFile() = default;
  ~LazyLogFile() { close(); }
  LazyLogFile(const LazyLogFile&) = delete;
  LazyLogFile& operator=(const LazyLogFile&) = delete;
  void set_path(std::string path) { path_ = std::move(path); }
  void set_limit(uint64_t max_bytes) { max_bytes_ = max_bytes; }
  // Never opens the file through a symbolic link (O_NOFOLLOW): for a trial
  // that owns its directory (--run-as) and could point the agent, root, at
  // a file of root's. Off otherwise: the tests point logs at /dev/full so.
  void refuse_links() { no_follow_ = true; }
  // Returns "" or, the first time bytes are not kept, why.
  std::string append(std::string_view bytes);
  void close();

 private:
  std::string path_;
  int fd_ = -1;
  bool failed_ = false;
  uint64_t written_ = 0;
  uint64_t max_bytes_ = UINT64_MAX;
  bool no_follow_ = false;
};

class TrialSupervisor final : public Supervision {
 public:
  // Prepares and launches. Always returns a supervisor; see finished().
  static std::unique_ptr<TrialSupervisor> start(const TrialLaunch& launch, const SupervisorOptions& options,
                                                Launcher& launcher, const Clock& clock);
  ~TrialSupervisor() override;  // a still-running child is killed (SIGKILL to its group) and reaped
  TrialSupervisor(const TrialSupervisor&) = delete;
  TrialSupervisor& operator=(const TrialSupervisor&) = delete;

  const TrialLaunch& launch() const { return launch_; }
  pid_t pid() const override { return pid_; }  // the trial's pid (kept after reaping); -1 if never started
  double started_at() const override { return started_wall_; }
  const std::string& working_dir() const override { return working_dir_; }
  // Every variable set for the trial on top of the agent's environment.
  const std::vector<std::pair<std::string, std::string>>& environment() const override { return environment_; }
  // Its process until reaped.
  std::vector<pid_t> live_pids() const override;

  // Descriptors to poll for input; empty once finished.
  std::vector<int> poll_fds() const override;
  // When service() must run next even if no descriptor is ready (stop
  // escalation, timeout, exit polling without pidfd); INT64_MAX if never.
  int64_t next_deadline_ms() const override;
  // Reads what output is ready, notices exit, enforces timeout and grace.
  void service() override;

  // Stops the trial: SIGTERM to its group now, SIGKILL after the grace
  // period; the result is kStopped with `reason`. No-op once stopping or
  // finished (a timeout stops with end kTimedOut the same way).
  // `grace_ms` >= 0 replaces the options' grace for this stop (a lease that
  // must end before the scheduler requeues the trial).
  // A trial whose main process has already ended by itself, its exit not yet
  // collected (the agent was busy or frozen), keeps its own end (kExited,
  // kSignaled): reported as stopped, a trial that ran to its end would be
  // requeued and run again (issue 26).
  void request_stop(const std::string& reason, int grace_ms = -1) override;
  void stop_after_keeper(const std::string& reason, int grace_ms) override;
  bool stopping() const override { return stop_requested_at_ms_ >= 0; }

  bool finished() const override { return result_.has_value(); }
  const TrialResult& result() const override { return *result_; }  // precondition: finished()

  // Metric points not yet taken, in the order they were printed.
  std::vector<MetricPoint> take_metrics() override;
  size_t pending_metrics() const override { return pending_metrics_.size(); }
  // Points dropped so far for want of room (max_pending_metrics); the agent
  // logs the count whenever it grows.
  uint64_t dropped_metrics() const override { return dropped_metrics_; }
  // Log output (stderr, and stdout lines that are not metrics) not yet taken.
  PendingLog::Taken take_log() override { return log_.take(); }
  bool has_pending_log() const override { return !log_.empty(); }

 private:
  TrialSupervisor(const TrialLaunch& launch, const SupervisorOptions& options, const Clock& clock);
  void prepare_and_launch(Launcher& launcher);
  void fail_to_start(const Status& why);
  // Fills `r` as a launch failure for `why` and logs the reason to stderr.log.
  void set_launch_failure(TrialResult& r, const Status& why);
  void stop(const std::string& reason, bool timed_out);
  // Reads up to a budget from one pipe; returns false at end of stream.
  bool read_stream(int& fd, bool is_stdout, bool drain);
  void on_stdout_line(std::string_view line, bool overlong);
  void check_exit();
  // Reads whether the exec succeeded (see ExecWatch); called once the child
  // is reaped, when the answer is there without waiting.
  void check_exec();
  // Sends `sig` to the trial's process group, or to the trial itself when it
  // has left its group. Precondition: not yet reaped.
  void signal_trial(int sig);
  // Reaps the child (blocking: it has exited or been SIGKILLed); its wait status.
  int reap_child();
  void finish(std::optional<int> wait_status);  // nullopt: reaped by someone else
  // Kills what is left of the trial in its container and removes it (not a
  // shared container: its GangSupervisor does that).
  void release_container();
  void close_fds();

  TrialLaunch launch_;
  SupervisorOptions options_;
  const Clock& clock_;
  SpawnedChild child_;
  TrialContainer container_;
  pid_t pid_ = -1;
  std::string working_dir_;
  std::vector<std::pair<std::string, std::string>> environment_;
  LazyLogFile stdout_log_;
  LazyLogFile stderr_log_;
  LineSplitter stdout_lines_;
  MetricStepper stepper_;
  PendingLog log_;
  std::vector<MetricPoint> pending_metrics_;
  uint64_t dropped_metrics_ = 0;
  int64_t started_ms_ = 0;
  double started_wall_ = 0;
  int64_t stop_requested_at_ms_ = -1;
  int grace_ms_ = -1;  // the grace of the stop in progress
  bool killed_ = false;
  bool timed_out_ = false;
  std::string stop_reason_;
  std::string oom_reason_;  // "out of memory: ..." read when its container was released; "" otherwise
  std::optional<TrialResult> result_;
  std::optional<Status> exec_failure_;  // the exec failed after launch() returned
};

// The variables a trial gets on top of the agent's environment: SWEPT_SWEEP_ID,
// SWEPT_TRIAL_ID, SWEPT_ATTEMPT, SWEPT_PARAMS, then the scheduler's extra_env,
// then those the agent owns: CUDA_VISIBLE_DEVICES (empty when no GPU),
// CUDA_DEVICE_ORDER=PCI_BUS_ID, SWEPT_GPU_MEMORY_FRACTION (when a share),
// SWEPT_CHECKPOINT_DIR, then launch.agent_env (a gang's torchrun variables).
// A later entry wins over an earlier one of the same name.
std::vector<std::pair<std::string, std::string>> trial_environment(const TrialLaunch& launch,
                                                                   const std::string& checkpoint_dir);

// Whether the trial's command names the parameter file (an argument that
// contains protocol::kParamsFileName: ${args_json_file} expanded, or a shell command
// that reads it), so that it is written for the trial. Other trials read
// their parameters from argv or SWEPT_PARAMS and get no file: each file is
// an inode, the costliest thing a short trial makes the agent do on a busy
// ext4 (docs/benchmarks.md, "Scheduler").
bool names_params_file(const std::vector<std::string>& argv);

// Checks a scheduler-given relative workdir: not absolute, no "..", not empty
// after normalisation. InvalidArgument otherwise.
Status check_relative_workdir(const std::string& workdir);

}  // namespace swept::agent
