// Containment: keeping every process a trial starts inside the trial, so that
// none outlives it (issue 15, item 5).
//
// A process group is not enough: a trial may call setsid() or setpgid() (a
// daemonising library, `setsid sleep &`, a data loader's helper) and leave the
// group; its processes then survive the trial's end and keep their GPU. The
// agent contains trials in one of two modes, chosen once at start-up and
// named in its start-up log (docs/deploy.md, "Trial containment"):
//
//  - kCgroup: each trial runs in a cgroup v2 of its own while it runs, a
//    child of a directory the agent makes under its own cgroup
//    (`<agent's cgroup>/swept-agent-PID/trial-N`; see "Reuse" below for why
//    N is not the trial's id; the K-th containment of one process, K > 1,
//    uses `swept-agent-PID-K`, so that agents in one process, as `swept run`
//    may start, keep their trials apart). The trial's process is created in it by the kernel
//    (clone3 with CLONE_INTO_CGROUP, through a descriptor of the directory
//    opened here), or where the kernel cannot, enters it before it execs (it
//    writes 0 to the cgroup's cgroup.procs); either way nothing it starts can
//    be outside it: no fork, setsid or double fork leaves a cgroup; only a
//    process with the rights to write another cgroup's cgroup.procs can.
//    SIGTERM goes to every process listed in cgroup.procs; the kill writes
//    cgroup.kill (Linux 5.14), or else freezes the cgroup, SIGKILLs every pid
//    listed and thaws it. A cgroup that held anything but the trial's main
//    process when the trial ended is killed and removed once empty.
//    Reuse: making and removing a cgroup costs the kernel about 35 us of the
//    agent's thread per trial (kernfs nodes for every interface file, then
//    their teardown), which is most of what containment adds to a short
//    trial. So a trial cgroup found empty when its trial ends is kept (up to
//    kMaxPooledCgroups, with descriptors of it and of its cgroup.events and
//    cgroup.stat) and given to a later trial. It is reused only when it is
//    truly clean: cgroup.events says "populated 0" (no process in it or below)
//    and "frozen 0", cgroup.stat says it has no child cgroups (nor dying
//    ones), and the agent's directory enables no controller for it
//    (cgroup.subtree_control empty: the agent enables controllers there only
//    for cgroup v2 trial limits, agent/limits.h, and then reuses nothing). The emptiness is checked again just before the reuse. What a
//    reused cgroup carries over, then: no limits and no controller counters
//    (memory.peak, pids.max, memory.events and the like do not exist in it;
//    where a controller is enabled nothing is reused and every trial gets a
//    fresh cgroup, as before), but the core files' running totals do carry
//    over: cpu.stat and the *.pressure totals count every trial the cgroup
//    has held. swept reads none of them; a trial that reads its own cpu.stat
//    must take differences. A trial that rewrites its own cgroup's core
//    settings (cgroup.max.descendants, cgroup.max.depth, cgroup.type) is
//    outside this guarantee, as it would be writing its parent's or another
//    trial's: it runs as the agent's user. SWEPT_AGENT_REUSE_CGROUPS=0 turns
//    reuse off (one fresh cgroup per trial; a diagnostic, and the benchmark's
//    other side).
//    Available when a cgroup v2 hierarchy is mounted and the agent may write
//    its own cgroup (root, or a delegated subtree, e.g. systemd's
//    Delegate=yes). The agent's own cgroup keeps the agent: the trials' cgroups
//    are its descendants and have no children with processes of their own, so
//    cgroup v2's no-internal-processes rule is met without moving the agent
//    (the agent enables controllers only in its own directory, for trial
//    limits: agent/limits.h).
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
#include <set>
#include <string>
#include <vector>

#include "agent/limits.h"
#include "common/mutex.h"
#include "common/status.h"

namespace swept::agent {

enum class ContainmentMode { kCgroup, kSubreaper };

// "cgroup" or "subreaper".
const char* containment_mode_name(ContainmentMode mode);

// One trial's containment, made before its launch.
struct TrialContainer {
  std::string cgroup_dir;  // kCgroup: the trial's cgroup directory; "" otherwise
  // kCgroup: a descriptor of cgroup_dir (O_PATH) for LaunchSpec::cgroup_fd,
  // valid until Containment::launched() or kill_all_and_release(), which
  // set it to -1 (closing it unless the Containment's pool owns it); -1 when
  // none (the trial then enters through cgroup.procs).
  int cgroup_fd = -1;
  // kCgroup: the slot of the Containment's pool of reusable cgroups that
  // cgroup_dir belongs to (the pool owns cgroup_fd); -1 for a cgroup of this
  // trial's alone (reuse off, or the pool full), removed when it ends.
  int pool_slot = -1;
  std::string tag;         // kSubreaper: the value of SWEPT_TRIAL_TAG; also set in kCgroup (harmless)
  pid_t leader = -1;       // the trial's main process once launched
  AppliedLimits limits;    // its memory, pids and cpu limits (agent/limits.h); empty without enable_limits()
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
  // Declared first: the annotations below name it.
  static Mutex reap_mu_;
  // Every trial process whose supervisor reaps it, of every containment of
  // this process (see ReapHold).
  static std::set<pid_t> supervised_ SWEPT_GUARDED_BY(reap_mu_);

 public:
  // Several agents may run in one process (swept run's local agents), and in
  // kSubreaper mode each one's collect() reaps the process's orphans: none
  // may reap a trial process that another agent's supervisor reaps (its exit
  // status would be lost). So those are listed process-wide: a ReapHold,
  // held across a launch and the supervise() of its pid, and across a
  // supervisor's waitpid and the unsupervise() of its pid, keeps every
  // containment of the process from reaping in between.
  class SWEPT_SCOPED_CAPABILITY ReapHold {
   public:
    ReapHold() SWEPT_ACQUIRE(reap_mu_) : lock_(reap_mu_) {}
    ~ReapHold() SWEPT_RELEASE() {}
    ReapHold(const ReapHold&) = delete;
    ReapHold& operator=(const ReapHold&) = delete;

   private:
    MutexLock lock_;
  };
  static void supervise(pid_t pid) SWEPT_REQUIRES(reap_mu_) { supervised_.insert(pid); }
  static void unsupervise(pid_t pid) SWEPT_REQUIRES(reap_mu_) { supervised_.erase(pid); }

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

  // Sets each trial's limits from now on (agent/limits.h): memory and pids
  // always where the host can, the cpu quota with `enforce_cpus`. Called once,
  // before the first prepare(); the limiter's description() goes to the log.
  void enable_limits(bool enforce_cpus);
  // Null before enable_limits().
  const TrialLimiter* limiter() const { return limiter_.get(); }
  // "out of memory: limit 8 GiB" when the OOM killer struck the trial, else
  // "". Read once its processes ended, before kill_all_and_release().
  static std::string oom_reason(const TrialContainer& c) { return TrialLimiter::oom_reason(c.limits); }

  // The most emptied trial cgroups kept for reuse (each holds three
  // descriptors while kept or in use).
  static constexpr int kMaxPooledCgroups = 64;

  // A container for one trial (kCgroup: an empty cgroup of the pool, else one
  // made here). The ids are for messages only. With enable_limits(),
  // `limits` are set in it (c.limits.procs_files: the v1 cgroups the trial's
  // process must enter too). IoError when no cgroup can be made or limited.
  Result<TrialContainer> prepare(int64_t sweep_id, int64_t trial_id, int attempt,
                                 const protocol::TrialLimits& limits = {});
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
  // supervisor reaps, then releases the container: a cgroup found empty goes
  // back to the pool (or is removed), one that held processes is killed and
  // removed (now or, while still emptying, on a later collect()).
  void kill_all_and_release(TrialContainer& c);
  // Retries the removal of emptied cgroups and reaps killed orphans; cheap
  // when there is nothing to do. Returns true while something is pending.
  bool collect(const std::vector<pid_t>& live_leaders);

 private:
  Containment() = default;

  // ---- containment_subreaper.cpp: kSubreaper ----------------------------------
  // Makes the agent a child subreaper and this containment a subreaper one;
  // `why_not` (why no cgroup, "" when the subreaper was chosen) goes into
  // the description. IoError when the kernel refuses.
  Status become_subreaper(const std::string& why_not);
  // The pids of the trial's processes now (leader excluded).
  std::vector<pid_t> find_tagged(const TrialContainer& c) const;
  // Stops and kills them until none is left; the killed wait in to_reap_.
  void kill_tagged(const TrialContainer& c);
  // Reaps the killed orphans, and (kSubreaper) those that exited on their
  // own, never one of `live_leaders` nor one any supervisor listed
  // (supervise()).
  void reap_orphans(const std::vector<pid_t>& live_leaders);

  // ---- containment_cgroup.cpp: kCgroup ----------------------------------------
  // Sets this containment up in cgroup mode, in a directory made under the
  // agent's own cgroup (clearing what dead agents left). "" when done, else
  // why it cannot be, having left nothing behind.
  // `instance` counts the containments made in this process (1, 2, ...).
  std::string try_cgroup_mode(uint64_t instance);
  // An empty cgroup for a trial: the pool's most recently emptied clean one,
  // else a new one. IoError when none can be made.
  Result<TrialContainer> take_cgroup();
  // kill_all_and_release() for a cgroup: back to the pool when clean, else
  // killed and removed.
  void release_cgroup(TrialContainer& c);
  // Retires every cgroup of the pool (the agent is stopping).
  void release_pool();
  // Retries the removal of emptied cgroups (to_remove_).
  void remove_emptied();

  // A trial cgroup kept for reuse; `dir` empty: a free slot.
  struct PooledCgroup {
    std::string dir;
    int dir_fd = -1;     // O_PATH, for clone3
    int events_fd = -1;  // cgroup.events
    int stat_fd = -1;    // cgroup.stat
  };
  // kCgroup: a new cgroup, in a pool slot when reuse is on and one is free.
  Result<TrialContainer> make_cgroup();
  // Whether the slot's cgroup is empty and not frozen; `fully`: also no
  // child cgroups and no controller enabled for it (see "Reuse").
  bool clean(const PooledCgroup& p, bool fully) const;
  // Closes the slot's descriptors, removes its cgroup (killing what is in it
  // first when `kill`) and frees the slot.
  void retire(int slot, bool kill);
  // Removes a trial cgroup and any child cgroups its trial made, deepest
  // first; leaves what is still emptying in to_remove_.
  void remove_cgroup(const std::string& dir);

  ContainmentMode mode_ = ContainmentMode::kSubreaper;
  std::string description_;
  std::string agent_dir_;  // kCgroup: <agent's cgroup>/swept-agent-PID[-K]
  bool has_cgroup_kill_ = false;
  std::string tag_prefix_;  // "PID-INSTANCE-": every trial's tag starts so
  uint64_t next_serial_ = 0;
  uint64_t instance_ = 0;                  // counts containments in this process (names directories)
  std::unique_ptr<TrialLimiter> limiter_;  // null: no limits set
  uint64_t cgroups_made_ = 0;  // names trial cgroups: trial-N
  bool reuse_cgroups_ = true;            // SWEPT_AGENT_REUSE_CGROUPS != "0"
  int subtree_control_fd_ = -1;          // agent_dir_/cgroup.subtree_control, for clean()
  std::vector<PooledCgroup> pool_;       // at most kMaxPooledCgroups slots
  std::vector<int> idle_;                // slots whose cgroup awaits its next trial
  std::vector<std::string> to_remove_;  // emptied cgroups not yet removable
  std::vector<pid_t> to_reap_;          // killed orphans (kSubreaper)
};

// Whether `pid` exists and is not a zombie (tests; /proc/PID/stat).
bool process_alive(pid_t pid);

}  // namespace swept::agent
