// Trial limits (issue 26, item 6): the memory, processes and CPU time one
// trial may take, set in a cgroup of the trial's own before it execs, so that
// a leak or a fork bomb ends the trial and not the host.
//
// Where each limit is set, decided once at start-up per controller:
//  - cgroup v2 (production hosts: systemd's unified hierarchy): in the trial's
//    containment cgroup itself (agent/containment.h), once the agent has
//    enabled the controller for the trials' parent directory
//    (`+memory +pids +cpu` in its cgroup.subtree_control): memory.max
//    (memory.swap.max 0, so swap does not stretch it), pids.max, cpu.max.
//    The agent's own cgroup must give its children the controller; where
//    that cgroup is not the root, the agent first moves itself into a leaf
//    of it, beside the trials' directory (containment_modes.h,
//    enable_for_children; docs/deploy.md, "Trial limits"), and takes the
//    controllers back and itself out of the leaf at a clean stop (leaf());
//  - cgroup v1 (hosts that mount the controllers one hierarchy each, like CI's):
//    `<hierarchy>/<agent's cgroup>/swept-agent-PID[-K]/trial-N`, one per trial
//    in each hierarchy a limit needs, which the trial's process enters (its
//    cgroup.procs) before it execs: memory.limit_in_bytes (and
//    memory.memsw.limit_in_bytes where swap accounting exists), pids.max,
//    cpu.cfs_quota_us over cpu.cfs_period_us. Removed when the trial ends.
// Every file named is root's (0644 in a 0755 directory): a trial running as
// another user (`swept agent --run-as`) can neither raise its limits nor
// move itself out.
// A limit the host cannot set (no such controller, or the agent may not
// write it) is listed in not_enforced() with why; the agent says so in its
// log, in REGISTER (`containment`) and in each such trial's log, and runs the
// trial without it (docs/deploy.md, "Trial limits"). SWEPT_AGENT_LIMITS, when
// set, names the only limits to look for (comma-separated; a diagnostic).
// Thread safety: used by the agent's one event loop (through Containment).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/protocol.h"
#include "common/status.h"

namespace swept::agent {

// What one trial got: the directories to enter, and what to read at its end.
struct AppliedLimits {
  std::vector<std::string> v1_dirs;       // its cgroup v1 directories (removed at release)
  std::vector<std::string> procs_files;   // the cgroup.procs files its process writes 0 into
  std::string memory_dir;                 // where its memory is accounted ("" when no memory limit)
  bool memory_v1 = false;                 // memory_dir is a v1 one (memory.oom_control) or v2 (memory.events)
  int64_t memory_bytes = 0;
  std::string warning;                    // "" or the line for the trial's log: limits asked for but not set
};

class TrialLimiter {
 public:
  // `v2_trials_dir`: the directory holding the trials' v2 cgroups (the
  // containment's cgroup_root(); "" in subreaper mode). `instance`: as the
  // containment's, naming v1 directories alike. Never fails: what cannot be
  // enforced is said by not_enforced().
  TrialLimiter(const std::string& v2_trials_dir, bool enforce_cpus, uint64_t instance);
  ~TrialLimiter();  // removes its v1 directories (the trials have ended)
  TrialLimiter(const TrialLimiter&) = delete;
  TrialLimiter& operator=(const TrialLimiter&) = delete;

  // The limits this agent sets, e.g. "memory,pids,cpus" ("" when none).
  std::string enforced() const;
  // For the start-up log: where each limit is set, or why it is not.
  const std::string& description() const { return description_; }
  // The v1 directories holding the trials' cgroups (tests: a trial must not
  // be able to write their cgroup.procs).
  std::vector<std::string> v1_agent_dirs() const;
  // Whether the trials' v2 cgroups carry controllers (no cgroup is reused then).
  bool uses_v2() const { return v2_memory_ || v2_pids_ || v2_cpu_; }
  // Where the agent moved itself to give controllers on (both "" when it
  // did not), and the controllers it gave from `parent`: what
  // containment_files::leave_leaf undoes once the trials' directory is gone.
  struct Leaf {
    std::string parent, leaf;
  };
  const Leaf& leaf() const { return leaf_; }
  const std::vector<std::string>& given() const { return given_; }

  // Sets `limits` for a trial whose v2 cgroup is `v2_trial_dir` ("" when
  // none); pids 0 means kDefaultPids. `serial` names its v1 directories.
  // IoError when a directory or limit the host offers cannot be written.
  Result<AppliedLimits> apply(const std::string& v2_trial_dir, const protocol::TrialLimits& limits, uint64_t serial);
  // "out of memory: limit 8 GiB" when the kernel's OOM killer killed a
  // process of the trial, else "". Read after the trial's processes ended.
  static std::string oom_reason(const AppliedLimits& applied);
  // Removes the trial's v1 directories (those still emptying on a later collect()).
  void release(AppliedLimits& applied);
  // Retries removals; true while some are pending.
  bool collect();

  static constexpr int64_t kDefaultPids = 4096;
  // Every trial has a pids limit, so on a cgroup v1 host every trial would
  // make and remove a pids cgroup: about a quarter more wall time for 1,000
  // trials that do nothing (docs/benchmarks.md). An emptied one is kept
  // (up to this many) and given to a later trial, once checked empty again;
  // only its pids.events count carries over, which swept does not read.
  // Memory cgroups are never reused: their OOM count must be the trial's.
  static constexpr size_t kMaxIdlePidsCgroups = 64;

 private:
  struct V1 {
    std::string agent_dir;  // "" when this controller has no v1 hierarchy here
    std::string why_not;
  };
  V1 setup_v1(const std::string& controller, uint64_t instance);
  std::string setup_v2(const std::string& v2_trials_dir, const std::string& controller, bool& enabled);

  bool enforce_cpus_ = false;
  bool v2_memory_ = false, v2_pids_ = false, v2_cpu_ = false;
  V1 v1_memory_, v1_pids_, v1_cpu_;
  bool memsw_ = false;  // v1 swap accounting: memory.memsw.limit_in_bytes exists
  std::string not_memory_, not_pids_, not_cpus_;  // why not enforced ("" when enforced)
  std::string description_;
  std::vector<std::string> to_remove_;
  std::vector<std::string> idle_pids_;  // emptied v1 pids cgroups awaiting a trial
  Leaf leaf_;                           // where the agent moved itself (setup_v2)
  std::vector<std::string> given_;      // controllers enabled in leaf_.parent's subtree_control
};

// "8 GiB", "512 MiB", "1.5 GiB", "1000000 bytes": a limit as people read it.
std::string format_bytes(int64_t bytes);

}  // namespace swept::agent
