// `swept run FILE [--db swept.db] [--gpus ...] [--slots N] [--dashboard ADDR|off]`:
// the whole system in one process. An embedded scheduler (scheduler/broker.h)
// listens on a free loopback port; a local agent (agent/agent.h) registers
// with it; the main thread shows progress from the database (read-only, as
// any reader would) until the sweep is over, then prints the best trial and
// where the results are.
//
// Threads: the broker's loop, the agent's loop, and this one; they share
// nothing but the socket between broker and agent, the database file, and a
// few atomics (stop flags, cancel request).
// Ctrl-C (or SIGTERM): every trial is stopped through the protocol, the
// database records them as stopped, and the command exits 130. A second
// Ctrl-C stops waiting for trials to end (the agent still kills them).
// Exit: 0 when every trial completed, 7 when some did not, 2 for a bad file
// or flag or a sweep this machine can never place, 1 when the scheduler or
// agent cannot run.
// An existing --db is extended: a sweep left `running` there by a `swept run`
// that was killed (SIGKILL, power loss) resumes alongside the new one, as a
// restarted `swept scheduler` would resume it.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/agent.h"
#include "cli/client_common.h"
#include "cli/command.h"
#include "cli/signals.h"
#include "cli/dashboard.h"
#include "cli/sweep_file.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/wakeup.h"
#include "scheduler/broker.h"
#include "store/db_lock.h"

namespace swept::cli {
namespace {

std::atomic<int> g_run_interrupts{0};
extern "C" void on_run_signal(int) { g_run_interrupts.fetch_add(1); }

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

// One progress line: bar, counts, elapsed, ETA, best so far.
std::string progress_line(const protocol::SweepSummary& s, double elapsed) {
  int64_t done = s.counts.done();
  std::string bar;
  std::string counts;
  if (s.total_trials && *s.total_trials > 0) {
    const int width = 24;
    int fill = static_cast<int>(width * double(done) / double(*s.total_trials));
    bar = "[" + std::string(fill, '#') + std::string(width - fill, '-') + "] ";
    counts = std::to_string(done) + "/" + std::to_string(*s.total_trials);
  } else {
    counts = std::to_string(done) + " done";
  }
  std::string eta = "--:--";
  if (s.total_trials && done > 0) eta = clock_text(elapsed / double(done) * double(*s.total_trials - done));
  std::string line = bar + counts;
  for (TrialState shown : {TrialState::kCompleted, TrialState::kRunning, TrialState::kFailed}) {
    line += "  ";
    line += name(shown);
    line += " " + std::to_string(s.counts[shown]);
  }
  line += "  elapsed " + clock_text(elapsed) + "  ETA " + eta;
  if (s.metric_name && s.best_value)
    line += "  best " + *s.metric_name + " " + fmt_num(*s.best_value) + " (trial " + std::to_string(*s.best_trial_id) + ")";
  return line;
}

int run_run(const std::vector<std::string>& args) {
  std::string file, db = "swept.db", dashboard = "127.0.0.1:8080", progress = "auto";
  bool verbose = false;
  std::string stats_file;
  DashboardTls tls;
  int max_unauthenticated = web::ServerOptions{}.max_unauthenticated;
  agent::AgentOptions ao;
  ao.name = "local";
  ao.workdir = "swept-work";
  scheduler::BrokerOptions bo;
  bo.bind = "tcp://127.0.0.1:*";  // for swept status/cancel and the dashboard's cancel
  bo.local_bind = "inproc://swept-run-agent";
  po::options_description desc("options");
  desc.add_options()("file", po::value(&file), "the sweep file (JSON)")(
      "db", po::value(&db)->default_value(db), "the results database (created or extended)")(
      "gpus", po::value(&ao.gpus)->default_value("auto"), "GPUs: auto, none, or fake:N[xMEMORY]")(
      "slots", po::value(&ao.slots)->default_value(0), "CPU trials at once (0: one per CPU)")(
      "workdir", po::value(&ao.workdir)->default_value(ao.workdir), "where trials' directories and logs go")(
      "dashboard", po::value(&dashboard)->default_value(dashboard), "dashboard address HOST:PORT, or off")(
      "tls-cert", po::value(&tls.cert), kTlsCertHelp)("tls-key", po::value(&tls.key), kTlsKeyHelp)(
      "max-unauthenticated", po::value(&max_unauthenticated)->default_value(max_unauthenticated),
      kMaxUnauthenticatedHelp)(
      "progress", po::value(&progress)->default_value(progress), "auto (a bar on a terminal), lines, or off")(
      "stop-grace-ms", po::value(&ao.stop_grace_ms)->default_value(ao.stop_grace_ms),
      "on Ctrl-C, how long trials get between SIGTERM and SIGKILL")(
      "heartbeat-ms", po::value(&bo.heartbeat_ms)->default_value(bo.heartbeat_ms), "heartbeat interval (tests)")(
      "verbose,v", po::bool_switch(&verbose), "log what the scheduler and agent do")(
      "stats", po::value(&stats_file), "write the scheduler's counters (JSON) to this file at the end (bench/)");
  po::positional_options_description pos;
  pos.add("file", 1);
  if (auto rc = parse_flags("run", "swept run FILE [--db swept.db] [--gpus ...] [--slots N] [--dashboard ADDR|off]",
                            args, desc, pos))
    return *rc;
  if (file.empty()) {
    std::cerr << "swept run: name the sweep file: swept run FILE\n";
    return kExitUsage;
  }
  if (progress != "auto" && progress != "lines" && progress != "off") {
    std::cerr << "swept run: --progress must be auto, lines or off\n";
    return kExitUsage;
  }
  if (tls.cert.empty() != tls.key.empty()) {
    std::cerr << "swept run: " << (tls.cert.empty() ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key")
              << ": HTTPS needs both the certificate and its private key\n";
    return kExitUsage;
  }
  if (!tls.cert.empty() && dashboard == "off") {
    std::cerr << "swept run: --tls-cert/--tls-key are for the dashboard, which --dashboard off turns off\n";
    return kExitUsage;
  }
  if (Status s = web::check_max_unauthenticated(max_unauthenticated); !s.ok()) {
    std::cerr << "swept run: " << s.message() << "\n";
    return kExitUsage;
  }
  if (!verbose) log::set_level(log::Level::kWarn);  // the progress line says what matters
  std::optional<std::string> text = read_sweep_file(file);  // says why on failure
  if (!text) return kExitUsage;
  ao.heartbeat_interval_ms = bo.heartbeat_ms;
  ao.scheduler_endpoint = "tcp://127.0.0.1:5555";  // replaced by the bound port below
  if (Status s = agent::validate_options(ao); !s.ok()) return report("run", s);

  // The scheduler: store, socket, the sweep.
  auto lock = store::DbLock::acquire(db);  // one scheduler per database (store/db_lock.h)
  if (!lock.ok()) return report("run", lock.status());
  auto store = store::Writer::open(db);
  if (!store.ok()) return report("run", store.status());
  scheduler::Broker broker(**store, SteadyClock::instance(), bo);
  if (Status s = broker.bind(); !s.ok()) return report("run", s);
  (*lock)->set_address(broker.endpoint());
  if (Status s = broker.recover(); !s.ok()) return report("run", s);
  // The dashboard reads the same database; its cancel button reaches this
  // scheduler like `swept cancel` does. It starts before the sweep is
  // submitted, so that bad input (a TLS file, a token) refuses the run with
  // nothing recorded. A dashboard that cannot listen (the port is taken) is
  // not a reason to refuse the sweep: say so and go on.
  std::unique_ptr<web::Server> dashboard_server;
  if (dashboard != "off") {
    auto server = start_dashboard(dashboard, db, /*token=*/"", broker.endpoint(), /*insecure=*/false, {}, tls,
                                  max_unauthenticated);
    if (server.ok()) {
      dashboard_server = std::move(*server);
    } else if (server.status().code() == StatusCode::kInvalidArgument) {
      std::cerr << "swept run: " << server.status().message() << "\n";
      return kExitUsage;
    } else {
      std::cerr << "swept run: " << server.status().message()
                << " (going on without it; --dashboard HOST:PORT picks another address)\n";
    }
  }
  auto submitted = broker.submit(*text);
  if (!submitted.ok()) {
    std::cerr << "swept run: " << file << " is not a valid sweep file:\n" << submitted.status().message() << "\n";
    return kExitUsage;
  }
  const int64_t sweep_id = submitted->sweep_id;
  // The local agent talks to the broker through inproc: the same protocol
  // and sockets, without TCP or ZeroMQ's I/O thread in between.
  ao.scheduler_endpoint = bo.local_bind;
  ao.zmq_context = &broker.context();
  Wakeup agent_wakeup;  // ends the agent's wait when it is told to stop
  ao.wakeup = &agent_wakeup;


  on_stop_signals(on_run_signal, /*ignore_sigpipe=*/true);

  std::atomic<bool> stop_broker{false}, stop_agent{false}, broker_failed{false};
  Status broker_status;
  std::thread broker_thread([&] {
    broker_status = broker.run(stop_broker);
    if (!broker_status.ok()) broker_failed = true;
  });
  std::atomic<int> agent_rc{-1};
  std::atomic<double> agent_cpu{0};
  std::thread agent_thread([&] {
    timespec t0{}, t1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    agent_rc = agent::run_agent(ao, stop_agent);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    agent_cpu = double(t1.tv_sec - t0.tv_sec) + double(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  });

  // Each loop notices its stop flag at once: the wake-up ends its wait.
  auto stop_agent_thread = [&] {
    stop_agent = true;
    agent_wakeup.notify();
    agent_thread.join();
  };
  auto stop_broker_thread = [&] {
    stop_broker = true;
    broker.wake();
    broker_thread.join();
  };

  auto reader = store::open_reader(db);
  if (!reader.ok()) {
    stop_agent_thread();
    stop_broker_thread();
    return report("run", reader.status());
  }
  const bool tty = progress == "auto" && isatty(STDERR_FILENO);
  const bool lines = progress == "lines" || (progress == "auto" && !tty);
  std::cerr << "swept run: sweep " << sweep_id << " ("
            << (submitted->total_trials ? std::to_string(*submitted->total_trials) + " trials" : std::string("unbounded"))
            << "), results in " << db << "\n";
  if (dashboard_server) std::cerr << "swept run: dashboard at " << dashboard_server->url() << "\n";

  auto started = std::chrono::steady_clock::now();
  auto last_line = started;
  bool interrupted = false;
  bool unfit_exit = false;  // the sweep can never be placed here
  bool held_exit = false;   // the local agent is quarantined: nothing can run
  std::chrono::steady_clock::time_point stop_deadline{};
  std::optional<protocol::SweepSummary> last;
  int rc = kExitOk;
  int64_t changes = 0;
  for (;;) {
    // Wakes when the sweep ends (or its last trial does), else to redraw
    // and to look at the signal count.
    changes = broker.wait_for_change(changes, std::chrono::milliseconds(tty ? 200 : 100));
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - started).count();
    if (broker_failed) {
      std::cerr << "\nswept run: the scheduler stopped: " << broker_status.message() << "\n";
      rc = kExitFailure;
      break;
    }
    if (agent_rc.load() >= 0 && !interrupted) {
      std::cerr << "\nswept run: the local agent stopped (exit " << agent_rc.load() << "); see the messages above\n";
      rc = agent_rc.load() == kExitUsage ? kExitUsage : kExitFailure;
      break;
    }
    int signals = g_run_interrupts.load();
    if (signals > 0 && !interrupted) {
      interrupted = true;
      std::cerr << "\nswept run: stopping every trial (Ctrl-C again to stop waiting)\n";
      broker.request_cancel_all();
      stop_deadline = now + std::chrono::milliseconds(ao.stop_grace_ms + 10000);
    }
    auto sums = store::sweep_summaries(**reader, sweep_id);
    if (sums.ok()) last = sums->front();
    if (!interrupted) {
      auto unfit = broker.unplaceable_sweeps();
      if (std::find(unfit.begin(), unfit.end(), sweep_id) != unfit.end()) {
        std::cerr << "\nswept run: the trials of " << file << " need more than this machine offers (resources: "
                  << "GPUs per trial, gpu_memory_fraction or cpus; this agent has --gpus " << ao.gpus
                  << "): stopping\n";
        interrupted = true;
        unfit_exit = true;
        broker.request_cancel_all();
        stop_deadline = now + std::chrono::milliseconds(ao.stop_grace_ms + 10000);
        continue;
      }
      // Its one agent quarantined (its host failed to start trials, or its
      // self-check failed): nothing will run here until that is fixed.
      if (std::string why = broker.all_quarantined(); !why.empty()) {
        std::cerr << "\nswept run: " << why << ": stopping (fix the host, then run again)\n";
        interrupted = true;
        held_exit = true;
        broker.request_cancel_all();
        stop_deadline = now + std::chrono::milliseconds(ao.stop_grace_ms + 10000);
        continue;
      }
    }
    if (interrupted) {
      bool ended = last && last->state != SweepState::kRunning && broker.live_trials() == 0;
      if (ended || signals > 1 || now > stop_deadline) {
        rc = unfit_exit ? kExitUsage : held_exit ? kExitFailure : kExitInterrupted;
        break;
      }
      continue;
    }
    if (!last) continue;
    if (tty)
      std::cerr << "\r" << progress_line(*last, elapsed) << "\033[K" << std::flush;
    else if (lines && now - last_line > std::chrono::seconds(10)) {
      std::cerr << progress_line(*last, elapsed) << "\n";
      last_line = now;
    }
    if (last->state != SweepState::kRunning && last->counts[TrialState::kRunning] == 0 && broker.live_trials() == 0) {
      if (tty || lines) std::cerr << (tty ? "\r" : "") << progress_line(*last, elapsed) << (tty ? "\033[K\n" : "\n");
      // Early-stopped trials are the sweep's rule at work, not a failure.
      rc = (last->state == SweepState::kCompleted &&
            last->counts[TrialState::kCompleted] + last->counts[TrialState::kEarlyStopped] == last->counts.total())
               ? kExitOk
               : kExitNotAllCompleted;
      break;
    }
  }

  // Shut down in order: the agent first (it stops what still runs and says
  // goodbye), then the scheduler once it has recorded that.
  stop_agent_thread();
  // Its last reports reach the scheduler before the scheduler stops.
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
       broker.live_trials() > 0 && std::chrono::steady_clock::now() < until;)
    changes = broker.wait_for_change(changes, std::chrono::milliseconds(50));
  stop_broker_thread();
  if (!broker_status.ok() && rc != kExitFailure) {
    std::cerr << "swept run: the scheduler stopped: " << broker_status.message() << "\n";
    rc = kExitFailure;
  }

  if (!stats_file.empty()) {
    scheduler::BrokerStats st = broker.stats();
    nlohmann::json j = {{"messages_in", st.messages_in},       {"messages_dropped", st.messages_dropped},
                        {"trials_dispatched", st.trials_dispatched}, {"trials_finished", st.trials_finished},
                        {"successors", st.successors},
                        {"metric_rows", st.metric_rows},       {"loop_cpu_seconds", st.loop_cpu_seconds},
                        {"ingest_seconds", st.ingest_seconds}, {"turns", st.turns},
                        {"agent_cpu_seconds", agent_cpu.load()},
                        {"wall_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()}};
    std::ofstream(stats_file) << j.dump(2) << "\n";
  }

  // The outcome, from the database.
  auto sums = store::sweep_summaries(**reader, sweep_id);
  auto rows = store::trial_rows(**reader, sweep_id);
  if (sums.ok() && rows.ok()) {
    const auto& s = sums->front();
    std::cout << "sweep " << sweep_id << " " << name(s.state) << ": " << final_counts_text(s.counts) << ", "
              << unfinished_count(s.counts) << " not run\n";
    if (auto best = best_trial(s, *rows))
      std::cout << "best: trial " << best->id << " " << *s.metric_name << "=" << fmt_num(*best->metric_value) << "  "
                << params_text(best->params) << "\n";
    else if (s.metric_name)
      std::cout << "best: no completed trial reported " << *s.metric_name << "\n";
    std::cout << "results: " << db << " (swept status " << sweep_id << " --db " << db << "; swept trials " << sweep_id
              << " --db " << db << "); trial outputs under " << ao.workdir << "/sweep-" << sweep_id << "/\n";
    std::cout << "dashboard: swept web --db " << db << " (then open http://127.0.0.1:8080/)\n";
  }
  return rc;
}

}  // namespace
SWEPT_COMMAND("run", "run a sweep on this machine: scheduler, agent and progress in one process", run_run);
}  // namespace swept::cli
