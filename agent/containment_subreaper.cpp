// Containment's subreaper mode (containment.h, kSubreaper), the fallback
// where no cgroup can be had: the agent adopts its trials' orphans, finds a
// trial's processes by its SWEPT_TRIAL_TAG and by descent in a sweep of
// /proc, stops and kills them, and reaps what it adopted.
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/containment.h"
#include "agent/containment_modes.h"

namespace swept::agent {
namespace {

using containment_files::read_small_file;

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

namespace containment_files {

int signal_every_tagged(const TrialsView& view, int sig) {
  const std::string entry = std::string(Containment::tag_variable()) + "=" + view.tag_prefix;
  if (sig != SIGKILL) {
    std::vector<pid_t> pids = find_all_tagged(entry);
    for (pid_t p : pids) ::kill(p, sig);
    return static_cast<int>(pids.size());
  }
  return static_cast<int>(stop_and_kill_until_none([&] { return find_all_tagged(entry); }).size());
}

}  // namespace containment_files

Status Containment::become_subreaper(const std::string& why_not) {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    return Status::IoError(std::string("prctl(PR_SET_CHILD_SUBREAPER): ") + containment_files::errno_text(errno));
  }
  mode_ = ContainmentMode::kSubreaper;
  description_ = "subreaper: the agent adopts its trials' orphans and sweeps them by the SWEPT_TRIAL_TAG marker" +
                 (why_not.empty() ? std::string(" (chosen)") : " (no cgroup: " + why_not + ")");
  return Status::Ok();
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

void Containment::kill_tagged(const TrialContainer& c) {
  for (pid_t p : stop_and_kill_until_none([&] { return find_tagged(c); })) to_reap_.push_back(p);
}

void Containment::reap_orphans(const std::vector<pid_t>& live_leaders) {
  std::erase_if(to_reap_, [](pid_t p) {
    int status = 0;
    pid_t r = ::waitpid(p, &status, WNOHANG);
    return r == p || (r < 0 && errno == ECHILD);
  });
  if (mode_ != ContainmentMode::kSubreaper) return;
  // Orphans that exited on their own are the agent's zombies: reap them,
  // but never a trial's main process, which its supervisor reaps (this
  // agent's or, in a process of several agents, another's).
  ReapHold hold;
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) break;
    if (std::find(live_leaders.begin(), live_leaders.end(), info.si_pid) != live_leaders.end()) break;
    if (supervised_.count(info.si_pid)) break;
    int status = 0;
    ::waitpid(info.si_pid, &status, WNOHANG);
  }
}

}  // namespace swept::agent
