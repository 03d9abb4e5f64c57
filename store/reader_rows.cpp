// The read model in the protocol's types (reader.h, last section): the
// scheduler's answers to client queries and the CLI's --db commands. Sweeps
// and agents come from the dashboard's own queries (reader.cpp,
// reader_agents.cpp), so "best", the counts and what runs where have one
// definition each.
#include <unordered_map>

#include "store/reader.h"
#include "store/schema.h"

namespace swept::store {

namespace {

using nlohmann::json;

json parse_json_or(const std::string& text, json fallback) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? fallback : j;
}

}  // namespace

protocol::SweepSummary to_protocol(const SweepSummary& s) {
  protocol::SweepSummary p;
  p.id = s.id;
  p.name = s.name;
  p.method = s.method;
  p.state = s.state;
  p.metric_name = s.metric_name;
  p.metric_goal = s.metric_goal;
  p.total_trials = s.total_trials;
  p.created_at = s.created_at;
  p.finished_at = s.finished_at;
  p.counts = s.counts;
  p.metric_missing = s.metric_missing;
  if (s.best) {
    p.best_trial_id = s.best->trial_id;
    p.best_value = s.best->value;
    p.best_params = s.best->params;
  }
  return p;
}

Result<std::unique_ptr<Connection>> open_reader(const std::string& path) {
  auto conn = Connection::open(path, Connection::Mode::kReadOnly, 5000);
  if (!conn.ok()) return conn.status();
  auto version = read_schema_version(**conn);
  if (!version.ok())
    return Status::Corruption(path + " is not a swept database (" + version.status().message() + ")");
  if (*version > kSchemaVersion)
    return Status::Corruption(path + " has schema version " + std::to_string(*version) +
                              ", newer than this swept understands (" + std::to_string(kSchemaVersion) +
                              "): use a newer swept");
  return conn;
}

Result<std::vector<protocol::SweepSummary>> sweep_summaries(Connection& db, std::optional<int64_t> sweep_id) {
  std::vector<protocol::SweepSummary> out;
  if (sweep_id) {
    SWEPT_ASSIGN_OR_RETURN(one, get_sweep(db, *sweep_id));
    out.push_back(to_protocol(one));
    return out;
  }
  SWEPT_ASSIGN_OR_RETURN(all, list_sweeps(db));
  // list_sweeps answers newest first (the dashboard's order); the protocol's
  // list is by id.
  for (auto it = all.rbegin(); it != all.rend(); ++it) out.push_back(to_protocol(*it));
  return out;
}

Result<std::vector<protocol::TrialRow>> trial_rows(Connection& db, int64_t sweep_id, int64_t after_index,
                                                   int64_t limit) {
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  SWEPT_RETURN_IF_ERROR(get_sweep(db, sweep_id).status());
  // Index: UNIQUE (sweep_id, idx).
  SWEPT_ASSIGN_OR_RETURN(version, read_schema_version(db));
  SWEPT_ASSIGN_OR_RETURN(st, db.prepare(std::string("SELECT id, sweep_id, idx, state, attempts, agent, gpus, gpu_fraction, "
                                                    "exit_code, reason, metric_value, params, command, started_at, ended_at, ") +
                                        (version >= 3 ? "suggestion" : "NULL") +
                                        (version >= 4 ? ", stop_rule, stop_at, stop_step, stop_value, stop_threshold, stop_reason, stop_decided_at"
                                                      : ", NULL, NULL, NULL, NULL, NULL, NULL, NULL") +
                                        " FROM trials WHERE sweep_id=?1 AND idx > ?2 ORDER BY idx LIMIT ?3"));
  st.bind(1, sweep_id);
  st.bind(2, after_index);
  st.bind(3, limit);
  std::vector<protocol::TrialRow> out;
  std::unordered_map<int64_t, size_t> by_id;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    protocol::TrialRow t;
    t.id = st.int64(0);
    t.sweep_id = st.int64(1);
    t.index = st.int64(2);
    t.state = trial_state_named(st.text(3)).value_or(TrialState::kQueued);
    t.attempts = static_cast<int>(st.int64(4));
    t.agent = st.optional_text(5);
    t.gpus = decode_gpu_list<int>(st.optional_text(6));
    t.gpu_fraction = st.optional_real(7);
    if (auto ec = st.optional_int64(8)) t.exit_code = static_cast<int>(*ec);
    t.reason = st.optional_text(9);
    t.metric_value = st.optional_real(10);
    t.params = parse_json_or(st.text(11), json::object());
    // A damaged command reads as none: the query still answers for the
    // sweep's other trials (the writer refuses such a row: Corruption).
    if (auto argv = decode_argv(t.id, st.text(12)); argv.ok()) t.command = std::move(*argv);
    t.started_at = st.optional_real(13);
    t.ended_at = st.optional_real(14);
    if (auto text = st.optional_text(15)) t.suggestion = parse_json_or(*text, json());
    if (auto rule = st.optional_text(16))
      t.stop = protocol::TrialRow::Stop{*rule, st.optional_int64(17).value_or(-1), st.optional_int64(18).value_or(0),
                                        st.optional_real(19), st.optional_real(20), st.optional_text(21).value_or(""),
                                        st.optional_real(22).value_or(0)};
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
  return out;
}

Result<std::vector<protocol::AgentRow>> agent_rows(Connection& db, std::optional<double> seen_since) {
  SWEPT_ASSIGN_OR_RETURN(agents, list_agents(db, seen_since));
  std::vector<protocol::AgentRow> out;
  for (auto& a : agents) {
    protocol::AgentRow r;
    r.name = a.name;
    r.host = a.host;
    r.state = a.state;
    r.slots = static_cast<int>(a.slots);
    r.last_seen = a.last_seen;
    for (const auto& g : a.gpus) r.gpus.push_back({static_cast<int>(g.index), g.uuid, g.name, g.memory_bytes});
    r.running = std::move(a.running);
    r.quarantine = std::move(a.quarantine);
    r.containment = std::move(a.containment);
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::string> trial_log_tail(Connection& db, int64_t trial_id) {
  SWEPT_ASSIGN_OR_RETURN(st, db.prepare("SELECT tail FROM trial_logs WHERE trial_id = ?"));
  st.bind(1, trial_id);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  return row ? st.text(0) : std::string();
}

}  // namespace swept::store
