// Writer::end_trial: a trial's end in one call (writer.h). The scheduler's
// lifecycle decides how an attempt ends (finish, lose, requeue, a late
// result); this records the attempt's row, the trial's row and, for a
// diverged trial, the forgotten metric value together, so that a reader
// never sees an attempt ended under a trial still running, nor the reverse.
#include "store/writer.h"

namespace swept::store {

Status Writer::end_trial(const TrialEnd& end) {
  const bool own_tx = !in_transaction();
  if (own_tx) SWEPT_RETURN_IF_ERROR(begin());
  auto record = [&]() -> Status {
    const StartRecord* start = end.start ? &*end.start : nullptr;
    SWEPT_RETURN_IF_ERROR(
        end_attempt(end.trial_id, end.attempt, end.attempt_state, end.exit_code, end.reason, end.ended_at, start));
    if (!end.trial_state) return Status::Ok();
    SWEPT_RETURN_IF_ERROR(set_trial_state(end.trial_id, *end.trial_state, end.exit_code,
                                          end.trial_reason.value_or(end.reason), end.trial_ended_at, start));
    if (end.forget_metric_value) SWEPT_RETURN_IF_ERROR(clear_metric_value(end.trial_id));
    return Status::Ok();
  };
  Status s = record();
  if (!own_tx) return s;
  if (!s.ok()) {
    rollback();
    return s;
  }
  return commit();
}

}  // namespace swept::store
