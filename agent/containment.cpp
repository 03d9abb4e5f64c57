// Containment: see containment.h for the two modes and what each guarantees.
#include "agent/containment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "common/log.h"

namespace swept::agent {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

bool read_small_file(const std::string& path, std::string& out, size_t limit = 1 << 20) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.clear();
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() >= limit) break;
  }
  ::close(fd);
  return true;
}

// Writes `text` to a cgroup control file; 0 or errno.
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

struct ProcEntry {
  pid_t pid;
  pid_t ppid;
  char state;
};

std::vector<ProcEntry> scan_proc() {
  std::vector<ProcEntry> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::string stat;
    if (!read_small_file("/proc/" + std::string(e->d_name) + "/stat", stat, 4096)) continue;
    size_t close_paren = stat.rfind(')');  // the command may hold spaces and parentheses
    if (close_paren == std::string::npos || close_paren + 4 >= stat.size()) continue;
    char state = stat[close_paren + 2];
    long ppid = std::strtol(stat.c_str() + close_paren + 4, nullptr, 10);
    out.push_back({static_cast<pid_t>(pid), static_cast<pid_t>(ppid), state});
  }
  ::closedir(d);
  return out;
}

// Whether the process's environment holds `entry` (as a whole variable, or
// a variable starting with it when `prefix`).
bool environ_has(pid_t pid, const std::string& entry, bool prefix = false) {
  std::string env;
  if (!read_small_file("/proc/" + std::to_string(pid) + "/environ", env, 4 << 20)) return false;
  size_t at = 0;
  while ((at = env.find(entry, at)) != std::string::npos) {
    bool starts = at == 0 || env[at - 1] == '\0';
    bool ends = prefix || at + entry.size() == env.size() || env[at + entry.size()] == '\0';
    if (starts && ends) return true;
    at += entry.size();
  }
  return false;
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

// Kills the trials of agents that died (SIGKILL) before removing their
// cgroups: `<base>/swept-agent-PID` whose PID no longer runs.
void clean_dead_agents(const std::string& base) {
  DIR* d = ::opendir(base.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("swept-agent-", 0) != 0) continue;
    long pid = std::strtol(name.c_str() + 12, nullptr, 10);
    if (pid > 0 && (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0)) continue;
    stale.push_back(base + "/" + name);
  }
  ::closedir(d);
  for (const std::string& dir : stale) {
    clear_agent_dir(dir);
    ::rmdir(dir.c_str());
  }
}

// kSubreaper: stops, then kills, what `find` lists, until a listing finds
// nothing new (a process that forked between the listing and the SIGSTOP is
// found by the next one; at most 100 rounds). Returns every pid killed.
std::set<pid_t> stop_and_kill_until_none(const std::function<std::vector<pid_t>()>& find) {
  std::set<pid_t> killed;
  for (int round = 0; round < 100; ++round) {
    std::vector<pid_t> pids = find();
    bool fresh = false;
    for (pid_t p : pids) fresh = fresh || !killed.count(p);
    if (!fresh) break;
    for (pid_t p : pids) ::kill(p, SIGSTOP);
    for (pid_t p : pids) {
      ::kill(p, SIGKILL);
      killed.insert(p);
    }
  }
  return killed;
}

// kSubreaper: the live processes whose environment has a tag starting with
// `tag_entry_prefix` ("SWEPT_TRIAL_TAG=PID-I-"), and all their descendants.
std::vector<pid_t> find_all_tagged(const std::string& tag_entry_prefix) {
  std::vector<ProcEntry> procs = scan_proc();
  std::multimap<pid_t, pid_t> children;
  for (const auto& p : procs) {
    if (p.state != 'Z' && p.state != 'X') children.emplace(p.ppid, p.pid);
  }
  std::set<pid_t> found;
  std::vector<pid_t> todo;
  for (const auto& p : procs) {
    if (p.state != 'Z' && p.state != 'X' && environ_has(p.pid, tag_entry_prefix, /*prefix=*/true)) todo.push_back(p.pid);
  }
  while (!todo.empty()) {
    pid_t pid = todo.back();
    todo.pop_back();
    if (!found.insert(pid).second) continue;
    auto range = children.equal_range(pid);
    for (auto it = range.first; it != range.second; ++it) todo.push_back(it->second);
  }
  found.erase(::getpid());  // never the caller
  return {found.begin(), found.end()};
}

}  // namespace

int signal_every_trial(const TrialsView& view, int sig) {
  int found = 0;
  if (view.mode == ContainmentMode::kCgroup) {
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
  const std::string entry = std::string(Containment::tag_variable()) + "=" + view.tag_prefix;
  if (sig != SIGKILL) {
    std::vector<pid_t> pids = find_all_tagged(entry);
    for (pid_t p : pids) ::kill(p, sig);
    return static_cast<int>(pids.size());
  }
  return static_cast<int>(stop_and_kill_until_none([&] { return find_all_tagged(entry); }).size());
}

const char* containment_mode_name(ContainmentMode mode) {
  return mode == ContainmentMode::kCgroup ? "cgroup" : "subreaper";
}

bool process_alive(pid_t pid) {
  std::string stat;
  if (!read_small_file("/proc/" + std::to_string(pid) + "/stat", stat, 4096)) return false;
  size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return false;
  char state = stat[close_paren + 2];
  return state != 'Z' && state != 'X';
}

Result<std::unique_ptr<Containment>> Containment::create(const std::string& preference) {
  std::string choice = preference;
  if (choice == "auto") {
    if (const char* env = std::getenv("SWEPT_AGENT_CONTAINMENT"); env && *env) choice = env;
  }
  if (choice != "auto" && choice != "cgroup" && choice != "subreaper") {
    return Status::InvalidArgument("unknown trial containment '" + choice + "': use auto, cgroup or subreaper");
  }
  std::unique_ptr<Containment> c(new Containment());
  static std::atomic<uint64_t> instances{0};
  c->tag_prefix_ = std::to_string(::getpid()) + "-" + std::to_string(++instances) + "-";
  std::string why_not;
  if (choice != "subreaper") {
    auto base = own_cgroup_dir();
    std::string agent_dir = base.ok() ? *base + "/swept-agent-" + std::to_string(::getpid()) : "";
    if (!base.ok()) {
      why_not = base.status().message();
    } else if (::access((*base + "/cgroup.procs").c_str(), W_OK) != 0) {
      why_not = "this process's cgroup " + *base + " is not writable (" + errno_text(errno) +
                "): run the agent as root or in a delegated cgroup (systemd: Delegate=yes)";
    } else if (int made = ::mkdir(agent_dir.c_str(), 0755) == 0 ? 0 : errno; made != 0 && made != EEXIST) {
      why_not = "cannot create " + agent_dir + " (" + errno_text(made) + ")";
    } else {
      // It existed: a dead agent's that had this pid (a container's agent
      // often has the same one each time). Its trials are not ours.
      if (made == EEXIST) clear_agent_dir(agent_dir);
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
      if (why_not.empty()) {
        c->mode_ = ContainmentMode::kCgroup;
        c->agent_dir_ = agent_dir;
        c->has_cgroup_kill_ = ::access((agent_dir + "/cgroup.kill").c_str(), F_OK) == 0;
        const char* reuse = std::getenv("SWEPT_AGENT_REUSE_CGROUPS");
        c->reuse_cgroups_ = !(reuse && std::string_view(reuse) == "0");
        c->subtree_control_fd_ = ::open((agent_dir + "/cgroup.subtree_control").c_str(), O_RDONLY | O_CLOEXEC);
        clean_dead_agents(*base);
        c->description_ = "cgroup v2, one cgroup per trial under " + agent_dir +
                          (c->has_cgroup_kill_ ? " (killed with cgroup.kill" : " (killed by freezing, no cgroup.kill") +
                          (c->reuse_cgroups_ ? "; emptied cgroups reused)" : "; no reuse)");
        return c;
      }
      ::rmdir(agent_dir.c_str());
    }
    if (choice == "cgroup") return Status::FailedPrecondition("trial containment by cgroup is impossible: " + why_not);
  }
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    return Status::IoError(std::string("prctl(PR_SET_CHILD_SUBREAPER): ") + errno_text(errno));
  }
  c->mode_ = ContainmentMode::kSubreaper;
  c->description_ = "subreaper: the agent adopts its trials' orphans and sweeps them by the SWEPT_TRIAL_TAG marker" +
                    (why_not.empty() ? std::string(" (chosen)") : " (no cgroup: " + why_not + ")");
  return c;
}

Containment::~Containment() {
  // The agent is stopping: every trial has been reaped; remove what is left,
  // the pool's cgroups first (killing what one might hold: none should).
  for (size_t slot = 0; slot < pool_.size(); ++slot) {
    if (!pool_[slot].dir.empty()) retire(static_cast<int>(slot), !clean(pool_[slot], /*fully=*/false));
  }
  idle_.clear();
  if (subtree_control_fd_ >= 0) ::close(subtree_control_fd_);
  for (int i = 0; i < 1000 && collect({}); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (mode_ == ContainmentMode::kCgroup) ::rmdir(agent_dir_.c_str());
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

Result<TrialContainer> Containment::prepare(int64_t sweep_id, int64_t trial_id, int attempt) {
  uint64_t serial = ++next_serial_;
  const std::string tag = tag_prefix_ + std::to_string(serial);
  if (mode_ != ContainmentMode::kCgroup) {
    TrialContainer c;
    c.tag = tag;
    return c;
  }
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
    c.tag = tag;
    c.cgroup_dir = p.dir;
    c.cgroup_fd = p.dir_fd;
    c.pool_slot = slot;
    return c;
  }
  auto made = make_cgroup();
  if (!made.ok()) {
    return Status::IoError(made.status().message() + " (for trial " + std::to_string(trial_id) + " of sweep " +
                           std::to_string(sweep_id) + ", attempt " + std::to_string(attempt) + ")");
  }
  made->tag = tag;
  return made;
}

std::string Containment::procs_file(const TrialContainer& c) {
  return c.cgroup_dir.empty() ? std::string() : c.cgroup_dir + "/cgroup.procs";
}

void Containment::launched(TrialContainer& c) {
  if (c.cgroup_fd >= 0 && c.pool_slot < 0) ::close(c.cgroup_fd);  // a pooled one's is the pool's
  c.cgroup_fd = -1;
}

TrialsView Containment::view() const {
  TrialsView v;
  v.mode = mode_;
  v.cgroup_root = agent_dir_;
  v.has_cgroup_kill = has_cgroup_kill_;
  v.tag_prefix = tag_prefix_;
  return v;
}

std::vector<pid_t> Containment::find_tagged(const TrialContainer& c) const {
  const pid_t self = ::getpid();
  std::vector<ProcEntry> procs = scan_proc();
  std::multimap<pid_t, const ProcEntry*> children;
  for (const auto& p : procs) children.emplace(p.ppid, &p);
  const std::string entry = std::string(tag_variable()) + "=" + c.tag;
  std::vector<pid_t> found;
  // Depth-first from the agent: every process of a trial is in the agent's
  // tree (a subreaper's orphans become its children).
  std::vector<std::pair<pid_t, bool>> stack{{self, false}};
  while (!stack.empty()) {
    auto [pid, inherited] = stack.back();
    stack.pop_back();
    auto range = children.equal_range(pid);
    for (auto it = range.first; it != range.second; ++it) {
      const ProcEntry& child = *it->second;
      bool live = child.state != 'Z' && child.state != 'X';
      bool mine = inherited || pid == c.leader;
      if (!mine && live && child.pid != c.leader) mine = environ_has(child.pid, entry);
      if (mine && live && child.pid != c.leader) found.push_back(child.pid);
      stack.push_back({child.pid, mine});
    }
  }
  return found;
}

void Containment::signal_all(const TrialContainer& c, int sig) {
  if (mode_ == ContainmentMode::kCgroup && !c.cgroup_dir.empty()) {
    for (pid_t p : read_procs(c.cgroup_dir)) ::kill(p, sig);
    return;
  }
  for (pid_t p : find_tagged(c)) ::kill(p, sig);
}

void Containment::kill_all_and_release(TrialContainer& c) {
  launched(c);
  if (mode_ == ContainmentMode::kCgroup) {
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
    return;
  }
  for (pid_t p : stop_and_kill_until_none([&] { return find_tagged(c); })) to_reap_.push_back(p);
}

bool Containment::collect(const std::vector<pid_t>& live_leaders) {
  // In order: a trial's child cgroups were queued before the trial's.
  std::erase_if(to_remove_, [](const std::string& dir) { return ::rmdir(dir.c_str()) == 0 || errno != EBUSY; });
  std::erase_if(to_reap_, [](pid_t p) {
    int status = 0;
    pid_t r = ::waitpid(p, &status, WNOHANG);
    return r == p || (r < 0 && errno == ECHILD);
  });
  if (mode_ == ContainmentMode::kSubreaper) {
    // Orphans that exited on their own are the agent's zombies: reap them,
    // but never a trial's main process, which its supervisor reaps.
    for (;;) {
      siginfo_t info{};
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) break;
      if (std::find(live_leaders.begin(), live_leaders.end(), info.si_pid) != live_leaders.end()) break;
      int status = 0;
      ::waitpid(info.si_pid, &status, WNOHANG);
    }
  }
  return !to_remove_.empty() || !to_reap_.empty();
}

}  // namespace swept::agent
