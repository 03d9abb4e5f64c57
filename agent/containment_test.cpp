// Tests of trial containment (issue 15, item 5) with real processes: a trial
// that double-forks and calls setsid leaves a process outside its group;
// after the trial exits, is stopped or times out, that process must be gone.
// Each case runs in both modes where the machine allows: the cgroup v2 mode
// (when this process may create cgroups: root or a delegated subtree) and
// the subreaper fallback (always). The test says which it exercised.
#include "agent/containment.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "agent/supervisor.h"
#include "agent/test_util.h"

using namespace swept::agent;
using swept::agent::testing::TempDir;

namespace {

// Starts a process that escapes the trial's process group and session (a
// double fork: the middle shell exits at once, the grandchild calls setsid),
// records its pid, says "ready", then does what `then` says.
std::string escaping_trial(const std::string& then) {
  return "( setsid sh -c 'echo $$ > escaped.pid.tmp; mv escaped.pid.tmp escaped.pid; exec sleep 1000' & ); "
         "while [ ! -s escaped.pid ]; do sleep 0.01; done; echo ready; " +
         then;
}

enum class Ending { kExits, kStopped, kTimesOut };

const char* ending_name(Ending e) {
  return e == Ending::kExits ? "exits" : e == Ending::kStopped ? "is stopped" : "times out";
}

void run_case(Containment& containment, Ending ending) {
  std::string mode = containment_mode_name(containment.mode());
  std::string how = ending_name(ending);
  CAPTURE(mode);
  CAPTURE(how);
  TempDir root;
  PosixLauncher launcher;
  SupervisorOptions options;
  options.workdir_root = root.path();
  options.stop_grace_ms = 300;
  options.containment = &containment;
  TrialLaunch launch;
  launch.sweep_id = 1;
  launch.trial_id = 5;
  launch.workdir = "sweep-1/trial-5";
  // A trial that is stopped or times out ignores SIGTERM, so the SIGKILL
  // after the grace period is what ends it.
  // One that exits waits for the test's word (a file) first.
  std::string then = ending == Ending::kExits ? "while [ ! -e go ]; do sleep 0.01; done; exit 0"
                                              : "trap '' TERM; while :; do sleep 0.05; done";
  launch.argv = {"/bin/sh", "-c", escaping_trial(then)};
  if (ending == Ending::kTimesOut) launch.timeout_s = 1.0;
  auto sup = TrialSupervisor::start(launch, options, launcher, swept::SteadyClock::instance());
  REQUIRE_FALSE(sup->finished());

  std::string log;
  auto step = [&](int wait_ms) {
    int64_t until = sup->next_deadline_ms() - swept::SteadyClock::instance().now_ms();
    swept::agent::testing::poll_readable(sup->poll_fds(), static_cast<int>(std::clamp<int64_t>(until, 0, wait_ms)));
    sup->service();
    log += sup->take_log().text;
    std::vector<pid_t> leaders;
    if (!sup->finished()) leaders.push_back(sup->pid());
    containment.collect(leaders);
  };
  REQUIRE(swept::agent::testing::wait_until([&] { return log.find("ready") != std::string::npos || sup->finished(); },
                                            step));
  REQUIRE_MESSAGE(log.find("ready") != std::string::npos, log);
  std::string pid_text = swept::agent::testing::read_file(sup->working_dir() + "/escaped.pid");
  pid_t escaped = static_cast<pid_t>(std::stol(pid_text));
  REQUIRE(escaped > 0);
  CHECK(process_alive(escaped));
  CHECK(::getsid(escaped) != ::getsid(sup->pid()));  // it really left the trial's session

  if (ending == Ending::kStopped) sup->request_stop("stopped by the test");
  if (ending == Ending::kExits) std::ofstream(sup->working_dir() + "/go").put('\n');
  REQUIRE(swept::agent::testing::wait_until([&] { return sup->finished(); }, step));
  TrialEnd expected = ending == Ending::kExits     ? TrialEnd::kExited
                      : ending == Ending::kStopped ? TrialEnd::kStopped
                                                   : TrialEnd::kTimedOut;
  CHECK(sup->result().end == expected);

  // The escaped process is killed with its trial (a deadline, not a sleep).
  bool gone = swept::agent::testing::wait_until([&] { return !process_alive(escaped); }, step, 10000);
  CHECK_MESSAGE(gone, "pid ", escaped, " outlived its trial");
  if (!gone) ::kill(escaped, SIGKILL);

  // Nothing is left behind: the cgroup removed, or the orphan reaped.
  if (containment.mode() == ContainmentMode::kCgroup) {
    auto no_trial_cgroups = [&] {
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(containment.cgroup_root(), ec)) {
        if (e.path().filename().string().rfind("trial-", 0) == 0) return false;
      }
      return true;
    };
    CHECK(swept::agent::testing::wait_until(no_trial_cgroups, step, 10000));
  } else {
    auto reaped = [&] {
      int status = 0;
      return ::waitpid(escaped, &status, WNOHANG) < 0 && errno == ECHILD;
    };
    CHECK(swept::agent::testing::wait_until(reaped, step, 10000));
  }
}

// Whether this kernel and build create a child straight in a cgroup (clone3
// with CLONE_INTO_CGROUP: Linux 5.7, implemented for x86-64): decided from
// the kernel's version, independently of what the launcher reports.
bool kernel_creates_in_cgroup() {
#if defined(__x86_64__)
  utsname u{};
  if (::uname(&u) != 0) return false;
  int major = 0, minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 5 || (major == 5 && minor >= 7);
#else
  return false;
#endif
}

// Launches `cat /proc/self/cgroup` into a fresh trial cgroup, its procs file
// given as `procs` (the real one, or one that does not exist); returns the
// launch's result and what the trial printed.
struct CgroupLaunch {
  swept::Result<SpawnedChild> child = swept::Status::Internal("not launched");
  std::string out;
  std::string cgroup_dir;
  swept::Status exec = swept::Status::Internal("not launched");  // the exec's outcome
};
CgroupLaunch launch_reading_own_cgroup(Containment& containment, PosixLauncher& launcher, bool real_procs_file) {
  CgroupLaunch r;
  auto c = containment.prepare(1, 7, 1);
  REQUIRE(c.ok());
  r.cgroup_dir = c->cgroup_dir;
  REQUIRE(c->cgroup_fd >= 0);
  LaunchSpec spec;
  spec.argv = {"/bin/cat", "/proc/self/cgroup"};
  spec.cgroup_procs = real_procs_file ? Containment::procs_file(*c) : c->cgroup_dir + "/no-such-file";
  spec.cgroup_fd = c->cgroup_fd;
  r.child = launcher.launch(spec);
  Containment::launched(*c);
  CHECK(c->cgroup_fd == -1);
  if (r.child.ok()) {
    c->leader = r.child->pid;
    std::string chunk;
    swept::agent::testing::wait_until(
        [&] {
          char buf[4096];
          ssize_t n = ::read(r.child->stdout_fd, buf, sizeof buf);
          if (n > 0) r.out.append(buf, static_cast<size_t>(n));
          return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
        },
        [&](int w) { swept::agent::testing::poll_readable({r.child->stdout_fd}, w); });
    int status = 0;
    ::waitpid(r.child->pid, &status, 0);
    r.exec = r.child->exec->outcome();
    for (int fd : {r.child->stdout_fd, r.child->stderr_fd, r.child->pidfd}) ::close(fd);
  }
  containment.kill_all_and_release(*c);
  return r;
}

void run_all_endings(Containment& containment) {
  for (Ending e : {Ending::kExits, Ending::kStopped, Ending::kTimesOut}) run_case(containment, e);
}

}  // namespace

TEST_CASE("containment: cgroup mode, where this machine allows it: nothing a trial started survives it") {
  auto containment = Containment::create("cgroup");
  if (!containment.ok()) {
    // Not a pass in disguise: the subreaper case below still runs; this one
    // says plainly that it did not.
    MESSAGE("cgroup v2 containment NOT exercised on this machine: " << containment.status().message());
    return;
  }
  MESSAGE("exercising " << (*containment)->description());
  CHECK((*containment)->mode() == ContainmentMode::kCgroup);
  run_all_endings(**containment);
}

TEST_CASE("containment: subreaper fallback (forced): nothing a trial started survives it") {
  auto containment = Containment::create("subreaper");
  REQUIRE(containment.ok());
  MESSAGE("exercising " << (*containment)->description());
  CHECK((*containment)->mode() == ContainmentMode::kSubreaper);
  run_all_endings(**containment);
}

TEST_CASE("containment: SWEPT_AGENT_CONTAINMENT overrides auto, an unknown mode is refused") {
  ::setenv("SWEPT_AGENT_CONTAINMENT", "subreaper", 1);
  auto forced = Containment::create("auto");
  ::unsetenv("SWEPT_AGENT_CONTAINMENT");
  REQUIRE(forced.ok());
  CHECK((*forced)->mode() == ContainmentMode::kSubreaper);
  auto bad = Containment::create("jail");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("auto, cgroup or subreaper") != std::string::npos);
}

TEST_CASE("containment: a trial is created in its cgroup (clone3) where the kernel can, and the cgroup.procs way still works") {
  auto containment = Containment::create("cgroup");
  if (!containment.ok()) {
    MESSAGE("cgroup v2 containment NOT exercised on this machine: " << containment.status().message());
    return;
  }
  const bool in_place = kernel_creates_in_cgroup();
  MESSAGE("kernel creates children in a cgroup: " << std::string(in_place ? "yes" : "no (fallback path only)"));
  auto own_line = [](const std::string& cgroup_dir) {
    // /proc/self/cgroup names the v2 cgroup ("0::") relative to the
    // hierarchy's root, which cgroup_dir ends with.
    return "0::" + cgroup_dir.substr(cgroup_dir.find("/swept-agent-")) + "\n";
  };
  {
    PosixLauncher launcher;
    // The procs file does not exist: only a child created in its cgroup can
    // run at all, and it is inside from its first instruction.
    CgroupLaunch r = launch_reading_own_cgroup(**containment, launcher, /*real_procs_file=*/false);
    if (in_place) {
      REQUIRE_MESSAGE(r.child.ok(), r.child.status().ToString());
      CHECK_MESSAGE(r.exec.ok(), r.exec.message());
      CHECK(r.child->born_in_cgroup);
      CHECK_MESSAGE(r.out.find(own_line(r.cgroup_dir)) != std::string::npos, r.out);
    }
    // Real procs file: the same either way.
    CgroupLaunch ok = launch_reading_own_cgroup(**containment, launcher, /*real_procs_file=*/true);
    REQUIRE_MESSAGE(ok.child.ok(), ok.child.status().ToString());
    CHECK(ok.exec.ok());
    CHECK(ok.child->born_in_cgroup == in_place);
    CHECK_MESSAGE(ok.out.find(own_line(ok.cgroup_dir)) != std::string::npos, ok.out);
  }
  {
    // The fallback, forced: the child moves itself through cgroup.procs.
    ::setenv("SWEPT_AGENT_CLONE_INTO_CGROUP", "0", 1);
    PosixLauncher launcher;
    ::unsetenv("SWEPT_AGENT_CLONE_INTO_CGROUP");
    CgroupLaunch ok = launch_reading_own_cgroup(**containment, launcher, /*real_procs_file=*/true);
    REQUIRE_MESSAGE(ok.child.ok(), ok.child.status().ToString());
    CHECK_FALSE(ok.child->born_in_cgroup);
    CHECK_MESSAGE(ok.out.find(own_line(ok.cgroup_dir)) != std::string::npos, ok.out);
    // It really goes through the file: without one, the launch fails, as a host fault naming the cgroup.
    CgroupLaunch bad = launch_reading_own_cgroup(**containment, launcher, /*real_procs_file=*/false);
    REQUIRE(bad.child.ok());  // launch() does not wait for the exec
    CHECK_FALSE(bad.child->born_in_cgroup);
    CHECK(bad.out.empty());
    CHECK(bad.exec.code() == swept::StatusCode::kUnavailable);
    CHECK_MESSAGE(bad.exec.message().find("cannot enter the trial's cgroup") != std::string::npos, bad.exec.message());
  }
}
