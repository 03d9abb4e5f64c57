// The read model in the protocol's types (reader.h, last section): the
// scheduler's answers to client queries and the CLI's --db commands. Sweeps
// and agents come from the dashboard's own queries (reader.cpp,
// reader_agents.cpp), so "best", the counts and what runs where have one
// definition each.
#include <unordered_map>

#include "store/integrity.h"
#include "store/reader.h"
#include "store/reader_internal.h"
#include "store/rows.h"
#include "store/schema.h"

namespace swept::store {

namespace {

using nlohmann::json;

json parse_json_or(const std::string& text, json fallback) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? fallback : j;
}

}  // namespace

Result<std::unique_ptr<Connection>> open_reader(const std::string& path, ReaderCheck check) {
  auto conn = Connection::open(path, Connection::Mode::kReadOnly, 5000);
  if (!conn.ok()) return conn.status();
  auto version = read_schema_version(**conn);
  if (!version.ok())
    return Status::Corruption(path + " is not a swept database (" + version.status().message() + ")");
  if (*version > kSchemaVersion)
    return Status::Corruption(path + " has schema version " + std::to_string(*version) +
                              ", newer than this swept understands (" + std::to_string(kSchemaVersion) +
                              "): use a newer swept");
  if (check == ReaderCheck::kIntegrity) SWEPT_RETURN_IF_ERROR(check_integrity(**conn, path));
  return conn;
}

Result<std::vector<SweepRow>> sweep_summaries(Connection& db, std::optional<int64_t> sweep_id) {
  std::vector<SweepRow> out;
  if (sweep_id) {
    SWEPT_ASSIGN_OR_RETURN(one, get_sweep(db, *sweep_id));
    out.push_back(std::move(one));
    return out;
  }
  SWEPT_ASSIGN_OR_RETURN(all, list_sweeps(db));
  // list_sweeps answers newest first (the dashboard's order); the protocol's
  // list is by id.
  for (auto it = all.rbegin(); it != all.rend(); ++it) out.push_back(std::move(*it));
  return out;
}

Result<std::vector<TrialRow>> trial_rows(Connection& db, int64_t sweep_id, int64_t after_index, int64_t limit) {
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  SWEPT_ASSIGN_OR_RETURN(sweep, get_sweep_in_txn(db, sweep_id, /*with_counts=*/false));
  // Index: UNIQUE (sweep_id, idx).
  SWEPT_ASSIGN_OR_RETURN(version, read_schema_version(db));
  SWEPT_ASSIGN_OR_RETURN(st, db.prepare(std::string("SELECT ") + kTrialColumns + ", " +
                                        (version >= 3 ? "t.suggestion" : "NULL") +
                                        (version >= 4 ? ", t.stop_rule, t.stop_at, t.stop_step, t.stop_value, "
                                                        "t.stop_threshold, t.stop_reason, t.stop_decided_at"
                                                      : ", NULL, NULL, NULL, NULL, NULL, NULL, NULL") +
                                        (version >= 7 ? ", t.nodes" : ", NULL") +
                                        " FROM trials t WHERE t.sweep_id=?1 AND t.idx > ?2 ORDER BY t.idx LIMIT ?3"));
  st.bind(1, sweep_id);
  st.bind(2, after_index);
  st.bind(3, limit);
  std::vector<TrialRow> out;
  std::unordered_map<int64_t, size_t> by_id;
  constexpr int kMore = kTrialColumnCount;  // the columns after the row's
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    // A damaged row reads as well as it can (damaged is not on the wire): the
    // query still answers for the sweep's other trials (the writer refuses
    // such a row: Corruption).
    TrialRow t = read_trial_row(st);
    if (auto text = st.optional_text(kMore)) t.suggestion = parse_json_or(*text, json());
    if (auto rule = st.optional_text(kMore + 1))
      t.stop = TrialStop{*rule,
                         st.optional_int64(kMore + 2).value_or(-1),
                         st.optional_int64(kMore + 3).value_or(0),
                         st.optional_real(kMore + 4),
                         st.optional_real(kMore + 5),
                         st.optional_text(kMore + 6).value_or(""),
                         st.optional_real(kMore + 7).value_or(0)};
    t.nodes = decode_nodes(st.optional_text(kMore + 8));
    by_id[t.id] = out.size();
    out.push_back(std::move(t));
  }
  if (out.empty()) return out;
  SWEPT_ASSIGN_OR_RETURN(lat, db.prepare("SELECT l.trial_id, l.name, l.value FROM trial_latest l "
                                         "JOIN trials t ON t.id=l.trial_id WHERE t.sweep_id=?1 AND t.idx BETWEEN ?2 AND ?3"));
  lat.bind(1, sweep_id);
  lat.bind(2, out.front().index);
  lat.bind(3, out.back().index);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, lat.step());
    if (!row) break;
    auto it = by_id.find(lat.int64(0));
    if (it != by_id.end()) out[it->second].latest[lat.text(1)] = lat.real(2);
  }
  mark_feasibility(*sweep_goals(sweep), out);
  SWEPT_RETURN_IF_ERROR(fill_schedules(db, out));
  return out;
}

Result<std::string> trial_log_tail(Connection& db, int64_t trial_id) {
  SWEPT_ASSIGN_OR_RETURN(st, db.prepare("SELECT tail FROM trial_logs WHERE trial_id = ?"));
  st.bind(1, trial_id);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  return row ? st.text(0) : std::string();
}

}  // namespace swept::store
