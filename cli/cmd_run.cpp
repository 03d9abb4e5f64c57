// `swept run FILE [--db swept.db] [--gpus ...] [--slots N] [--dashboard ADDR|off]`:
// the whole system in one process. An embedded scheduler (scheduler/broker.h)
// listens on a free loopback port; a local agent (agent/agent.h) registers
// with it; the main thread shows progress from the database (read-only, as
// any reader would) until the sweep is over, then prints the best trial and
// where the results are. This file parses and checks the flags and reads the
// sweep file (YAML or JSON, cli/sweep_file.h); cli/run_session.h runs it.
//
// Ctrl-C (or SIGTERM): every trial is stopped through the protocol, the
// database records them as stopped, and the command exits 130. A second
// Ctrl-C stops waiting for trials to end (the agent still kills them).
// Exit: 0 when every trial completed, 7 when some did not, 2 for a bad file
// or flag or a sweep this machine can never place, 1 when the scheduler or
// agent cannot run.
// An existing --db is extended: a sweep left `running` there by a `swept run`
// that was killed (SIGKILL, power loss) resumes alongside the new one, as a
// restarted `swept scheduler` would resume it.
#include <iostream>
#include <optional>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "agent/rendezvous.h"
#include "cli/client_common.h"
#include "cli/command.h"
#include "cli/local_agents.h"
#include "cli/run_session.h"
#include "cli/sweep_file.h"
#include "cli/warm_file.h"
#include "common/log.h"

namespace swept::cli {
namespace {

// The flags into `o`. Returns an exit code to return at once (--help, a
// flag that does not parse), or nullopt.
std::optional<int> parse_run_flags(const std::vector<std::string>& args, RunOptions& o, bool& verbose) {
  agent::AgentOptions& ao = o.agent;
  po::options_description desc("options");
  desc.add_options()("file", po::value(&o.file), "the sweep file (YAML or JSON)")(
      "db", po::value(&o.db)->default_value(o.db), "the results database (created or extended)")(
      "gpus", po::value(&ao.gpus)->default_value("auto"), "GPUs: auto, none, or fake:N[xMEMORY]")(
      "slots", po::value(&ao.slots)->default_value(0), "CPU trials at once (0: one per CPU)")(
      "local-agents", po::value(&o.local_agents)->default_value(1),
      "agents in this process, sharing the slots and GPUs (multi-node trials on one machine)")(
      "workdir", po::value(&ao.workdir)->default_value(ao.workdir), "where trials' directories and logs go")(
      "dashboard", po::value(&o.dashboard)->default_value(o.dashboard), "dashboard address HOST:PORT, or off")(
      "tls-cert", po::value(&o.tls.cert), kTlsCertHelp)("tls-key", po::value(&o.tls.key), kTlsKeyHelp)(
      "max-unauthenticated", po::value(&o.max_unauthenticated)->default_value(o.max_unauthenticated),
      kMaxUnauthenticatedHelp)(
      "progress", po::value(&o.progress)->default_value(o.progress), "auto (a bar on a terminal), lines, or off")(
      "rendezvous-ports", po::value(&o.rendezvous_ports)->default_value("29500-29999"),
      "ports LO-HI the local agents give multi-node trials' processes (MASTER_PORT, TF_CONFIG's)")(
      "stop-grace-ms", po::value(&ao.stop_grace_ms)->default_value(ao.stop_grace_ms),
      "on Ctrl-C, how long trials get between SIGTERM and SIGKILL")(
      "heartbeat-ms", po::value(&o.broker.heartbeat_ms)->default_value(o.broker.heartbeat_ms),
      "heartbeat interval (tests)")("verbose,v", po::bool_switch(&verbose), "log what the scheduler and agent do")(
      "stats", po::value(&o.stats_file), "write the scheduler's counters (JSON) to this file at the end (bench/)");
  po::positional_options_description pos;
  pos.add("file", 1);
  return parse_flags("run", "swept run FILE [--db swept.db] [--gpus ...] [--slots N] [--dashboard ADDR|off]", args,
                     desc, pos);
}

// What the flags must agree on before anything starts. Returns kExitUsage
// (the problem said on stderr), or nullopt.
std::optional<int> check_run_flags(const RunOptions& o) {
  if (o.file.empty()) {
    std::cerr << "swept run: name the sweep file: swept run FILE\n";
    return kExitUsage;
  }
  if (o.progress != "auto" && o.progress != "lines" && o.progress != "off") {
    std::cerr << "swept run: --progress must be auto, lines or off\n";
    return kExitUsage;
  }
  if (o.tls.cert.empty() != o.tls.key.empty()) {
    std::cerr << "swept run: " << (o.tls.cert.empty() ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key")
              << ": HTTPS needs both the certificate and its private key\n";
    return kExitUsage;
  }
  if (!o.tls.cert.empty() && o.dashboard == "off") {
    std::cerr << "swept run: --tls-cert/--tls-key are for the dashboard, which --dashboard off turns off\n";
    return kExitUsage;
  }
  if (o.local_agents < 1 || o.local_agents > kMaxLocalAgents) {
    std::cerr << "swept run: --local-agents must be 1 to " << kMaxLocalAgents << ", not " << o.local_agents << "\n";
    return kExitUsage;
  }
  if (Status s = web::check_max_unauthenticated(o.max_unauthenticated); !s.ok()) {
    std::cerr << "swept run: " << s.message() << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

int run_run(const std::vector<std::string>& args) {
  RunOptions o;
  o.agent.name = "local";
  o.agent.workdir = "swept-work";
  o.broker.bind = "tcp://127.0.0.1:*";  // for swept status/cancel and the dashboard's cancel
  o.broker.local_bind = "inproc://swept-run-agent";
  bool verbose = false;
  if (auto rc = parse_run_flags(args, o, verbose)) return *rc;
  if (auto rc = check_run_flags(o)) return *rc;
  // Multi-node trials' ports (issue 30: every process gets one): two runs
  // on one host at once each need a range of their own.
  if (auto ports = agent::parse_port_range(o.rendezvous_ports); ports.ok()) {
    std::tie(o.agent.rendezvous_port_lo, o.agent.rendezvous_port_hi) = *ports;
  } else {
    std::cerr << "swept run: " << ports.status().message() << "\n";
    return kExitUsage;
  }
  if (!verbose) log::set_level(log::Level::kWarn);  // the progress line says what matters
  std::optional<LoadedSweep> loaded = load_sweep_file(o.file);  // says why on failure
  if (!loaded) return kExitUsage;
  auto warm_trials = read_warm_start(o.file, loaded->spec);  // a warm_start.file is read here, at the edge
  if (!warm_trials.ok()) return report("run", warm_trials.status().WithContext(o.file));
  o.warm.trials = std::move(*warm_trials);
  const std::string* text = &loaded->text;
  o.agent.heartbeat_interval_ms = o.broker.heartbeat_ms;
  // Checked with a stand-in endpoint: the session connects the agent to the
  // embedded scheduler through o.broker.local_bind.
  o.agent.scheduler_endpoint = "tcp://127.0.0.1:5555";
  if (Status s = agent::validate_options(o.agent); !s.ok()) return report("run", s);
  RunSession session(std::move(o));
  return session.run(*text);
}

}  // namespace
SWEPT_COMMAND("run", "run a sweep on this machine: scheduler, agent and progress in one process", run_run);
}  // namespace swept::cli
