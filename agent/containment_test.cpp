// Tests of trial containment (issue 15, item 5) with real processes: a trial
// that double-forks and calls setsid leaves a process outside its group;
// after the trial exits, is stopped or times out, that process must be gone.
// Each case runs in both modes where the machine allows: the cgroup v2 mode
// (when this process may create cgroups: root or a delegated subtree) and
// the subreaper fallback (always). The test says which it exercised.
#include "agent/containment.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "agent/supervisor.h"
#include "agent/test_util.h"
#include "common/testing/eventually.h"

using namespace swept::agent;
using swept::agent::testing::kNoPause;
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

// Whether no process is left in any trial cgroup under the containment's
// root (cgroup.events of each; an emptied cgroup may be kept for reuse).
bool trial_cgroups_empty(const Containment& containment) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(containment.cgroup_root(), ec)) {
    if (e.path().filename().string().rfind("trial-", 0) != 0) continue;
    std::string events = swept::agent::testing::read_file(e.path().string() + "/cgroup.events");
    if (events.find("populated 0") == std::string::npos) return false;
  }
  return true;
}

// The trial cgroups under the containment's root, by path.
std::vector<std::string> trial_cgroups(const Containment& containment) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(containment.cgroup_root(), ec)) {
    if (e.path().filename().string().rfind("trial-", 0) == 0) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// `in_cgroup`: the cgroup the trial must run in (a reused one), checked
// while it runs; "" for any.
void run_case(Containment& containment, Ending ending, const std::string& in_cgroup = "") {
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
  // One turn of the agent's loop for this trial, blocking at most wait_ms.
  auto step = [&](int wait_ms) {
    int64_t until = sup->next_deadline_ms() - swept::SteadyClock::instance().now_ms();
    swept::agent::testing::poll_readable(sup->poll_fds(), static_cast<int>(std::clamp<int64_t>(until, 0, wait_ms)));
    sup->service();
    log += sup->take_log().text;
    std::vector<pid_t> leaders;
    if (!sup->finished()) leaders.push_back(sup->pid());
    containment.collect(leaders);
  };
  // Each wait below steps the trial until its condition holds.
  auto stepped = [&](const std::function<bool()>& done) {
    return [&step, done] { return done() || (step(100), done()); };
  };
  REQUIRE(swept::testing::eventually(stepped([&] { return log.find("ready") != std::string::npos || sup->finished(); }),
                                     20, kNoPause));
  REQUIRE_MESSAGE(log.find("ready") != std::string::npos, log);
  std::string pid_text = swept::agent::testing::read_file(sup->working_dir() + "/escaped.pid");
  pid_t escaped = static_cast<pid_t>(std::stol(pid_text));
  REQUIRE(escaped > 0);
  CHECK(process_alive(escaped));
  CHECK(::getsid(escaped) != ::getsid(sup->pid()));  // it really left the trial's session
  if (!in_cgroup.empty()) {
    std::string procs = swept::agent::testing::read_file(in_cgroup + "/cgroup.procs");
    CHECK_MESSAGE(("\n" + procs).find("\n" + std::to_string(escaped) + "\n") != std::string::npos,
                  "the trial did not run in the reused cgroup " << in_cgroup << ": its procs are " << procs);
  }

  if (ending == Ending::kStopped) sup->request_stop("stopped by the test");
  if (ending == Ending::kExits) std::ofstream(sup->working_dir() + "/go").put('\n');
  REQUIRE(swept::testing::eventually(stepped([&] { return sup->finished(); }), 20, kNoPause));
  TrialEnd expected = ending == Ending::kExits     ? TrialEnd::kExited
                      : ending == Ending::kStopped ? TrialEnd::kStopped
                                                   : TrialEnd::kTimedOut;
  CHECK(sup->result().end == expected);

  // The escaped process is killed with its trial (a deadline, not a sleep).
  bool gone = swept::testing::eventually(stepped([&] { return !process_alive(escaped); }), 10, kNoPause);
  CHECK_MESSAGE(gone, "pid ", escaped, " outlived its trial");
  if (!gone) ::kill(escaped, SIGKILL);

  // Nothing is left behind: no process in any trial cgroup (an emptied one
  // may be kept for the next trial), or the orphan reaped.
  if (containment.mode() == ContainmentMode::kCgroup) {
    CHECK(swept::testing::eventually(stepped([&] { return trial_cgroups_empty(containment); }), 10, kNoPause));
  } else {
    auto reaped = [&] {
      int status = 0;
      return ::waitpid(escaped, &status, WNOHANG) < 0 && errno == ECHILD;
    };
    CHECK(swept::testing::eventually(stepped(reaped), 10, kNoPause));
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
    swept::testing::eventually(
        [&] {
          swept::agent::testing::poll_readable({r.child->stdout_fd}, 100);
          char buf[4096];
          ssize_t n = ::read(r.child->stdout_fd, buf, sizeof buf);
          if (n > 0) r.out.append(buf, static_cast<size_t>(n));
          return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
        },
        20, kNoPause);
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

namespace {

// Runs `argv` to its end in container `c` (not released) and returns what it
// printed and its wait status.
struct Ran {
  std::string out;
  int status = -1;
};
Ran run_in(TrialContainer& c, PosixLauncher& launcher, const std::vector<std::string>& argv) {
  Ran r;
  LaunchSpec spec;
  spec.argv = argv;
  spec.cgroup_procs = Containment::procs_file(c);
  spec.cgroup_fd = c.cgroup_fd;
  auto child = launcher.launch(spec);
  Containment::launched(c);
  REQUIRE_MESSAGE(child.ok(), child.status().ToString());
  c.leader = child->pid;
  swept::testing::eventually(
      [&] {
        swept::agent::testing::poll_readable({child->stdout_fd}, 100);
        char buf[4096];
        ssize_t n = ::read(child->stdout_fd, buf, sizeof buf);
        if (n > 0) r.out.append(buf, static_cast<size_t>(n));
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
      },
      20, kNoPause);
  ::waitpid(child->pid, &r.status, 0);
  CHECK(child->exec->outcome().ok());
  for (int fd : {child->stdout_fd, child->stderr_fd, child->pidfd}) ::close(fd);
  return r;
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

// Waits (with a deadline) until `path` is gone, collecting as the agent does.
bool removed(Containment& containment, const std::string& path) {
  return swept::testing::eventually(
      [&] {
        if (!exists(path)) return true;
        containment.collect({});
        return !exists(path);
      },
      10, std::chrono::milliseconds(5));
}

}  // namespace

TEST_CASE("containment: an emptied trial cgroup is reused only while clean, and its trial is still killed as a whole") {
  auto made = Containment::create("cgroup");
  if (!made.ok()) {
    MESSAGE("cgroup v2 containment NOT exercised on this machine: " << made.status().message());
    return;
  }
  Containment& k = **made;
  PosixLauncher launcher;

  // A trial that leaves nothing behind: its cgroup is kept, empty, and is the
  // next trial's.
  auto a = k.prepare(1, 1, 1);
  REQUIRE(a.ok());
  const std::string dir = a->cgroup_dir;
  run_in(*a, launcher, {"/bin/true"});
  k.kill_all_and_release(*a);
  CHECK(trial_cgroups(k) == std::vector<std::string>{dir});
  auto b = k.prepare(1, 2, 1);
  REQUIRE(b.ok());
  CHECK(b->cgroup_dir == dir);
  CHECK(b->cgroup_fd >= 0);
  CHECK(swept::agent::testing::read_file(dir + "/cgroup.procs").empty());  // truly empty when given out
  Ran in_it = run_in(*b, launcher, {"/bin/cat", "/proc/self/cgroup"});
  CHECK_MESSAGE(in_it.out.find("0::" + dir.substr(dir.find("/swept-agent-")) + "\n") != std::string::npos, in_it.out);
  k.kill_all_and_release(*b);

  // A trial in the reused cgroup whose escaped process outlives it: killed
  // with it, and that cgroup is not reused but removed.
  run_case(k, Ending::kExits, /*in_cgroup=*/dir);
  CHECK(removed(k, dir));

  // Something that entered an idle cgroup (a process moved in by hand): the
  // cgroup is not given out; what is in it is killed and it is removed.
  auto c = k.prepare(1, 3, 1);
  REQUIRE(c.ok());
  const std::string idle = c->cgroup_dir;
  run_in(*c, launcher, {"/bin/true"});
  k.kill_all_and_release(*c);
  pid_t intruder = ::fork();
  if (intruder == 0) {
    ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  REQUIRE(intruder > 0);
  std::ofstream(idle + "/cgroup.procs") << intruder << "\n";
  auto d = k.prepare(1, 4, 1);
  REQUIRE(d.ok());
  CHECK(d->cgroup_dir != idle);
  int status = 0;
  bool reaped = swept::testing::eventually([&] { return ::waitpid(intruder, &status, WNOHANG) == intruder; }, 10,
                                           std::chrono::milliseconds(5));
  CHECK_MESSAGE(reaped, "the process moved into an idle trial cgroup was not killed");
  if (!reaped) ::kill(intruder, SIGKILL);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  CHECK(removed(k, idle));
  run_in(*d, launcher, {"/bin/true"});
  k.kill_all_and_release(*d);

  // A cgroup its trial made a child cgroup in (a trial may: it runs as the
  // agent's user) is not reused: it is removed, child first.
  auto e = k.prepare(1, 5, 1);
  REQUIRE(e.ok());
  const std::string nested = e->cgroup_dir;
  run_in(*e, launcher, {"/bin/true"});
  REQUIRE(::mkdir((nested + "/sub").c_str(), 0755) == 0);
  k.kill_all_and_release(*e);
  CHECK(removed(k, nested));
}

TEST_CASE("containment: no trial cgroup leaks: after many trials at most one per concurrent trial, none after the agent") {
  auto made = Containment::create("cgroup");
  if (!made.ok()) {
    MESSAGE("cgroup v2 containment NOT exercised on this machine: " << made.status().message());
    return;
  }
  std::unique_ptr<Containment> k = std::move(*made);
  const std::string root = k->cgroup_root();
  PosixLauncher launcher;
  for (int round = 0; round < 10; ++round) {
    std::vector<TrialContainer> running;
    for (int i = 0; i < 4; ++i) {
      auto c = k->prepare(1, round * 4 + i, 1);
      REQUIRE(c.ok());
      running.push_back(*c);
    }
    for (TrialContainer& c : running) run_in(c, launcher, {"/bin/true"});
    for (TrialContainer& c : running) k->kill_all_and_release(c);
  }
  CHECK(trial_cgroups(*k).size() == 4);
  k.reset();  // the agent stops: its directory goes, pooled cgroups and all
  CHECK_FALSE(exists(root));

  // With reuse turned off, every trial's cgroup is its own and removed at its end.
  ::setenv("SWEPT_AGENT_REUSE_CGROUPS", "0", 1);
  auto fresh = Containment::create("cgroup");
  ::unsetenv("SWEPT_AGENT_REUSE_CGROUPS");
  REQUIRE(fresh.ok());
  auto c1 = (*fresh)->prepare(1, 1, 1);
  REQUIRE(c1.ok());
  const std::string first = c1->cgroup_dir;
  CHECK(c1->pool_slot == -1);
  run_in(*c1, launcher, {"/bin/true"});
  (*fresh)->kill_all_and_release(*c1);
  CHECK(trial_cgroups(**fresh).empty());
  auto c2 = (*fresh)->prepare(1, 2, 1);
  REQUIRE(c2.ok());
  CHECK(c2->cgroup_dir != first);
  run_in(*c2, launcher, {"/bin/true"});
  (*fresh)->kill_all_and_release(*c2);
}

TEST_CASE("containment: the trial cgroups of an agent that was SIGKILLed are killed and removed at the next start") {
  {
    auto probe = Containment::create("cgroup");
    if (!probe.ok()) {
      MESSAGE("cgroup v2 containment NOT exercised on this machine: " << probe.status().message());
      return;
    }
  }
  int report[2];
  REQUIRE(::pipe(report) == 0);
  pid_t agent = ::fork();
  REQUIRE(agent >= 0);
  if (agent == 0) {
    // The agent that dies: one trial whose setsid'd process outlives it (the
    // trial's own process gets SIGKILL with the agent, PR_SET_PDEATHSIG).
    ::close(report[0]);
    auto k = Containment::create("cgroup");
    if (!k.ok()) ::_exit(1);
    auto c = (*k)->prepare(1, 1, 1);
    if (!c.ok()) ::_exit(2);
    PosixLauncher launcher;
    LaunchSpec spec;
    spec.argv = {"/bin/sh", "-c", "setsid sleep 1000 & wait"};
    spec.cgroup_procs = Containment::procs_file(*c);
    spec.cgroup_fd = c->cgroup_fd;
    auto child = launcher.launch(spec);
    if (!child.ok()) ::_exit(3);
    std::string line = c->cgroup_dir + "\n" + std::to_string(child->pid) + "\n";
    if (::write(report[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) ::_exit(4);
    for (;;) ::pause();
  }
  ::close(report[1]);
  std::string got;
  swept::testing::eventually(
      [&] {
        swept::agent::testing::poll_readable({report[0]}, 100);
        char buf[512];
        ssize_t n = ::read(report[0], buf, sizeof buf);
        if (n > 0) got.append(buf, static_cast<size_t>(n));
        return n <= 0 || std::count(got.begin(), got.end(), '\n') == 2;
      },
      20, kNoPause);
  ::close(report[0]);
  std::istringstream fields(got);
  std::string cgroup;
  long leader = 0;
  fields >> cgroup >> leader;
  REQUIRE_MESSAGE(leader > 0, "the agent reported: " << got);
  const std::string agent_dir = cgroup.substr(0, cgroup.rfind('/'));
  // The escaped process: the one in the trial's cgroup that is not its leader.
  pid_t escaped = -1;
  swept::testing::eventually(
      [&] {
        std::istringstream procs(swept::agent::testing::read_file(cgroup + "/cgroup.procs"));
        for (long p; procs >> p;) {
          if (p != leader) escaped = static_cast<pid_t>(p);
        }
        return escaped > 0;
      },
      20, std::chrono::milliseconds(5));
  ::kill(agent, SIGKILL);
  int status = 0;
  ::waitpid(agent, &status, 0);
  REQUIRE(escaped > 0);
  CHECK(process_alive(escaped));
  CHECK(exists(cgroup));

  auto next = Containment::create("cgroup");  // the next agent, in the same cgroup
  REQUIRE(next.ok());
  CHECK_FALSE(exists(agent_dir));
  bool gone =
      swept::testing::eventually([&] { return !process_alive(escaped); }, 10, std::chrono::milliseconds(5));
  CHECK_MESSAGE(gone, "pid ", escaped, " left by the dead agent's trial still runs");
  if (!gone) ::kill(escaped, SIGKILL);
  ::waitpid(escaped, &status, WNOHANG);  // ours to reap if this process is a subreaper
}

// `swept run` may run several agents in one process: a second containment
// must not take the first's directory for a dead agent's (and kill its
// trials), nor name its trial cgroups alike.
TEST_CASE("containment: two agents in one process keep their cgroups and trials apart") {
  auto first = Containment::create("cgroup");
  if (!first.ok()) {
    MESSAGE("cgroup v2 containment NOT exercised on this machine: " << first.status().message());
    return;
  }
  TempDir root;
  PosixLauncher launcher;
  SupervisorOptions options;
  options.workdir_root = root.path();
  options.containment = first->get();
  TrialLaunch launch;
  launch.sweep_id = 1;
  launch.trial_id = 3;
  launch.workdir = "sweep-1/trial-3";
  launch.argv = {"/bin/sh", "-c", "exec sleep 300"};
  auto sup = TrialSupervisor::start(launch, options, launcher, swept::SteadyClock::instance());
  REQUIRE_FALSE(sup->finished());

  auto second = Containment::create("cgroup");
  REQUIRE(second.ok());
  CHECK((*second)->cgroup_root() != (*first)->cgroup_root());
  CHECK(process_alive(sup->pid()));  // not mistaken for a dead agent's trial
  auto other = (*second)->prepare(1, 4, 1);
  REQUIRE(other.ok());
  CHECK(trial_cgroups(**first).size() == 1);
  CHECK(trial_cgroups(**second).size() == 1);
  (*second)->kill_all_and_release(*other);
  CHECK(process_alive(sup->pid()));
  sup.reset();  // kills and reaps it
}

// In subreaper mode every agent of a process reaps the process's orphans:
// one must not reap another agent's trial, whose supervisor reaps it (and
// would then lose its exit status).
TEST_CASE("containment: in subreaper mode an agent never reaps another agent's trial in the same process") {
  auto reaper = Containment::create("subreaper");
  auto owner = Containment::create("subreaper");
  REQUIRE(reaper.ok());
  REQUIRE(owner.ok());
  TempDir root;
  PosixLauncher launcher;
  SupervisorOptions options;
  options.workdir_root = root.path();
  options.containment = owner->get();
  TrialLaunch launch;
  launch.sweep_id = 1;
  launch.trial_id = 6;
  launch.workdir = "sweep-1/trial-6";
  launch.argv = {"/bin/sh", "-c", "exit 3"};
  auto sup = TrialSupervisor::start(launch, options, launcher, swept::SteadyClock::instance());
  REQUIRE_FALSE(sup->finished());
  const pid_t pid = sup->pid();
  // It has exited (a zombie its supervisor has not reaped yet) ...
  REQUIRE(swept::testing::eventually(
      [&] {
        siginfo_t info{};
        return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
      },
      10, std::chrono::milliseconds(5)));
  // ... when the other agent's loop collects its own orphans.
  (*reaper)->collect({});
  REQUIRE(swept::testing::eventually([&] { return sup->service(), sup->finished(); }, 10, std::chrono::milliseconds(5)));
  CHECK(sup->result().end == TrialEnd::kExited);
  CHECK(sup->result().exit_code == 3);
}
