// The agent against a fake scheduler: a ROUTER socket in the test that speaks
// docs/protocol.md through the real codec, on a port chosen at run time.
// The agent runs in a thread through run_agent(), exactly as `swept run`
// embeds it; its trials are real tiny processes. Every wait has a deadline.
#include "agent/agent.h"
#include "agent/exit_journal.h"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/launcher.h"
#include "agent/test_util.h"
#include "common/exit_codes.h"
#include "common/protocol.h"
#include "common/testing/eventually.h"
#include "common/testing/loopback.h"

using namespace swept;
using namespace swept::agent;
namespace pr = swept::protocol;
using swept::agent::testing::kNoPause;
using swept::agent::testing::TempDir;

namespace {

constexpr int kWaitMs = 15000;

class FakeScheduler {
 public:
  FakeScheduler() { open("tcp://127.0.0.1:*"); }

  // The scheduler dies: its socket goes, with whatever was queued. Ending the
  // context waits until the listening port is really closed, so that
  // reopen() can bind it again.
  void close() {
    router_.reset();
    context_.reset();
    peer_.clear();  // a restarted scheduler knows no agent until it registers
  }
  // The scheduler comes back on the same address.
  void reopen() { open(endpoint_); }

  const std::string& endpoint() const { return endpoint_; }
  const std::string& peer() const { return peer_; }

  void send(const pr::Message& m) { send_raw(pr::encode(m)); }
  void send_raw(const pr::Frames& frames) {
    std::vector<zmq::const_buffer> parts{zmq::buffer(peer_)};
    for (const auto& f : frames) parts.push_back(zmq::buffer(f));
    REQUIRE(zmq::send_multipart(*router_, parts));
  }

  // The first not yet consumed message of type T (matching `pred`), waiting
  // for more until the deadline. Heartbeats are answered while waiting.
  template <typename T>
  std::optional<T> wait_for(const std::function<bool(const T&)>& pred = nullptr, int timeout_ms = kWaitMs) {
    std::optional<T> found;
    auto take = [&] {
      for (auto it = backlog_.begin(); it != backlog_.end(); ++it) {
        if (const T* m = std::get_if<T>(&*it); m && (!pred || pred(*m))) {
          found = *m;
          backlog_.erase(it);
          return true;
        }
      }
      return false;
    };
    // Pumping blocks on the socket, so eventually() need not pause between tries.
    const int step_ms = std::min(timeout_ms, 100);
    swept::testing::eventually([&] { return take() || (pump(step_ms), take()); }, timeout_ms / 1000.0, kNoPause);
    return found;
  }

  // Kinds received so far and not consumed, in order (for order checks).
  std::vector<std::string> backlog_kinds() const {
    std::vector<std::string> out;
    for (const auto& m : backlog_) out.push_back(pr::kind_name(m));
    return out;
  }
  void clear_backlog() { backlog_.clear(); }
  // The messages received so far and not consumed, in order.
  std::vector<pr::Message> backlog() const { return {backlog_.begin(), backlog_.end()}; }

  bool heartbeats = true;  // send HEARTBEAT every 100 ms to the current peer

 private:
  void open(const std::string& endpoint) {
    context_.emplace();
    router_.emplace(*context_, zmq::socket_type::router);
    router_->set(zmq::sockopt::linger, 0);
    router_->set(zmq::sockopt::router_handover, 1);
    router_->bind(endpoint);
    endpoint_ = router_->get(zmq::sockopt::last_endpoint);
  }

  void pump(int wait_ms) {
    if (!router_) return swept::agent::testing::poll_readable({}, wait_ms);
    zmq::pollitem_t item{static_cast<void*>(*router_), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(std::min(wait_ms, 50)));
    while (true) {
      std::vector<zmq::message_t> parts;
      if (!zmq::recv_multipart(*router_, std::back_inserter(parts), zmq::recv_flags::dontwait)) break;
      REQUIRE(parts.size() >= 2);
      pr::Frames frames;
      for (size_t i = 1; i < parts.size(); ++i) frames.push_back(parts[i].to_string());
      pr::Decoded d = pr::decode(frames);
      REQUIRE_MESSAGE(d.ok(), d.error);  // the agent only ever sends well-formed messages
      if (std::holds_alternative<pr::Register>(*d.message)) peer_ = parts[0].to_string();
      backlog_.push_back(*d.message);
      heartbeat_if_due();  // decoding a burst takes a while (more so under sanitizers)
    }
    heartbeat_if_due();
  }

  void heartbeat_if_due() {
    int64_t now = swept::agent::testing::steady_ms();
    if (heartbeats && !peer_.empty() && now - last_heartbeat_ms_ >= 100) {
      last_heartbeat_ms_ = now;
      std::vector<zmq::const_buffer> parts{zmq::buffer(peer_)};
      pr::Frames frames = pr::encode(pr::Heartbeat{});
      for (const auto& f : frames) parts.push_back(zmq::buffer(f));
      (void)zmq::send_multipart(*router_, parts, zmq::send_flags::dontwait);
    }
  }

  std::optional<zmq::context_t> context_;
  std::optional<zmq::socket_t> router_;  // declared after context_: destroyed first
  std::string endpoint_;
  std::string peer_;
  std::deque<pr::Message> backlog_;
  int64_t last_heartbeat_ms_ = 0;
};

// run_agent() on its own thread; stopped and joined on scope exit.
struct AgentThread {
  std::atomic<bool> stop{false};
  std::atomic<int> exit_code{-1};
  std::thread thread;
  explicit AgentThread(const AgentOptions& o) {
    thread = std::thread([this, o] { exit_code = run_agent(o, stop); });
  }
  int join() {
    stop = true;
    if (thread.joinable()) thread.join();
    return exit_code;
  }
  ~AgentThread() { join(); }
};

AgentOptions test_options(const FakeScheduler& s, const TempDir& dir) {
  AgentOptions o;
  o.scheduler_endpoint = s.endpoint();
  o.gpus = "fake:2x16GiB";
  o.slots = 3;
  o.name = "test-agent";
  o.workdir = dir.path();
  o.heartbeat_interval_ms = 100;
  o.liveness = 3;
  o.reconnect_initial_ms = 50;
  o.reconnect_max_ms = 200;
  o.stop_grace_ms = 2000;
  o.metrics_flush_ms = 20;
  return o;
}

pr::RegisterAck ack_for(const pr::Register& r, std::vector<pr::MetricsAck> acked = {}) {
  pr::RegisterAck ack;
  ack.session = r.session;
  ack.heartbeat_ms = 100;
  ack.liveness = 10;  // 1 s: slack for slow (sanitized) builds; the reconnect test waits this out
  ack.acked = std::move(acked);
  return ack;
}

pr::StartTrial start_trial(int64_t trial, const std::string& script, std::vector<int> gpus = {}) {
  pr::StartTrial s;
  s.trial_id = trial;
  s.attempt = 1;
  s.sweep_id = 3;
  s.argv = {"/bin/sh", "-c", script};
  s.env = {{"SWEPT_PARAMS", R"({"lr":0.1})"}};
  s.params = {{"lr", 0.1}};
  s.workdir = "sweep-3/trial-" + std::to_string(trial);
  s.gpus = std::move(gpus);
  return s;
}

// Registers the agent with the fake scheduler; returns the REGISTER.
pr::Register connect(FakeScheduler& s) {
  auto reg = s.wait_for<pr::Register>();
  REQUIRE(reg);
  s.send(ack_for(*reg));
  return *reg;
}

bool alive(pid_t pid) {
  std::string stat = swept::agent::testing::read_file("/proc/" + std::to_string(pid) + "/stat");
  return !stat.empty() && stat.find(") Z ") == std::string::npos;
}

// Starts the `swept agent` binary as its own process, named `name`, against
// the fake scheduler, working in `dir` with its log in DIR/agent.log (a shell
// redirects it, then becomes the agent), heartbeats every 100 ms.
Result<SpawnedChild> launch_swept_agent(PosixLauncher& launcher, FakeScheduler& s,
                                        const TempDir& dir, const std::string& name, int stop_grace_ms,
                                        std::vector<std::pair<std::string, std::string>> env = {}) {
  const std::string swept = std::string(SWEPT_BINARY_DIR) + "/bin/swept";
  REQUIRE_MESSAGE(std::filesystem::exists(swept), "build the swept target first");
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "exec \"$0\" agent --scheduler \"$1\" --gpus none --name \"$2\" --workdir \"$3\" "
               "--heartbeat-ms 100 --stop-grace-ms \"$4\" 2>\"$3/agent.log\"",
               swept, s.endpoint(), name, dir.path(), std::to_string(stop_grace_ms)};
  spec.working_dir = dir.path();
  spec.env_overrides = std::move(env);
  return launcher.launch(spec);
}

}  // namespace

TEST_CASE("agent: registers, runs a trial, streams its metrics, reports its exit, forgets it on EXIT_ACK") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  pr::Register reg = connect(s);
  CHECK(reg.name == "test-agent");
  CHECK(reg.slots == 3);
  CHECK(reg.session.size() == 16);
  CHECK(s.peer() == "test-agent#" + reg.session);
  REQUIRE(reg.gpus.size() == 2);
  CHECK(reg.gpus[1].index == 1);
  CHECK(reg.gpus[1].memory_bytes == (16ll << 30));
  CHECK(reg.running.empty());
  CHECK(reg.finished.empty());
  // Its containment mode, as agent/containment.h names it (which one depends
  // on the machine: a delegated cgroup v2, or the fallback), then the limits
  // it sets in each trial's cgroup (agent/limits.h; none where the host has
  // no controller).
  const std::string limits = reg.containment.substr(reg.containment.find("; ") + 2);
  CHECK_MESSAGE((reg.containment.rfind("cgroup; ", 0) == 0 || reg.containment.rfind("subreaper; ", 0) == 0),
                reg.containment);
  CHECK_MESSAGE((limits == "no limits" || limits == "limits memory,pids" || limits == "limits memory" ||
                 limits == "limits pids"),
                reg.containment);  // no --enforce-cpus: never cpus

  // The command names swept-params.json, so the agent writes it (and the trial checks it is there).
  s.send(start_trial(17, "test -s swept-params.json || exit 9; "
                         "echo '{\"step\": 1, \"loss\": 0.5}'; echo hello; echo \"[$CUDA_VISIBLE_DEVICES]\" >&2; "
                         "echo '{\"step\": 2, \"loss\": 0.25, \"final\": true}'",
                     {1}));
  auto started = s.wait_for<pr::TrialStarted>();
  REQUIRE(started);
  CHECK(started->trial_id == 17);
  CHECK(started->pid > 0);
  CHECK(started->workdir == dir.path() + "/sweep-3/trial-17");
  CHECK(started->env["CUDA_VISIBLE_DEVICES"] == "1");
  CHECK(started->env["SWEPT_PARAMS"] == R"({"lr":0.1})");
  CHECK(started->env["SWEPT_CHECKPOINT_DIR"] == dir.path() + "/sweep-3/trial-17/checkpoints");

  auto exited = s.wait_for<pr::TrialExited>();
  REQUIRE(exited);
  CHECK(exited->cause == pr::ExitCause::kExited);
  CHECK(exited->exit_code == 0);
  // Every batch came before the exit; together they hold every record, in order.
  std::vector<pr::MetricRecord> records;
  std::string log;
  int64_t last_seq = 0;
  while (auto batch = s.wait_for<pr::Metrics>(nullptr, 0)) {
    CHECK(batch->seq == last_seq + 1);
    last_seq = batch->seq;
    records.insert(records.end(), batch->records.begin(), batch->records.end());
    log += batch->log;
  }
  CHECK(exited->last_seq == last_seq);
  std::vector<pr::MetricRecord> want = {{1, "loss", 0.5}, {2, "loss", 0.25}};
  CHECK(records == want);
  CHECK(log.find("hello\n") != std::string::npos);
  CHECK(log.find("[1]\n") != std::string::npos);
  CHECK(swept::agent::testing::read_file(dir.path() + "/sweep-3/trial-17/swept-params.json") == "{\"lr\":0.1}\n");

  // Until EXIT_ACK the exit is kept: a re-registration lists it as finished.
  s.send(pr::Disconnect{"unknown session; register again"});
  auto again = s.wait_for<pr::Register>();
  REQUIRE(again);
  CHECK(again->session == reg.session);  // same socket
  REQUIRE(again->finished.size() == 1);
  CHECK(again->finished[0].trial_id == 17);
  s.send(ack_for(*again, {{17, 1, last_seq}}));
  auto resent = s.wait_for<pr::TrialExited>();
  REQUIRE(resent);
  CHECK(*resent == *exited);
  s.send(pr::ExitAck{17, 1});

  s.send(pr::Disconnect{"register again"});
  auto third = s.wait_for<pr::Register>();
  REQUIRE(third);
  CHECK(third->finished.empty());
  CHECK(agent.join() == kExitOk);
}

TEST_CASE("agent: STOP_TRIAL stops the trial's group, unknown trials are answered not_running") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  connect(s);
  s.send(start_trial(5, "trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done"));
  auto started = s.wait_for<pr::TrialStarted>();
  REQUIRE(started);
  REQUIRE(s.wait_for<pr::Metrics>([](const pr::Metrics& m) { return m.log.find("ready") != std::string::npos; }));
  s.send(pr::StartTrial(start_trial(5, "ignored")));  // a repeat changes nothing
  auto repeat = s.wait_for<pr::TrialStarted>();
  REQUIRE(repeat);
  CHECK(repeat->pid == started->pid);

  s.send(pr::StopTrial{5, 1, "cancelled by the user"});
  auto exited = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 5; });
  REQUIRE(exited);
  CHECK(exited->cause == pr::ExitCause::kStopped);
  CHECK(exited->reason == "cancelled by the user");
  CHECK_FALSE(alive(static_cast<pid_t>(started->pid)));

  s.send(pr::StopTrial{99, 2, "stale attempt"});
  auto not_running = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 99; });
  REQUIRE(not_running);
  CHECK(not_running->cause == pr::ExitCause::kNotRunning);
  CHECK(not_running->attempt == 2);
}

TEST_CASE("agent: a missing command or a GPU it lacks is a launch failure, and the agent carries on") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  connect(s);
  pr::StartTrial missing = start_trial(1, "");
  missing.argv = {"swept-no-such-program", "--x"};
  s.send(missing);
  auto e1 = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 1; });
  REQUIRE(e1);
  CHECK(e1->cause == pr::ExitCause::kLaunchFailed);
  CHECK(e1->exit_code == 127);
  CHECK(e1->reason.find("command not found: swept-no-such-program") == 0);

  s.send(start_trial(2, "exit 0", {7}));
  auto e2 = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 2; });
  REQUIRE(e2);
  CHECK(e2->cause == pr::ExitCause::kLaunchFailed);
  CHECK(e2->reason.find("GPU 7 is not on agent test-agent") == 0);

  // Garbage from the "scheduler" is dropped; the session goes on.
  s.send_raw({std::string(pr::kProtocolId), "START_TRIAL", "{not json"});
  s.send_raw({std::string(pr::kProtocolId), "NO_SUCH_KIND", "{}"});
  s.send_raw({"other", "x"});
  s.send(start_trial(3, "exit 4"));
  auto e3 = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 3; });
  REQUIRE(e3);
  CHECK(e3->cause == pr::ExitCause::kExited);
  CHECK(e3->exit_code == 4);
}

TEST_CASE("agent: the scheduler dies, trials keep running, the agent reconnects and reports them") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  pr::Register first = connect(s);
  // Trial 8 reports a metric, then waits for a file; trial 9 just runs.
  std::string go = dir.path() + "/go";
  s.send(start_trial(8, "echo '{\"step\": 1, \"acc\": 0.5}'; while [ ! -e " + go + " ]; do sleep 0.02; done; "
                        "echo '{\"step\": 2, \"acc\": 0.75}'"));
  s.send(start_trial(9, "trap 'exit 0' TERM; while :; do sleep 0.05; done"));
  auto started8 = s.wait_for<pr::TrialStarted>([](const pr::TrialStarted& t) { return t.trial_id == 8; });
  auto started9 = s.wait_for<pr::TrialStarted>([](const pr::TrialStarted& t) { return t.trial_id == 9; });
  REQUIRE(started8);
  REQUIRE(started9);
  REQUIRE(s.wait_for<pr::Metrics>([](const pr::Metrics& m) { return m.trial_id == 8 && !m.records.empty(); }));

  s.close();  // the scheduler is gone
  std::ofstream(go) << "go";  // trial 8 finishes while it is away

  s.reopen();
  s.clear_backlog();
  auto reg = s.wait_for<pr::Register>([](const pr::Register& r) { return r.finished.size() == 1; });
  REQUIRE(reg);
  CHECK(reg->session != first.session);  // a new socket
  REQUIRE(reg->running.size() == 1);
  CHECK(reg->running[0].trial_id == 9);
  CHECK(reg->running[0].pid == started9->pid);
  CHECK(alive(static_cast<pid_t>(started9->pid)));  // never restarted, never stopped
  CHECK(reg->finished[0].trial_id == 8);
  CHECK(reg->finished[0].cause == pr::ExitCause::kExited);
  CHECK(reg->finished[0].exit_code == 0);
  CHECK(reg->finished[0].last_seq >= 2);

  // The new scheduler stored batch 1 of trial 8: the agent re-sends the rest, then the exit.
  s.clear_backlog();
  s.send(ack_for(*reg, {{8, 1, 1}}));
  auto exited = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 8; });
  REQUIRE(exited);
  std::vector<pr::MetricRecord> resent;
  int64_t last_seq = 1;
  while (auto m = s.wait_for<pr::Metrics>([](const pr::Metrics& m) { return m.trial_id == 8; }, 0)) {
    CHECK(m->seq == last_seq + 1);
    last_seq = m->seq;
    resent.insert(resent.end(), m->records.begin(), m->records.end());
  }
  CHECK(last_seq == exited->last_seq);
  CHECK(resent == std::vector<pr::MetricRecord>{{2, "acc", 0.75}});
  s.send(pr::ExitAck{8, 1});

  // The running trial is still ours to stop.
  s.send(pr::StopTrial{9, 1, "done"});
  auto stopped = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 9; });
  REQUIRE(stopped);
  CHECK(stopped->cause == pr::ExitCause::kStopped);
}

TEST_CASE("agent: a duplicate name is retried with a new session") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  auto reg = s.wait_for<pr::Register>();
  REQUIRE(reg);
  s.send(pr::RegisterReject{"duplicate_name", "agent test-agent is alive elsewhere", 100});
  auto retry = s.wait_for<pr::Register>();
  REQUIRE(retry);
  CHECK(retry->session != reg->session);
  s.send(ack_for(*retry));
  CHECK(s.wait_for<pr::Heartbeat>());  // registered: heartbeats flow
}

TEST_CASE("agent: stopping the agent stops its trials, reports agent_shutdown, then DISCONNECT") {
  FakeScheduler s;
  TempDir dir;
  AgentOptions o = test_options(s, dir);
  o.stop_grace_ms = 200;
  AgentThread agent(o);
  connect(s);
  s.send(start_trial(4, "trap '' TERM; echo ready; while :; do sleep 0.05; done"));  // ignores SIGTERM
  auto started = s.wait_for<pr::TrialStarted>();
  REQUIRE(started);
  REQUIRE(s.wait_for<pr::Metrics>([](const pr::Metrics& m) { return m.log.find("ready") != std::string::npos; }));
  CHECK(agent.join() == kExitOk);
  CHECK_FALSE(alive(static_cast<pid_t>(started->pid)));
  REQUIRE(s.wait_for<pr::Disconnect>());
  // It said it leaves (HEARTBEAT `draining`, protocol 2) before it reported
  // the trial it stopped, so the scheduler sent nothing more its way.
  int said_at = -1, exited_at = -1, i = 0;
  for (const pr::Message& m : s.backlog()) {
    if (const auto* hb = std::get_if<pr::Heartbeat>(&m); hb && hb->draining && said_at < 0) said_at = i;
    if (std::holds_alternative<pr::TrialExited>(m) && exited_at < 0) exited_at = i;
    ++i;
  }
  CHECK(said_at >= 0);
  CHECK(said_at < exited_at);
  auto exited = s.wait_for<pr::TrialExited>();
  REQUIRE(exited);
  CHECK(exited->cause == pr::ExitCause::kAgentShutdown);
  CHECK(exited->signal == SIGKILL);
}

TEST_CASE("agent: bad options are refused before anything starts") {
  std::atomic<bool> stop{true};
  AgentOptions o;
  o.scheduler_endpoint = "localhost:5555";
  CHECK(run_agent(o, stop) == kExitUsage);
  o.scheduler_endpoint = "tcp://127.0.0.1:1";
  o.gpus = "fake:4x80GB";
  CHECK(validate_options(o).message().find("KiB, MiB, GiB, TiB") != std::string::npos);
  CHECK(run_agent(o, stop) == kExitUsage);
}

TEST_CASE("agent: the `swept agent` process exits 130 on SIGTERM after stopping its trials") {
  FakeScheduler s;
  TempDir dir;
  PosixLauncher launcher;
  auto child = launch_swept_agent(launcher, s, dir, "cli-agent", 2000);
  REQUIRE(child.ok());
  connect(s);
  s.send(start_trial(6, "trap 'echo stopping; exit 0' TERM; echo ready; while :; do sleep 0.05; done"));
  auto started = s.wait_for<pr::TrialStarted>();
  REQUIRE(started);
  REQUIRE(s.wait_for<pr::Metrics>([](const pr::Metrics& m) { return m.log.find("ready") != std::string::npos; }));

  ::kill(child->pid, SIGTERM);
  auto exited = s.wait_for<pr::TrialExited>();
  REQUIRE(exited);
  CHECK(exited->cause == pr::ExitCause::kAgentShutdown);
  CHECK(exited->exit_code == 0);
  CHECK(s.wait_for<pr::Disconnect>());
  // The agent's own exit: its pidfd becomes readable.
  swept::testing::eventually([&] {
    swept::agent::testing::poll_readable({child->pidfd}, 100);
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(child->pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0;
  }, 20, kNoPause);
  int status = 0;
  ::kill(child->pid, SIGKILL);  // no-op when it exited as it should; never leave it behind
  ::waitpid(child->pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == kExitInterrupted);
  CHECK_FALSE(alive(static_cast<pid_t>(started->pid)));
  for (int fd : {child->stdout_fd, child->stderr_fd, child->pidfd}) ::close(fd);
}

TEST_CASE("agent: a `swept agent` killed with SIGKILL leaves no trial running") {
  std::string swept = std::string(SWEPT_BINARY_DIR) + "/bin/swept";
  REQUIRE(std::filesystem::exists(swept));
  FakeScheduler s;
  TempDir dir;
  PosixLauncher launcher;
  LaunchSpec spec;
  spec.argv = {swept, "agent", "--scheduler", s.endpoint(), "--gpus", "none", "--name", "doomed",
               "--workdir", dir.path()};
  spec.working_dir = dir.path();
  auto child = launcher.launch(spec);
  REQUIRE(child.ok());
  connect(s);
  s.send(start_trial(2, "trap '' TERM; echo ready; while :; do sleep 0.05; done"));
  auto started = s.wait_for<pr::TrialStarted>();
  REQUIRE(started);
  REQUIRE(s.wait_for<pr::Metrics>([](const pr::Metrics& m) { return m.log.find("ready") != std::string::npos; }));

  ::kill(child->pid, SIGKILL);
  int status = 0;
  ::waitpid(child->pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  pid_t trial = static_cast<pid_t>(started->pid);
  bool gone = swept::testing::eventually([&] { return !alive(trial); }, 10, std::chrono::milliseconds(10));
  if (!gone) ::kill(-trial, SIGKILL);
  CHECK(gone);
  for (int fd : {child->stdout_fd, child->stderr_fd, child->pidfd}) ::close(fd);
}

// Issue 26: an exit the scheduler never acknowledged is kept on the host
// (agent/exit_journal.h): the next agent of the name, started after this one
// died (SIGKILL leaves the same file as this stop), reports it and re-sends
// its metrics; the trial is not run again.
TEST_CASE("agent: an exit not acknowledged when the agent went is reported by the next agent of its name, metrics first") {
  FakeScheduler s;
  TempDir dir;
  {
    AgentThread first(test_options(s, dir));
    auto reg1 = s.wait_for<pr::Register>();
    REQUIRE(reg1);
    pr::RegisterAck lease = ack_for(*reg1);
    lease.lease_ms = 60000;  // the exit is kept for a later agent for a few leases
    s.send(lease);
    s.send(start_trial(5, "echo '{\"step\": 1, \"loss\": 0.5}'; exit 0"));
    auto exited = s.wait_for<pr::TrialExited>();
    REQUIRE(exited);
    CHECK(exited->exit_code == 0);
    // No EXIT_ACK and no metrics ack: the scheduler never had them.
  }
  AgentThread second(test_options(s, dir));
  auto reg = s.wait_for<pr::Register>([](const pr::Register& r) { return !r.finished.empty(); });
  REQUIRE(reg);
  CHECK(reg->running.empty());
  REQUIRE(reg->finished.size() == 1);
  CHECK(reg->finished[0].trial_id == 5);
  CHECK(reg->finished[0].cause == pr::ExitCause::kExited);
  CHECK(reg->finished[0].exit_code == 0);
  CHECK(reg->finished[0].last_seq >= 1);
  s.send(ack_for(*reg));  // nothing of it stored yet
  auto batch = s.wait_for<pr::Metrics>([](const pr::Metrics& m) { return m.trial_id == 5 && !m.records.empty(); });
  REQUIRE(batch);
  CHECK(batch->records[0] == pr::MetricRecord{1, "loss", 0.5});
  auto again = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 5; });
  REQUIRE(again);
  s.send(pr::ExitAck{5, 1});
  // Acknowledged now: a third agent has nothing to report.
  CHECK(swept::testing::eventually([&] {
    std::string text = swept::agent::testing::read_file(dir.path() + "/.swept-exits-test-agent");
    return text.find("EXIT_ACK {") != std::string::npos;
  }, 20));
}

// A journaled exit whose attempt the scheduler starts again came from
// another scheduler's database (the same one never restarts an attempt): the
// trial runs, its own exit is reported, and the old one is dropped.
TEST_CASE("agent: a START_TRIAL for an attempt a previous agent had run starts it afresh, the old exit dropped") {
  FakeScheduler s;
  TempDir dir;
  {
    AgentThread first(test_options(s, dir));
    auto reg1 = s.wait_for<pr::Register>();
    REQUIRE(reg1);
    pr::RegisterAck lease = ack_for(*reg1);
    lease.lease_ms = 60000;
    s.send(lease);
    s.send(start_trial(6, "exit 0"));
    REQUIRE(s.wait_for<pr::TrialExited>());
  }
  AgentThread second(test_options(s, dir));
  auto reg = s.wait_for<pr::Register>([](const pr::Register& r) { return !r.finished.empty(); });
  REQUIRE(reg);
  s.send(ack_for(*reg));
  s.send(start_trial(6, "exit 4"));
  auto fresh = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 6 && e.exit_code == 4; });
  REQUIRE(fresh);
  std::string log = swept::agent::testing::read_file(dir.path() + "/.swept-exits-test-agent");
  CHECK(log.find("EXIT_ACK {") != std::string::npos);  // the old exit is off the journal
}

TEST_CASE("agent: a burst of metrics arrives whole, in batches of at most 10,000, numbered without gaps") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  connect(s);
  // 25,000 metric lines and 200 KiB of log in one burst.
  s.send(start_trial(11, "i=0; while [ $i -lt 25000 ]; do echo \"{\\\"step\\\": $i, \\\"x\\\": $i}\"; i=$((i+1)); done; "
                         "head -c 204800 /dev/zero | tr '\\000' L >&2"));
  auto exited = s.wait_for<pr::TrialExited>(nullptr, 60000);
  REQUIRE(exited);
  CHECK(exited->exit_code == 0);
  int64_t seq = 0, records = 0, log_bytes = 0, log_dropped = 0;
  bool in_order = true;
  while (auto m = s.wait_for<pr::Metrics>(nullptr, 0)) {
    CHECK(m->seq == seq + 1);
    seq = m->seq;
    CHECK(m->records.size() <= 10000);
    for (const auto& r : m->records) {
      in_order = in_order && r.step == records && r.value == static_cast<double>(records);
      ++records;
    }
    CHECK(m->log.size() <= 64 * 1024);
    log_bytes += static_cast<int64_t>(m->log.size());
    log_dropped += m->log_dropped;
  }
  CHECK(seq == exited->last_seq);
  CHECK(records == 25000);
  CHECK(in_order);
  CHECK(log_bytes + log_dropped == 204800);  // every log byte is either sent or counted
}

TEST_CASE("agent: a START_TRIAL that crosses a re-registration is announced once the scheduler acknowledges") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  connect(s);
  // In order: "register again", then a start. The agent re-registers before
  // it reads the start, so the REGISTER cannot list the trial.
  s.send(pr::Disconnect{"register again"});
  s.send(start_trial(21, "trap 'exit 0' TERM; while :; do sleep 0.05; done"));
  auto reg = s.wait_for<pr::Register>();
  REQUIRE(reg);
  CHECK(reg->running.empty());
  // Nothing about the trial goes out until the ACK: then TRIAL_STARTED.
  CHECK_FALSE(s.wait_for<pr::TrialStarted>(nullptr, 300));
  s.send(ack_for(*reg));
  auto started = s.wait_for<pr::TrialStarted>();
  REQUIRE(started);
  CHECK(started->trial_id == 21);
  s.send(pr::StopTrial{21, 1, "done"});
  auto exited = s.wait_for<pr::TrialExited>();
  REQUIRE(exited);
  CHECK(exited->cause == pr::ExitCause::kStopped);
}

TEST_CASE("agent: a START_TRIAL with `after` waits for that trial's end and then starts in its place") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  pr::Register reg = connect(s);
  CHECK(reg.features == std::vector<std::string>{"start_after", "gang", "checkpoint_segments", "checkpoint_frames"});
  auto is = [](int64_t id) { return [id](const auto& m) { return m.trial_id == id; }; };
  auto touch = [&](int64_t trial) { std::ofstream(dir.path() + "/sweep-3/trial-" + std::to_string(trial) + "/go"); };
  const std::string until_go = "while [ ! -e go ]; do sleep 0.02; done";

  s.send(start_trial(1, until_go));
  REQUIRE(s.wait_for<pr::TrialStarted>(is(1)));
  pr::StartTrial two = start_trial(2, "echo two");
  two.after_trial_id = 1;
  two.after_attempt = 1;
  s.send(two);
  // A repeated START_TRIAL for trial 1 is answered at once; the agent has
  // handled START_TRIAL 2 before it, and trial 2 has not started.
  s.send(start_trial(1, until_go));
  REQUIRE(s.wait_for<pr::TrialStarted>(is(1)));
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/sweep-3/trial-2"));
  touch(1);
  auto ended = s.wait_for<pr::TrialExited>(is(1));
  auto started = s.wait_for<pr::TrialStarted>(is(2));
  REQUIRE(ended);
  REQUIRE(started);
  CHECK(started->started_at >= ended->ended_at);
  // The exit says when its process started (what a scheduler that never
  // stored TRIAL_STARTED records as the start).
  CHECK(ended->started_at > 0);
  CHECK(ended->started_at <= ended->ended_at);
  auto done = s.wait_for<pr::TrialExited>(is(2));
  REQUIRE(done);
  CHECK(done->exit_code == 0);

  // STOP_TRIAL for a waiting trial: it ends there, never started.
  s.send(start_trial(4, until_go));
  REQUIRE(s.wait_for<pr::TrialStarted>(is(4)));
  pr::StartTrial five = start_trial(5, "echo five");
  five.after_trial_id = 4;
  five.after_attempt = 1;
  s.send(five);
  s.send(pr::StopTrial{5, 1, "cancelled by the user"});
  auto stopped = s.wait_for<pr::TrialExited>(is(5));
  REQUIRE(stopped);
  CHECK(stopped->cause == pr::ExitCause::kStopped);
  CHECK(stopped->reason == "cancelled by the user");

  // A re-registration forgets a waiting trial: neither running nor finished.
  pr::StartTrial six = start_trial(6, "echo six");
  six.after_trial_id = 4;
  six.after_attempt = 1;
  s.send(six);
  s.send(pr::Disconnect{"unknown session; register again"});
  auto again = s.wait_for<pr::Register>();
  REQUIRE(again);
  REQUIRE(again->running.size() == 1);
  CHECK(again->running[0].trial_id == 4);
  for (const auto& f : again->finished) CHECK(f.trial_id != 6);
  s.send(ack_for(*again));
  touch(4);
  REQUIRE(s.wait_for<pr::TrialExited>(is(4)));
  // Trial 4's end started nothing: 5 was stopped and 6 forgotten.
  s.send(start_trial(7, "true"));
  REQUIRE(s.wait_for<pr::TrialExited>(is(7)));
  CHECK_FALSE(s.wait_for<pr::TrialStarted>(is(5), 0));
  CHECK_FALSE(s.wait_for<pr::TrialStarted>(is(6), 0));
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/sweep-3/trial-6"));
  CHECK(agent.join() == kExitOk);
}

TEST_CASE("agent: TRIAL_STARTED goes out before the trial's first METRICS and its exit, or after 20 ms") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  connect(s);
  s.send(start_trial(8, "echo '{\"step\": 1, \"loss\": 0.5}'"));
  REQUIRE(s.wait_for<pr::TrialExited>());
  std::vector<std::string> kinds;
  for (const std::string& k : s.backlog_kinds())
    if (k != "HEARTBEAT") kinds.push_back(k);
  CHECK(kinds == std::vector<std::string>{"TRIAL_STARTED", "METRICS"});
  s.clear_backlog();
  // A trial that prints nothing and runs on is announced on its own.
  s.send(start_trial(9, "trap 'exit 0' TERM; while :; do sleep 0.05; done"));
  auto started = s.wait_for<pr::TrialStarted>();
  REQUIRE(started);
  CHECK(started->trial_id == 9);
  s.send(pr::StopTrial{9, 1, "done"});
  REQUIRE(s.wait_for<pr::TrialExited>());
}

TEST_CASE("agent: the launcher is injected: a fork that fails is a launch failure with its reason, the next one runs") {
  FakeScheduler s;
  TempDir dir;
  swept::agent::testing::FakeLauncher launcher;
  launcher.fail_next_with(Status::IoError("fork failed: Resource temporarily unavailable"));
  AgentOptions o = test_options(s, dir);
  o.launcher = &launcher;
  AgentThread agent(o);
  connect(s);
  s.send(start_trial(1, "exit 0"));
  auto e1 = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 1; });
  REQUIRE(e1);
  CHECK(e1->cause == pr::ExitCause::kLaunchFailed);
  CHECK(e1->reason.find("fork failed: Resource temporarily unavailable") != std::string::npos);

  s.send(start_trial(2, "exit 3"));
  auto e2 = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 2; });
  REQUIRE(e2);
  CHECK(e2->cause == pr::ExitCause::kExited);
  CHECK(e2->exit_code == 3);
  auto specs = launcher.launched();
  REQUIRE(specs.size() == 2);
  CHECK(specs[1].argv == std::vector<std::string>{"/bin/sh", "-c", "exit 3"});
}

TEST_CASE("agent: past its lease without a word from the scheduler it stops its trials, SIGKILL within the lease") {
  FakeScheduler s;
  TempDir dir;
  AgentOptions options = test_options(s, dir);
  options.stop_grace_ms = 10000;  // longer than the lease: the lease's own grace (half of it) applies
  AgentThread agent(options);
  auto reg = s.wait_for<pr::Register>();
  REQUIRE(reg);
  pr::RegisterAck ack = ack_for(*reg);
  ack.lease_ms = 2000;
  s.send(ack);
  // It ignores SIGTERM: only the SIGKILL at the end of the lease ends it.
  s.send(start_trial(4, "trap '' TERM; echo ready; while :; do sleep 0.05; done"));
  auto started = s.wait_for<pr::TrialStarted>();
  REQUIRE(started);
  REQUIRE(s.wait_for<pr::Metrics>([](const pr::Metrics& m) { return m.log.find("ready") != std::string::npos; }));

  // The link is cut: the scheduler neither answers nor heartbeats.
  s.heartbeats = false;
  const pid_t trial = static_cast<pid_t>(started->pid);
  bool gone = swept::testing::eventually(
      [&] { return !alive(trial) || (s.wait_for<pr::Disconnect>(nullptr, 100), !alive(trial)); }, 20, kNoPause);
  CHECK_MESSAGE(gone, "the trial outlived the agent's lease");

  // The link comes back: the agent reports the trial ended by the agent, not by itself.
  s.heartbeats = true;
  auto back = s.wait_for<pr::Register>([](const pr::Register& r) { return !r.finished.empty(); });
  REQUIRE(back);
  CHECK(back->running.empty());
  REQUIRE(back->finished.size() == 1);
  CHECK(back->finished[0].trial_id == 4);
  CHECK(back->finished[0].cause == pr::ExitCause::kAgentShutdown);
  CHECK(back->finished[0].reason.find("lease expired") != std::string::npos);
  CHECK(back->finished[0].reason.find("killed") != std::string::npos);  // SIGTERM was not enough
}

namespace {

// The state letter of /proc/PID/stat ('T': stopped), or 0 if none.
char process_state(pid_t pid) {
  std::string stat = swept::agent::testing::read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t close_paren = stat.rfind(')');
  return close_paren == std::string::npos || close_paren + 2 >= stat.size() ? 0 : stat[close_paren + 2];
}

// The lease keepers among this process's children (comm "swept-keeper").
std::vector<pid_t> keepers_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = swept::agent::testing::read_file(e.path().string() + "/stat");
    size_t open_paren = stat.find('('), close_paren = stat.rfind(')');
    if (open_paren == std::string::npos || close_paren == std::string::npos) continue;
    if (stat.substr(open_paren + 1, close_paren - open_paren - 1) != "swept-keeper") continue;
    if (std::atol(stat.c_str() + close_paren + 4) == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// A `swept agent` process (its log in DIR/agent.log) whose whole process
// group is frozen with SIGSTOP past its lease: its lease keeper must stop the
// trial, including what the trial started outside its group, while the
// agent is still frozen; resumed, the agent reports the trial ended by the lease.
void frozen_agent_case(const std::string& containment) {
  CAPTURE(containment);
  FakeScheduler s;
  TempDir dir;
  PosixLauncher launcher;
  auto agent = launch_swept_agent(launcher, s, dir, "frozen", 600, {{"SWEPT_AGENT_CONTAINMENT", containment}});
  REQUIRE(agent.ok());
  auto reg = s.wait_for<pr::Register>();
  REQUIRE(reg);
  // The REGISTER names the mode the agent chose (forced: subreaper).
  if (containment == "subreaper") CHECK(reg->containment.rfind("subreaper; ", 0) == 0);
  pr::RegisterAck ack = ack_for(*reg);
  ack.lease_ms = 2000;
  s.send(ack);
  // The trial ignores SIGTERM, and leaves behind a process outside its group
  // and session that ignores it too: only a SIGKILL to all of it ends it.
  s.send(start_trial(9, "trap '' TERM; ( setsid sh -c 'trap \"\" TERM; echo $$ > e.tmp; mv e.tmp escaped.pid; "
                        "exec sleep 1000' & ); while [ ! -s escaped.pid ]; do sleep 0.01; done; echo ready; "
                        "while :; do sleep 0.05; done"));
  auto started = s.wait_for<pr::TrialStarted>();
  REQUIRE(started);
  REQUIRE(s.wait_for<pr::Metrics>([](const pr::Metrics& m) { return m.log.find("ready") != std::string::npos; }));
  const pid_t trial = static_cast<pid_t>(started->pid);
  const pid_t escaped = static_cast<pid_t>(
      std::stol(swept::agent::testing::read_file(started->workdir + "/escaped.pid")));
  REQUIRE(alive(escaped));
  REQUIRE(::getpgid(escaped) != trial);
  std::vector<pid_t> keepers = keepers_of(agent->pid);
  REQUIRE_MESSAGE(keepers.size() == 1, "the agent runs one lease keeper");
  // A second trial that runs to its end while the agent is frozen (told by
  // a file): issue 26, it must be reported as it ended, not stopped.
  s.send(start_trial(11, "while [ ! -e go ]; do sleep 0.01; done; exit 0"));
  auto started11 = s.wait_for<pr::TrialStarted>([](const pr::TrialStarted& x) { return x.trial_id == 11; });
  REQUIRE(started11);
  const pid_t finisher = static_cast<pid_t>(started11->pid);

  // Frozen, the whole group (the keeper is not in it); the scheduler goes on
  // sending heartbeats that nobody reads.
  const int64_t frozen_at = swept::agent::testing::steady_ms();
  REQUIRE(::kill(-agent->pid, SIGSTOP) == 0);
  // The fake scheduler goes on heartbeating while the test waits (its pump).
  auto stopped = [&] { return process_state(agent->pid) == 'T'; };
  REQUIRE(swept::testing::eventually(
      [&] { return stopped() || (s.wait_for<pr::Disconnect>(nullptr, 10), stopped()); }, 20, kNoPause));
  { std::ofstream(started11->workdir + "/go") << "go"; }
  auto finisher_done = [&] { return process_state(finisher) == 'Z'; };
  REQUIRE(swept::testing::eventually(
      [&] { return finisher_done() || (s.wait_for<pr::Disconnect>(nullptr, 10), finisher_done()); }, 20, kNoPause));
  bool gone = swept::testing::eventually([&] {
    auto done = [&] { return !alive(trial) && !alive(escaped); };
    return done() || (s.wait_for<pr::Disconnect>(nullptr, 20), done());
  }, 20, kNoPause);
  const int64_t gone_after = swept::agent::testing::steady_ms() - frozen_at;
  CHECK_MESSAGE(gone, "the frozen agent's trial outlived its lease");
  CHECK_MESSAGE(process_state(agent->pid) == 'T', "the agent must still be frozen: the keeper did it");
  MESSAGE(containment << ": trial gone " << gone_after << " ms after the freeze (lease 2000 ms)");
  if (!gone) {
    ::kill(escaped, SIGKILL);
    ::kill(-trial, SIGKILL);
  }

  // A START_TRIAL sent while it is frozen, past its lease: the scheduler
  // has given that agent up, and may give the trial to another host.
  s.send(start_trial(10, "echo started > late.txt"));

  // Resumed, it reports the trial ended by the lease (on its connection, or
  // in a new REGISTER's `finished`), not as a trial killed out of the blue,
  // and the late START_TRIAL as not started: it never runs.
  ::kill(-agent->pid, SIGCONT);
  std::optional<pr::TrialExited> ended, late, finished;
  bool late_started = false;
  auto note = [&](const pr::TrialExited& x) {
    if (x.trial_id == 9) ended = x;
    if (x.trial_id == 10) late = x;
    if (x.trial_id == 11) finished = x;
  };
  // The agent's report of trial 9 comes after anything it did with trial 10.
  swept::testing::eventually([&] {
    if (ended) return true;
    if (auto st = s.wait_for<pr::TrialStarted>([](const pr::TrialStarted& x) { return x.trial_id == 10; }, 33))
      late_started = true;
    if (auto e = s.wait_for<pr::TrialExited>(nullptr, 33)) note(*e);
    if (auto r = s.wait_for<pr::Register>(nullptr, 33)) {
      for (const auto& f : r->finished) note(f);
      for (const auto& rt : r->running)
        if (rt.trial_id == 10) late_started = true;
      s.send(ack_for(*r));
    }
    return ended.has_value() && finished.has_value();
  }, 20, kNoPause);
  CHECK_FALSE_MESSAGE(late_started, "a START_TRIAL read after the lease ran out was started");
  // Dropped unread with the stale connection, or read and refused: then
  // reported as not started.
  if (late) {
    CHECK(late->cause == pr::ExitCause::kAgentShutdown);
    CHECK_MESSAGE(late->reason.find("not started") != std::string::npos, late->reason);
  }
  REQUIRE(ended);
  CHECK(ended->cause == pr::ExitCause::kAgentShutdown);
  CHECK_MESSAGE(ended->reason.find("lease expired") != std::string::npos, ended->reason);
  CHECK_MESSAGE(ended->reason.find("lease keeper") != std::string::npos, ended->reason);
  REQUIRE(finished);
  CHECK_MESSAGE(finished->cause == pr::ExitCause::kExited, finished->reason);
  CHECK(finished->exit_code == 0);
  std::string log = swept::agent::testing::read_file(dir.path() + "/agent.log");
  CHECK_MESSAGE(log.find("swept lease keeper") != std::string::npos, log);

  ::kill(agent->pid, SIGTERM);
  int status = 0;
  ::waitpid(agent->pid, &status, 0);
  // The keeper went with its agent.
  CHECK(swept::testing::eventually([&] { return !alive(keepers[0]); }, 20, std::chrono::milliseconds(10)));
  for (int fd : {agent->stdout_fd, agent->stderr_fd, agent->pidfd}) ::close(fd);
}

}  // namespace

TEST_CASE("agent: frozen with its group (SIGSTOP) past its lease, its lease keeper stops the trial and all it started, and what was sent meanwhile never starts") {
  frozen_agent_case("auto");  // cgroup where this machine allows it
  frozen_agent_case("subreaper");
}

TEST_CASE("agent: a healthy agent's trials are never touched by its lease keeper") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  auto reg = s.wait_for<pr::Register>();
  REQUIRE(reg);
  pr::RegisterAck ack = ack_for(*reg);
  ack.lease_ms = 2000;
  s.send(ack);
  auto keeper_runs = [] { return !keepers_of(::getpid()).empty(); };
  REQUIRE_MESSAGE(swept::testing::eventually(
                      [&] { return keeper_runs() || (s.wait_for<pr::Disconnect>(nullptr, 100), keeper_runs()); }, 20,
                      kNoPause),
                  "no lease keeper runs beside the agent");
  // It runs 6 s, three leases, answering SIGTERM loudly.
  s.send(start_trial(5, "trap 'echo got TERM; exit 7' TERM; i=0; while [ $i -lt 60 ]; do sleep 0.1; i=$((i+1)); "
                        "done; echo done"));
  std::string log;
  auto ended = s.wait_for<pr::TrialExited>(
      [&](const pr::TrialExited& e) { return e.trial_id == 5; }, 30000);
  while (auto m = s.wait_for<pr::Metrics>(nullptr, 0)) log += m->log;
  REQUIRE(ended);
  CHECK(ended->cause == pr::ExitCause::kExited);
  CHECK(ended->exit_code == 0);
  CHECK_MESSAGE(log.find("got TERM") == std::string::npos, log);
  CHECK(log.find("done") != std::string::npos);
}

// ---- multi-node trials (issue 25; docs/protocol.md, START_TRIAL `gang`) ----

namespace {

pr::Gang node_of(int nodes, int node_rank, int procs, int port) {
  pr::Gang g;
  g.nodes = nodes;
  g.node_rank = node_rank;
  g.procs_per_node = procs;
  g.master_addr = "127.0.0.1";
  g.master_port = port;
  return g;
}


// Runs `swept agent ARGS...` to its end; returns its exit status and stderr.
std::pair<int, std::string> run_swept_agent(const TempDir& dir, const std::vector<std::string>& args) {
  const std::string swept = std::string(SWEPT_BINARY_DIR) + "/bin/swept";
  REQUIRE_MESSAGE(std::filesystem::exists(swept), "build the swept target first");
  PosixLauncher launcher;
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "\"$0\" agent \"$@\" 2>\"$SWEPT_TEST_ERR\"", swept};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.working_dir = dir.path();
  spec.env_overrides = {{"SWEPT_TEST_ERR", dir.path() + "/err.txt"}};
  auto child = launcher.launch(spec);
  REQUIRE(child.ok());
  int status = 0;
  ::waitpid(child->pid, &status, 0);
  for (int fd : {child->stdout_fd, child->stderr_fd, child->pidfd}) ::close(fd);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, swept::agent::testing::read_file(dir.path() + "/err.txt")};
}

}  // namespace

TEST_CASE("agent: REGISTER carries the advertised address, the rendezvous ports and the feature gang") {
  FakeScheduler s;
  TempDir dir;
  {
    AgentThread agent(test_options(s, dir));
    pr::Register reg = connect(s);
    CHECK(reg.addr == "127.0.0.1");  // the local address toward tcp://127.0.0.1:PORT
    CHECK(reg.ports_lo == 29500);
    CHECK(reg.ports_hi == 29999);
    CHECK(std::find(reg.features.begin(), reg.features.end(), "gang") != reg.features.end());
    CHECK(agent.join() == kExitOk);
  }
  FakeScheduler s2;
  AgentOptions o = test_options(s2, dir);
  o.advertise_addr = "10.1.2.3";
  o.rendezvous_port_lo = 30000;
  o.rendezvous_port_hi = 30009;
  AgentThread agent(o);
  pr::Register reg = connect(s2);
  CHECK(reg.addr == "10.1.2.3");
  CHECK(reg.ports_lo == 30000);
  CHECK(reg.ports_hi == 30009);
  CHECK(agent.join() == kExitOk);
}

TEST_CASE("agent: `swept agent` refuses a bad --rendezvous-ports or --advertise-addr, exit 2, naming it") {
  TempDir dir;
  auto [code, err] = run_swept_agent(dir, {"--scheduler", "tcp://127.0.0.1:1", "--rendezvous-ports", "29999-29500"});
  CHECK(code == kExitUsage);
  CHECK(err.find("--rendezvous-ports '29999-29500' must be a port range LO-HI") != std::string::npos);
  auto [code2, err2] = run_swept_agent(dir, {"--scheduler", "tcp://127.0.0.1:1", "--rendezvous-ports", "lots"});
  CHECK(code2 == kExitUsage);
  CHECK(err2.find("--rendezvous-ports 'lots'") != std::string::npos);
  auto [code3, err3] = run_swept_agent(dir, {"--scheduler", "tcp://127.0.0.1:1", "--advertise-addr", "a b"});
  CHECK(code3 == kExitUsage);
  CHECK(err3.find("--advertise-addr 'a b'") != std::string::npos);
}

TEST_CASE("agent: a START_TRIAL with gang is one trial of procs_per_node processes, metrics from RANK 0 only") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  connect(s);
  const int port = swept::testing::free_port();
  pr::StartTrial start = start_trial(31, "echo \"{\\\"step\\\": 1, \\\"rank\\\": $RANK}\"; echo \"$LOCAL_RANK/$WORLD_SIZE\"", {0, 1});
  start.gang = node_of(1, 0, 3, port);
  s.send(start);
  auto started = s.wait_for<pr::TrialStarted>();
  REQUIRE(started);
  CHECK(started->env["RANK"] == "0");  // local rank 0's environment
  CHECK(started->env["LOCAL_WORLD_SIZE"] == "3");
  CHECK(started->env["MASTER_PORT"] == std::to_string(port));
  CHECK(started->env["CUDA_VISIBLE_DEVICES"] == "0,1");
  auto exited = s.wait_for<pr::TrialExited>();
  REQUIRE(exited);
  CHECK(exited->cause == pr::ExitCause::kExited);
  CHECK(exited->exit_code == 0);
  std::vector<pr::MetricRecord> records;
  std::string log;
  while (auto batch = s.wait_for<pr::Metrics>(nullptr, 0)) {
    records.insert(records.end(), batch->records.begin(), batch->records.end());
    log += batch->log;
  }
  CHECK(records == std::vector<pr::MetricRecord>{{1, "rank", 0}});
  for (const char* line : {"0/3\n", "1/3\n", "2/3\n"}) CHECK(log.find(line) != std::string::npos);
  CHECK_FALSE(s.wait_for<pr::TrialStarted>(nullptr, 0));  // one node, one TRIAL_STARTED
  CHECK(agent.join() == kExitOk);
}

TEST_CASE("agent: a gang node's failing process stops the others, STOP_TRIAL stops every process of a node") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  connect(s);
  const int port = swept::testing::free_port();
  // Rank 1 of node 0 fails once ranks 0 and 2 are waiting: the node's exit is its exit.
  pr::StartTrial failing = start_trial(41, "echo $$ > pid-$RANK; if [ $RANK = 1 ]; then "
                                           "while [ ! -s pid-0 ] || [ ! -s pid-2 ]; do sleep 0.01; done; exit 3; fi; "
                                           "exec sleep 300");
  failing.gang = node_of(2, 0, 3, port);
  s.send(failing);
  auto exited = s.wait_for<pr::TrialExited>();
  REQUIRE(exited);
  CHECK(exited->cause == pr::ExitCause::kExited);
  CHECK(exited->exit_code == 3);
  CHECK(exited->reason == "rank 1: exit code 3");
  const std::string trial41 = dir.path() + "/sweep-3/trial-41/";
  for (int rank : {0, 1, 2}) {
    pid_t pid = std::stoi(swept::agent::testing::read_file(trial41 + "pid-" + std::to_string(rank)));
    CHECK(swept::testing::eventually([&] { return !alive(pid); }, 10, std::chrono::milliseconds(10)));
  }

  pr::StartTrial stopped = start_trial(42, "echo $$ > pid-$RANK; echo ready; exec sleep 300");
  stopped.gang = node_of(2, 1, 3, port);
  s.send(stopped);
  const std::string trial42 = dir.path() + "/sweep-3/trial-42/";
  auto all_running = [&] {
    s.wait_for<pr::Heartbeat>(nullptr, 20);  // keeps the session alive while waiting
    for (int rank : {3, 4, 5})
      if (swept::agent::testing::read_file(trial42 + "pid-" + std::to_string(rank)).empty()) return false;
    return true;
  };
  REQUIRE(swept::testing::eventually(all_running, 15, kNoPause));
  // Node 0's TRIAL_STARTED is the trial's record; node 1's says it runs, without the environment.
  auto started41 = s.wait_for<pr::TrialStarted>([](const pr::TrialStarted& t) { return t.trial_id == 41; });
  REQUIRE(started41);
  CHECK(started41->env.at("RANK") == "0");
  auto started42 = s.wait_for<pr::TrialStarted>([](const pr::TrialStarted& t) { return t.trial_id == 42; });
  REQUIRE(started42);
  CHECK(started42->pid > 0);
  CHECK(started42->env.empty());
  s.send(pr::StopTrial{42, 1, "cancelled"});
  auto ended = s.wait_for<pr::TrialExited>([](const pr::TrialExited& e) { return e.trial_id == 42; });
  REQUIRE(ended);
  CHECK(ended->cause == pr::ExitCause::kStopped);
  for (int rank : {3, 4, 5}) {
    pid_t pid = std::stoi(swept::agent::testing::read_file(trial42 + "pid-" + std::to_string(rank)));
    CHECK(swept::testing::eventually([&] { return !alive(pid); }, 10, std::chrono::milliseconds(10)));
  }
  CHECK(agent.join() == kExitOk);
}

TEST_CASE("agent: node 0 whose master_port is taken ends launch_failed, the host's fault, naming the port") {
  FakeScheduler s;
  TempDir dir;
  AgentThread agent(test_options(s, dir));
  connect(s);
  // Listening on all interfaces: the agent's check of the port must fail.
  swept::testing::HeldPort busy(/*listen=*/true, htonl(INADDR_ANY));
  pr::StartTrial start = start_trial(51, "echo ran > ran");
  start.gang = node_of(2, 0, 2, busy.port());
  s.send(start);
  auto exited = s.wait_for<pr::TrialExited>();
  REQUIRE(exited);
  CHECK(exited->cause == pr::ExitCause::kLaunchFailed);
  CHECK(exited->host_fault);
  CHECK(exited->reason.find("master_port " + std::to_string(busy.port()) + " cannot be bound") == 0);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/sweep-3/trial-51/ran"));
  CHECK(agent.join() == kExitOk);
}
