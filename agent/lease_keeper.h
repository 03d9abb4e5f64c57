// LeaseKeeper: stops an agent's trials when its lease runs out while the
// agent itself cannot act (docs/protocol.md, "Leases").
//
// The agent stops its own trials when it has heard nothing from the
// scheduler for its lease. An agent process that is frozen (SIGSTOP, a
// debugger, a long page-in) cannot, while its trials, which are processes of
// their own, run on; the scheduler requeues them once the lease and a margin
// have passed, so they would run twice at once. The keeper is one small
// process, forked once when the agent starts (not per trial: launching stays
// as cheap as it was), that shares one page with the agent: the two
// deadlines of the lease (SIGTERM, then SIGKILL) on CLOCK_MONOTONIC, which
// the agent moves every time it renews the lease, and a counter of the
// keeper's interventions. It sleeps until the next deadline (a futex on the
// page wakes it when a deadline moves earlier). Once one passes without
// renewal it signals every trial of the agent itself, through what the
// agent's containment left for it to find them (agent/containment.h,
// TrialsView: the agent's cgroup directory, or the trials' SWEPT_TRIAL_TAG
// prefix), and counts it; the agent, when it runs again, reports those trials
// as ended by their lease.
//
// Except a trial that had already ended by itself: its main process a zombie
// the frozen agent could not reap. It ran to its end, and reported as stopped
// it would be requeued and run to its end twice (issue 26). So the agent also
// publishes its trials' main pids on the page, and the keeper, before it
// signals, notes for each whether it was still running (signalled: the
// keeper's doing) or had ended (its own end); the agent reads that verdict.
//
// The keeper is its own session and process group (setsid), so that
// `kill -STOP -PGID` aimed at the agent's group does not stop it too, nor do
// the terminal's signals. It dies with the agent's thread (PR_SET_PDEATHSIG),
// and when the LeaseKeeper is destroyed. What it cannot survive: a stop that
// also reaches it (its own pid, or a cgroup freezer around both, which then
// freezes the trials too), and a SIGKILL aimed at it (the agent notices at
// its next self-check and starts another).
//
// Thread safety: one LeaseKeeper belongs to the agent's event loop thread;
// its methods are not to be called concurrently.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "agent/containment.h"
#include "common/status.h"

namespace swept::agent {

class LeaseKeeper {
 public:
  // Forks the keeper for the trials `view` covers. Unavailable when the
  // shared page or the process cannot be made (the agent then runs without,
  // and says so). The thread calling start() must outlive the keeper (the
  // keeper gets SIGKILL when it ends) and must not be a thread that lets its
  // forked children run on libc locks other than malloc's (the keeper takes
  // none; see signal_every_trial).
  static Result<std::unique_ptr<LeaseKeeper>> start(const TrialsView& view);
  // Tells the keeper to exit, then kills and reaps it.
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // The deadlines on std::chrono::steady_clock (CLOCK_MONOTONIC) in ms:
  // SIGTERM to every trial at `term_at_ms`, SIGKILL at `kill_at_ms`;
  // INT64_MAX: none. Cheap when nothing changed (two loads); a deadline moved
  // earlier also wakes the keeper (one system call).
  void set_deadlines(int64_t term_at_ms, int64_t kill_at_ms);
  // How many times the keeper has signalled trials since start (it counts
  // only when it found some). One load.
  uint32_t interventions() const;
  // The trials' main processes, for the keeper's verdicts (kMaxTrackedPids at
  // most: the rest get none). Cheap when nothing changed.
  void set_trial_pids(const std::vector<pid_t>& pids);
  // Whether the keeper, when it acted, found `pid` already ended (a zombie:
  // the trial ended by itself, before any signal of the keeper's). False when
  // it found it running and signalled it, or has no verdict on it.
  bool found_ended(pid_t pid) const;
  static constexpr size_t kMaxTrackedPids = 256;
  // Whether the keeper process still runs; reaps it when it has exited.
  bool alive();
  pid_t pid() const { return pid_; }

 private:
  struct Shared;
  LeaseKeeper() = default;
  [[noreturn]] static void run_keeper(Shared& shared, const TrialsView& view, pid_t agent);
  // In the keeper, before it signals: notes which published trials still run.
  static void judge_trials(Shared& shared);

  Shared* shared_ = nullptr;  // the page shared with the keeper
  pid_t pid_ = -1;
  bool reaped_ = false;
  TrialsView view_;
  std::vector<pid_t> published_;  // what set_trial_pids() last wrote
};

}  // namespace swept::agent
