// Warm starts (issue 28, docs/sweep-format.md "Warm starts"): which earlier
// trials may seed a sweep, and where each goes.
//
// The earlier trials come from outside sweeps/ (the scheduler reads a sweep
// from its store, the CLI reads a file `swept export` wrote); here they are
// judged against this sweep's space, purely. A trial fits when every
// parameter of the space is present and its value is one the parameter may
// take: among the values of a categorical (or the constant), an integer in
// an int_uniform's range, a number in a bounded distribution's range (a
// q-distribution's step beyond its ends, as rounding may put a draw there),
// a number where the distribution is unbounded. Parameters the space does not
// have are dropped. A grid (or an explicit `trials` list) seeds only its own
// points: a fitting trial takes the index of the grid point it is, so that
// point is never run, and a second trial at the same point is a duplicate.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/rows.h"
#include "sweeps/sweep.h"

namespace swept::sweeps {

// One earlier trial offered to a warm start: its params (nested), its final
// value of this sweep's metric (nullopt: none, as for a trial that did not
// complete or never reported it), its origin for the imported trial's reason
// ("sweep 3, trial 17"), and whether its values were read from CSV text (a
// categorical value or constant then matches by its text as well as by
// type). The protocol's type, as the CLI sends a file's trials with SUBMIT.
using WarmCandidate = protocol::WarmTrial;

// What a warm start does with its candidates.
struct WarmPlan {
  struct Seed {
    nlohmann::json params;               // only this space's parameters
    double value = 0;
    std::optional<int64_t> grid_index;   // grid or explicit list: the point it is
    std::string origin;
  };
  std::vector<Seed> seeds;     // in the candidates' order
  int64_t offered = 0;         // candidates given
  int64_t outside_space = 0;   // a parameter missing, of the wrong type, out of range, not among the values
  int64_t without_value = 0;   // no final value of the metric
  int64_t duplicates = 0;      // a grid point already seeded
  std::string first_outside;   // why the first trial outside the space was skipped

  int64_t skipped() const { return outside_space + without_value + duplicates; }
  // "3 of 5 earlier trials fit; 2 skipped: 1 outside this sweep's space
  // (first: parameters.lr: 3 is above max 1), 1 without a value of loss".
  std::string summary(const std::string& metric) const;
};

// The plan for `candidates` against `spec`'s space (see the file comment).
// Grid points are found by walking the grid once (at most kMaxGridTrials
// points) when a candidate fits; numbers match a grid's values to 6
// significant digits, the precision a CSV export writes.
WarmPlan plan_warm_start(const SweepSpec& spec, const std::vector<WarmCandidate>& candidates);

// Whether `params` fit the space: the params restricted to its parameters,
// or nullopt with why (a path and a reason) in `why`.
std::optional<nlohmann::json> fit_to_space(const SweepSpec& spec, const nlohmann::json& params, bool text_values,
                                           std::string* why);

// A stored (or exported) trial as a candidate for a sweep whose metric is
// `metric`: its value is its latest value of that metric, and only a
// completed or imported trial has one. `origin_prefix` starts its origin
// ("sweep 3" -> "sweep 3, trial 17").
WarmCandidate candidate_from_row(const TrialRow& row, const std::string& metric, const std::string& origin_prefix);

class Checker;
// Parses the `warm_start` key into spec.warm_start (parse.cpp calls it):
// exactly one of {sweep: ID} and {file: PATH}, and the sweep needs a metric.
void parse_warm_start(Checker& ck, const nlohmann::json& root, SweepSpec& spec);

}  // namespace swept::sweeps
