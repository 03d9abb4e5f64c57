// Tests of TrialSupervisor with real tiny trial processes. Long-running trials
// sleep inside the child; the test itself only waits on events (pipes, pidfd,
// the supervisor's own deadlines) with an overall deadline.
#include "agent/supervisor.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "agent/test_util.h"
#include "common/testing/eventually.h"

using namespace swept::agent;
using swept::agent::testing::TempDir;

namespace {

struct Trial {
  TempDir root;
  PosixLauncher launcher;
  std::unique_ptr<TrialSupervisor> sup;
  std::vector<MetricPoint> metrics;
  std::string log;
  size_t max_pending_metrics = SupervisorOptions{}.max_pending_metrics;
  std::string shared_root;  // another Trial's root: trials of one agent, side by side

  void root_override(const std::string& path) { shared_root = path; }
  void start(TrialLaunch launch, int grace_ms = 10000, uint64_t max_log_bytes = uint64_t{1} << 30) {
    SupervisorOptions options;
    options.max_pending_metrics = max_pending_metrics;
    options.max_output_log_bytes = max_log_bytes;
    options.workdir_root = shared_root.empty() ? root.path() : shared_root;
    options.stop_grace_ms = grace_ms;
    if (launch.workdir.empty()) launch.workdir = "sweep-1/trial-7";
    sup = TrialSupervisor::start(launch, options, launcher, swept::SteadyClock::instance());
  }
  void drain() {
    for (auto& m : sup->take_metrics()) metrics.push_back(m);
    log += sup->take_log().text;
  }
  // One turn of an event loop: wait for output, exit or a deadline, then service.
  void step(int wait_ms) {
    int64_t until = sup->next_deadline_ms() - swept::SteadyClock::instance().now_ms();
    swept::agent::testing::poll_readable(sup->poll_fds(), static_cast<int>(std::clamp<int64_t>(until, 0, wait_ms)));
    sup->service();
    drain();
  }
  bool run_until(const std::function<bool()>& done, int timeout_ms = 20000) {
    return swept::testing::eventually([&] { return done() || (step(100), done()); }, timeout_ms / 1000.0,
                                      swept::agent::testing::kNoPause);
  }
  bool run_to_end() {
    return run_until([this] { return sup->finished(); });
  }
  std::string file(const std::string& name) { return swept::agent::testing::read_file(sup->working_dir() + "/" + name); }
};

TrialLaunch shell(const std::string& script) {
  TrialLaunch l;
  l.sweep_id = 1;
  l.trial_id = 7;
  l.argv = {"/bin/sh", "-c", script};
  return l;
}

}  // namespace

// The agent logs the count (agent_metrics.cpp), so it must be exact.
TEST_CASE("agent supervisor: points beyond max_pending_metrics are dropped (the newest) and counted") {
  Trial t;
  t.max_pending_metrics = 3;
  // One line, five points: more than the supervisor may hold before any is taken.
  t.start(shell("echo '{\"step\": 1, \"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"e\": 5}'"));
  REQUIRE(t.run_to_end());
  REQUIRE(t.metrics.size() == 3);
  CHECK(t.metrics[0] == MetricPoint{1, "a", 1});
  CHECK(t.metrics[2] == MetricPoint{1, "c", 3});
  CHECK(t.sup->dropped_metrics() == 2);
}

TEST_CASE("agent supervisor: metric lines become points with steps, other output is log and files") {
  Trial t;
  TrialLaunch l = shell(
      "printf '%s\\n' '{\"loss\": 2.0}' 'epoch 1' '{\"step\": 5, \"loss\": 0.5, \"lr\": 0.1}' '{\"acc\": 0.9}' "
      "'{\"step\": -1, \"x\": 1}'; echo oops >&2; printf 'no newline at end'");
  l.params_json = R"({"lr":0.1})";
  t.start(l);
  REQUIRE(t.run_to_end());
  const TrialResult& r = t.sup->result();
  CHECK(r.end == TrialEnd::kExited);
  CHECK(r.exit_code == 0);
  CHECK(r.reason == "exit code 0");
  std::vector<MetricPoint> want = {{0, "loss", 2.0}, {5, "loss", 0.5}, {5, "lr", 0.1}, {5, "acc", 0.9}};
  CHECK(t.metrics == want);
  CHECK(t.log.find("epoch 1\n") != std::string::npos);
  CHECK(t.log.find("{\"step\": -1, \"x\": 1}\n") != std::string::npos);  // a bad step makes it log
  CHECK(t.log.find("oops\n") != std::string::npos);
  CHECK(t.log.find("no newline at end") != std::string::npos);
  CHECK(t.file("stdout.log").find("{\"step\": 5, \"loss\": 0.5, \"lr\": 0.1}\nepoch") == std::string::npos);
  CHECK(t.file("stdout.log").find("epoch 1\n{\"step\": 5") != std::string::npos);
  CHECK(t.file("stderr.log") == "oops\n");
  // Its command does not name swept-params.json: no file (names_params_file).
  CHECK_FALSE(std::filesystem::exists(t.sup->working_dir() + "/swept-params.json"));
  CHECK(t.sup->working_dir() == t.root.path() + "/sweep-1/trial-7");
  CHECK(r.ended_at >= r.started_at);
}

TEST_CASE("agent supervisor: the trial's environment and directories") {
  Trial t;
  TrialLaunch l = shell(
      "echo \"gpus=[$CUDA_VISIBLE_DEVICES] order=$CUDA_DEVICE_ORDER frac=${SWEPT_GPU_MEMORY_FRACTION-none} "
      "sweep=$SWEPT_SWEEP_ID trial=$SWEPT_TRIAL_ID attempt=$SWEPT_ATTEMPT extra=$EXTRA params=$SWEPT_PARAMS\"; "
      "echo \"ckpt=$SWEPT_CHECKPOINT_DIR\"; pwd; test -d \"$SWEPT_CHECKPOINT_DIR\" && echo ckpt-exists");
  l.gpu_indices = {1, 3};
  l.gpu_memory_fraction = 0.4;
  l.attempt = 2;
  l.extra_env = {{"EXTRA", "yes"}, {"CUDA_VISIBLE_DEVICES", "9"}};  // the agent owns CUDA_VISIBLE_DEVICES
  l.params_json = R"({"a":1})";
  l.workdir = "s/t";
  t.start(l);
  REQUIRE(t.run_to_end());
  std::string dir = t.root.path() + "/s/t";
  std::string real_dir = std::filesystem::canonical(dir).string();
  CHECK(t.log == "gpus=[1,3] order=PCI_BUS_ID frac=0.4 sweep=1 trial=7 attempt=2 extra=yes params={\"a\":1}\n"
                 "ckpt=" + dir + "/checkpoints\n" + real_dir + "\nckpt-exists\n");

  Trial cpu;
  cpu.start(shell("echo \"[${CUDA_VISIBLE_DEVICES-unset}] ${SWEPT_GPU_MEMORY_FRACTION-none}\""));
  REQUIRE(cpu.run_to_end());
  CHECK(cpu.log == "[] none\n");  // set but empty: the trial sees no GPU
}

TEST_CASE("agent supervisor: a pbt segment's checkpoint directory, filled with a verified copy of another's") {
  // Member 5's first segment saves into its own segment directory.
  Trial first;
  TrialLaunch l = shell("echo \"ckpt=$SWEPT_CHECKPOINT_DIR\"; echo 42 > \"$SWEPT_CHECKPOINT_DIR/theta\"");
  l.trial_id = 5;
  l.workdir = "sweep-1/trial-5";
  l.attempt = 1;
  l.checkpoint = swept::protocol::CheckpointSegment{};
  first.start(l);
  REQUIRE(first.run_to_end());
  CHECK(first.log == "ckpt=" + first.root.path() + "/sweep-1/trial-5/segments/1\n");

  // Member 7's second segment starts on a copy of member 5's first, in a directory of its own.
  Trial second;
  second.root_override(first.root.path());
  TrialLaunch c = shell("echo \"ckpt=$SWEPT_CHECKPOINT_DIR\"; cat \"$SWEPT_CHECKPOINT_DIR/theta\"");
  c.trial_id = 7;
  c.workdir = "sweep-1/trial-7";
  c.attempt = 2;
  c.checkpoint = swept::protocol::CheckpointSegment{5, 1};
  second.start(c);
  REQUIRE(second.run_to_end());
  CHECK(second.log == "ckpt=" + first.root.path() + "/sweep-1/trial-7/segments/2\n42\n");

  // A donor segment that is not on this host: the segment does not start, and says why.
  Trial orphan;
  orphan.root_override(first.root.path());
  c.attempt = 3;
  c.checkpoint = swept::protocol::CheckpointSegment{9, 4};
  orphan.start(c);
  REQUIRE(orphan.run_to_end());
  CHECK(orphan.sup->result().end == TrialEnd::kLaunchFailed);
  CHECK(orphan.sup->result().reason.find("checkpoint of trial 9 segment 4 not copied") != std::string::npos);
}

TEST_CASE("agent supervisor: failures are reported with exit code, signal and reason") {
  Trial exits;
  exits.start(shell("echo '{\"diverged\": true}'; exit 3"));
  REQUIRE(exits.run_to_end());
  CHECK(exits.sup->result().end == TrialEnd::kExited);
  CHECK(exits.sup->result().exit_code == 3);
  CHECK(exits.sup->result().diverged);
  CHECK(exits.sup->result().reason == "exit code 3 (diverged)");

  Trial crashes;
  crashes.start(shell("kill -SEGV $$"));
  REQUIRE(crashes.run_to_end());
  CHECK(crashes.sup->result().end == TrialEnd::kSignaled);
  CHECK(crashes.sup->result().signal == SIGSEGV);
  CHECK_FALSE(crashes.sup->result().exit_code.has_value());
  CHECK(crashes.sup->result().reason == "killed by signal 11 (SIGSEGV)");
}

TEST_CASE("agent supervisor: a command that does not exist fails the trial, 127, with a clear reason") {
  Trial t;
  TrialLaunch l;
  l.argv = {"swept-no-such-trainer", "--lr=1"};
  t.start(l);
  REQUIRE(t.sup->finished());
  CHECK(t.sup->result().end == TrialEnd::kLaunchFailed);
  CHECK(t.sup->result().exit_code == 127);
  CHECK(t.sup->result().reason.find("command not found: swept-no-such-trainer") == 0);
  CHECK(t.sup->poll_fds().empty());
  CHECK(t.file("stderr.log").find("command not found") != std::string::npos);

  Trial escape;
  l.workdir = "../outside";
  escape.start(l);
  REQUIRE(escape.sup->finished());
  CHECK(escape.sup->result().end == TrialEnd::kLaunchFailed);
  CHECK(escape.sup->result().reason.find("'..'") != std::string::npos);
}

TEST_CASE("agent supervisor: an exec that fails after the launch (not a program, missing interpreter) fails the trial") {
  // The launcher returns before the exec; these failures come back through
  // its pipe and must still read as launch failures, not as "exit code 127".
  struct Case {
    const char* name;
    std::string content;
    int exit_code;
    std::string reason;  // followed by the program's path
  };
  for (const Case& c : {Case{"notes.txt", std::string("\x7f" "ELF but not really\n"), 126, "not an executable format: "},
                        Case{"script", "#!/no/such/interpreter\necho hi\n", 127, "command not found: "}}) {
    Trial t;
    const std::string path = t.root.path() + "/" + c.name;
    std::ofstream(path) << c.content;
    ::chmod(path.c_str(), 0755);
    TrialLaunch l;
    l.argv = {path};
    t.start(l);
    REQUIRE(t.run_to_end());
    CHECK(t.sup->result().end == TrialEnd::kLaunchFailed);
    CHECK(t.sup->result().exit_code == c.exit_code);
    CHECK(t.sup->result().reason == c.reason + path);
    CHECK(t.file("stderr.log").find(c.reason) != std::string::npos);
  }
}

TEST_CASE("agent supervisor: a trial directory that cannot be made fails the trial with the path and the cause") {
  // The child makes its directories before the exec; a file where the
  // trial's directory should be stops it there, and the reason names it.
  Trial t;
  std::filesystem::create_directories(t.root.path() + "/sweep-1");
  std::ofstream(t.root.path() + "/sweep-1/trial-7") << "in the way\n";
  t.start(shell("echo should-not-run"));
  REQUIRE(t.run_to_end());
  CHECK(t.sup->result().end == TrialEnd::kLaunchFailed);
  CHECK(t.sup->result().reason ==
        "cannot create the trial directory " + t.root.path() + "/sweep-1/trial-7/checkpoints: Not a directory");
  CHECK(t.log.find("should-not-run") == std::string::npos);
}

TEST_CASE("agent supervisor: megabytes without a newline are log, cut, and kept whole in stdout.log") {
  Trial t;
  t.start(shell("head -c 3000000 /dev/zero | tr '\\000' a; printf '\\n{\"step\": 2, \"x\": 1}\\n'"));
  REQUIRE(t.run_to_end());
  CHECK(t.sup->result().exit_code == 0);
  CHECK(t.metrics == std::vector<MetricPoint>{{2, "x", 1.0}});
  CHECK(t.log.find("line longer than 1 MiB") != std::string::npos);
  CHECK(t.file("stdout.log").size() == 3000000 + 1 + std::string("{\"step\": 2, \"x\": 1}\n").size());
}

TEST_CASE("agent supervisor: a trial that never prints is stopped at its timeout") {
  Trial t;
  TrialLaunch l = shell("exec sleep 30");
  l.timeout_s = 0.3;
  t.start(l);
  REQUIRE(t.run_to_end());
  CHECK(t.sup->result().end == TrialEnd::kTimedOut);
  CHECK(t.sup->result().signal == SIGTERM);
  CHECK(t.sup->result().reason == "timed out after 0.3 s");
  // Nothing printed, no log files, no parameter file (the command does not
  // name it); the directory and checkpoints/ are there.
  CHECK_FALSE(std::filesystem::exists(t.sup->working_dir() + "/stdout.log"));
  CHECK_FALSE(std::filesystem::exists(t.sup->working_dir() + "/stderr.log"));
  CHECK_FALSE(std::filesystem::exists(t.sup->working_dir() + "/swept-params.json"));
  CHECK(std::filesystem::is_directory(t.sup->working_dir() + "/checkpoints"));
}

TEST_CASE("agent supervisor: swept-params.json is written for a command that names it, before it runs") {
  // As ${args_json_file} expands: the file's name as an argument of its own.
  Trial named;
  TrialLaunch l = shell("cat \"$0\"");
  l.argv.push_back("swept-params.json");
  l.params_json = R"({"lr": 0.1})";
  named.start(l);
  REQUIRE(named.run_to_end());
  CHECK(named.sup->result().exit_code == 0);
  CHECK(named.file("stdout.log") == "{\"lr\": 0.1}\n");
  CHECK(named.file("swept-params.json") == "{\"lr\": 0.1}\n");
  // Named inside a shell command, with a path.
  Trial in_script;
  l = shell("cat ./swept-params.json");
  l.params_json = R"({"x": 2})";
  in_script.start(l);
  REQUIRE(in_script.run_to_end());
  CHECK(in_script.sup->result().exit_code == 0);
  CHECK(in_script.file("stdout.log") == "{\"x\": 2}\n");
  CHECK(names_params_file({"python3", "train.py", "--config=/w/t/swept-params.json"}));
  CHECK_FALSE(names_params_file({"python3", "train.py", "--lr=0.1"}));
}

TEST_CASE("agent supervisor: stop sends SIGTERM to the group, a trial that ignores it gets SIGKILL after the grace") {
  Trial polite;
  polite.start(shell("trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done"));
  REQUIRE(polite.run_until([&] { return polite.log.find("ready") != std::string::npos; }));
  polite.sup->request_stop("cancelled by the user");
  REQUIRE(polite.run_to_end());
  CHECK(polite.sup->result().end == TrialEnd::kStopped);
  CHECK(polite.sup->result().exit_code == 0);
  CHECK(polite.sup->result().reason == "cancelled by the user");
  CHECK(polite.log.find("bye") != std::string::npos);

  Trial stubborn;
  stubborn.start(shell("trap '' TERM; echo ready; while :; do sleep 0.05; done"), /*grace_ms=*/300);
  REQUIRE(stubborn.run_until([&] { return stubborn.log.find("ready") != std::string::npos; }));
  stubborn.sup->request_stop("cancelled by the user");
  stubborn.sup->request_stop("a second request changes nothing");
  REQUIRE(stubborn.run_to_end());
  CHECK(stubborn.sup->result().end == TrialEnd::kStopped);
  CHECK(stubborn.sup->result().signal == SIGKILL);
  CHECK(stubborn.sup->result().reason.find("cancelled by the user (still running after SIGTERM") == 0);
}

namespace {
// Whether the trial's main process has ended (a zombie nobody reaped yet).
bool ended_unreaped(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}
}  // namespace

// Issue 26: an agent that wakes (from SIGSTOP, a long turn) past its lease
// stops every trial; one that had run to its end meanwhile, reported as
// stopped, would be requeued by the scheduler and run to its end twice.
TEST_CASE("agent supervisor: a stop after the trial ended by itself keeps its own end, after the keeper's signal it is stopped") {
  Trial done;
  done.start(shell("exit 3"));
  // It ends while nobody services it (the agent frozen): a zombie.
  REQUIRE(swept::testing::eventually([&] { return ended_unreaped(done.sup->pid()); }, 20));
  done.sup->request_stop("lease expired: this agent could not act", 100);
  REQUIRE(done.run_to_end());
  CHECK(done.sup->result().end == TrialEnd::kExited);
  CHECK(done.sup->result().exit_code == 3);
  CHECK(done.sup->result().reason == "exit code 3");

  // The lease keeper's SIGTERM came first (it exits 0 on it): stopped.
  Trial keeper;
  keeper.start(shell("trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done"));
  REQUIRE(keeper.run_until([&] { return keeper.log.find("ready") != std::string::npos; }));
  REQUIRE(::kill(-keeper.sup->pid(), SIGTERM) == 0);
  REQUIRE(swept::testing::eventually([&] { return ended_unreaped(keeper.sup->pid()); }, 20));
  keeper.sup->stop_after_keeper("lease expired: stopped by the lease keeper", 100);
  REQUIRE(keeper.run_to_end());
  CHECK(keeper.sup->result().end == TrialEnd::kStopped);
  CHECK(keeper.sup->result().reason.find("lease expired: stopped by the lease keeper") == 0);
}

TEST_CASE("agent supervisor: what the trial leaves in its process group dies with it") {
  Trial t;
  t.start(shell("sleep 30 & echo $!; exit 0"));
  REQUIRE(t.run_to_end());
  CHECK(t.sup->result().end == TrialEnd::kExited);
  pid_t orphan = std::stoi(t.log);
  // Killed: gone, or a zombie waiting for whoever reaps orphans here.
  std::string stat = swept::agent::testing::read_file("/proc/" + std::to_string(orphan) + "/stat");
  bool dead = stat.empty() || stat.find(") Z ") != std::string::npos;
  if (!dead) {
    // SIGKILL is delivered asynchronously: wait for the state to change.
    dead = swept::testing::eventually(
        [&] {
          stat = swept::agent::testing::read_file("/proc/" + std::to_string(orphan) + "/stat");
          return stat.empty() || stat.find(") Z ") != std::string::npos;
        },
        5, std::chrono::milliseconds(10));
  }
  CHECK(dead);
}

TEST_CASE("agent supervisor: destroying a running supervisor kills and reaps its trial") {
  Trial t;
  t.start(shell("echo ready; exec sleep 30"));
  REQUIRE(t.run_until([&] { return t.log.find("ready") != std::string::npos; }));
  pid_t pid = t.sup->pid();
  t.sup.reset();
  CHECK(::kill(pid, 0) == -1);  // reaped: the pid no longer names our child
}

TEST_CASE("agent supervisor: a trial reaped behind the agent's back still ends (SIGCHLD ignored)") {
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGCHLD, &ignore, &previous);  // the kernel now reaps children itself
  Trial t;
  t.start(shell("echo '{\"x\": 1}'; exit 0"));
  bool ended = t.run_to_end();
  ::sigaction(SIGCHLD, &previous, nullptr);
  REQUIRE(ended);
  CHECK(t.sup->result().end == TrialEnd::kSignaled);
  CHECK(t.sup->result().reason.find("exit status lost") == 0);
  CHECK(t.metrics == std::vector<MetricPoint>{{0, "x", 1.0}});
}

// Issue 15, defect 10: stdout.log is capped, and a full disk while writing it
// is said in the trial's own log (its record), not silently truncated.
TEST_CASE("agent supervisor: stdout.log stops at its cap and the trial's log says so") {
  Trial t;
  t.start(shell("head -c 5000 /dev/zero | tr '\\000' a; printf '\\n{\"step\": 1, \"x\": 2}\\n'"), 10000, 1000);
  REQUIRE(t.run_to_end());
  CHECK(t.sup->result().exit_code == 0);
  CHECK(t.file("stdout.log").size() == 1000);
  CHECK(t.metrics == std::vector<MetricPoint>{{1, "x", 2.0}});  // metrics are read past the cap
  CHECK_MESSAGE(t.log.find("stdout.log reached its cap of 1000 bytes") != std::string::npos, t.log);
}

TEST_CASE("agent supervisor: a full disk while writing stdout.log is said in the trial's log, the trial goes on") {
  Trial t;
  // /dev/full answers every write with ENOSPC: a full disk, without filling one.
  const std::string dir = t.root.path() + "/sweep-1/trial-7";
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink("/dev/full", dir + "/stdout.log");
  t.start(shell("echo hello; echo world"));
  REQUIRE(t.run_to_end());
  CHECK(t.sup->result().exit_code == 0);
  CHECK_MESSAGE(t.log.find("No space left on device") != std::string::npos, t.log);
  CHECK_MESSAGE(t.log.find("the rest of this trial's output is not in it") != std::string::npos, t.log);
  CHECK(t.log.find("hello") != std::string::npos);  // the log itself still has the output
}
