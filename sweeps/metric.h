// The metrics a sweep optimizes (their names and which way is better) and the
// constraints it keeps. Apart from sweep.h so that the stopping rules
// (stopping/rule.h), which sweep.h's SweepSpec holds, and pareto.h can name a
// Goal without including sweep.h back.
// Thread safety: plain values.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

namespace swept::sweeps {

enum class Goal { kMinimize, kMaximize };

struct Metric {
  // A constructor rather than an aggregate, so that the existing
  // Metric{name, goal, target} spellings stay complete as fields are added.
  Metric() = default;
  Metric(std::string name_, Goal goal_, std::optional<double> target_ = std::nullopt,
         std::optional<double> ref_ = std::nullopt)
      : name(std::move(name_)), goal(goal_), target(target_), ref(ref_) {}

  std::string name;
  Goal goal = Goal::kMinimize;
  // W&B's `target`: the sweep finishes once a completed trial's value
  // reaches it (>= when maximizing, <= when minimizing).
  std::optional<double> target;
  // Whether `value` reaches the target (false without one).
  bool reaches_target(double value) const {
    return target && (goal == Goal::kMaximize ? value >= *target : value <= *target);
  }
  // swept's `metrics[i].ref`: this objective's end of the hypervolume's
  // reference point (pareto.h), its worst value that still counts; nullopt =
  // the worst value seen (reference_point).
  std::optional<double> ref;
};

// swept's `constraints:` item: a trial is feasible when the final value of
// metric `name` lies within [min, max] (either bound may be absent; the
// parser requires at least one).
struct Constraint {
  std::string name;
  std::optional<double> min, max;
  // How far `value` lies outside the bounds: > 0 violated, <= 0 satisfied
  // (the distance to the nearer bound, negative inside), as Optuna's
  // constraints_func contract reads it. A NaN value (the metric never
  // reported, or failed) is +inf: never feasible. 0 without bounds.
  double violation(double value) const {
    if (std::isnan(value)) return std::numeric_limits<double>::infinity();
    double v = -std::numeric_limits<double>::infinity();
    if (min) v = std::max(v, *min - value);
    if (max) v = std::max(v, value - *max);
    return (min || max) ? v : 0.0;
  }
};

}  // namespace swept::sweeps
