// The metric a sweep optimizes: its name and which way is better. Apart from
// sweep.h so that the stopping rules (stopping/rule.h), which sweep.h's
// SweepSpec holds, can name a Goal without including sweep.h back.
// Thread safety: plain values.
#pragma once

#include <optional>
#include <string>

namespace swept::sweeps {

enum class Goal { kMinimize, kMaximize };

struct Metric {
  std::string name;
  Goal goal = Goal::kMinimize;
  // W&B's `target`: the sweep finishes once a completed trial's value
  // reaches it (>= when maximizing, <= when minimizing).
  std::optional<double> target;
  // Whether `value` reaches the target (false without one).
  bool reaches_target(double value) const {
    return target && (goal == Goal::kMaximize ? value >= *target : value <= *target);
  }
};

}  // namespace swept::sweeps
