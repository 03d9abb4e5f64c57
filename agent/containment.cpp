// Containment, the part both modes share (containment.h says what each mode
// guarantees): choosing the mode at start-up, and the calls the supervisor
// makes for each trial, each handed to the mode's own file
// (containment_cgroup.cpp, containment_subreaper.cpp).
#include "agent/containment.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "agent/containment_modes.h"

namespace swept::agent {

Mutex Containment::reap_mu_;
std::set<pid_t> Containment::supervised_;

namespace containment_files {

std::string errno_text(int e) { return std::strerror(e); }

bool read_small_file(const std::string& path, std::string& out, size_t limit) {
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

}  // namespace containment_files

using containment_files::read_procs;
using containment_files::read_small_file;

int signal_every_trial(const TrialsView& view, int sig) {
  return view.mode == ContainmentMode::kCgroup ? containment_files::signal_every_cgroup(view, sig)
                                               : containment_files::signal_every_tagged(view, sig);
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
  const uint64_t instance = ++instances;
  c->instance_ = instance;
  c->tag_prefix_ = std::to_string(::getpid()) + "-" + std::to_string(instance) + "-";
  std::string why_not;
  if (choice != "subreaper") {
    why_not = c->try_cgroup_mode(instance);
    if (why_not.empty()) return c;
    if (choice == "cgroup") return Status::FailedPrecondition("trial containment by cgroup is impossible: " + why_not);
  }
  Status s = c->become_subreaper(why_not);
  if (!s.ok()) return s;
  return c;
}

Containment::~Containment() {
  // The agent is stopping: every trial has been reaped; remove what is left,
  // the pool's cgroups first (killing what one might hold: none should).
  release_pool();
  // Where the limits moved the agent (a leaf of its cgroup): undone last.
  TrialLimiter::Leaf leaf = limiter_ ? limiter_->leaf() : TrialLimiter::Leaf{};
  std::vector<std::string> given = limiter_ ? limiter_->given() : std::vector<std::string>{};
  limiter_.reset();  // its v1 directories: every trial has ended
  if (subtree_control_fd_ >= 0) ::close(subtree_control_fd_);
  for (int i = 0; i < 1000 && collect({}); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (mode_ == ContainmentMode::kCgroup) ::rmdir(agent_dir_.c_str());
  if (!leaf.leaf.empty()) containment_files::leave_leaf(leaf.parent, leaf.leaf, ::getpid(), given);
}

void Containment::enable_limits(bool enforce_cpus) {
  limiter_ = std::make_unique<TrialLimiter>(mode_ == ContainmentMode::kCgroup ? agent_dir_ : std::string(),
                                            enforce_cpus, instance_);
}

Result<TrialContainer> Containment::prepare(int64_t sweep_id, int64_t trial_id, int attempt,
                                            const protocol::TrialLimits& limits) {
  uint64_t serial = ++next_serial_;
  const std::string tag = tag_prefix_ + std::to_string(serial);
  auto which = [&] {
    return " (for trial " + std::to_string(trial_id) + " of sweep " + std::to_string(sweep_id) + ", attempt " +
           std::to_string(attempt) + ")";
  };
  TrialContainer c;
  if (mode_ == ContainmentMode::kCgroup) {
    auto taken = take_cgroup();
    if (!taken.ok()) return Status::IoError(taken.status().message() + which());
    c = std::move(taken).value();
  }
  c.tag = tag;
  if (limiter_) {
    auto applied = limiter_->apply(c.cgroup_dir, limits, serial);
    if (!applied.ok()) {
      kill_all_and_release(c);
      return Status::IoError(applied.status().message() + which());
    }
    c.limits = std::move(applied).value();
  }
  return c;
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
    release_cgroup(c);
  } else {
    kill_tagged(c);
  }
  if (limiter_) limiter_->release(c.limits);
}

bool Containment::collect(const std::vector<pid_t>& live_leaders) {
  remove_emptied();
  reap_orphans(live_leaders);
  const bool limits_pending = limiter_ && limiter_->collect();
  return !to_remove_.empty() || !to_reap_.empty() || limits_pending;
}

}  // namespace swept::agent
