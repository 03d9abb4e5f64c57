// Tests of trial limits (issue 26, item 6) with real processes and real
// cgroups: a trial that allocates past resources.memory is killed and says
// so; a fork bomb stops at resources.pids; --enforce-cpus sets the quota;
// --run-as runs the trial as that user, who cannot leave its cgroups.
// Each needs root and the controller on this machine: where one is missing
// the case prints why and exits 77, which CTest reports as skipped (never
// as passed).
#include "agent/limits.h"

#include <doctest/doctest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include "agent/containment.h"
#include "agent/containment_modes.h"
#include "agent/supervisor.h"
#include "agent/test_util.h"
#include "common/testing/eventually.h"
#include "common/testing/temp_dir.h"

using namespace swept::agent;
using swept::agent::testing::kNoPause;
using swept::agent::testing::read_file;

namespace {

// Ends this test case as skipped (CTest's SKIP_RETURN_CODE), saying why.
void skip_unless(bool ok, const std::string& why) {
  if (ok) return;
  std::fprintf(stderr, "SKIPPED (not a pass): %s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(77);
}

std::unique_ptr<Containment> limited_containment(bool enforce_cpus) {
  skip_unless(::geteuid() == 0, "trial limits need root (cgroups)");
  auto c = Containment::create("auto");
  REQUIRE(c.ok());
  (*c)->enable_limits(enforce_cpus);
  MESSAGE((*c)->description() << "; " << (*c)->limiter()->description());
  return std::move(*c);
}

// Whether `item` is in a comma-separated `list`.
bool listed(const std::string& list, const std::string& item) {
  std::istringstream in(list);
  for (std::string w; std::getline(in, w, ',');) {
    if (w == item) return true;
  }
  return false;
}

bool enforces(const Containment& c, const std::string& what) { return listed(c.limiter()->enforced(), what); }

// One trial under `containment`, stepped as the agent's loop would.
struct Run {
  Run(Containment& containment, std::vector<std::string> argv, const swept::protocol::TrialLimits& limits,
      const RunAs* run_as = nullptr)
      : containment(containment) {
    REQUIRE_FALSE(root.path().empty());
    ::chmod(root.path().c_str(), 0755);  // a --run-as user must reach its directory
    SupervisorOptions options;
    options.workdir_root = root.path();
    options.stop_grace_ms = 300;
    options.containment = &containment;
    options.run_as = run_as;
    TrialLaunch launch;
    launch.sweep_id = 1;
    launch.trial_id = 9;
    launch.argv = std::move(argv);
    launch.limits = limits;
    sup = TrialSupervisor::start(launch, options, launcher, swept::SteadyClock::instance());
  }
  void step() {
    int64_t until = sup->next_deadline_ms() - swept::SteadyClock::instance().now_ms();
    swept::agent::testing::poll_readable(sup->poll_fds(), static_cast<int>(std::clamp<int64_t>(until, 0, 100)));
    sup->service();
    log += sup->take_log().text;
    std::vector<pid_t> leaders;
    if (!sup->finished()) leaders.push_back(sup->pid());
    containment.collect(leaders);
  }
  bool until(const std::function<bool()>& done, double seconds = 30) {
    return swept::testing::eventually([&] { return done() || (step(), done()); }, seconds, kNoPause);
  }
  const TrialResult& finish() {
    REQUIRE_MESSAGE(until([&] { return sup->finished(); }), log);
    return sup->result();
  }
  std::string file(const std::string& name) const { return read_file(sup->working_dir() + "/" + name); }

  Containment& containment;
  swept::testing::TempDir root{"swept-limits"};
  PosixLauncher launcher;
  std::unique_ptr<TrialSupervisor> sup;
  std::string log;
};

// The last path component of the trial's cgroup in the hierarchy whose
// /proc/PID/cgroup line names `controller` ("" for the v2 line), e.g. "trial-3".
std::string trial_cgroup_name(pid_t pid, const std::string& controller) {
  std::istringstream lines(read_file("/proc/" + std::to_string(pid) + "/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (controller.empty() ? controllers.empty() : listed(controllers, controller)) {
      return line.substr(line.rfind('/') + 1);
    }
  }
  return "";
}

}  // namespace

TEST_CASE("limits: a trial that allocates past resources.memory is killed, its reason says out of memory") {
  auto c = limited_containment(false);
  skip_unless(enforces(*c, "memory"), "no memory controller: " + c->limiter()->description());
  swept::protocol::TrialLimits limits;
  limits.memory_bytes = int64_t{64} << 20;
  // `tail` keeps a line whole: 400 MB without a newline is 400 MB held.
  Run big(*c, {"/bin/sh", "-c", "head -c 400000000 /dev/zero | tail; exit 3"}, limits);
  const TrialResult& r = big.finish();
  CHECK_MESSAGE(r.reason.rfind("out of memory: limit 64 MiB (", 0) == 0, r.reason, "\n", big.log);
  CHECK(r.exit_code == 3);
  // The same trial within its limit: its reason is its exit, nothing more.
  Run small(*c, {"/bin/sh", "-c", "head -c 1000 /dev/zero | tail >/dev/null; exit 3"}, limits);
  CHECK(small.finish().reason == "exit code 3");
}

TEST_CASE("limits: a fork bomb stops at resources.pids, and what it started dies with it") {
  auto c = limited_containment(false);
  skip_unless(enforces(*c, "pids"), "no pids controller: " + c->limiter()->description());
  swept::protocol::TrialLimits limits;
  limits.pids = 32;
  // 2,000 processes without a limit; the shell gives up at its first fork refused.
  Run bomb(*c,
           {"/bin/sh", "-c",
            "i=0; while [ $i -lt 2000 ]; do sleep 1000 & echo $! >> pids; i=$((i+1)); echo $i > forked; done; exit 0"},
           limits);
  const TrialResult& r = bomb.finish();
  CHECK_MESSAGE(r.exit_code != 0, r.reason);  // refused a fork: the shell failed
  const int forked = std::atoi(bomb.file("forked").c_str());
  CHECK(forked > 0);
  CHECK_MESSAGE(forked < 32, "started ", forked, " processes under pids.max 32");
  std::vector<pid_t> pids;
  std::istringstream in(bomb.file("pids"));
  for (long p; in >> p;) pids.push_back(static_cast<pid_t>(p));
  CHECK(bomb.until([&] { return std::none_of(pids.begin(), pids.end(), process_alive); }));
}

TEST_CASE("limits: a limit this host cannot set is said in the trial's log, and the trial runs without it") {
  ::setenv("SWEPT_AGENT_LIMITS", "pids", 1);  // as on a host without the memory controller
  auto made = Containment::create("auto");
  REQUIRE(made.ok());
  Containment& c = **made;
  c.enable_limits(false);  // reads SWEPT_AGENT_LIMITS
  ::unsetenv("SWEPT_AGENT_LIMITS");
  CHECK_FALSE(enforces(c, "memory"));
  CHECK(c.limiter()->description().find("memory NOT enforced (turned off by SWEPT_AGENT_LIMITS=pids") !=
        std::string::npos);
  swept::protocol::TrialLimits limits;
  limits.memory_bytes = int64_t{8} << 30;
  Run trial(c, {"/bin/sh", "-c", "echo ran"}, limits);
  CHECK(trial.finish().reason == "exit code 0");
  CHECK_MESSAGE(trial.log.find("[swept: resources.memory (8 GiB) is NOT enforced on this agent: turned off by "
                               "SWEPT_AGENT_LIMITS=pids]\n") != std::string::npos,
                trial.log);
  CHECK(trial.log.find("ran\n") != std::string::npos);
}

TEST_CASE("limits: --enforce-cpus gives the trial resources.cpus CPUs' worth of quota") {
  auto c = limited_containment(true);
  skip_unless(enforces(*c, "cpus"), "no cpu controller: " + c->limiter()->description());
  swept::protocol::TrialLimits limits;
  limits.cpus = 2;
  Run trial(*c, {"/bin/sh", "-c", "echo ready; while [ ! -e go ]; do sleep 0.01; done"}, limits);
  REQUIRE(trial.until([&] { return trial.log.find("ready") != std::string::npos; }));
  std::string quota;
  const auto v1 = c->limiter()->v1_agent_dirs();
  auto cpu_dir = std::find_if(v1.begin(), v1.end(), [](const std::string& d) {
    return ::access((d + "/cpu.cfs_quota_us").c_str(), F_OK) == 0;
  });
  if (cpu_dir != v1.end()) {
    const std::string dir = *cpu_dir + "/" + trial_cgroup_name(trial.sup->pid(), "cpu");
    quota = read_file(dir + "/cpu.cfs_quota_us") + "/" + read_file(dir + "/cpu.cfs_period_us");
    CHECK(quota == "200000\n/100000\n");
  } else {
    quota = read_file(c->cgroup_root() + "/" + trial_cgroup_name(trial.sup->pid(), "") + "/cpu.max");
    CHECK(quota == "200000 100000\n");
  }
  std::ofstream(trial.sup->working_dir() + "/go").put('\n');
  CHECK(trial.finish().reason == "exit code 0");
}

TEST_CASE("limits: --run-as runs the trial as that user, who owns its directory and cannot leave its cgroups") {
  auto c = limited_containment(false);
  skip_unless(std::system("command -v useradd >/dev/null && command -v userdel >/dev/null") == 0,
              "no useradd/userdel to make a test user");
  const std::string user = "swept-lt" + std::to_string(::getpid() % 100000);
  REQUIRE(std::system(("useradd --system --no-create-home --shell /usr/sbin/nologin " + user).c_str()) == 0);
  struct Remove {
    std::string user;
    ~Remove() { (void)std::system(("userdel " + user + " 2>/dev/null").c_str()); }
  } remove{user};
  auto run_as = resolve_run_as(user);
  REQUIRE(run_as.ok());
  // Every cgroup directory holding the trial's: writing its cgroup.procs is
  // how a process moves itself out (what root trials could do).
  std::vector<std::string> parents = c->limiter()->v1_agent_dirs();
  if (c->mode() == ContainmentMode::kCgroup) parents.push_back(c->cgroup_root());
  REQUIRE_FALSE(parents.empty());
  // A file of root's that the trial points its stdout.log at: the agent,
  // root, must not append the trial's output to it.
  swept::testing::TempDir victim_dir{"swept-victim"};
  const std::string victim = victim_dir.path() + "/root-owned";
  std::ofstream(victim) << "root's\n";
  std::string script = "ln -s " + victim + " stdout.log; id -u > uid; stat -c %u . > owner; "
                       "stat -c %u checkpoints > checkpoints_owner; ";
  for (const std::string& p : parents) {
    script += "if echo $$ > " + p + "/cgroup.procs; then echo ESCAPED " + p + "; else echo refused; fi; ";
  }
  Run trial(*c, {"/bin/sh", "-c", script}, {}, &*run_as);
  const TrialResult& r = trial.finish();
  CHECK_MESSAGE(r.reason == "exit code 0", r.reason, "\n", trial.log);
  const std::string uid = std::to_string(run_as->uid) + "\n";
  CHECK(trial.file("uid") == uid);
  CHECK(trial.file("owner") == uid);
  CHECK(trial.file("checkpoints_owner") == uid);
  CHECK_MESSAGE(trial.log.find("ESCAPED") == std::string::npos, trial.log);
  CHECK(trial.log.find("refused") != std::string::npos);
  CHECK(read_file(victim) == "root's\n");
  CHECK_MESSAGE(trial.log.find("stdout.log: Too many levels of symbolic links") != std::string::npos, trial.log);
}

TEST_CASE("limits: --run-as refuses root, an unknown user, and says why") {
  auto root = resolve_run_as("root");
  CHECK(root.status().message().find("that is root") != std::string::npos);
  auto nobody = resolve_run_as("no-such-user-swept");
  CHECK(nobody.status().message() ==
        "--run-as no-such-user-swept: no such user; create one (useradd --system swept-trial) or name an existing one");
}

TEST_CASE("limits: sizes are written as people read them") {
  CHECK(format_bytes(int64_t{8} << 30) == "8 GiB");
  CHECK(format_bytes(int64_t{64} << 20) == "64 MiB");
  CHECK(format_bytes(int64_t{3} << 29) == "1.5 GiB (1610612736 bytes)");
  CHECK(format_bytes(1000) == "1000 bytes");
}

TEST_CASE("limits: a dead agent's v1 trial cgroups are killed and removed when the next agent starts") {
  auto first = limited_containment(false);
  skip_unless(enforces(*first, "pids"), "no pids controller: " + first->limiter()->description());
  auto dirs = first->limiter()->v1_agent_dirs();
  auto pids_dir = std::find_if(dirs.begin(), dirs.end(), [](const std::string& d) {
    return d.find("/pids") != std::string::npos;
  });
  skip_unless(pids_dir != dirs.end(), "pids is not in a cgroup v1 hierarchy here");
  const std::string base = pids_dir->substr(0, pids_dir->rfind('/'));
  // A pid that ran and is gone: the "dead agent".
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  REQUIRE(dead > 0);
  ::waitpid(dead, nullptr, 0);
  const std::string left = base + "/swept-agent-" + std::to_string(dead);
  REQUIRE(::mkdir(left.c_str(), 0755) == 0);
  REQUIRE(::mkdir((left + "/trial-1").c_str(), 0755) == 0);
  // What its trial left running: a process in that cgroup.
  pid_t orphan = ::fork();
  if (orphan == 0) {
    std::ofstream(left + "/trial-1/cgroup.procs") << "0\n";
    ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  REQUIRE(swept::testing::eventually([&] { return read_file(left + "/trial-1/cgroup.procs").find(
                                                       std::to_string(orphan)) != std::string::npos; },
                                     10));
  auto next = limited_containment(false);  // the next agent of this host
  int status = 0;
  const bool reaped = swept::testing::eventually([&] { return ::waitpid(orphan, &status, WNOHANG) == orphan; }, 10);
  if (!reaped) ::kill(orphan, SIGKILL), ::waitpid(orphan, &status, 0);
  REQUIRE_MESSAGE(reaped, "the dead agent's trial process ", orphan, " was left running");
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(::access(left.c_str(), F_OK) != 0);
}

TEST_CASE("limits: an emptied v1 pids cgroup is given to the next trial, with that trial's limit") {
  auto c = limited_containment(false);
  auto dirs = c->limiter()->v1_agent_dirs();
  auto pids_dir = std::find_if(dirs.begin(), dirs.end(), [](const std::string& d) {
    return ::access((d + "/pids.max").c_str(), F_OK) == 0;
  });
  skip_unless(pids_dir != dirs.end(), "pids is not in a cgroup v1 hierarchy here: " + c->limiter()->description());
  // The trial's pids cgroup, as /proc/self/cgroup names it: its last component.
  auto pids_cgroup = [](const std::string& text) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      size_t a = line.find(':'), b = line.find(':', a + 1);
      if (listed(line.substr(a + 1, b - a - 1), "pids")) return line.substr(line.rfind('/') + 1);
    }
    return std::string();
  };
  std::vector<std::string> names;
  for (int64_t limit : {64, 100}) {
    swept::protocol::TrialLimits limits;
    limits.pids = limit;
    Run trial(*c, {"/bin/sh", "-c", "cat /proc/self/cgroup > cg"}, limits);
    REQUIRE(trial.finish().reason == "exit code 0");
    names.push_back(pids_cgroup(trial.file("cg")));
    REQUIRE_FALSE(names.back().empty());
    CHECK(read_file(*pids_dir + "/" + names.back() + "/pids.max") == std::to_string(limit) + "\n");
  }
  CHECK(names[0] == names[1]);
}

// ---- an agent in a cgroup of its own: the leaf it moves into (cgroup v2) ----

namespace {

// Where this process's cgroup v2 hierarchy is mounted, whole (its root, not
// a bind mount of a subtree); "" when it is not.
std::string v2_mount() {
  std::istringstream lines(read_file("/proc/self/mountinfo"));
  for (std::string line; std::getline(lines, line);) {
    const size_t dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, devno, root, mount_point;
    fields >> id >> parent >> devno >> root >> mount_point;
    if (root == "/") return mount_point;
  }
  return "";
}

// A process that only waits to be killed (killed and reaped when it goes),
// to be moved between cgroups as an agent would move itself.
struct Sleeper {
  pid_t pid = -1;
  Sleeper() {
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::pause();
      ::_exit(0);
    }
  }
  ~Sleeper() {
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
};

// The cgroup v2 path of `pid` below the hierarchy's root ("/a/b").
std::string cgroup_of(pid_t pid) {
  std::istringstream lines(read_file("/proc/" + std::to_string(pid) + "/cgroup"));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return "";
}

// A cgroup made for the test below the v2 root, and removed with what it holds.
struct TestCgroup {
  std::string root, dir;
  explicit TestCgroup(const std::string& name) {
    skip_unless(::geteuid() == 0, "moving processes between cgroups needs root");
    root = v2_mount();
    skip_unless(!root.empty(), "no cgroup v2 hierarchy is mounted here");
    dir = root + "/" + name + "-" + std::to_string(::getpid());
    REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  }
  ~TestCgroup() {
    // Children first; every sleeper is moved back to the root by then or dead.
    for (int round = 0; round < 3; ++round) {
      std::istringstream ls(read_file(dir + "/cgroup.procs"));
      for (long p; ls >> p;) containment_files::write_control(root + "/cgroup.procs", std::to_string(p));
    }
    [[maybe_unused]] int rc = std::system(("find '" + dir + "' -depth -type d -exec rmdir {} + 2>/dev/null").c_str());
  }
};

}  // namespace

TEST_CASE("limits: an agent in a cgroup of its own moves into a leaf, so that its cgroup gives the trials a controller") {
  // cgroup v2 refuses a controller to the children of a cgroup holding a
  // process (EBUSY), as systemd services and containers hold their agent.
  // This machine binds memory, pids and cpu to cgroup v1; hugetlb, the one
  // controller its cgroup v2 has, stands in for them.
  TestCgroup own("swept-leaf-test");
  skip_unless(read_file(own.root + "/cgroup.controllers").find("hugetlb") != std::string::npos,
              "cgroup v2 has no controller here to give on (hugetlb)");
  const bool had = read_file(own.root + "/cgroup.subtree_control").find("hugetlb") != std::string::npos;
  if (!had) REQUIRE(containment_files::write_control(own.root + "/cgroup.subtree_control", "+hugetlb") == 0);
  {
    Sleeper agent;
    REQUIRE(containment_files::write_control(own.dir + "/cgroup.procs", std::to_string(agent.pid)) == 0);
    // The kernel's rule, for real.
    CHECK(containment_files::write_control(own.dir + "/cgroup.subtree_control", "+hugetlb") == EBUSY);
    std::string moved;
    CHECK(containment_files::enable_for_children(own.dir, "hugetlb", agent.pid, &moved) == "");
    const std::string leaf = own.dir + "/" + containment_files::leaf_name(agent.pid);
    CHECK(moved == leaf);
    CHECK(own.root + cgroup_of(agent.pid) == leaf);
    // The trials' directory, a sibling of the leaf, gets the controller, and
    // a second agent of that process sets up beside the first.
    const std::string trials = own.dir + "/swept-agent-" + std::to_string(agent.pid);
    REQUIRE(::mkdir(trials.c_str(), 0755) == 0);
    CHECK(read_file(trials + "/cgroup.controllers").find("hugetlb") != std::string::npos);
    CHECK(containment_files::agent_base(leaf, agent.pid) == own.dir);
    CHECK(containment_files::agent_base(own.dir, agent.pid) == own.dir);
    // A clean stop undoes it all: the cgroup is as the agent found it.
    REQUIRE(::rmdir(trials.c_str()) == 0);
    containment_files::leave_leaf(own.dir, leaf, agent.pid, {"hugetlb"});
    CHECK(own.root + cgroup_of(agent.pid) == own.dir);
    CHECK(::access(leaf.c_str(), F_OK) != 0);
    CHECK(read_file(own.dir + "/cgroup.subtree_control").find("hugetlb") == std::string::npos);
    // Another process in the agent's cgroup keeps it refused: named, with what to do.
    Sleeper other;
    REQUIRE(containment_files::write_control(own.dir + "/cgroup.procs", std::to_string(other.pid)) == 0);
    moved.clear();
    const std::string why = containment_files::enable_for_children(own.dir, "hugetlb", agent.pid, &moved);
    CHECK(moved == leaf);
    CHECK(why.find("still holds other processes, " + std::to_string(other.pid)) != std::string::npos);
    CHECK(why.find("DelegateSubgroup=") != std::string::npos);
    MESSAGE(why);
  }
  if (!had) containment_files::write_control(own.root + "/cgroup.subtree_control", "-hugetlb");
}

TEST_CASE("limits: a dead agent's leaf and trial cgroups are removed by the next agent, a live agent's kept") {
  TestCgroup own("swept-leaf-clean");
  // A pid that ran and is gone: the dead agent's.
  pid_t dead = ::fork();
  REQUIRE(dead >= 0);
  if (dead == 0) ::_exit(0);
  int st = 0;
  REQUIRE(::waitpid(dead, &st, 0) == dead);
  const std::string dead_leaf = own.dir + "/" + containment_files::leaf_name(dead);
  const std::string dead_trials = own.dir + "/swept-agent-" + std::to_string(dead);
  REQUIRE(::mkdir(dead_leaf.c_str(), 0755) == 0);
  REQUIRE(::mkdir(dead_trials.c_str(), 0755) == 0);
  REQUIRE(::mkdir((dead_trials + "/trial-1").c_str(), 0755) == 0);
  // What its trial left running, and a live agent in its own leaf beside it.
  pid_t left = ::fork();
  REQUIRE(left >= 0);
  if (left == 0) {
    ::pause();
    ::_exit(0);
  }
  REQUIRE(containment_files::write_control(dead_trials + "/trial-1/cgroup.procs", std::to_string(left)) == 0);
  Sleeper live;
  const std::string live_leaf = own.dir + "/" + containment_files::leaf_name(live.pid);
  REQUIRE(::mkdir(live_leaf.c_str(), 0755) == 0);
  REQUIRE(containment_files::write_control(live_leaf + "/cgroup.procs", std::to_string(live.pid)) == 0);

  containment_files::clean_dead_agents(own.dir);
  REQUIRE(::waitpid(left, &st, 0) == left);
  CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL));
  CHECK(::access(dead_trials.c_str(), F_OK) != 0);
  CHECK(::access(dead_leaf.c_str(), F_OK) != 0);
  CHECK(::access(live_leaf.c_str(), F_OK) == 0);
  CHECK(own.root + cgroup_of(live.pid) == live_leaf);
}
