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

Result<std::vector<Writer::PbtMemberRecord>> Writer::pbt_members(int64_t sweep_id,
                                                                 const std::string& interval_reason) {
  SWEPT_CACHED(st,
               "SELECT t.id, t.idx, t.state, t.params, t.attempts, "
               "  (SELECT MAX(a.attempt) FROM attempts a WHERE a.trial_id = t.id AND a.state = ?3 "
               "     AND instr(a.reason, ?2) > 0), "
               "  l.round, l.from_step, l.donor_trial_id, l.donor_segment, t.env "
               "FROM trials t LEFT JOIN pbt_lineage l ON l.trial_id = t.id "
               "  AND l.round = (SELECT MAX(round) FROM pbt_lineage WHERE trial_id = t.id) "
               "WHERE t.sweep_id = ?1 ORDER BY t.id");
  st.bind(1, sweep_id);
  st.bind(2, interval_reason);
  st.bind(3, name(TrialState::kQueued));
  std::vector<PbtMemberRecord> out;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    PbtMemberRecord m;
    m.trial_id = st.int64(0);
    m.index = st.int64(1);
    m.state = trial_state_named(st.text(2)).value_or(TrialState::kQueued);
    m.params_json = st.text(3);
    m.attempts = static_cast<int>(st.int64(4));
    m.interval_segment = static_cast<int>(st.optional_int64(5).value_or(0));
    m.lineage_round = st.optional_int64(6).value_or(-1);
    m.lineage_from_step = st.optional_int64(7).value_or(0);
    m.donor_trial_id = st.optional_int64(8);
    m.donor_segment = static_cast<int>(st.optional_int64(9).value_or(0));
    m.env_json = st.optional_text(10).value_or("");
    out.push_back(std::move(m));
  }
  st.reset();
  return out;
}

Result<std::optional<std::pair<int64_t, double>>> Writer::first_metric_from(int64_t trial_id, const std::string& metric,
                                                                             int64_t step) {
  SWEPT_CACHED(st, "SELECT step, value FROM metrics WHERE trial_id = ?1 AND name = ?2 AND step >= ?3 "
                   "ORDER BY step LIMIT 1");
  st.bind(1, trial_id);
  st.bind(2, metric);
  st.bind(3, step);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  std::optional<std::pair<int64_t, double>> out;
  if (row) out = std::make_pair(st.int64(0), st.real(1));
  st.reset();
  return out;
}

}  // namespace swept::store
