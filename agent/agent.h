// The swept agent: one per host. It registers with a scheduler over ZeroMQ
// (docs/protocol.md), runs the trials the scheduler sends it as child
// processes with GPUs assigned through CUDA_VISIBLE_DEVICES, streams their
// metrics back, and keeps them running while the scheduler is away.
//
// This header is the agent's whole public surface for the rest of swept:
// `swept agent` (cli/cmd_agent.cpp) and `swept run` (an embedded scheduler and
// a local agent in one process, in threads) both call run_agent().
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/curvezmq.h"
#include "common/status.h"
#include "common/wakeup.h"

namespace zmq {
class context_t;
}

namespace swept::agent {

class Launcher;

struct AgentOptions {
  // Where the scheduler listens, e.g. "tcp://127.0.0.1:5555". Required.
  std::string scheduler_endpoint;
  // CurveZMQ keys for a keyed scheduler (--key/--scheduler-pub); disabled:
  // a plain connection. A refused key or a failed handshake stops the agent
  // (exit 1) with a message saying which.
  curvezmq::ClientKeys keys;
  // GPU inventory: "auto" (NVML if present, else none), "none", or
  // "fake:N[xMEMORY]" (e.g. "fake:4x80GiB"); see agent/gpu_inventory.h.
  // "auto" inside an allocation (SLURM_STEP_GPUS, SLURM_JOB_GPUS or
  // CUDA_VISIBLE_DEVICES set) offers only the allocated GPUs.
  std::string gpus = "auto";
  // With "auto": the GPUs this agent is given (indices or UUIDs), in place of
  // the environment's allocation; `swept run --local-agents` shares the
  // machine's GPUs out so. nullopt: the environment's, if any.
  std::optional<std::vector<std::string>> gpu_allocation;
  // Trials without GPU resources that may run at once. 0: the CPUs this
  // process may use (its affinity; SLURM_CPUS_PER_TASK under Slurm).
  int slots = 0;
  // The agent's name as the scheduler shows it. Empty: the host name.
  std::string name;
  // Parent of every trial's working directory (created if missing).
  // Empty: "./swept-work".
  std::string workdir;

  // Heartbeats (Paranoid Pirate): the agent sends one every
  // heartbeat_interval_ms while connected and considers the scheduler gone
  // after `liveness` intervals without hearing anything from it. These are
  // the agent's values until REGISTER_ACK brings the scheduler's, which then
  // govern the session (docs/protocol.md).
  int heartbeat_interval_ms = 1000;
  int liveness = 5;
  // Reconnect backoff: first retry after reconnect_initial_ms, doubling up to
  // reconnect_max_ms.
  int reconnect_initial_ms = 1000;
  int reconnect_max_ms = 32000;
  // Stopping a trial: SIGTERM to its process group, SIGKILL after this long.
  int stop_grace_ms = 10000;
  // How trials are kept whole (agent/containment.h, docs/deploy.md): "auto"
  // (a cgroup v2 per trial where the agent may make one, else the subreaper
  // sweep; SWEPT_AGENT_CONTAINMENT overrides "auto"), "cgroup", "subreaper".
  std::string containment = "auto";
  // Trial limits (agent/limits.h, docs/deploy.md "Trial limits"): memory and
  // pids are always set where the host can; the CPU quota (resources.cpus
  // CPUs' worth of time, cgroup cpu.max or cfs_quota_us) only with this
  // (--enforce-cpus): a trial's threads otherwise use whatever CPUs are idle.
  bool enforce_cpus = false;
  // Non-empty: trials run as this unprivileged user (--run-as; the agent must
  // be root), who owns their directories but not their cgroups.
  std::string run_as;
  // Multi-node trials (docs/protocol.md, START_TRIAL `gang`). The address
  // other hosts reach this one at, sent in REGISTER (`addr`) and given to
  // every node of a trial whose node 0 runs here as MASTER_ADDR
  // (--advertise-addr). Empty: the local address of the connection toward
  // the scheduler (agent/rendezvous.h), 127.0.0.1 for inproc:// and ipc://
  // endpoints (swept run). Its interface becomes the trials'
  // GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME.
  std::string advertise_addr;
  // The ports the scheduler picks from for the processes of multi-node
  // trials that run here: MASTER_PORT when this agent holds node 0, and
  // every process's TF_CONFIG port (issue 30) (--rendezvous-ports; REGISTER
  // `rendezvous_ports`).
  int rendezvous_port_lo = 29500;
  int rendezvous_port_hi = 29999;
  // Metrics are batched and sent at least this often while trials report.
  int metrics_flush_ms = 200;
  // The ZeroMQ context to connect through; it must outlive run_agent. Set it
  // to the scheduler's when both are in one process and the endpoint is
  // inproc:// (swept run). Null: the agent makes its own.
  zmq::context_t* zmq_context = nullptr;
  // Drain (`swept agent` on SIGUSR1, which deploy/slurm asks Slurm to send
  // before the job's time limit): when it becomes true the agent stops as
  // on `stop` (no new trials; running ones get SIGTERM so they checkpoint,
  // SIGKILL after stop_grace_ms; each reported agent_shutdown, which the
  // scheduler requeues without spending a retry), says "draining" in its
  // log and the trials' reasons, and run_agent returns kExitOk. Null: none.
  const std::atomic<bool>* drain = nullptr;
  // Polled by the agent's loop: notify() it after setting the stop flag and
  // the agent stops at once instead of within 100 ms. Null: none.
  const Wakeup* wakeup = nullptr;
  // The outside world, injected (tests): the clock for heartbeats, liveness,
  // backoff and timestamps, and the launcher that starts trial processes.
  // Null: SteadyClock and the fork/exec PosixLauncher. Both must outlive
  // run_agent; the launcher is called from the agent's thread only.
  const Clock* clock = nullptr;
  Launcher* launcher = nullptr;
};

// Checks options that can be checked without the network (GPU spec, slots,
// endpoint syntax, advertised address, rendezvous ports, workdir creatable).
// InvalidArgument names the bad option.
Status validate_options(const AgentOptions& options);

// Runs the agent until `stop` (or options.drain) becomes true (checked at
// least every 100 ms).
// On stop it stops every running trial (SIGTERM, then SIGKILL after the
// grace period), reports each to the scheduler (cause agent_shutdown), sends
// DISCONNECT, and returns. Running trials are never abandoned: run_agent does
// not return while a child of it is alive.
// Returns kExitOk after a stop, kExitUsage when the options are invalid
// (message logged), kExitFailure when the agent cannot run (the workdir
// cannot be created, NVML fails midway, the scheduler rejects the REGISTER as
// a bad request), kExitInternal for a bug. Never throws.
// Thread safety: may run on any thread, next to other threads of the same
// process (between fork and exec its children make only async-signal-safe
// system calls, and it installs no signal handlers). Trials get SIGKILL when
// the calling thread ends (PR_SET_PDEATHSIG), which run_agent never lets
// happen while they run. The process must not ignore SIGCHLD (exit codes
// would be lost; trials still end, reported as such). Several agents may run
// in one process when their names differ.
int run_agent(const AgentOptions& options, const std::atomic<bool>& stop);

}  // namespace swept::agent
