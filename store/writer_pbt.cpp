// The writer's population-based training (writer.h, "population-based
// training"): a member's parameters changing at an exploit, and its lineage.
#include <string>

#include "store/writer.h"
#include "store/writer_cached.h"

namespace swept::store {

Status Writer::set_trial_params(int64_t trial_id, const std::string& params_json, const std::string& command_json) {
  SWEPT_CACHED(st, "UPDATE trials SET params = ?1, command = ?2 WHERE id = ?3");
  st.bind(1, params_json);
  st.bind(2, command_json);
  st.bind(3, trial_id);
  return st.run();
}

Status Writer::record_lineage(const LineageRow& row) {
  SWEPT_CACHED(st,
               "INSERT OR REPLACE INTO pbt_lineage(trial_id, round, from_step, donor_trial_id, donor_segment, params, "
               "changes, decided_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  st.bind(1, row.trial_id);
  st.bind(2, row.round);
  st.bind(3, row.from_step);
  if (row.donor_trial_id) st.bind(4, *row.donor_trial_id);
  else st.bind_null(4);
  if (row.donor_segment) st.bind(5, *row.donor_segment);
  else st.bind_null(5);
  st.bind(6, row.params_json);
  st.bind(7, row.changes_json);
  st.bind(8, row.decided_at);
  return st.run();
}

Result<std::optional<Writer::AttemptPlace>> Writer::attempt_place(int64_t trial_id, int attempt) {
  SWEPT_CACHED(st,
               "SELECT a.agent, t.sweep_id FROM attempts a JOIN trials t ON t.id = a.trial_id "
               "WHERE a.trial_id = ?1 AND a.attempt = ?2");
  st.bind(1, trial_id);
  st.bind(2, attempt);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  std::optional<AttemptPlace> place;
  if (row) place = AttemptPlace{st.text(0), st.int64(1)};
  st.reset();
  return place;
}

}  // namespace swept::store
