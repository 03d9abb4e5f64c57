// The states' names and the trial's transition function: see states.h.
#include "common/states.h"

namespace swept {

std::optional<TrialState> trial_state_named(std::string_view name) {
  for (const auto& s : kTrialStates)
    if (s.name == name) return s.state;
  return std::nullopt;
}

std::optional<SweepState> sweep_state_named(std::string_view name) {
  for (size_t i = 0; i < kSweepStateNames.size(); ++i)
    if (kSweepStateNames[i] == name) return static_cast<SweepState>(i);
  return std::nullopt;
}

std::optional<AgentState> agent_state_named(std::string_view name) {
  for (size_t i = 0; i < kAgentStateNames.size(); ++i)
    if (kAgentStateNames[i] == name) return static_cast<AgentState>(i);
  return std::nullopt;
}

std::optional<TrialState> next_trial_state(TrialState from, TrialEvent event, int retries_left) {
  using S = TrialState;
  switch (event.kind) {
    case TrialEventKind::kDispatch:
    case TrialEventKind::kAdopt:
      // Adoption takes back a requeued attempt only: a `lost` trial is final
      // (docs/protocol.md, Reconciliation).
      if (from == S::kQueued) return S::kRunning;
      return std::nullopt;
    case TrialEventKind::kFinish:
      if (!info(event.outcome).process_outcome) return std::nullopt;
      // A running trial ends; one given up while its agent was away (queued
      // again, or lost) keeps the result its agent brings back, unless that
      // attempt was only stopped (as stale, by the scheduler): that is no
      // result.
      // Early-stopped is the scheduler's own decision about this running
      // attempt; a given-up attempt cannot end so.
      if (from == S::kRunning) return event.outcome;
      if ((from == S::kQueued || from == S::kLost) && event.outcome != S::kStopped &&
          event.outcome != S::kEarlyStopped)
        return event.outcome;
      return std::nullopt;
    case TrialEventKind::kCancel:
      if (from == S::kQueued || from == S::kRunning) return S::kStopped;
      return std::nullopt;
    case TrialEventKind::kLose:
      if (from != S::kRunning) return std::nullopt;
      return retries_left > 0 ? S::kQueued : S::kLost;
    case TrialEventKind::kReject:
      if (from == S::kQueued) return S::kFailed;
      return std::nullopt;
    case TrialEventKind::kRetry:
      if (info(from).retryable) return S::kQueued;
      return std::nullopt;
    case TrialEventKind::kRetryEarlyStopped:
      if (info(from).retryable || from == S::kEarlyStopped) return S::kQueued;
      return std::nullopt;
    case TrialEventKind::kRequeue:
      // Not the trial's doing: whatever its retries, it waits for another place.
      if (from == S::kRunning) return S::kQueued;
      return std::nullopt;
  }
  return std::nullopt;
}

std::string sql_state_list(bool (*keep)(const TrialStateInfo&)) {
  std::string list;
  for (const auto& s : kTrialStates) {
    if (!keep(s)) continue;
    if (!list.empty()) list += ", ";
    list += '\'';
    list += s.name;
    list += '\'';
  }
  return list;
}

}  // namespace swept
