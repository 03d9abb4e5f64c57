// Containment's cgroup v2 mode (containment.h, kCgroup): setting it up under
// the agent's own cgroup (clearing what dead agents left), a cgroup per trial
// taken from the pool of emptied ones or made afresh, and killing and
// removing a trial's cgroup when it ends.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include "agent/containment.h"
#include "agent/containment_modes.h"
#include "common/log.h"

namespace swept::agent {

namespace containment_files {

int write_control(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = ::write(fd, text.data(), text.size());
  int e = n < 0 ? errno : 0;
  ::close(fd);
  return e;
}

std::vector<pid_t> read_procs(const std::string& cgroup_dir) {
  std::vector<pid_t> pids;
  std::string text;
  if (!read_small_file(cgroup_dir + "/cgroup.procs", text)) return pids;
  std::istringstream in(text);
  long p;
  while (in >> p) pids.push_back(static_cast<pid_t>(p));
  return pids;
}

}  // namespace containment_files

namespace {

using containment_files::errno_text;
using containment_files::read_procs;
using containment_files::read_small_file;

using containment_files::write_control;

// The cgroup v2 directory of this process, or why there is none.
Result<std::string> own_cgroup_dir() {
  std::string text;
  if (!read_small_file("/proc/self/cgroup", text)) return Status::FailedPrecondition("/proc/self/cgroup is unreadable");
  std::string rel;
  bool found = false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("0::", 0) == 0) {
      rel = line.substr(3);
      found = true;
    }
  }
  if (!found) return Status::FailedPrecondition("no cgroup v2 hierarchy (no 0:: line in /proc/self/cgroup)");
  if (rel.rfind("/..", 0) == 0) return Status::FailedPrecondition("this process's cgroup is outside its cgroup namespace");
  std::string mounts;
  if (!read_small_file("/proc/self/mountinfo", mounts)) return Status::FailedPrecondition("/proc/self/mountinfo is unreadable");
  std::istringstream mlines(mounts);
  for (std::string line; std::getline(mlines, line);) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, devno, root, mount_point;
    fields >> id >> parent >> devno >> root >> mount_point;
    if (root != "/") continue;  // a bind mount of a subtree: paths would not line up
    return rel == "/" ? mount_point : mount_point + rel;
  }
  return Status::FailedPrecondition("cgroup v2 is not mounted (no cgroup2 entry in /proc/self/mountinfo)");
}

// Moves a short-lived forked child into `dir` the way a trial will enter its
// cgroup: proves that this process may move processes there (delegation).
int probe_move(const std::string& dir) {
  std::string procs = dir + "/cgroup.procs";
  pid_t pid = ::fork();
  if (pid < 0) return errno;
  if (pid == 0) {
    int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) ::_exit(1);
    ::_exit(::write(fd, "0", 1) == 1 ? 0 : 2);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : EACCES;
}

// Freezes, SIGKILLs every member, thaws (kernels without cgroup.kill).
void freeze_and_kill(const std::string& dir) {
  bool frozen = write_control(dir + "/cgroup.freeze", "1") == 0;
  if (frozen) {
    // Freezing is asynchronous: wait (bounded) for cgroup.events to say so,
    // so that no member forks between the listing and the kill.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    std::string events;
    while (std::chrono::steady_clock::now() < until && read_small_file(dir + "/cgroup.events", events) &&
           events.find("frozen 1") == std::string::npos) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (int round = 0; round < 100; ++round) {
    std::vector<pid_t> pids = read_procs(dir);
    if (pids.empty()) break;
    for (pid_t p : pids) ::kill(p, SIGKILL);
    if (frozen) break;  // frozen members cannot fork: one pass kills them all
  }
  if (frozen) write_control(dir + "/cgroup.freeze", "0");
}

void kill_cgroup(const std::string& dir, bool has_kill) {
  if (has_kill && write_control(dir + "/cgroup.kill", "1") == 0) return;
  freeze_and_kill(dir);
}

// Reads a cgroup control file through a descriptor kept open: kernfs makes
// its text afresh for every read from offset 0. nullopt when it cannot.
std::optional<std::string> read_control_fd(int fd) {
  if (fd < 0) return std::nullopt;
  char buf[1024];
  ssize_t n;
  do {
    n = ::pread(fd, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

// The value of `key` in a flat keyed file ("key value" lines: cgroup.events,
// cgroup.stat); nullopt when the key is absent.
std::optional<long> keyed_value(const std::string& text, std::string_view key) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return std::strtol(std::string(line.substr(key.size() + 1)).c_str(), nullptr, 10);
    }
    at = end + 1;
  }
  return std::nullopt;
}

// The child cgroups of `dir` (a cgroup's subdirectories; its interface
// files are regular files).
std::vector<std::string> child_cgroups(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type != DT_DIR || std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    out.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  return out;
}

// Removes cgroup `dir` and the child cgroups a trial may have made in it,
// deepest first. Returns the ones still emptying (EBUSY), children before
// their parents, for a later try.
std::vector<std::string> remove_cgroup_tree(const std::string& dir) {
  if (::rmdir(dir.c_str()) == 0 || errno != EBUSY) return {};
  // EBUSY: processes in it or below, or child cgroups (even empty ones).
  std::vector<std::string> busy;
  for (const std::string& child : child_cgroups(dir)) {
    for (std::string& b : remove_cgroup_tree(child)) busy.push_back(std::move(b));
  }
  if (::rmdir(dir.c_str()) != 0 && errno == EBUSY) busy.push_back(dir);
  return busy;
}

// Kills what the trials in an agent directory (one of a dead agent, or of
// a dead agent whose pid this process now has) hold, and removes their
// cgroups; a cgroup still emptying stays for the next start.
void clear_agent_dir(const std::string& dir) {
  DIR* t = ::opendir(dir.c_str());
  if (!t) return;
  std::vector<std::string> trials;
  while (dirent* e = ::readdir(t)) {
    if (std::strncmp(e->d_name, "trial-", 6) == 0) trials.push_back(dir + "/" + e->d_name);
  }
  ::closedir(t);
  for (const std::string& trial : trials) {
    std::string events;
    bool populated = read_small_file(trial + "/cgroup.events", events) &&
                     keyed_value(events, "populated").value_or(1) != 0;
    if (populated) {
      log::warn("killing the processes a dead agent's trial left behind in " + trial);
      kill_cgroup(trial, ::access((trial + "/cgroup.kill").c_str(), F_OK) == 0);
      // The kill is asynchronous; this runs once, at start-up, so it may wait
      // a little (bounded) for the cgroup to empty before removing it.
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (std::chrono::steady_clock::now() < until && read_small_file(trial + "/cgroup.events", events) &&
             keyed_value(events, "populated").value_or(0) != 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    remove_cgroup_tree(trial);  // may still be emptying: then it stays for the next start
  }
}

}  // namespace

namespace containment_files {

// Kills the trials of agents that died (SIGKILL) before removing their
// cgroups: `<base>/swept-agent-PID` whose PID no longer runs, and the leaf
// `swept-agent-PID.self` such an agent had moved into (empty: its one
// process is dead).
void clean_dead_agents(const std::string& base) {
  for (const std::string& dir : containment_files::dead_agent_dirs(base)) {
    clear_agent_dir(dir);
    ::rmdir(dir.c_str());
  }
}

std::string leaf_name(pid_t pid) { return "swept-agent-" + std::to_string(pid) + ".self"; }

std::string agent_base(const std::string& own, pid_t self) {
  const size_t slash = own.rfind('/');
  if (slash == std::string::npos || own.compare(slash + 1, std::string::npos, leaf_name(self)) != 0) return own;
  return own.substr(0, slash);
}

std::string enable_for_children(const std::string& parent, const std::string& controller, pid_t self,
                                std::string* moved_to) {
  const std::string control = parent + "/cgroup.subtree_control";
  int e = write_control(control, "+" + controller);
  const std::string refused = "cgroup v2: " + parent + " does not give its children the " + controller + " controller (";
  if (e == 0) return "";
  if (e != EBUSY) return refused + errno_text(e) + "; docs/deploy.md, \"Trial limits\")";
  // It holds processes (the agent, at least): the agent moves into a leaf.
  const std::string leaf = parent + "/" + leaf_name(self);
  if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST)
    return refused + "EBUSY, and cannot create the leaf " + leaf + " to move the agent into: " + errno_text(errno) + ")";
  if (int m = write_control(leaf + "/cgroup.procs", std::to_string(self)); m != 0)
    return refused + "EBUSY, and cannot move the agent into " + leaf + ": " + errno_text(m) + ")";
  *moved_to = leaf;
  log::info("moved the agent (pid " + std::to_string(self) + ") into " + leaf + ", so that " + parent +
            " holds no process and may give its children controllers (cgroup v2)");
  if ((e = write_control(control, "+" + controller)) == 0) return "";
  std::string others;
  for (pid_t p : read_procs(parent)) {
    std::string comm;
    read_small_file("/proc/" + std::to_string(p) + "/comm", comm, 256);
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    others += (others.empty() ? "" : ", ") + std::to_string(p) + (comm.empty() ? "" : " (" + comm + ")");
  }
  if (others.empty()) return refused + errno_text(e) + ", even with the agent moved into " + leaf + ")";
  return refused + errno_text(e) + ": it still holds other processes, " + others +
         "; start the agent alone in its cgroup, or in a leaf of it (systemd: DelegateSubgroup=))";
}

void leave_leaf(const std::string& parent, const std::string& leaf, pid_t self,
                const std::vector<std::string>& controllers) {
  for (const std::string& c : controllers) write_control(parent + "/cgroup.subtree_control", "-" + c);
  write_control(parent + "/cgroup.procs", std::to_string(self));
  ::rmdir(leaf.c_str());
}

std::vector<std::string> dead_agent_dirs(const std::string& base) {
  std::vector<std::string> stale;
  DIR* d = ::opendir(base.c_str());
  if (!d) return stale;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("swept-agent-", 0) != 0) continue;
    long pid = std::strtol(name.c_str() + 12, nullptr, 10);
    if (pid > 0 && (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0)) continue;
    stale.push_back(base + "/" + name);
  }
  ::closedir(d);
  return stale;
}

int signal_every_cgroup(const TrialsView& view, int sig) {
  int found = 0;
  if (view.cgroup_root.empty()) return 0;
  DIR* d = ::opendir(view.cgroup_root.c_str());
  if (!d) return 0;
  std::vector<std::string> trials;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "trial-", 6) == 0) trials.push_back(view.cgroup_root + "/" + e->d_name);
  }
  ::closedir(d);
  for (const std::string& trial : trials) {
    std::vector<pid_t> pids = read_procs(trial);
    if (pids.empty()) continue;
    ++found;
    if (sig == SIGKILL) {
      kill_cgroup(trial, view.has_cgroup_kill);
    } else {
      for (pid_t p : pids) ::kill(p, sig);
    }
  }
  return found;
}

}  // namespace containment_files

std::string Containment::try_cgroup_mode(uint64_t instance) {
  auto own = own_cgroup_dir();
  if (!own.ok()) return own.status().message();
  // A second agent of a process that moved into its leaf (agent_base) sets up beside the first.
  Result<std::string> base = containment_files::agent_base(*own, ::getpid());
  // One directory per containment: a second agent in this process (swept
  // run's local agents) must neither take the first's directory for a dead
  // agent's nor name its trial cgroups alike.
  std::string agent_dir = *base + "/swept-agent-" + std::to_string(::getpid());
  if (instance > 1) agent_dir.append(1, '-').append(std::to_string(instance));
  if (::access((*base + "/cgroup.procs").c_str(), W_OK) != 0) {
    return "this process's cgroup " + *base + " is not writable (" + errno_text(errno) +
           "): run the agent as root or in a delegated cgroup (systemd: Delegate=yes)";
  }
  int made = ::mkdir(agent_dir.c_str(), 0755) == 0 ? 0 : errno;
  if (made != 0 && made != EEXIST) return "cannot create " + agent_dir + " (" + errno_text(made) + ")";
  // It existed: a dead agent's that had this pid (a container's agent
  // often has the same one each time). Its trials are not ours.
  if (made == EEXIST) clear_agent_dir(agent_dir);
  std::string why_not;
  std::string probe = agent_dir + "/probe";
  if (::mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST) {
    why_not = "cannot create " + probe + " (" + errno_text(errno) + ")";
  } else if (int e = probe_move(probe); e != 0) {
    why_not = "cannot move a process into " + probe + " (" + errno_text(e) + ")";
  }
  // The probe process is reaped, so the cgroup is empty; retry briefly
  // while the kernel finishes removing it from the cgroup.
  for (int i = 0; i < 1000 && ::rmdir(probe.c_str()) != 0 && errno == EBUSY; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!why_not.empty()) {
    ::rmdir(agent_dir.c_str());
    return why_not;
  }
  mode_ = ContainmentMode::kCgroup;
  agent_dir_ = agent_dir;
  has_cgroup_kill_ = ::access((agent_dir + "/cgroup.kill").c_str(), F_OK) == 0;
  const char* reuse = std::getenv("SWEPT_AGENT_REUSE_CGROUPS");
  reuse_cgroups_ = !(reuse && std::string_view(reuse) == "0");
  subtree_control_fd_ = ::open((agent_dir + "/cgroup.subtree_control").c_str(), O_RDONLY | O_CLOEXEC);
  containment_files::clean_dead_agents(*base);
  description_ = "cgroup v2, one cgroup per trial under " + agent_dir +
                 (has_cgroup_kill_ ? " (killed with cgroup.kill" : " (killed by freezing, no cgroup.kill") +
                 (reuse_cgroups_ ? "; emptied cgroups reused)" : "; no reuse)");
  return "";
}

void Containment::release_pool() {
  for (size_t slot = 0; slot < pool_.size(); ++slot) {
    if (!pool_[slot].dir.empty()) retire(static_cast<int>(slot), !clean(pool_[slot], /*fully=*/false));
  }
  idle_.clear();
}

bool Containment::clean(const PooledCgroup& p, bool fully) const {
  auto events = read_control_fd(p.events_fd);
  if (!events || keyed_value(*events, "populated") != 0) return false;
  if (keyed_value(*events, "frozen").value_or(0) != 0) return false;  // no "frozen" line: no v2 freezer
  if (!fully) return true;
  auto stat = read_control_fd(p.stat_fd);
  if (!stat || keyed_value(*stat, "nr_descendants") != 0 ||
      keyed_value(*stat, "nr_dying_descendants").value_or(0) != 0) {
    return false;
  }
  auto controllers = read_control_fd(subtree_control_fd_);
  return controllers && controllers->find_first_not_of(" \n") == std::string::npos;
}

void Containment::remove_cgroup(const std::string& dir) {
  for (std::string& busy : remove_cgroup_tree(dir)) to_remove_.push_back(std::move(busy));
}

void Containment::retire(int slot, bool kill) {
  PooledCgroup p = std::exchange(pool_[static_cast<size_t>(slot)], PooledCgroup{});
  for (int fd : {p.dir_fd, p.events_fd, p.stat_fd}) {
    if (fd >= 0) ::close(fd);
  }
  if (kill) kill_cgroup(p.dir, has_cgroup_kill_);
  remove_cgroup(p.dir);
}

Result<TrialContainer> Containment::make_cgroup() {
  TrialContainer c;
  // trial-N, N counting this agent's cgroups. A name taken already (left by
  // a dead agent of this pid that could not be removed) is skipped.
  for (int tries = 0;; ++tries) {
    c.cgroup_dir = agent_dir_ + "/trial-" + std::to_string(++cgroups_made_);
    if (::mkdir(c.cgroup_dir.c_str(), 0755) == 0) break;
    if (errno != EEXIST || tries == 100) {
      return Status::IoError("cannot create the trial's cgroup " + c.cgroup_dir + ": " + errno_text(errno));
    }
  }
  // For clone3's CLONE_INTO_CGROUP; without it the child enters through
  // cgroup.procs, so a failure here costs only that (and the reuse).
  c.cgroup_fd = ::open(c.cgroup_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (!reuse_cgroups_ || c.cgroup_fd < 0) return c;
  size_t slot = 0;
  while (slot < pool_.size() && !pool_[slot].dir.empty()) ++slot;
  if (slot == static_cast<size_t>(kMaxPooledCgroups)) return c;  // the pool is full: this one is the trial's alone
  PooledCgroup p;
  p.events_fd = ::open((c.cgroup_dir + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC);
  p.stat_fd = ::open((c.cgroup_dir + "/cgroup.stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (p.events_fd < 0 || p.stat_fd < 0) {  // cannot be checked: not reusable
    for (int fd : {p.events_fd, p.stat_fd}) {
      if (fd >= 0) ::close(fd);
    }
    return c;
  }
  p.dir = c.cgroup_dir;
  p.dir_fd = c.cgroup_fd;
  if (slot == pool_.size()) pool_.emplace_back();
  pool_[slot] = std::move(p);
  c.pool_slot = static_cast<int>(slot);
  return c;
}

Result<TrialContainer> Containment::take_cgroup() {
  // The most recently emptied cgroup first, checked again: nothing may have
  // entered it since its trial ended.
  while (!idle_.empty()) {
    int slot = idle_.back();
    idle_.pop_back();
    const PooledCgroup& p = pool_[static_cast<size_t>(slot)];
    if (!clean(p, /*fully=*/false)) {
      log::warn("trial cgroup " + p.dir + " is no longer empty: killing what entered it and removing it");
      retire(slot, /*kill=*/true);
      continue;
    }
    TrialContainer c;
    c.cgroup_dir = p.dir;
    c.cgroup_fd = p.dir_fd;
    c.pool_slot = slot;
    return c;
  }
  return make_cgroup();
}

void Containment::release_cgroup(TrialContainer& c) {
  if (c.cgroup_dir.empty()) return;
  const int slot = std::exchange(c.pool_slot, -1);
  if (slot >= 0) {
    // Most trials leave nothing behind (the leader, a zombie now, no longer
    // counts as populated): the cgroup goes back to the pool as it is. One
    // that holds processes, or that its trial changed, is killed and removed.
    if (clean(pool_[static_cast<size_t>(slot)], /*fully=*/true)) {
      idle_.push_back(slot);
    } else {
      retire(slot, /*kill=*/true);
    }
    c.cgroup_dir.clear();
    return;
  }
  // A cgroup of its own. The kernel removes an empty cgroup at once and
  // refuses (EBUSY) one with processes, so trying that first spares the
  // kill (three system calls, and the cgroup lock) per trial.
  if (::rmdir(c.cgroup_dir.c_str()) == 0 || errno == ENOENT) {
    c.cgroup_dir.clear();
    return;
  }
  kill_cgroup(c.cgroup_dir, has_cgroup_kill_);
  remove_cgroup(c.cgroup_dir);
  c.cgroup_dir.clear();
}

void Containment::remove_emptied() {
  // In order: a trial's child cgroups were queued before the trial's.
  std::erase_if(to_remove_, [](const std::string& dir) { return ::rmdir(dir.c_str()) == 0 || errno != EBUSY; });
}

}  // namespace swept::agent
