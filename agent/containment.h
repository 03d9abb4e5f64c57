// Containment: keeping every process a trial starts inside the trial, so that
// none outlives it (issue 15, item 5).
//
// A process group is not enough: a trial may call setsid() or setpgid() (a
// daemonising library, `setsid sleep &`, a data loader's helper) and leave the
// group; its processes then survive the trial's end and keep their GPU. The
// agent contains trials in one of two modes, chosen once at start-up and
// named in its start-up log (docs/deploy.md, "Trial containment"):
//
//  - kCgroup: each trial runs in its own cgroup v2, a child of a directory
//    the agent makes under its own cgroup (`<agent's cgroup>/swept-agent-PID/
//    trial-S-T-A-N`). The trial's process is created in it by the kernel
//    (clone3 with CLONE_INTO_CGROUP, through a descriptor of the directory
//    opened here), or where the kernel cannot, enters it before it execs (it
//    writes 0 to the cgroup's cgroup.procs); either way nothing it starts can
//    be outside it: no fork, setsid or double fork leaves a cgroup; only a
//    process with the rights to write another cgroup's cgroup.procs can.
//    SIGTERM goes to every process listed in cgroup.procs; the kill writes
//    cgroup.kill (Linux 5.14), or else freezes the cgroup, SIGKILLs every pid
//    listed and thaws it. The cgroup is removed once empty.
//    Available when a cgroup v2 hierarchy is mounted and the agent may write
//    its own cgroup (root, or a delegated subtree, e.g. systemd's
//    Delegate=yes). The agent's own cgroup keeps the agent: the trials' cgroups
//    are its descendants and have no children with processes of their own, so
//    cgroup v2's no-internal-processes rule is met without moving the agent
//    (no controller is enabled anywhere by the agent).
//  - kSubreaper: the fallback. The agent is a child subreaper
//    (PR_SET_CHILD_SUBREAPER): a trial's orphaned processes become the
//    agent's children instead of init's. Each trial carries a marker in its
//    environment (SWEPT_TRIAL_TAG, unique per agent process and launch). A
//    sweep of /proc finds the trial's processes: every process whose
//    environment has the marker, with all its descendants, and the
//    descendants of the trial's main process. They are stopped (SIGSTOP),
//    killed, and the sweep repeats until it finds none. Killed orphans are
//    reaped by the agent. What escapes it: a process that both leaves the
//    trial's tree (reparented: it becomes the agent's child, so it does not
//    leave the agent's tree) AND empties or rewrites its environment
//    (`env -i`) is not attributed to its trial and lives on as the agent's
//    child. Orphans that exit on their own are reaped by the agent.
//
// Thread safety: a Containment is used by the agent's one event loop; the
// launcher's child only writes the path it was given.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace swept::agent {

enum class ContainmentMode { kCgroup, kSubreaper };

// "cgroup" or "subreaper".
const char* containment_mode_name(ContainmentMode mode);

// One trial's containment, made before its launch.
struct TrialContainer {
  std::string cgroup_dir;  // kCgroup: the trial's cgroup directory; "" otherwise
  // kCgroup: a descriptor of cgroup_dir (O_PATH) for LaunchSpec::cgroup_fd,
  // owned here until Containment::launched() or kill_all_and_release()
  // closes it; -1 when none (the trial then enters through cgroup.procs).
  int cgroup_fd = -1;
  std::string tag;         // kSubreaper: the value of SWEPT_TRIAL_TAG; also set in kCgroup (harmless)
  pid_t leader = -1;       // the trial's main process once launched
};

// What another process needs to find every trial of one agent's containment
// and signal them (the lease keeper, agent/lease_keeper.h): a copy, valid for
// the Containment's life.
struct TrialsView {
  ContainmentMode mode = ContainmentMode::kSubreaper;
  std::string cgroup_root;  // kCgroup: the directory holding every trial's cgroup
  bool has_cgroup_kill = false;
  // kSubreaper: every trial of this containment has SWEPT_TRIAL_TAG starting
  // with this ("PID-INSTANCE-", the instance counting containments in one
  // process, so that two agents in one process keep apart).
  std::string tag_prefix;
};

// Sends `sig` to every process of every trial `view` covers: kCgroup, the
// members of each trial cgroup (SIGKILL: cgroup.kill, or freeze and kill);
// kSubreaper, each process whose environment has a tag with the prefix and
// all its descendants (SIGKILL: stopped first, repeated until none is new).
// Returns how many trials (kCgroup: non-empty cgroups) or processes
// (kSubreaper) it found. Removes nothing. Callable from any process,
// including a child forked from a multi-threaded agent (it takes no lock but
// malloc's, which glibc keeps usable after fork); errors are skipped.
int signal_every_trial(const TrialsView& view, int sig);

class Containment {
 public:
  // Chooses the mode. `preference`: "auto" (cgroup v2 where possible, else
  // subreaper), "cgroup" (InvalidArgument/FailedPrecondition if impossible,
  // naming why), "subreaper". The environment variable
  // SWEPT_AGENT_CONTAINMENT, when set, overrides an "auto" preference (tests
  // force the fallback with it). Also sets PR_SET_CHILD_SUBREAPER in
  // subreaper mode.
  static Result<std::unique_ptr<Containment>> create(const std::string& preference = "auto");
  ~Containment();
  Containment(const Containment&) = delete;
  Containment& operator=(const Containment&) = delete;

  ContainmentMode mode() const { return mode_; }
  // For the start-up log: the mode, where, and (fallback) why not cgroup.
  const std::string& description() const { return description_; }
  // kCgroup: the directory holding the trials' cgroups ("" otherwise).
  const std::string& cgroup_root() const { return agent_dir_; }

  // A fresh container for one trial (kCgroup: its cgroup is made here).
  Result<TrialContainer> prepare(int64_t sweep_id, int64_t trial_id, int attempt);
  // The file the trial's process writes 0 into before it execs when it is
  // not created in its cgroup ("" when none).
  static std::string procs_file(const TrialContainer& c);
  // The trial was launched (or failed to be): closes c.cgroup_fd.
  static void launched(TrialContainer& c);
  // For the lease keeper: how to find this containment's trials.
  TrialsView view() const;
  // The variable the trial gets (SWEPT_TRIAL_TAG=tag).
  static const char* tag_variable() { return "SWEPT_TRIAL_TAG"; }

  // Sends `sig` to every process of the trial (the leader included).
  void signal_all(const TrialContainer& c, int sig);
  // Kills every process of the trial but the (zombie) leader, which its
  // supervisor reaps, then removes the container (now or, for a cgroup still
  // emptying, on a later collect()).
  void kill_all_and_release(TrialContainer& c);
  // Retries the removal of emptied cgroups and reaps killed orphans; cheap
  // when there is nothing to do. Returns true while something is pending.
  bool collect(const std::vector<pid_t>& live_leaders);

 private:
  Containment() = default;
  // kSubreaper: the pids of the trial's processes now (leader excluded).
  std::vector<pid_t> find_tagged(const TrialContainer& c) const;

  ContainmentMode mode_ = ContainmentMode::kSubreaper;
  std::string description_;
  std::string agent_dir_;  // kCgroup: <agent's cgroup>/swept-agent-PID
  bool has_cgroup_kill_ = false;
  std::string tag_prefix_;  // "PID-INSTANCE-": every trial's tag starts so
  uint64_t next_serial_ = 0;
  std::vector<std::string> to_remove_;  // emptied cgroups not yet removable
  std::vector<pid_t> to_reap_;          // killed orphans (kSubreaper)
};

// Whether `pid` exists and is not a zombie (tests; /proc/PID/stat).
bool process_alive(pid_t pid);

}  // namespace swept::agent
