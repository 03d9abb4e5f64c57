// `swept agent --scheduler tcp://HOST:5555 [--gpus ...] [--slots N] [--name NAME] [--workdir DIR]`:
// runs this host's agent (agent/agent.h) until SIGTERM or SIGINT, which stop
// its trials (SIGTERM, then SIGKILL after the grace period), tell the
// scheduler, and exit 130; or until SIGUSR1, a drain (the signal
// deploy/slurm/swept-agent.sbatch asks Slurm for before the time limit),
// which does the same and exits 0. Either way the scheduler requeues the
// stopped trials without spending a retry. The scheduler address may also come from
// SWEPT_SCHEDULER. The flags after the first group exist for tests and for
// tuning: heartbeat interval, liveness, reconnect backoff, grace period.

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include <boost/program_options.hpp>

#include "agent/agent.h"
#include "agent/rendezvous.h"
#include "cli/command.h"
#include "cli/signals.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/wakeup.h"

namespace swept::cli {
namespace {

// Set from the signal handler: a lock-free atomic store is async-signal-safe.
std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

// Written from the handler too (one write(2)): the agent's loop wakes at once.
Wakeup g_stop_wakeup;

extern "C" void on_stop_signal(int) {
  g_stop_requested.store(true);
  g_stop_wakeup.notify();
}

std::atomic<bool> g_drain_requested{false};

extern "C" void on_drain_signal(int) {
  g_drain_requested.store(true);
  g_stop_wakeup.notify();
}

int run_agent_command(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  agent::AgentOptions o;
  po::options_description visible(
      "usage: swept agent --scheduler tcp://HOST:5555 [--gpus auto|none|fake:N[xMEMORY]] [--slots N]\n"
      "                   [--name NAME] [--workdir DIR] [--key FILE --scheduler-pub FILE]\n"
      "                   [--advertise-addr ADDR] [--rendezvous-ports LO-HI]\n"
      "                   [--enforce-cpus] [--run-as USER]\n\n"
      "Runs the trials a swept scheduler sends to this host, each as a child process with its GPUs\n"
      "in CUDA_VISIBLE_DEVICES. Stops on SIGTERM/SIGINT after stopping its trials (exit 130).\n"
      "Drains on SIGUSR1 (Slurm's --signal before a time limit): takes no new trials, stops the\n"
      "running ones (SIGTERM so they checkpoint, SIGKILL after --stop-grace-ms), hands them back to\n"
      "the scheduler, which requeues them without spending a retry, and exits 0.\n\noptions");
  visible.add_options()("help,h", "show this help")(
      "scheduler", po::value<std::string>(), "the scheduler's address (default: $SWEPT_SCHEDULER)")(
      "gpus", po::value<std::string>(&o.gpus)->default_value("auto"),
      "GPUs to offer: auto (NVML), none, or fake:N[xMEMORY] e.g. fake:4x80GiB")(
      "slots", po::value<int>(&o.slots)->default_value(0), "trials without GPUs that may run at once (0: one per CPU)")(
      "name", po::value<std::string>(&o.name), "this agent's name (default: the host name)")(
      "workdir", po::value<std::string>(&o.workdir)->default_value("swept-work"),
      "where trials' directories go (created if missing)")(
      "stop-grace-ms", po::value<int>(&o.stop_grace_ms)->default_value(o.stop_grace_ms),
      "after SIGTERM, how long a trial may take to exit before SIGKILL")(
      "heartbeat-ms", po::value<int>(&o.heartbeat_interval_ms)->default_value(o.heartbeat_interval_ms),
      "heartbeat interval until the scheduler names its own")(
      "liveness", po::value<int>(&o.liveness)->default_value(o.liveness),
      "heartbeats missed before the scheduler counts as gone")(
      "reconnect-min-ms", po::value<int>(&o.reconnect_initial_ms)->default_value(o.reconnect_initial_ms),
      "first reconnect delay (doubles on each failed try)")(
      "reconnect-max-ms", po::value<int>(&o.reconnect_max_ms)->default_value(o.reconnect_max_ms),
      "longest reconnect delay")(
      "metrics-flush-ms", po::value<int>(&o.metrics_flush_ms)->default_value(o.metrics_flush_ms),
      "how often a reporting trial's metrics are sent")(
      "key", po::value<std::string>(), "this agent's secret key file, for a keyed scheduler (default: $SWEPT_KEY)")(
      "scheduler-pub", po::value<std::string>(), "the scheduler's public key file (default: $SWEPT_SCHEDULER_PUB)")(
      "advertise-addr", po::value<std::string>(&o.advertise_addr),
      "the address other hosts reach this one at, MASTER_ADDR of multi-node trials whose node 0 runs here "
      "(default: the local address of the connection to the scheduler)")(
      "rendezvous-ports", po::value<std::string>()->default_value("29500-29999"),
      "ports LO-HI the scheduler picks multi-node trials' ports from for the processes that run here "
      "(MASTER_PORT on node 0, TF_CONFIG's for every process)")(
      "enforce-cpus", "limit each trial to resources.cpus CPUs' worth of time (cgroup cpu quota)")(
      "run-as", po::value<std::string>(&o.run_as),
      "run trials as this unprivileged user (the agent must be root); they cannot leave their cgroups")(
      "verbose,v", "log every trial's start and end");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(visible).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "swept agent: " << e.what() << "; run 'swept agent --help'\n";
    return kExitUsage;
  }
  if (vm.count("help")) {
    std::cout << visible << "\n";
    return kExitOk;
  }
  if (vm.count("scheduler")) {
    o.scheduler_endpoint = vm["scheduler"].as<std::string>();
  } else if (const char* env = std::getenv("SWEPT_SCHEDULER"); env && *env) {
    o.scheduler_endpoint = env;
  } else {
    std::cerr << "swept agent: no scheduler address; pass --scheduler tcp://HOST:5555 or set SWEPT_SCHEDULER\n";
    return kExitUsage;
  }
  auto keys = curvezmq::client_keys(vm.count("key") ? vm["key"].as<std::string>() : "",
                                 vm.count("scheduler-pub") ? vm["scheduler-pub"].as<std::string>() : "");
  if (!keys.ok()) {
    std::cerr << "swept agent: " << keys.status().message() << "\n";
    return kExitUsage;
  }
  o.keys = std::move(*keys);
  auto ports = agent::parse_port_range(vm["rendezvous-ports"].as<std::string>());
  if (!ports.ok()) {
    std::cerr << "swept agent: " << ports.status().message() << "\n";
    return kExitUsage;
  }
  std::tie(o.rendezvous_port_lo, o.rendezvous_port_hi) = *ports;
  o.enforce_cpus = vm.count("enforce-cpus") > 0;
  if (Status s = agent::validate_options(o); !s.ok()) {
    std::cerr << "swept agent: " << s.message() << "\n";
    return kExitUsage;
  }
  log::set_program("swept-agent");
  if (vm.count("verbose")) log::set_level(log::Level::kDebug);

  on_stop_signals(on_stop_signal, /*ignore_sigpipe=*/false);
  struct sigaction drain {};
  drain.sa_handler = on_drain_signal;
  sigemptyset(&drain.sa_mask);
  sigaction(SIGUSR1, &drain, nullptr);

  o.wakeup = &g_stop_wakeup;
  o.drain = &g_drain_requested;
  int code = agent::run_agent(o, g_stop_requested);
  if (code == kExitOk && g_stop_requested.load()) return kExitInterrupted;
  return code;
}

}  // namespace

SWEPT_COMMAND("agent", "run this host's agent: runs the trials a scheduler sends it", run_agent_command);

}  // namespace swept::cli
