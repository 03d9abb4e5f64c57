// The row readers of store/rows.h. Values are decoded once here: states by
// their names (common/states.h), GPU lists, parameters and commands through
// schema.h's codec.
#include "store/rows.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "store/schema.h"

namespace swept::store {

SweepRow read_sweep_row(const Statement& s) {
  SweepRow sw;
  sw.id = s.int64(0);
  sw.name = s.text(1);
  sw.method = s.text(2);
  sw.metric_name = s.optional_text(3);
  sw.metric_goal = s.optional_text(4);
  sw.spec = s.text(5);
  sw.state = sweep_state_named(s.text(6)).value_or(SweepState::kRunning);
  sw.total_trials = s.optional_int64(7);
  sw.next_index = s.int64(8);
  sw.created_at = s.real(9);
  sw.finished_at = s.optional_real(10);
  return sw;
}

namespace {
void note_damage(TrialRow& r, const Status& why) {
  r.damaged = r.damaged ? *r.damaged + "; " + why.message() : why.message();
}
}  // namespace

TrialRow read_trial_row(const Statement& s) {
  TrialRow r;
  r.id = s.int64(0);
  r.sweep_id = s.int64(1);
  r.index = s.int64(2);
  r.state = trial_state_named(s.text(3)).value_or(TrialState::kQueued);
  r.attempts = static_cast<int>(s.int64(4));
  r.agent = s.optional_text(5);
  r.gpus = decode_gpu_list<int>(s.optional_text(6));
  r.gpu_fraction = s.optional_real(7);
  if (auto code = s.optional_int64(8)) r.exit_code = static_cast<int>(*code);
  r.reason = s.optional_text(9);
  r.metric_value = s.optional_real(10);
  if (auto params = decode_params(r.id, s.text(11)); params.ok())
    r.params = std::move(*params);
  else
    note_damage(r, params.status());
  if (auto argv = decode_argv(r.id, s.text(12)); argv.ok()) {
    r.command = std::move(*argv);
  } else {
    note_damage(r, argv.status());
    // What can be shown of it: its strings, anything else as JSON text.
    nlohmann::json j = nlohmann::json::parse(s.text(12), nullptr, false);
    if (j.is_array())
      for (const auto& a : j) r.command.push_back(a.is_string() ? a.get<std::string>() : a.dump());
  }
  r.started_at = s.optional_real(13);
  r.ended_at = s.optional_real(14);
  return r;
}

Result<TrialRow> sound_trial_row(const Statement& s) {
  TrialRow r = read_trial_row(s);
  if (r.damaged) return Status::Corruption(*r.damaged);
  return r;
}

namespace {
// Runs `select` (a query whose first column is a trial id, ending in "IN (")
// over the ids of `rows`, and hands each result to `each` with its row.
Status for_each_of_rows(Connection& db, const std::string& select, std::vector<TrialRow>& rows,
                        const std::function<void(TrialRow&, const Statement&)>& each) {
  if (rows.empty()) return Status::Ok();
  std::string sql = select;
  for (size_t i = 0; i < rows.size(); ++i) sql += i ? ",?" : "?";
  sql += ")";
  SWEPT_ASSIGN_OR_RETURN(stmt, db.prepare(sql));
  std::map<int64_t, TrialRow*> by_id;
  for (size_t i = 0; i < rows.size(); ++i) {
    stmt.bind(static_cast<int>(i + 1), rows[i].id);
    by_id[rows[i].id] = &rows[i];
  }
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, stmt.step());
    if (!row) break;
    each(*by_id[stmt.int64(0)], stmt);
  }
  return Status::Ok();
}
}  // namespace

Status fill_latest(Connection& db, std::vector<TrialRow>& rows) {
  return for_each_of_rows(db, "SELECT trial_id, name, value FROM trial_latest WHERE trial_id IN (", rows,
                          [](TrialRow& r, const Statement& st) { r.latest[st.text(1)] = st.real(2); });
}

Status fill_schedules(Connection& db, std::vector<TrialRow>& rows) {
  if (rows.empty()) return Status::Ok();
  SWEPT_ASSIGN_OR_RETURN(version, read_schema_version(db));
  if (version < 8) return Status::Ok();
  SWEPT_RETURN_IF_ERROR(for_each_of_rows(
      db, "SELECT trial_id, round, from_step, donor_trial_id, donor_segment, params, changes FROM pbt_lineage "
          "WHERE trial_id IN (",
      rows, [](TrialRow& r, const Statement& st) {
        PbtStep s;
        s.round = st.int64(1);
        s.from_step = st.int64(2);
        s.donor_trial_id = st.optional_int64(3);
        if (auto seg = st.optional_int64(4)) s.donor_segment = static_cast<int>(*seg);
        // Written by the writer as JSON; a damaged cell reads as nothing rather than failing the page.
        s.params = nlohmann::json::parse(st.text(5), nullptr, /*allow_exceptions=*/false);
        if (s.params.is_discarded()) s.params = nlohmann::json::object();
        const nlohmann::json changes = nlohmann::json::parse(st.text(6), nullptr, /*allow_exceptions=*/false);
        if (changes.is_array())
          for (const auto& c : changes)
            if (c.is_string()) s.changes.push_back(c.get<std::string>());
        r.schedule.push_back(std::move(s));
      }));
  for (TrialRow& r : rows)
    std::sort(r.schedule.begin(), r.schedule.end(), [](const PbtStep& a, const PbtStep& b) { return a.round < b.round; });
  return Status::Ok();
}

Status fill_nodes(Connection& db, std::vector<TrialRow>& rows) {
  if (rows.empty()) return Status::Ok();
  SWEPT_ASSIGN_OR_RETURN(version, read_schema_version(db));
  if (version < 7) return Status::Ok();
  return for_each_of_rows(db, "SELECT id, nodes FROM trials WHERE nodes IS NOT NULL AND id IN (", rows,
                          [](TrialRow& r, const Statement& st) { r.nodes = decode_nodes(st.optional_text(1)); });
}

}  // namespace swept::store
