// Trial limits (limits.h): finding, per controller, a cgroup v2 parent that
// can carry it or a cgroup v1 hierarchy that has it, then per trial writing
// the limits, reading the OOM killer's count at the end, and removing the v1
// directories.
#include "agent/limits.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "agent/containment_modes.h"
#include "common/log.h"

namespace swept::agent {

namespace {

using containment_files::errno_text;
using containment_files::read_small_file;
using containment_files::write_control;


bool has_word(const std::string& list, const std::string& word, char sep) {
  std::istringstream in(list);
  for (std::string w; std::getline(in, w, sep);) {
    while (!w.empty() && (w.back() == '\n' || w.back() == ' ')) w.pop_back();
    if (w == word) return true;
  }
  return false;
}

// The number after `key ` in a flat keyed file (memory.events,
// memory.oom_control); -1 when absent.
long long keyed(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string k; in >> k;) {
    long long v = 0;
    if (!(in >> v)) break;
    if (k == key) return v;
  }
  return -1;
}

// This process's directory in the cgroup v1 hierarchy holding `controller`,
// or why there is none.
Result<std::string> v1_dir_of(const std::string& controller) {
  std::string mounts, own;
  if (!read_small_file("/proc/self/mountinfo", mounts) || !read_small_file("/proc/self/cgroup", own)) {
    return Status::FailedPrecondition("/proc/self/mountinfo or /proc/self/cgroup is unreadable");
  }
  std::string rel;
  bool listed = false;
  std::istringstream lines(own);
  for (std::string line; std::getline(lines, line);) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    if (has_word(line.substr(a + 1, b - a - 1), controller, ',')) {
      rel = line.substr(b + 1);
      listed = true;
    }
  }
  if (!listed) return Status::FailedPrecondition("no cgroup v1 hierarchy has the " + controller + " controller");
  std::istringstream mlines(mounts);
  for (std::string line; std::getline(mlines, line);) {
    size_t dash = line.find(" - cgroup ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype, source, options;
    tail >> fstype >> source >> options;
    if (!has_word(options, controller, ',')) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, devno, root, mount_point;
    fields >> id >> parent >> devno >> root >> mount_point;
    if (root != "/") continue;  // a bind mount of a subtree: paths would not line up
    return rel == "/" ? mount_point : mount_point + rel;
  }
  return Status::FailedPrecondition("the cgroup v1 " + controller + " hierarchy is not mounted here");
}

// Kills what a dead agent's trials left in its v1 directory `dir` and
// removes their cgroups (once, at start-up: a bounded wait for the killed
// to leave is fine).
void clear_v1_agent_dir(const std::string& dir) {
  DIR* t = ::opendir(dir.c_str());
  std::vector<std::string> trials;
  while (dirent* e = t ? ::readdir(t) : nullptr) {
    if (std::strncmp(e->d_name, "trial-", 6) == 0) trials.push_back(dir + "/" + e->d_name);
  }
  if (t) ::closedir(t);
  for (const std::string& trial : trials) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (::rmdir(trial.c_str()) != 0 && errno == EBUSY && std::chrono::steady_clock::now() < until) {
      for (pid_t p : containment_files::read_procs(trial)) ::kill(p, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

// The same for every `<base>/swept-agent-PID*` whose PID no longer runs.
void clear_dead_v1(const std::string& base) {
  for (const std::string& dir : containment_files::dead_agent_dirs(base)) {
    clear_v1_agent_dir(dir);
    ::rmdir(dir.c_str());
  }
}

}  // namespace

std::string format_bytes(int64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (unit < 4 && v >= 1024.0) {
    v /= 1024.0;
    ++unit;
  }
  if (unit < 0) return std::to_string(bytes) + " bytes";
  char buf[64];
  if (v == static_cast<double>(static_cast<int64_t>(v))) {
    std::snprintf(buf, sizeof buf, "%lld %s", static_cast<long long>(v), kUnits[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s (%lld bytes)", v, kUnits[unit], static_cast<long long>(bytes));
  }
  return buf;
}

TrialLimiter::V1 TrialLimiter::setup_v1(const std::string& controller, uint64_t instance) {
  V1 v;
  auto base = v1_dir_of(controller);
  if (!base.ok()) {
    v.why_not = base.status().message();
    return v;
  }
  clear_dead_v1(*base);
  std::string dir = *base + "/swept-agent-" + std::to_string(::getpid());
  if (instance > 1) dir += "-" + std::to_string(instance);
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno != EEXIST) {
      v.why_not = "cannot create " + dir + " (" + errno_text(errno) + "): run the agent as root";
      return v;
    }
    // A dead agent's that had this pid (a container's agent often has the
    // same one each time): its trials are not ours, and their names are.
    clear_v1_agent_dir(dir);
  }
  v.agent_dir = dir;
  return v;
}

std::string TrialLimiter::setup_v2(const std::string& trials_dir, const std::string& controller, bool& enabled) {
  std::string available;
  if (!read_small_file(trials_dir + "/cgroup.controllers", available)) return "cgroup v2: cannot read " + trials_dir;
  if (!has_word(available, controller, ' ')) {
    // The agent's own cgroup must offer it to its children. Only the root
    // may while it holds processes (cgroup v2's no-internal-process rule):
    // elsewhere the agent first moves itself into a leaf beside the trials'
    // directory (containment_modes.h, enable_for_children).
    std::string parent = trials_dir.substr(0, trials_dir.rfind('/'));
    std::string moved_to;
    std::string why = containment_files::enable_for_children(parent, controller, ::getpid(), &moved_to);
    if (!moved_to.empty()) leaf_ = {parent, moved_to};
    if (!why.empty()) return why;
    given_.push_back(controller);
  }
  if (int e = write_control(trials_dir + "/cgroup.subtree_control", "+" + controller); e != 0) {
    return "cgroup v2: cannot enable " + controller + " in " + trials_dir + " (" + errno_text(e) + ")";
  }
  enabled = true;
  return "";
}

TrialLimiter::TrialLimiter(const std::string& v2_trials_dir, bool enforce_cpus, uint64_t instance)
    : enforce_cpus_(enforce_cpus) {
  // Each limit: cgroup v2 when the trials' own cgroups can carry it, else a
  // v1 hierarchy, else not enforced (and why).
  // SWEPT_AGENT_LIMITS=memory,pids (any of memory, pids, cpus; "" for none)
  // keeps the agent from setting the others: a diagnostic, and how the tests
  // make a host that cannot enforce a limit.
  const char* only = std::getenv("SWEPT_AGENT_LIMITS");
  auto choose = [&](const std::string& v2_name, const std::string& v1_name, bool& v2, V1& v1, std::string& why_not) {
    const std::string limit = v1_name == "cpu" ? "cpus" : v1_name;
    if (only && !has_word(only, limit, ',')) {
      why_not = "turned off by SWEPT_AGENT_LIMITS=" + std::string(only);
      return std::string();
    }
    std::string v2_why = "no cgroup v2 containment";
    if (!v2_trials_dir.empty()) v2_why = setup_v2(v2_trials_dir, v2_name, v2);
    if (v2) return std::string("cgroup v2");
    v1 = setup_v1(v1_name, instance);
    if (!v1.agent_dir.empty()) return "cgroup v1 " + v1.agent_dir;
    why_not = v2_why + "; " + v1.why_not;
    return std::string();
  };
  std::string where_memory = choose("memory", "memory", v2_memory_, v1_memory_, not_memory_);
  std::string where_pids = choose("pids", "pids", v2_pids_, v1_pids_, not_pids_);
  std::string where_cpu;
  if (enforce_cpus) {
    where_cpu = choose("cpu", "cpu", v2_cpu_, v1_cpu_, not_cpus_);
  } else {
    not_cpus_ = "not asked (swept agent --enforce-cpus)";
  }
  if (!v1_memory_.agent_dir.empty()) memsw_ = ::access((v1_memory_.agent_dir + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0;
  auto say = [](const char* what, const std::string& where, const std::string& why_not) {
    return std::string(what) + (where.empty() ? " NOT enforced (" + why_not + ")" : " in " + where);
  };
  description_ = "trial limits: " + say("memory", where_memory, not_memory_) + "; " +
                 say("pids", where_pids, not_pids_) + "; " + say("cpus", where_cpu, not_cpus_);
}

TrialLimiter::~TrialLimiter() {
  for (std::string& dir : idle_pids_) to_remove_.push_back(std::move(dir));
  for (int i = 0; i < 1000 && collect(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (const V1* v : {&v1_memory_, &v1_pids_, &v1_cpu_}) {
    if (!v->agent_dir.empty()) ::rmdir(v->agent_dir.c_str());
  }
}

std::vector<std::string> TrialLimiter::v1_agent_dirs() const {
  std::vector<std::string> out;
  for (const V1* v : {&v1_memory_, &v1_pids_, &v1_cpu_}) {
    if (!v->agent_dir.empty()) out.push_back(v->agent_dir);
  }
  return out;
}

std::string TrialLimiter::enforced() const {
  std::string out;
  auto add = [&](const char* name, const std::string& why_not) {
    if (!why_not.empty()) return;
    if (!out.empty()) out += ',';
    out += name;
  };
  add("memory", not_memory_);
  add("pids", not_pids_);
  add("cpus", not_cpus_);
  return out;
}

Result<AppliedLimits> TrialLimiter::apply(const std::string& v2_trial_dir, const protocol::TrialLimits& limits,
                                          uint64_t serial) {
  AppliedLimits a;
  const int64_t pids = limits.pids > 0 ? limits.pids : kDefaultPids;
  const bool want_cpus = enforce_cpus_ && limits.cpus > 0;
  // (v2 dir or v1 agent dir, file, value) for each limit, set in that order.
  std::vector<std::pair<std::string, std::string>> writes;
  auto v1_trial_dir = [&](const V1& v) -> Result<std::string> {
    std::string dir = v.agent_dir + "/trial-" + std::to_string(serial);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::IoError("cannot create the trial's cgroup " + dir + ": " + errno_text(errno));
    }
    a.v1_dirs.push_back(dir);
    a.procs_files.push_back(dir + "/cgroup.procs");
    return dir;
  };
  auto fail = [&](Status s) {
    release(a);
    return s;
  };
  if (limits.memory_bytes > 0 && not_memory_.empty()) {
    const std::string bytes = std::to_string(limits.memory_bytes);
    a.memory_bytes = limits.memory_bytes;
    if (v2_memory_) {
      a.memory_dir = v2_trial_dir;
      writes.push_back({v2_trial_dir + "/memory.max", bytes});
      // No swap: the limit is what the trial may hold, not what it may page out.
      write_control(v2_trial_dir + "/memory.swap.max", "0");
    } else {
      auto dir = v1_trial_dir(v1_memory_);
      if (!dir.ok()) return fail(dir.status());
      a.memory_dir = *dir;
      a.memory_v1 = true;
      writes.push_back({*dir + "/memory.limit_in_bytes", bytes});
      if (memsw_) writes.push_back({*dir + "/memory.memsw.limit_in_bytes", bytes});
    }
  } else if (limits.memory_bytes > 0) {
    a.warning = "resources.memory (" + format_bytes(limits.memory_bytes) + ") is NOT enforced on this agent: " + not_memory_;
  }
  if (not_pids_.empty()) {
    std::string dir = v2_trial_dir;
    if (!v2_pids_ && !idle_pids_.empty()) {
      dir = std::move(idle_pids_.back());  // see kMaxIdlePidsCgroups
      idle_pids_.pop_back();
      if (containment_files::read_procs(dir).empty()) {
        a.v1_dirs.push_back(dir);
        a.procs_files.push_back(dir + "/cgroup.procs");
      } else {
        to_remove_.push_back(std::move(dir));  // something entered it: killed and removed by collect()
      }
    }
    if (!v2_pids_ && (a.v1_dirs.empty() || a.v1_dirs.back().rfind(v1_pids_.agent_dir + "/", 0) != 0)) {
      auto d = v1_trial_dir(v1_pids_);
      if (!d.ok()) return fail(d.status());
      dir = *d;
    } else if (!v2_pids_) {
      dir = a.v1_dirs.back();
    }
    writes.push_back({dir + "/pids.max", std::to_string(pids)});
  } else if (limits.pids > 0 && limits.pids != kDefaultPids) {
    a.warning += (a.warning.empty() ? "" : "; ") + std::string("resources.pids (") + std::to_string(pids) +
                 ") is NOT enforced on this agent: " + not_pids_;
  }
  if (want_cpus && not_cpus_.empty()) {
    const std::string quota = std::to_string(int64_t{limits.cpus} * 100000);
    if (v2_cpu_) {
      writes.push_back({v2_trial_dir + "/cpu.max", quota + " 100000"});
    } else {
      auto d = v1_trial_dir(v1_cpu_);
      if (!d.ok()) return fail(d.status());
      writes.push_back({*d + "/cpu.cfs_period_us", "100000"});
      writes.push_back({*d + "/cpu.cfs_quota_us", quota});
    }
  }
  for (const auto& [file, value] : writes) {
    if (int e = write_control(file, value); e != 0) {
      return fail(Status::IoError("cannot set the trial's limit " + file + " to " + value + ": " + errno_text(e)));
    }
  }
  return a;
}

std::string TrialLimiter::oom_reason(const AppliedLimits& a) {
  if (a.memory_dir.empty()) return "";
  std::string text;
  if (!read_small_file(a.memory_dir + (a.memory_v1 ? "/memory.oom_control" : "/memory.events"), text)) return "";
  if (keyed(text, "oom_kill") <= 0) return "";
  return "out of memory: limit " + format_bytes(a.memory_bytes);
}

void TrialLimiter::release(AppliedLimits& a) {
  for (const std::string& dir : a.v1_dirs) {
    if (!v1_pids_.agent_dir.empty() && dir.rfind(v1_pids_.agent_dir + "/", 0) == 0 &&
        idle_pids_.size() < kMaxIdlePidsCgroups && containment_files::read_procs(dir).empty()) {
      idle_pids_.push_back(dir);
      continue;
    }
    if (::rmdir(dir.c_str()) != 0 && errno == EBUSY) to_remove_.push_back(dir);
  }
  a.v1_dirs.clear();
  a.procs_files.clear();
}

bool TrialLimiter::collect() {
  std::erase_if(to_remove_, [](const std::string& dir) {
    if (::rmdir(dir.c_str()) == 0 || errno != EBUSY) return true;
    // Still holding processes: the trial's container was killed, but a
    // process that left it (it ran as root) may remain; kill it here too.
    for (pid_t p : containment_files::read_procs(dir)) ::kill(p, SIGKILL);
    return false;
  });
  return !to_remove_.empty();
}

}  // namespace swept::agent
