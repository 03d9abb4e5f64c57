// `swept scheduler --bind tcp://127.0.0.1:5555 --db swept.db`: the central
// scheduler (scheduler/broker.h) as a daemon. Accepts sweeps from the CLI,
// places trials on the agents that register, records everything in the
// database. Restarted on the same database after a crash, it carries on:
// agents re-register and their running trials are adopted, not restarted.
// SIGINT/SIGTERM stop it cleanly (exit 130); trials keep running on agents.
//
// Security (docs/protocol.md, "Security"): with --key and --authorized the
// socket is a CurveZMQ server and a ZAP handler in this process lets in only
// the listed keys; SIGHUP re-reads --authorized. Without a key it binds only
// loopback, ipc or inproc addresses (with a warning: other local users can
// reach them), unless --insecure.

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/client_common.h"
#include "cli/command.h"
#include "cli/signals.h"
#include "cli/dashboard.h"
#include "common/clock.h"
#include "common/curvezmq.h"
#include "common/log.h"
#include "scheduler/broker.h"
#include "scheduler/zap.h"
#include "store/db_lock.h"

namespace swept::cli {
namespace {

std::atomic<bool> g_scheduler_stop{false};
// The broker to wake from the handler (Broker::wake is one write(2)).
std::atomic<const scheduler::Broker*> g_scheduler_broker{nullptr};
static_assert(std::atomic<const scheduler::Broker*>::is_always_lock_free);
std::atomic<bool> g_scheduler_reload{false};
extern "C" void on_scheduler_reload(int) { g_scheduler_reload.store(true); }

// Where an unkeyed scheduler is reachable from: "" for inproc (this process
// only), "local" for loopback and ipc (every user of this host), "network"
// for anything else.
std::string reach_of(const std::string& bind) {
  if (bind.rfind("inproc://", 0) == 0) return "";
  if (bind.rfind("ipc://", 0) == 0) return "local";
  if (bind.rfind("tcp://", 0) != 0) return "network";
  std::string host = bind.substr(6);
  if (auto colon = host.rfind(':'); colon != std::string::npos) host = host.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return "local";
  return "network";
}

extern "C" void on_scheduler_signal(int) {
  g_scheduler_stop.store(true);
  if (const scheduler::Broker* b = g_scheduler_broker.load()) b->wake();
}

// Checks a --bind value before ZeroMQ sees it: ZeroMQ reads the port of
// tcp://127.0.0.1:99999 modulo 2^16 and listens somewhere else. Returns the
// problem, or "" when the endpoint is well formed.
std::string bind_problem(const std::string& bind) {
  const std::string hint =
      ": use tcp://HOST:PORT (PORT 1 to 65535, or * for a free one; e.g. tcp://0.0.0.0:5555) or ipc://PATH";
  auto starts = [&](const char* prefix) { return bind.rfind(prefix, 0) == 0; };
  if (starts("ipc://") || starts("inproc://")) {
    if (bind.size() == bind.find("://") + 3) return "--bind '" + bind + "' names no path" + hint;
    return "";
  }
  if (!starts("tcp://")) return "--bind '" + bind + "' is not an address swept can listen on" + hint;
  const std::string rest = bind.substr(6);
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return "--bind '" + bind + "' needs a host and a port" + hint;
  const std::string port = rest.substr(colon + 1);
  if (port == "*") return "";
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return "--bind '" + bind + "': the port '" + port + "' is not a number" + hint;
  const int n = std::stoi(port);
  if (n < 1 || n > 65535) return "--bind '" + bind + "': the port " + port + " is out of range" + hint;
  return "";
}

// What `swept scheduler`'s flags say.
struct SchedulerFlags {
  scheduler::BrokerOptions broker;  // its keys are set by load_keys()
  std::string db = "swept.db", endpoint_file, web = "off", level = "info", key_file, authorized_dir, web_token;
  bool insecure = false;
  DashboardTls web_tls;
  int max_unauthenticated = web::ServerOptions{}.max_unauthenticated;
};

// The flags into `f`. Returns an exit code to return at once (--help, a flag
// that does not parse), or nullopt.
std::optional<int> parse_scheduler_flags(const std::vector<std::string>& args, SchedulerFlags& f) {
  scheduler::BrokerOptions& o = f.broker;
  po::options_description desc("options");
  desc.add_options()("bind", po::value(&o.bind)->default_value(o.bind),
                     "where agents and clients connect; tcp://127.0.0.1:* picks a free port")(
      "db", po::value(&f.db)->default_value(f.db), "the database file (created if missing)")(
      "heartbeat-ms", po::value(&o.heartbeat_ms)->default_value(o.heartbeat_ms), "heartbeat interval, both ways")(
      "liveness", po::value(&o.liveness)->default_value(o.liveness), "heartbeats an agent may miss before it is lost")(
      "recovery-grace-ms", po::value(&o.recovery_grace_ms)->default_value(o.recovery_grace_ms),
      "after a restart, how long running trials wait for their agent to come back")(
      "quarantine-after", po::value(&o.quarantine_after)->default_value(o.quarantine_after),
      "launch failures in a row an agent blames on its host before it gets no more work (0: never)")(
      "agent-display-s", po::value(&o.agent_display_s)->default_value(o.agent_display_s),
      "how long an agent that went away stays in `swept agents` (without --all)")(
      "forget-agents-after-s", po::value(&o.forget_agents_after_s)->default_value(o.forget_agents_after_s),
      "delete the rows of agents gone this long (their trials keep their names)")(
      "unkeyed-register-rate", po::value(&o.unkeyed_register_rate)->default_value(o.unkeyed_register_rate),
      "without keys: new agents admitted per second (a burst of twice that); the rest retry")(
      "endpoint-file", po::value(&f.endpoint_file), "write the bound endpoint to this file once listening")(
      "web", po::value(&f.web)->default_value(f.web), "dashboard address HOST:PORT, or off (see swept web)")(
      "log-level", po::value(&f.level)->default_value(f.level), "debug, info, warn or error")(
      "key", po::value(&f.key_file), "this scheduler's secret key (swept keygen): agents and clients must use keys")(
      "authorized", po::value(&f.authorized_dir),
      "directory of allowed public keys: agents/*.pub may register, clients/*.pub may submit; SIGHUP re-reads it")(
      "token", po::value(&f.web_token), "the dashboard's bearer token (default: $SWEPT_WEB_TOKEN); needed with a "
                                        "non-loopback --web")(
      "tls-cert", po::value(&f.web_tls.cert), kTlsCertHelp)("tls-key", po::value(&f.web_tls.key), kTlsKeyHelp)(
      "max-unauthenticated", po::value(&f.max_unauthenticated)->default_value(f.max_unauthenticated),
      kMaxUnauthenticatedHelp)(
      "insecure", po::bool_switch(&f.insecure), "allow --bind on a network address without --key, and a non-loopback "
                                                "--web without --token (trusted networks only: anyone reaching the port "
                                                "can run commands on every agent)");
  po::positional_options_description pos;
  return parse_flags("scheduler", "swept scheduler [--bind ADDR] [--db FILE] [--key FILE --authorized DIR] [options]",
                     args, desc, pos);
}

// The numbers, the address, the log level and the dashboard's flags, each
// checked before anything starts. Returns kExitUsage (the problem said on
// stderr), or nullopt.
std::optional<int> check_scheduler_flags(const SchedulerFlags& f) {
  const scheduler::BrokerOptions& o = f.broker;
  if (o.heartbeat_ms < 1 || o.liveness < 1 || o.recovery_grace_ms < 0) {
    std::cerr << "swept scheduler: --heartbeat-ms and --liveness must be at least 1, --recovery-grace-ms 0 or more\n";
    return kExitUsage;
  }
  if (o.quarantine_after < 0 || o.agent_display_s < 0 || o.forget_agents_after_s < 0) {
    std::cerr << "swept scheduler: --quarantine-after, --agent-display-s and --forget-agents-after-s must be 0 or "
                 "more\n";
    return kExitUsage;
  }
  if (o.unkeyed_register_rate < 1 || o.unkeyed_register_rate > 100000) {
    std::cerr << "swept scheduler: --unkeyed-register-rate must be from 1 to 100000 agents a second\n";
    return kExitUsage;
  }
  if (std::string problem = bind_problem(o.bind); !problem.empty()) {
    std::cerr << "swept scheduler: " << problem << "\n";
    return kExitUsage;
  }
  if (f.level != "debug" && f.level != "info" && f.level != "warn" && f.level != "error") {
    std::cerr << "swept scheduler: --log-level '" << f.level << "' is not a level: use debug, info, warn or error\n";
    return kExitUsage;
  }
  if (!f.web_tls.cert.empty() || !f.web_tls.key.empty()) {
    if (f.web_tls.cert.empty() || f.web_tls.key.empty()) {
      std::cerr << "swept scheduler: "
                << (f.web_tls.cert.empty() ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key")
                << ": HTTPS needs both the certificate and its private key\n";
      return kExitUsage;
    }
    if (f.web == "off") {
      std::cerr << "swept scheduler: --tls-cert/--tls-key are for the dashboard: add --web HOST:PORT\n";
      return kExitUsage;
    }
  }
  if (Status s = web::check_max_unauthenticated(f.max_unauthenticated); !s.ok()) {
    std::cerr << "swept scheduler: " << s.message() << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

void set_log_level(const std::string& level) {
  log::set_program("swept-scheduler");
  if (level == "debug") log::set_level(log::Level::kDebug);
  else if (level == "warn") log::set_level(log::Level::kWarn);
  else if (level == "error") log::set_level(log::Level::kError);
}

// With --key and --authorized: reads the secret key and the allowed public
// keys into f.broker and `keys`. Without: refuses a network --bind unless
// --insecure, and warns about whom the socket is open to. Returns an exit
// code when the scheduler must not start, or nullopt.
std::optional<int> load_keys(SchedulerFlags& f, std::shared_ptr<scheduler::KeyRing>& keys) {
  if (f.key_file.empty() != f.authorized_dir.empty()) {
    std::cerr << "swept scheduler: --key and --authorized go together: the scheduler's secret key and the directory "
                 "of the public keys allowed in (swept keygen --out PREFIX makes keys)\n";
    return kExitUsage;
  }
  scheduler::BrokerOptions& o = f.broker;
  if (!f.key_file.empty()) {
    auto pair = curvezmq::read_secret_key_file(f.key_file);
    if (!pair.ok()) return report("scheduler", pair.status());
    o.server_key = *pair;
    keys = std::make_shared<scheduler::KeyRing>(f.authorized_dir);
    if (Status s = keys->reload(); !s.ok()) return report("scheduler", s);
    if (keys->size() == 0)
      log::warn(f.authorized_dir + " lists no keys yet: nobody can connect until .pub files are added to its agents/ "
                "and clients/ folders and the scheduler gets SIGHUP");
    o.keys = keys;
  } else if (std::string reach = reach_of(o.bind); reach == "network") {
    if (!f.insecure) {
      std::cerr << "swept scheduler: refusing to listen on " << o.bind
                << " without keys: anyone who reaches it could submit commands that every agent runs. Make keys "
                   "(swept keygen --out scheduler; one per agent and client), then pass --key scheduler.key "
                   "--authorized DIR (see docs/deploy.md); or bind 127.0.0.1; or, on a network you trust "
                   "completely, add --insecure\n";
      return kExitUsage;
    }
    log::warn("--insecure: listening on " + o.bind + " with no authentication or encryption; anyone who reaches "
              "this port can run commands on every agent");
  } else if (reach == "local") {
    log::warn("no --key: any user of this host can reach " + o.bind + " and submit commands that agents run; use "
              "--key and --authorized wherever other users can log in (docs/deploy.md)");
  }
  return std::nullopt;
}

// Starts the ZAP handler that lets in only the keys of `keys`, with SIGHUP
// re-reading them. It must run before bind(): a CURVE socket with no ZAP
// handler lets anyone in.
Result<std::unique_ptr<scheduler::ZapHandler>> start_zap(scheduler::Broker& broker,
                                                         std::shared_ptr<scheduler::KeyRing> keys) {
  auto zap = std::make_unique<scheduler::ZapHandler>(broker.context(), std::move(keys));
  if (Status s = zap->start(&g_scheduler_reload); !s.ok()) return s;
  struct sigaction hup {};
  hup.sa_handler = on_scheduler_reload;
  sigemptyset(&hup.sa_mask);
  hup.sa_flags = SA_RESTART;
  sigaction(SIGHUP, &hup, nullptr);
  return zap;
}

// The dashboard of --web. On a keyed scheduler its cancel link connects
// with a key of its own, made for this process and authorized as a client.
Result<std::unique_ptr<web::Server>> start_scheduler_dashboard(const SchedulerFlags& f,
                                                               const scheduler::Broker& broker,
                                                               const std::shared_ptr<scheduler::KeyRing>& keys) {
  curvezmq::ClientKeys dashboard_keys;
  if (keys) {
    auto pair = curvezmq::generate();
    if (!pair.ok()) return pair.status();
    keys->add_fixed(pair->public_key, scheduler::KeyRing::Entry{scheduler::KeyRole::kClient, "(the dashboard)"});
    dashboard_keys.own = *pair;
    dashboard_keys.server_public = f.broker.server_key->public_key;
  }
  auto server = start_dashboard(f.web, f.db, f.web_token, broker.endpoint(), f.insecure, dashboard_keys, f.web_tls,
                                f.max_unauthenticated);
  if (!server.ok()) return server.status();
  log::info("dashboard at " + (*server)->url());
  return server;
}

// The broker's loop until a stop signal (exit 130) or a failure (exit 1),
// with --endpoint-file written once it listens.
int serve(const SchedulerFlags& f, scheduler::Broker& broker, const scheduler::KeyRing* keys) {
  g_scheduler_broker = &broker;
  on_stop_signals(on_scheduler_signal, /*ignore_sigpipe=*/true);
  if (!f.endpoint_file.empty()) {
    std::string tmp = f.endpoint_file + ".tmp";
    std::ofstream(tmp) << broker.endpoint() << "\n";
    std::rename(tmp.c_str(), f.endpoint_file.c_str());
  }
  log::info("listening on " + broker.endpoint() + ", database " + f.db +
            (keys ? ", CURVE keys required (" + std::to_string(keys->size()) + " authorized)" : ""));
  Status s = broker.run(g_scheduler_stop);
  g_scheduler_broker = nullptr;
  if (!s.ok()) {
    log::error("stopping: " + s.message());
    return kExitFailure;
  }
  log::info("stopped by signal");
  return kExitInterrupted;
}

int run_scheduler(const std::vector<std::string>& args) {
  SchedulerFlags f;
  if (auto rc = parse_scheduler_flags(args, f)) return *rc;
  if (auto rc = check_scheduler_flags(f)) return *rc;
  set_log_level(f.level);
  std::shared_ptr<scheduler::KeyRing> keys;
  if (auto rc = load_keys(f, keys)) return *rc;

  // One scheduler per database, for its whole life (store/db_lock.h).
  auto lock = store::DbLock::acquire(f.db);
  if (!lock.ok()) return report("scheduler", lock.status());
  auto store = store::Writer::open(f.db);
  if (!store.ok()) return report("scheduler", store.status());
  scheduler::Broker broker(**store, SteadyClock::instance(), f.broker);
  // Declared after the broker so it stops before the broker's context ends.
  std::unique_ptr<scheduler::ZapHandler> zap;
  if (keys) {
    auto started = start_zap(broker, keys);
    if (!started.ok()) return report("scheduler", started.status());
    zap = std::move(*started);
  }
  if (Status s = broker.bind(); !s.ok()) {
    std::cerr << "swept scheduler: " << s.message() << "\n";
    return kExitFailure;
  }
  (*lock)->set_address(broker.endpoint());
  if (Status s = broker.recover(); !s.ok()) return report("scheduler", s);
  std::unique_ptr<web::Server> dashboard;
  if (f.web != "off") {
    auto server = start_scheduler_dashboard(f, broker, keys);
    if (!server.ok()) return report("scheduler", server.status());
    dashboard = std::move(*server);
  }
  return serve(f, broker, keys.get());
}

}  // namespace
SWEPT_COMMAND("scheduler", "run the central scheduler (agents and clients connect to it)", run_scheduler);
}  // namespace swept::cli
