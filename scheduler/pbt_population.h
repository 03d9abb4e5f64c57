// PbtPopulation: one `method: pbt` sweep's members between two rounds
// (issue 29; docs/sweep-format.md, "Population-based training").
//
// A member is one trial; each segment between two rounds is one attempt of
// it, with its own checkpoint directory on its agent (START_TRIAL
// `checkpoint`, docs/protocol.md). The runner feeds this the member's metric
// values (observe), and what the lifecycle decided about its attempts
// (reached, gone, ended); it answers when to stop a member (at the interval,
// or done at max_steps), when a round is ready, and, through sweeps/'s pure
// plan_round, what every member does next: its parameters and whose ended
// segment its next segment starts from.
//
// Invariants: a member's `stop_step` is (round + 1) x interval for the round
// being gathered; `segment` is the attempt whose directory holds the member's
// newest complete checkpoint (0: none yet). A member stopped at the interval
// is kReached until the round runs; one lost in mid-segment is kGone for
// this round (never waited for) and resumes from its own `segment`.
// No I/O, no clock: the runner records what this decides.
// Thread safety: one thread (the broker's loop), as the runner.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "sweeps/pbt.h"
#include "sweeps/sweep.h"

namespace swept::scheduler {

class PbtPopulation {
 public:
  // What a metric value asks of its member.
  enum class Stop { kNone, kInterval, kDone };

  // `spec` is a pbt sweep's (spec.pbt and spec.metric set); kept by value.
  explicit PbtPopulation(sweeps::SweepSpec spec) : spec_(std::move(spec)) {}

  // A member was created (its first segment starts from nothing).
  void add(int64_t trial_id, int slot, nlohmann::json params);
  bool has(int64_t trial_id) const { return members_.count(trial_id) != 0; }

  // A value of the sweep's metric at `step`: kInterval the first time a
  // member reaches its stop step (the value is kept for the ranking), kDone
  // when it reaches pbt.max_steps. kNone otherwise, and for a member already
  // told to stop. The stop step is the one its running segment was given
  // (segment_starts): a rerun of a lost member may have been given a round's
  // interval that the round, not waiting for it, has passed since, and its
  // program waits there for its stop.
  Stop observe(int64_t trial_id, int64_t step, double value);
  // Its next segment starts now: the stop step it is given (next_stop_step(),
  // its SWEPT_PBT_STOP_STEP), kept for observe().
  int64_t segment_starts(int64_t trial_id);

  // Its segment `attempt` ended at the interval: its checkpoint is complete
  // there. True: it waits for the round; false: the round it stopped for
  // (late_round) has run without it (it had been lost meanwhile), so it goes
  // on at once from its own checkpoint with its own parameters.
  bool reached(int64_t trial_id, int attempt);
  // The round a member was last stopped for: after reached() said false,
  // the round that ran without it (its lineage row for that round says it
  // went on from its own checkpoint, so that a restart finds the same).
  int64_t late_round(int64_t trial_id) const {
    auto it = members_.find(trial_id);
    return it == members_.end() ? 0 : it->second.stopped_for;
  }
  // Whether a member waits for the round (the sweep is not complete then).
  bool holding() const;
  // The members waiting for the round, taken out of the population: the
  // sweep stops its queued trials (cancelled, or its target reached).
  std::vector<int64_t> release_waiting();
  // Its segment was lost, or failed (lifecycle_pbt.cpp): the round goes on
  // without it, and it reruns with the parameters it has. Lost (its host
  // went away, its agent shut down: `failed` false), it reruns from where
  // that segment started, a donor's checkpoint included: the round's
  // exploit stands, its lineage with it. Failed (its program, or the copy
  // or pull of its checkpoint), it reruns from its own newest complete
  // segment, and this returns true when that segment was to start from a
  // donor's checkpoint, which it now does not (its lineage must say so). A
  // donor's checkpoint gone meanwhile (pruned, its host lost) fails the
  // copy or the pull, so that case ends on its own checkpoint too.
  bool gone(int64_t trial_id, bool failed);
  // Its parameters now (those of its next segment); null for no member.
  nlohmann::json params(int64_t trial_id) const;
  // It reached a final state (done, failed, lost for good): out of the population.
  void ended(int64_t trial_id);

  // Whether the round can run: a member reached the interval and none still runs.
  bool ready() const;
  // Runs the round (precondition: ready()): plan_round over the members'
  // reports, then each reached member takes its new parameters and the
  // segment to start from, and all live members aim at the next interval.
  // The plan is returned for the runner to record (params, lineage, queue);
  // `resumed` gets the members that waited, to be queued again.
  sweeps::pbt::RoundPlan run_round(std::vector<int64_t>* resumed);

  // Where the member's next segment starts: its own or its donor's newest
  // complete segment, or an empty directory before its first.
  protocol::CheckpointSegment next_checkpoint(int64_t trial_id) const;
  // The round being gathered (1 for the first interval).
  int64_t round() const { return round_; }
  // The step at which a running member is stopped next: the round's
  // interval, or pbt.max_steps when that comes first. A segment's program
  // reads it as SWEPT_PBT_STOP_STEP, so that it may save there and wait for
  // the stop, and its checkpoint is exactly at the interval.
  int64_t next_stop_step() const;
  // The step its next segment starts from (the interval it was stopped at; 0 at first).
  int64_t from_step(int64_t trial_id) const;

  // A member as this class keeps it; public for restore().
  struct Member {
    int slot = 0;
    nlohmann::json params;
    sweeps::pbt::Standing standing = sweeps::pbt::Standing::kRunning;
    double value = 0;
    bool stop_sent = false;        // told to stop in this segment (interval or done)
    int segment = 0;               // newest attempt whose checkpoint is complete
    protocol::CheckpointSegment next;  // where its next segment starts
    int64_t next_step = 0;         // the step of `next`'s checkpoint (kept when from_step moves on)
    int64_t from_step = 0;         // the step its next segment starts from
    int64_t own_step = 0;          // the step of its own newest complete segment
    int64_t stopped_for = 0;       // the round it was last stopped for
    int64_t segment_stop = 0;      // the stop step its running segment was given (0: unknown, after a restart)
  };
  // After a scheduler restart (SweepRunner::rebuild_population): the round
  // being gathered, then each live member as the store shows it.
  void restore_round(int64_t round) { round_ = round; }
  void restore(int64_t trial_id, Member m) { members_[trial_id] = std::move(m); }
  // The step at which the round being gathered stops its members.
  int64_t stop_step() const { return round_ * spec_.pbt->interval; }
  // Whether the member was told to stop in its current segment (restore: a
  // stop the scheduler before the restart sent is owed again).
  bool stop_sent(int64_t trial_id) const {
    auto it = members_.find(trial_id);
    return it != members_.end() && it->second.stop_sent;
  }

 private:
  sweeps::SweepSpec spec_;
  std::map<int64_t, Member> members_;  // by trial id
  int64_t round_ = 1;
};

}  // namespace swept::scheduler
