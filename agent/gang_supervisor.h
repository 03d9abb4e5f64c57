// GangSupervisor: one node of a multi-node (or multi-process) trial, as
// START_TRIAL `gang` asks (docs/protocol.md; issue 25): procs_per_node
// processes (local ranks 0 .. P-1) that the agent runs and reports as one
// trial, the way torchrun runs a node's workers.
//
// Each process has a TrialSupervisor of its own (its pipes, its process
// group, its exit), with torchrun's environment (agent/rendezvous.h) and
// every one of the node's GPUs in CUDA_VISIBLE_DEVICES. This class holds what
// is the node's:
//  - the directory: `<root>/<workdir>/` and its `checkpoints/`, made here once
//    with swept-params.json (when the command names it) before any process
//    starts, so that no process reads the file while another rewrites it;
//  - the logs: process RANK R writes rank-R.stdout.log and rank-R.stderr.log;
//    only the process with RANK 0 has its stdout read for metric lines (on
//    other nodes none does), every process's output is the trial's log;
//  - the container (agent/containment.h): one cgroup (or subreaper tag) for
//    all the node's processes, so that a stop, a timeout, the agent's
//    shutdown or the lease keeper reach every process tree of the node, and
//    what is left in it is killed once the last process has ended;
//  - node 0's check that master_port can be bound, before anything starts;
//    when it cannot, the node ends at once: kLaunchFailed, host_fault, a
//    reason naming the port (the scheduler requeues it with another port);
//  - the end: when a process fails (exits non-zero, is killed by a signal, or
//    cannot start), the others are stopped (SIGTERM, SIGKILL after the
//    grace period), as torchrun does, and the node's result is that first
//    failure's, its reason prefixed "rank R: "; when every process exits 0,
//    exit 0. A stop or timeout of the node is reported as such.
// Parameter servers (issue 30; START_TRIAL gang's ps_node): the servers
// placed on this node run beside its workers (a node past the workers' nodes
// runs servers only), each with TF_CONFIG and SWEPT_ROLE=ps, its logs
// ps-J.stdout.log and ps-J.stderr.log, its stdout never read for metrics.
// A server's failure fails the node as a worker's does. Once every worker of
// the node has exited 0 while servers still run, workers_ended() says so (the
// agent tells the scheduler); the scheduler's stop with the reason
// protocol::kWorkersEndedStop then stops the servers and the node ends with
// exit 0. Any other stop is a stop.
// pid() and environment() are the first process's (what TRIAL_STARTED reports;
// node 0 alone reports the environment).
//
// Thread safety: none; one supervisor belongs to one event loop.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/rendezvous.h"
#include "agent/supervisor.h"
#include "common/protocol.h"

namespace swept::agent {

class GangSupervisor final : public Supervision {
 public:
  // Prepares the node and launches its processes. Always returns a
  // supervisor; a failure to start is its result (see finished()).
  // `ifname`: GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME for the processes
  // ("" when none is known; rendezvous.h's gang_environment decides).
  // launch.timeout_s is the node's, counted from this call.
  static std::unique_ptr<GangSupervisor> start(const TrialLaunch& launch, const protocol::Gang& gang,
                                               const std::string& ifname, const SupervisorOptions& options,
                                               Launcher& launcher, const Clock& clock);
  // Processes still running are killed (SIGKILL) and reaped, and the
  // container released.
  ~GangSupervisor() override;
  GangSupervisor(const GangSupervisor&) = delete;
  GangSupervisor& operator=(const GangSupervisor&) = delete;

  pid_t pid() const override;
  double started_at() const override { return started_wall_; }
  const std::string& working_dir() const override { return working_dir_; }
  const std::vector<std::pair<std::string, std::string>>& environment() const override;
  bool reports_environment() const override { return gang_.node_rank == 0; }
  std::vector<pid_t> live_pids() const override;
  std::vector<int> poll_fds() const override;
  int64_t next_deadline_ms() const override;
  void service() override;
  void request_stop(const std::string& reason, int grace_ms = -1) override;
  bool stopping() const override { return stop_requested_ || first_failure_ >= 0; }
  bool workers_ended() const override;
  bool finished() const override { return result_.has_value(); }
  const TrialResult& result() const override { return *result_; }
  std::vector<MetricPoint> take_metrics() override;
  size_t pending_metrics() const override;
  uint64_t dropped_metrics() const override;
  PendingLog::Taken take_log() override;
  bool has_pending_log() const override;

  // The supervisor of process `i` (tests): 0 .. processes() - 1, the
  // workers in local rank order, then the node's servers.
  const TrialSupervisor& process(size_t i) const { return *ranks_[i]; }
  size_t processes() const { return ranks_.size(); }

 private:
  GangSupervisor(const TrialLaunch& launch, const protocol::Gang& gang, const SupervisorOptions& options,
                 const Clock& clock);
  void prepare_and_launch(const std::string& ifname, Launcher& launcher);
  // The node's directory, checkpoints/ and swept-params.json.
  Status make_directory();
  void launch_processes(const std::string& relative, const std::string& ifname, Launcher& launcher);
  void fail_to_start(const Status& why);
  // Local rank `i` has just ended: a failure stops the others.
  void on_process_end(size_t i);
  void finish();
  void release_container();
  int global_rank(size_t local_rank) const;
  // "rank R" or "parameter server J", for process `i` (reasons, logs).
  std::string process_name(size_t i) const;
  // What runs on this node: its workers (none on a server's own node), then its servers.
  std::vector<GangProcess> node_processes() const;
  // The TF_CONFIG ports of node_processes(), checked bindable before the start.
  std::vector<int> own_ports() const;
  // Every worker of this node (none: true) has exited 0.
  bool workers_done() const;

  TrialLaunch launch_;
  protocol::Gang gang_;
  SupervisorOptions options_;
  const Clock& clock_;
  TrialContainer container_;
  bool has_container_ = false;
  std::vector<std::unique_ptr<TrialSupervisor>> ranks_;  // local rank order
  std::vector<bool> ended_;  // ranks_[i]'s end was seen by on_process_end
  std::vector<int> server_of_;  // ranks_[i]'s server index, -1 for a worker
  bool servers_stopped_ = false;  // stopped by kWorkersEndedStop after the workers ended
  std::string working_dir_;
  int64_t started_ms_ = 0;
  double started_wall_ = 0;
  bool stop_requested_ = false;
  bool timed_out_ = false;
  int first_failure_ = -1;  // local rank of the first process that failed
  std::string own_log_;     // the node's own lines for the trial's log
  std::optional<TrialResult> result_;
};

}  // namespace swept::agent
