// Where a trial lives under an agent's work directory: the one spelling of
// that layout. The scheduler names it in START_TRIAL `workdir`; supervisors
// (one node or a gang's), checkpoint pulls and segment copies, and `swept
// run`'s report of a failed trial find a trial's folder by it. A pure function.
#pragma once

#include <cstdint>
#include <string>

namespace swept {

// The scheduler-given `workdir` when there is one (START_TRIAL `workdir`,
// docs/protocol.md), else "sweep-<S>/trial-<T>"; relative to the agent's
// work directory.
inline std::string trial_relative_dir(int64_t sweep_id, int64_t trial_id, const std::string& workdir = "") {
  if (!workdir.empty()) return workdir;
  return "sweep-" + std::to_string(sweep_id) + "/trial-" + std::to_string(trial_id);
}

}  // namespace swept
