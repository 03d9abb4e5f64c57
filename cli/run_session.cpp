// RunSession: `swept run`'s four phases (run_session.h), and the progress
// line it draws while it watches.
#include "cli/run_session.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli/client_common.h"
#include "cli/local_agents.h"
#include "cli/signals.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/trial_dir.h"

namespace swept::cli {
namespace {

// SIGINT and SIGTERM, counted: the handler may only touch an atomic.
std::atomic<int> g_run_interrupts{0};
extern "C" void on_run_signal(int) { g_run_interrupts.fetch_add(1); }

// How long trials get, after the stop every trial was told, before the run
// stops waiting for them: the agent's grace between SIGTERM and SIGKILL,
// and 10 s for the reports to come back.
constexpr int kStopWaitMarginMs = 10000;

std::string clock_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60),
                  (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

// One progress line: bar, counts, elapsed, ETA, best so far. Written to a
// stream: GCC 12's -Wrestrict misreads `"[" + std::string(...)` once inlined
// here, and warnings are errors.
std::string progress_line(const SweepRow& s, double elapsed) {
  const int64_t done = done_of_total(s);
  std::ostringstream line;
  if (s.total_trials && *s.total_trials > 0) {
    const int width = 24;
    const int fill = static_cast<int>(width * double(done) / double(*s.total_trials));
    line << '[' << std::string(fill, '#') << std::string(width - fill, '-') << "] " << done << '/' << *s.total_trials;
  } else {
    line << done << " done";
  }
  std::string eta = "--:--";
  if (s.total_trials && done > 0) eta = clock_text(elapsed / double(done) * double(*s.total_trials - done));
  for (TrialState shown : {TrialState::kCompleted, TrialState::kRunning, TrialState::kFailed})
    line << "  " << name(shown) << ' ' << s.counts[shown];
  line << "  elapsed " << clock_text(elapsed) << "  ETA " << eta;
  if (s.metric_name && s.best)
    line << "  best " << *s.metric_name << ' ' << fmt_num(s.best->value) << " (trial " << s.best->trial_id << ')';
  return line.str();
}

double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

RunSession::RunSession(RunOptions options) : options_(std::move(options)) {}

RunSession::~RunSession() {
  if (!agents_.empty()) stop_agent_thread();
  if (broker_thread_.joinable()) stop_broker_thread();
}

int RunSession::run(const std::string& sweep_text) {
  if (std::optional<int> refused = start(sweep_text)) return *refused;
  int rc = watch();
  rc = shut_down(rc);
  report();
  return rc;
}

// ---- Phase 1: start the parts ----

std::optional<int> RunSession::start(const std::string& sweep_text) {
  if (auto rc = make_agents()) return rc;  // before anything is recorded
  if (auto rc = open_scheduler()) return rc;
  // The dashboard starts before the sweep is submitted, so that bad input
  // (a TLS file, a token) refuses the run with nothing recorded.
  if (auto rc = start_dashboard_if_asked()) return rc;
  if (auto rc = submit(sweep_text)) return rc;
  on_stop_signals(on_run_signal, /*ignore_sigpipe=*/true);
  start_threads();
  return open_reader_and_announce();
}

// (cli::report below is client_common.h's Status printer, not phase 4.)
std::optional<int> RunSession::open_scheduler() {
  auto lock = store::DbLock::acquire(options_.db);  // one scheduler per database (store/db_lock.h)
  if (!lock.ok()) return cli::report("run", lock.status());
  lock_ = std::move(*lock);
  auto store = store::Writer::open(options_.db);
  if (!store.ok()) return cli::report("run", store.status());
  store_ = std::move(*store);
  broker_ = std::make_unique<scheduler::Broker>(*store_, SteadyClock::instance(), options_.broker);
  if (Status s = broker_->bind(); !s.ok()) return cli::report("run", s);
  lock_->set_address(broker_->endpoint());
  // A sweep left `running` here by a killed `swept run` resumes alongside
  // the new one, as a restarted `swept scheduler` would resume it.
  if (Status s = broker_->recover(); !s.ok()) return cli::report("run", s);
  return std::nullopt;
}

// The dashboard reads the same database; its cancel button reaches this
// scheduler as `swept cancel` does. One that cannot listen (the port is
// taken) is no reason to refuse the sweep: say so and go on.
std::optional<int> RunSession::start_dashboard_if_asked() {
  if (options_.dashboard == "off") return std::nullopt;
  auto server = start_dashboard(options_.dashboard, options_.db, /*token=*/"", broker_->endpoint(),
                                /*insecure=*/false, {}, options_.tls, options_.max_unauthenticated);
  if (server.ok()) {
    dashboard_ = std::move(*server);
  } else if (server.status().code() == StatusCode::kInvalidArgument) {
    std::cerr << "swept run: " << server.status().message() << "\n";
    return kExitUsage;
  } else {
    std::cerr << "swept run: " << server.status().message()
              << " (going on without it; --dashboard HOST:PORT picks another address)\n";
  }
  return std::nullopt;
}

std::optional<int> RunSession::submit(const std::string& sweep_text) {
  auto submitted = broker_->submit(sweep_text, options_.warm);
  if (!submitted.ok()) {
    std::cerr << "swept run: " << options_.file << " is not a valid sweep file:\n"
              << submitted.status().message() << "\n";
    return kExitUsage;
  }
  sweep_id_ = submitted->sweep_id;
  total_trials_ = submitted->total_trials;
  if (submitted->warm_start) std::cerr << "swept run: " << *submitted->warm_start << "\n";
  return std::nullopt;
}

std::optional<int> RunSession::make_agents() {
  auto each = local_agent_options(options_.agent, options_.local_agents);
  if (!each.ok()) return cli::report("run", each.status());
  for (agent::AgentOptions& o : *each) {
    auto a = std::make_unique<LocalAgent>();
    a->options = std::move(o);
    agents_.push_back(std::move(a));
  }
  return std::nullopt;
}

void RunSession::start_threads() {
  broker_thread_ = std::thread([this] {
    broker_status_ = broker_->run(stop_broker_);
    if (!broker_status_.ok()) broker_failed_ = true;
  });
  for (auto& a : agents_) {
    // A local agent talks to the broker through inproc: the same protocol
    // and sockets, without TCP or ZeroMQ's I/O thread in between.
    agent::AgentOptions& ao = a->options;
    ao.scheduler_endpoint = options_.broker.local_bind;
    ao.zmq_context = &broker_->context();
    ao.wakeup = &a->wakeup;
    a->thread = std::thread([this, agent = a.get()] {
      timespec t0{}, t1{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
      agent->rc = agent::run_agent(agent->options, stop_agent_);
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
      const double cpu = double(t1.tv_sec - t0.tv_sec) + double(t1.tv_nsec - t0.tv_nsec) * 1e-9;
      for (double seen = agent_cpu_.load(); !agent_cpu_.compare_exchange_weak(seen, seen + cpu);) {
      }
    });
  }
}

std::optional<int> RunSession::open_reader_and_announce() {
  // The scheduler's Writer checked the file's integrity when it opened it.
  auto reader = store::open_reader(options_.db, store::ReaderCheck::kCheckedByWriter);
  if (!reader.ok()) {
    stop_agent_thread();
    stop_broker_thread();
    return cli::report("run", reader.status());
  }
  reader_ = std::move(*reader);
  tty_ = options_.progress == "auto" && isatty(STDERR_FILENO);
  lines_ = options_.progress == "lines" || (options_.progress == "auto" && !tty_);
  std::cerr << "swept run: sweep " << sweep_id_ << " ("
            << (total_trials_ ? std::to_string(*total_trials_) + " trials" : std::string("unbounded"))
            << "), results in " << options_.db << "\n";
  if (dashboard_) std::cerr << "swept run: dashboard at " << dashboard_->url() << "\n";
  started_ = last_line_ = std::chrono::steady_clock::now();
  return std::nullopt;
}

// ---- Phase 2: watch the sweep ----

int RunSession::watch() {
  for (;;) {
    // Wakes when the sweep ends (or its last trial does), else to redraw
    // and to look at the signal count.
    changes_ = broker_->wait_for_change(changes_, std::chrono::milliseconds(tty_ ? 200 : 100));
    const auto now = std::chrono::steady_clock::now();
    if (std::optional<int> rc = a_part_stopped()) return *rc;
    const int signals = g_run_interrupts.load();
    if (signals > 0 && !stopping_) {
      std::cerr << "\nswept run: stopping every trial (Ctrl-C again to stop waiting)\n";
      begin_stopping(now, kExitInterrupted);
    }
    auto sums = store::sweep_summaries(*reader_, sweep_id_);
    if (sums.ok()) last_ = sums->front();
    if (!stopping_ && cannot_run_here(now)) continue;
    if (stopping_) {
      if (std::optional<int> rc = stopped_enough(now, signals)) return *rc;
      continue;
    }
    if (!last_) continue;
    if (std::optional<int> rc = show_progress(now)) return *rc;
  }
}

// The scheduler's loop failed, or the agent's returned on its own: the run
// cannot go on. (After a stop the agent may well be gone; that is expected.)
std::optional<int> RunSession::a_part_stopped() {
  if (broker_failed_) {
    std::cerr << "\nswept run: the scheduler stopped: " << broker_status_.message() << "\n";
    return kExitFailure;
  }
  for (const auto& a : agents_) {
    const int agent_rc = a->rc.load();
    if (agent_rc >= 0 && !stopping_) {
      std::cerr << "\nswept run: the local agent " << a->options.name << " stopped (exit " << agent_rc
                << "); see the messages above\n";
      return agent_rc == kExitUsage ? kExitUsage : kExitFailure;
    }
  }
  return std::nullopt;
}

// True when this machine can never run the sweep (its trials need more than
// the agent offers, or the one agent is quarantined): the trials have then
// been told to stop.
bool RunSession::cannot_run_here(std::chrono::steady_clock::time_point now) {
  // Not before every local agent has registered, and a few heartbeats more
  // for the scheduler to place with all of them: under load the last
  // agent's REGISTER comes after the first dispatch, and a trial that needs
  // several agents (nodes, parameter servers' own nodes) then fits on none.
  if (broker_->stats().registers < static_cast<int64_t>(agents_.size())) return false;
  if (!all_registered_) all_registered_ = now;
  if (now - *all_registered_ < std::chrono::milliseconds(3 * options_.broker.heartbeat_ms)) return false;
  auto unfit = broker_->unplaceable_sweeps();
  if (std::find(unfit.begin(), unfit.end(), sweep_id_) != unfit.end()) {
    std::cerr << "\nswept run: the trials of " << options_.file << " need more than this machine offers (resources: "
              << "GPUs per trial, gpu_memory_fraction, cpus or nodes; here --gpus " << options_.agent.gpus << " and "
              << options_.local_agents << " local agent(s): a trial with nodes: N needs --local-agents N or more): "
              << "stopping\n";
    begin_stopping(now, kExitUsage);
    return true;
  }
  // Its one agent quarantined (its host failed to start trials, or its
  // self-check failed): nothing will run here until that is fixed.
  if (std::string why = broker_->all_quarantined(); !why.empty()) {
    std::cerr << "\nswept run: " << why << ": stopping (fix the host, then run again)\n";
    begin_stopping(now, kExitFailure);
    return true;
  }
  return false;
}

// Tells every trial to stop; the run exits `exit_code` once they have.
void RunSession::begin_stopping(std::chrono::steady_clock::time_point now, int exit_code) {
  stopping_ = true;
  stop_exit_ = exit_code;
  broker_->request_cancel_all();
  stop_deadline_ = now + std::chrono::milliseconds(options_.agent.stop_grace_ms + kStopWaitMarginMs);
}

// After a stop: done when the sweep and its trials have ended, on a second
// signal, or when they have taken too long.
std::optional<int> RunSession::stopped_enough(std::chrono::steady_clock::time_point now, int signals) const {
  const bool ended = last_ && last_->state != SweepState::kRunning && broker_->live_trials() == 0;
  if (ended || signals > 1 || now > stop_deadline_) return stop_exit_;
  return std::nullopt;
}

// Draws the progress (a bar redrawn in place, or a line every 10 s), and
// returns the exit code once the sweep is over.
std::optional<int> RunSession::show_progress(std::chrono::steady_clock::time_point now) {
  const SweepRow& s = *last_;
  const double elapsed = seconds_between(started_, now);
  if (tty_) {
    std::cerr << "\r" << progress_line(s, elapsed) << "\033[K" << std::flush;
  } else if (lines_ && now - last_line_ > std::chrono::seconds(10)) {
    std::cerr << progress_line(s, elapsed) << "\n";
    last_line_ = now;
  }
  if (s.state == SweepState::kRunning || s.counts[TrialState::kRunning] != 0 || broker_->live_trials() != 0)
    return std::nullopt;
  if (tty_ || lines_) std::cerr << (tty_ ? "\r" : "") << progress_line(s, elapsed) << (tty_ ? "\033[K\n" : "\n");
  // Early-stopped trials are the sweep's rule at work, not a failure.
  const bool all_completed =
      s.state == SweepState::kCompleted &&
      s.counts[TrialState::kCompleted] + s.counts[TrialState::kEarlyStopped] + s.counts[TrialState::kImported] ==
          s.counts.total();
  return all_completed ? kExitOk : kExitNotAllCompleted;
}

// ---- Phase 3: shut down ----

int RunSession::shut_down(int rc) {
  // In order: the agent first (it stops what still runs and says goodbye),
  // then the scheduler once it has recorded that.
  stop_agent_thread();
  // Its last reports reach the scheduler before the scheduler stops.
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
       broker_->live_trials() > 0 && std::chrono::steady_clock::now() < until;)
    changes_ = broker_->wait_for_change(changes_, std::chrono::milliseconds(50));
  stop_broker_thread();
  if (!broker_status_.ok() && rc != kExitFailure) {
    std::cerr << "swept run: the scheduler stopped: " << broker_status_.message() << "\n";
    rc = kExitFailure;
  }
  return rc;
}

// Each loop notices its stop flag at once: the wake-up ends its wait.
void RunSession::stop_agent_thread() {
  stop_agent_ = true;
  for (auto& a : agents_) a->wakeup.notify();
  for (auto& a : agents_)
    if (a->thread.joinable()) a->thread.join();
}

void RunSession::stop_broker_thread() {
  stop_broker_ = true;
  broker_->wake();
  broker_thread_.join();
}

// ---- Phase 4: report ----

void RunSession::report() {
  if (!options_.stats_file.empty()) write_stats();
  print_outcome();
}

void RunSession::write_stats() const {
  scheduler::BrokerStats st = broker_->stats();
  nlohmann::json j = {{"messages_in", st.messages_in},
                      {"messages_dropped", st.messages_dropped},
                      {"trials_dispatched", st.trials_dispatched},
                      {"trials_finished", st.trials_finished},
                      {"successors", st.successors},
                      {"metric_rows", st.metric_rows},
                      {"loop_cpu_seconds", st.loop_cpu_seconds},
                      {"ingest_seconds", st.ingest_seconds},
                      {"turns", st.turns},
                      {"agent_cpu_seconds", agent_cpu_.load()},
                      {"wall_seconds", seconds_between(started_, std::chrono::steady_clock::now())}};
  std::ofstream(options_.stats_file) << j.dump(2) << "\n";
}

// The last line of a trial's stderr.log that says ERROR (else its last
// non-empty line), up to 500 characters; "" when there is none. With several
// local agents the trial's folder is under one of NAME-1 ... NAME-N
// (cli/local_agents.cpp names them).
static std::string failure_line(const agent::AgentOptions& a, int local_agents, int64_t sweep_id, int64_t trial_id) {
  std::string tail = "/";  // appended, not "/" + ...: GCC 12's false -Wstringop-overflow
  tail += trial_relative_dir(sweep_id, trial_id);
  tail += "/stderr.log";
  std::vector<std::string> paths{a.workdir + tail};
  for (int k = 1; k <= local_agents && local_agents > 1; ++k)
    paths.push_back(a.workdir + "/" + a.name + "-" + std::to_string(k) + tail);
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in) continue;
    std::string line, last, error;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      last = line;
      if (line.find(" ERROR ") != std::string::npos || line.rfind("ERROR", 0) == 0) error = line;
    }
    std::string pick = error.empty() ? last : error;
    if (pick.size() > 500) pick = pick.substr(0, 497) + "...";
    return pick;
  }
  return "";
}

// A sweep whose trials failed says why the first one did: its reason and the
// line of its stderr that names the error, so that a user whose every trial
// failed (no data, a typo in the command) sees the cause without a search.
void RunSession::print_first_failure(const std::vector<TrialRow>& rows) const {
  int failed = 0;
  const TrialRow* first = nullptr;
  for (const TrialRow& r : rows) {
    if (r.state != TrialState::kFailed) continue;
    ++failed;
    if (!first) first = &r;
  }
  if (!first) return;
  std::cout << "failed: " << failed << (failed == 1 ? " trial" : " trials") << "; the first, trial " << first->id;
  if (first->reason) std::cout << " (" << *first->reason << ")";
  const std::string line = failure_line(options_.agent, options_.local_agents, sweep_id_, first->id);
  if (!line.empty()) std::cout << ", said: " << line;
  std::cout << "\n";
}

// The outcome, from the database: nothing when it cannot be read.
void RunSession::print_outcome() const {
  auto sums = store::sweep_summaries(*reader_, sweep_id_);
  auto rows = store::trial_rows(*reader_, sweep_id_);
  if (!sums.ok() || !rows.ok()) return;
  const std::string& db = options_.db;
  const auto& s = sums->front();
  std::cout << "sweep " << sweep_id_ << " " << name(s.state) << ": " << final_counts_text(s.counts) << ", "
            << unfinished_count(s.counts) << " not run\n";
  if (auto best = best_trial(s, *rows))
    std::cout << "best: trial " << best->id << " " << *s.metric_name << "=" << fmt_num(*best->metric_value) << "  "
              << params_text(best->params) << "\n";
  else if (s.metric_name)
    std::cout << "best: no completed trial reported " << *s.metric_name << "\n";
  print_first_failure(*rows);
  std::cout << "results: " << db << " (swept status " << sweep_id_ << " --db " << db << "; swept trials " << sweep_id_
            << " --db " << db << "); trial outputs under " << options_.agent.workdir
            << (options_.local_agents > 1 ? "/local-*" : "") << "/sweep-" << sweep_id_ << "/\n";
  std::cout << "dashboard: swept web --db " << db << " (then open http://127.0.0.1:8080/)\n";
}

}  // namespace swept::cli
