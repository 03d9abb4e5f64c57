// Population-based training (issue 29, `method: pbt`): the `pbt:` block's
// settings as a typed value, and the pure exploit/explore step the scheduler
// runs when a population reaches an interval (docs/sweep-format.md, "pbt").
//
// Pure like the rest of sweeps/: a plan is a function of (spec, round,
// members) alone, so the same sweep, seed and reports give the same plan on
// any machine, and a restarted scheduler recomputes the plan it had made.
// Every random choice (the donor, the resample coin, the factor, the
// categorical direction) is its own counter-based draw keyed by (seed, round,
// slot, what), so adding a mutation leaves the other choices alone.
// Thread safety: all functions are pure; PbtSettings is an immutable value.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweeps/space.h"
#include "sweeps/sweep.h"

namespace swept::sweeps {

class Checker;

namespace pbt {

// The `pbt:` block (key names follow Ray Tune's PopulationBasedTraining).
struct PbtSettings {
  int population = 8;                      // members, each one trial
  int64_t interval = 0;                    // metric steps between exploit/explore rounds (required, >= 1)
  double quantile = 0.25;                  // share of the ranked members in the top (and bottom) quantile, (0, 0.5]
  std::vector<double> perturb{0.8, 1.2};   // factors a number is multiplied by, each finite and > 0
  double resample_probability = 0.25;      // chance a mutated value is drawn afresh instead of perturbed
  // The parameters that may change, each with the distribution a resample
  // draws from; each names a leaf of `parameters` (same dotted name).
  std::vector<Leaf> mutations;
  std::optional<int64_t> max_steps;        // a member is done at this step; nullopt: when its program ends
};

// Reads the `pbt` block of `root` into spec.pbt, checking it against the
// parameter space already parsed. With method pbt the block is required;
// without it, a block is a problem. Internal to sweeps/ (parse.cpp calls it).
void parse_pbt(Checker& ck, const nlohmann::json& root, SweepSpec& spec, const ParameterSpace& space);

// Where a member stands when its population is polled at an interval.
enum class Standing {
  kReached,  // it reported the metric at the interval step and stopped there
  kRunning,  // it has not reached the interval yet: the round waits for it
  kGone,     // lost or failed in this segment: the round does not wait (it is retried or done)
};

// One member as the round sees it.
struct MemberReport {
  int64_t member = 0;      // its trial id
  int slot = 0;            // its place in the population, 0 .. population-1: keys its random draws
  Standing standing = Standing::kRunning;
  double value = std::numeric_limits<double>::quiet_NaN();  // the metric at the interval (kReached)
  nlohmann::json params;   // the parameters in force
};

// What one member does next.
struct MemberPlan {
  int64_t member = 0;
  int slot = 0;
  // Copy this member's checkpoint and resume from it (the bottom quantile);
  // nullopt: resume from its own checkpoint.
  std::optional<int64_t> donor;
  nlohmann::json params;              // the parameters of its next segment
  std::vector<std::string> changes;   // one line per changed parameter: "lr: 0.01 -> 0.012 (x1.2)"
};

// One round's decisions. `members` holds one plan per reported member, in
// the order given; `top` and `bottom` the ranked members' ids, best first.
struct RoundPlan {
  int64_t round = 0;
  std::vector<MemberPlan> members;
  std::vector<int64_t> top, bottom;
};

// Whether the round can run: no member is still kRunning (a gone member is
// never waited for, so a loss does not stall the population).
bool round_ready(const std::vector<MemberReport>& members);

// How many members form each quantile among `ranked` members: ceil(ranked *
// quantile), at most half of them (so no member is both top and bottom);
// 0 below two ranked members.
int quantile_size(int ranked, double quantile);

// The exploit/explore step of `round` (1 for the first interval). Members
// that reached the interval are ranked by value on the sweep's goal (a
// non-finite value ranks last; ties: the lower slot ranks higher); each of
// the bottom quantile copies a member of the top quantile drawn at random and
// gets explore()d parameters; every other member (the rest of the ranked,
// the gone) keeps its own checkpoint and parameters.
// Precondition: spec.pbt and spec.metric are set.
RoundPlan plan_round(const SweepSpec& spec, int64_t round, const std::vector<MemberReport>& members);

// The member `lost` became unreachable while the plan was carried out (its
// agent vanished before its checkpoint was copied): each member that was to
// copy it takes another member of the top quantile instead (drawn again,
// keeping its explored parameters), or, with none left, resumes from its own
// checkpoint with its own parameters. The lost member itself is dropped from
// `top`. Pure; `plan` is taken by value and returned changed.
RoundPlan replan_without(const SweepSpec& spec, RoundPlan plan, const std::vector<MemberReport>& members,
                         int64_t lost);

// Ray Tune's explore step for one member's parameters: each mutation leaf is
// resampled from its distribution with resample_probability (or when its
// current value is not one the distribution can give, for a categorical),
// else perturbed: a number multiplied by one of `perturb` (integers rounded,
// q-types snapped to q, bounded distributions clamped to their bounds), a
// categorical moved to a neighbouring value. `changes` gets one line per
// changed parameter. Draws are keyed by (seed, round, slot).
nlohmann::json explore(const SweepSpec& spec, const nlohmann::json& params, int64_t round, int slot,
                       std::vector<std::string>* changes);

// One-line summary for `swept validate`: "population 8, exploit every 100 steps, 2 mutations".
std::string describe(const PbtSettings& s);

}  // namespace pbt
}  // namespace swept::sweeps
