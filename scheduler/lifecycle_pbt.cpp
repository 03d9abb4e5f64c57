// TrialLifecycle, a population-based-training member's failed segment
// (issue 29; lifecycle.h, retry_member). A member is one trial whose
// segments are attempts; when one fails (its program exits non-zero, or its
// checkpoint cannot be copied or pulled), the member is not dropped from the
// population: it reruns from its own last complete checkpoint, as a lost
// attempt does, spending one of the sweep's max_retries. The failed attempt
// stays `failed` in the history, which is how the retries spent are counted
// (lose() counts every attempt that did not end `queued`), after a restart too.
#include "common/log.h"
#include "scheduler/lifecycle.h"

namespace swept::scheduler {

Result<bool> TrialLifecycle::retry_member(int64_t trial_id, const protocol::TrialExited& e, const std::string& reason) {
  auto it = live_.find(trial_id);
  if (it == live_.end() || it->second.cancelled || early_stop_decided(it->second)) return false;
  auto terms = terms_.find(it->second.sweep_id);
  if (terms == terms_.end() || !terms->second.pbt) return false;
  SWEPT_RETURN_IF_ERROR(ensure_tx());
  SWEPT_ASSIGN_OR_RETURN(free_attempts, store_.count_attempts(trial_id, TrialState::kQueued));
  const int spent = it->second.attempt - free_attempts;  // this failed attempt included
  if (spent > it->second.max_retries) return false;      // none left: it ends failed, as any trial
  auto taken = take_for_rerun(trial_id, reason);
  if (!taken.ok()) return taken.status();
  if (!*taken) return false;
  const LiveTrial lt = std::move(**taken);
  store::Writer::TrialEnd end;
  end.trial_id = trial_id;
  end.attempt = lt.attempt;
  end.attempt_state = TrialState::kFailed;
  end.exit_code = e.exit_code;
  end.reason = reason;
  end.ended_at = e.ended_at > 0 ? e.ended_at : clock_.wall_seconds();
  end.trial_state = TrialState::kQueued;
  end.trial_reason = "requeued after a failed segment (retry " + std::to_string(spent) + " of max_retries " +
                     std::to_string(lt.max_retries) + "): " + reason;
  SWEPT_RETURN_IF_ERROR(store_.end_trial(end));
  events_.push_back(TrialRequeued{trial_id, lt.sweep_id, false, lt.attempt, /*failed=*/true});
  changed_ = true;
  log::info("pbt member trial " + std::to_string(trial_id) + " attempt " + std::to_string(lt.attempt) + " failed (" +
            reason + "): it reruns from its last complete checkpoint, retry " + std::to_string(spent) + " of " +
            std::to_string(lt.max_retries));
  return true;
}

}  // namespace swept::scheduler
