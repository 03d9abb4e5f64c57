// `swept run`'s one process, as a session in four phases: start the parts
// (the scheduler on a loopback port, the dashboard, the sweep, the local
// agent), watch the sweep until it ends or is stopped, shut the parts down in
// order, and report the outcome. cmd_run.cpp parses and checks the flags,
// reads the sweep file, and hands both to RunSession::run.
//
// Threads: the broker's loop, the agent's loop, and the caller's; they share
// nothing but the socket between broker and agent, the database file, and a
// few atomics (stop flags, the agent's exit code, the signal count).
// Signals: start() installs SIGINT/SIGTERM handlers that count; the first
// stops every trial through the protocol (exit 130), a second stops waiting
// for them to end (the agent still kills them). Only one RunSession may
// exist in a process, since the signal count is the process's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "cli/dashboard.h"
#include "common/protocol.h"
#include "common/status.h"
#include "common/wakeup.h"
#include "scheduler/broker.h"
#include "store/db_lock.h"
#include "store/reader.h"
#include "store/writer.h"
#include "web/server.h"

namespace swept::cli {

// What `swept run`'s flags say, checked by the caller (cmd_run.cpp): the
// progress mode is auto, lines or off; the TLS files come as a pair and only
// with a dashboard; max_unauthenticated is in range; agent passes
// agent::validate_options.
struct RunOptions {
  std::string file;                          // the sweep file's name, for messages
  std::string db = "swept.db";               // created or extended
  std::string dashboard = "127.0.0.1:8080";  // HOST:PORT, or "off"
  std::string progress = "auto";             // auto (a bar on a terminal), lines, or off
  std::string stats_file;                    // the scheduler's counters as JSON at the end; empty: none
  std::string rendezvous_ports = "29500-29999";  // --rendezvous-ports, read into agent's range by cmd_run
  DashboardTls tls;
  int max_unauthenticated = web::ServerOptions{}.max_unauthenticated;
  agent::AgentOptions agent;          // its scheduler endpoint, context and wake-up are set by start()
  int local_agents = 1;               // agents sharing the machine (cli/local_agents.h)
  scheduler::BrokerOptions broker;    // local_bind names the agent's inproc endpoint
  scheduler::WarmInput warm;          // a warm start's file trials, read by cmd_run (cli/warm_file.h)
};

class RunSession {
 public:
  explicit RunSession(RunOptions options);
  // Stops the threads still running (the agent first), as shut_down does.
  ~RunSession();
  RunSession(const RunSession&) = delete;
  RunSession& operator=(const RunSession&) = delete;

  // The four phases in order, for the checked text of the sweep file.
  // Returns the exit code (docs/exit-codes.md): 0 when every trial completed
  // (or was early-stopped), 7 when some did not, 130 on Ctrl-C, 2 for a bad
  // sweep or one this machine can never place, 1 when the scheduler or the
  // agent cannot run (or the agent is quarantined).
  int run(const std::string& sweep_text);

  // Phase 1: takes the database's lock, opens it, binds and recovers the
  // scheduler (resuming a sweep a killed run left running), starts the
  // dashboard, submits the sweep, starts the broker's and the agent's
  // threads and announces the sweep on stderr. Returns an exit code when
  // the run cannot go on (what went wrong said on stderr), else nullopt.
  std::optional<int> start(const std::string& sweep_text);
  // Phase 2: shows progress from the database until the sweep is over, a
  // part stops, or a stop (a signal, a sweep that can never be placed, a
  // quarantined agent) has been carried out. Returns the exit code so far.
  int watch();
  // Phase 3: stops the agent (which stops what still runs), lets its last
  // reports reach the scheduler, then stops the scheduler. Returns `rc`, or
  // kExitFailure when the scheduler's loop failed.
  int shut_down(int rc);
  // Phase 4: writes --stats, then prints the sweep's outcome, its best trial
  // and where the results are on stdout.
  void report();

 private:
  // Phase 1's steps; each returns an exit code when the run cannot go on.
  std::optional<int> make_agents();
  std::optional<int> open_scheduler();
  std::optional<int> start_dashboard_if_asked();
  std::optional<int> submit(const std::string& sweep_text);
  void start_threads();
  std::optional<int> open_reader_and_announce();
  // Phase 2's steps.
  std::optional<int> a_part_stopped();
  bool cannot_run_here(std::chrono::steady_clock::time_point now);
  void begin_stopping(std::chrono::steady_clock::time_point now, int exit_code);
  std::optional<int> stopped_enough(std::chrono::steady_clock::time_point now, int signals) const;
  std::optional<int> show_progress(std::chrono::steady_clock::time_point now);
  // Phase 3's and 4's steps.
  void stop_agent_thread();
  void stop_broker_thread();
  void write_stats() const;
  void print_outcome() const;
  void print_first_failure(const std::vector<TrialRow>& rows) const;

  RunOptions options_;

  // The parts, in the order they start (and, reversed, are destroyed).
  std::unique_ptr<store::DbLock> lock_;
  std::unique_ptr<store::Writer> store_;
  std::unique_ptr<scheduler::Broker> broker_;
  std::unique_ptr<web::Server> dashboard_;  // null: off, or it could not listen
  int64_t sweep_id_ = 0;
  std::optional<int64_t> total_trials_;
  // The local agents: each one's options, wake-up (ends its wait when it is
  // told to stop), exit code once its loop returned, and thread.
  struct LocalAgent {
    agent::AgentOptions options;
    Wakeup wakeup;
    std::atomic<int> rc{-1};
    std::thread thread;
  };
  std::vector<std::unique_ptr<LocalAgent>> agents_;
  std::atomic<bool> stop_broker_{false}, stop_agent_{false}, broker_failed_{false};
  Status broker_status_;  // written by the broker's thread; read after broker_failed_ or its join
  std::thread broker_thread_;
  std::atomic<double> agent_cpu_{0};  // of every local agent's thread
  std::unique_ptr<store::Connection> reader_;

  // What watch() has seen.
  bool tty_ = false;    // a progress bar redrawn in place
  bool lines_ = false;  // a progress line every 10 seconds
  std::chrono::steady_clock::time_point started_{}, last_line_{}, stop_deadline_{};
  // When every local agent had registered (cannot_run_here judges only from then on).
  std::optional<std::chrono::steady_clock::time_point> all_registered_;
  bool stopping_ = false;  // every trial has been told to stop
  int stop_exit_ = 0;      // the exit code once they have
  std::optional<SweepRow> last_;
  int64_t changes_ = 0;
};

}  // namespace swept::cli
