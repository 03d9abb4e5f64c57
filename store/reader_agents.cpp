// The read model's agents (reader.h, list_agents): each agent with its GPUs
// and what runs there, derived from the running trials.
#include "store/reader.h"
#include "store/schema.h"

namespace swept::store {

Result<std::vector<AgentRow>> list_agents(Connection& db, std::optional<double> seen_since) {
  std::vector<AgentRow> out;
  SWEPT_ASSIGN_OR_RETURN(schema, db.has_schema());
  if (!schema) return out;
  ReadTransaction txn(db);
  SWEPT_RETURN_IF_ERROR(txn.status());
  SWEPT_ASSIGN_OR_RETURN(version, read_schema_version(db));
  std::map<std::string, size_t> by_name;
  std::string sql = std::string("SELECT name, host, state, slots, registered_at, last_seen, ") +
                    (version >= 5 ? "quarantine" : "NULL") + ", " + (version >= 6 ? "containment" : "NULL") +
                    " FROM agents" +
                    (seen_since ? " WHERE state = ?2 OR last_seen >= ?1" : "") + " ORDER BY name";
  SWEPT_ASSIGN_OR_RETURN(agents, db.prepare(sql));
  if (seen_since) agents.bind(1, *seen_since).bind(2, AgentState::kAlive);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, agents.step());
    if (!row) break;
    AgentRow a;
    a.name = agents.text(0);
    a.host = agents.text(1);
    a.state = agent_state_named(agents.text(2)).value_or(AgentState::kAlive);
    a.slots = static_cast<int>(agents.int64(3));
    a.registered_at = agents.real(4);
    a.last_seen = agents.real(5);
    a.quarantine = agents.optional_text(6);
    a.containment = agents.optional_text(7);
    by_name[a.name] = out.size();
    out.push_back(std::move(a));
  }
  SWEPT_ASSIGN_OR_RETURN(gpus, db.prepare("SELECT agent, idx, uuid, name, memory_bytes FROM agent_gpus ORDER BY agent, idx"));
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, gpus.step());
    if (!row) break;
    auto it = by_name.find(gpus.text(0));
    if (it == by_name.end()) continue;
    GpuInfo g;
    g.index = static_cast<int>(gpus.int64(1));
    g.uuid = gpus.text(2);
    g.name = gpus.text(3);
    g.memory_bytes = gpus.int64(4);
    out[it->second].gpus.push_back(std::move(g));
  }
  // What runs where, derived from running trials. Index: trials_by_state.
  SWEPT_ASSIGN_OR_RETURN(running, db.prepare(
      "SELECT id, sweep_id, agent, gpus, gpu_fraction FROM trials WHERE state = ? ORDER BY id"));
  running.bind(1, TrialState::kRunning);
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, running.step());
    if (!row) break;
    auto agent = running.optional_text(2);
    if (!agent) continue;
    auto it = by_name.find(*agent);
    if (it == by_name.end()) continue;
    std::vector<int> indices = decode_gpu_list<int>(running.optional_text(3));
    out[it->second].running.push_back({running.int64(0), std::move(indices), running.optional_real(4), running.int64(1)});
  }
  return out;
}

}  // namespace swept::store
