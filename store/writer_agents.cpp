// The writer's agents (writer.h, "agents"): registration with the agent's
// GPUs, liveness, quarantine, and forgetting agents long gone.
#include <map>
#include <string>

#include "store/writer.h"
#include "store/writer_cached.h"

namespace swept::store {

Status Writer::upsert_agent(const std::string& name, const std::string& host, int slots,
                           const std::vector<protocol::GpuInfo>& gpus, double now, const std::string& containment) {
  SWEPT_CACHED(st,
                "INSERT INTO agents(name, host, state, slots, registered_at, last_seen, containment) "
                "VALUES(?1,?2,?6,?3,?4,?5,NULLIF(?7,'')) "
                "ON CONFLICT(name) DO UPDATE SET host=excluded.host, state=excluded.state, slots=excluded.slots, "
                "registered_at=excluded.registered_at, last_seen=excluded.last_seen, containment=excluded.containment");
  st.bind(6, AgentState::kAlive);
  st.bind(7, containment);
  st.bind(1, name);
  st.bind(2, host);
  st.bind(3, slots);
  st.bind(4, now);
  st.bind(5, now);
  SWEPT_RETURN_IF_ERROR(st.run());
  SWEPT_CACHED(del, "DELETE FROM agent_gpus WHERE agent=?");
  del.bind(1, name);
  SWEPT_RETURN_IF_ERROR(del.run());
  SWEPT_CACHED(ins, "INSERT INTO agent_gpus(agent, idx, uuid, name, memory_bytes) VALUES(?,?,?,?,?)");
  for (const auto& g : gpus) {
    ins.bind(1, name);
    ins.bind(2, g.index);
    ins.bind(3, g.uuid);
    ins.bind(4, g.name);
    ins.bind(5, g.memory_bytes);
    SWEPT_RETURN_IF_ERROR(ins.run());
  }
  return Status::Ok();
}

Status Writer::set_agent_state(const std::string& name, AgentState state, double now) {
  SWEPT_CACHED(st, "UPDATE agents SET state=?, last_seen=? WHERE name=?");
  st.bind(1, state);
  st.bind(2, now);
  st.bind(3, name);
  SWEPT_RETURN_IF_ERROR(st.run());
  return Status::Ok();
}

Status Writer::set_agent_quarantine(const std::string& name, const std::optional<std::string>& reason) {
  SWEPT_CACHED(st, "UPDATE agents SET quarantine=? WHERE name=?");
  if (reason)
    st.bind(1, *reason);
  else
    st.bind_null(1);
  st.bind(2, name);
  return st.run();
}

Result<std::map<std::string, std::string>> Writer::quarantined_agents() {
  SWEPT_CACHED(st, "SELECT name, quarantine FROM agents WHERE quarantine IS NOT NULL");
  std::map<std::string, std::string> out;
  while (true) {
    SWEPT_ASSIGN_OR_RETURN(row, st.step());
    if (!row) break;
    out[st.text(0)] = st.text(1);
  }
  return out;
}

Result<int64_t> Writer::forget_agents(double gone_before) {
  // Which: gone or lost before the cut-off, not quarantined (an operator
  // should see those until released). Trials keep the name as text.
  // (State names are bound from common/states.h, never spelled here.)
  SWEPT_CACHED(count, "SELECT COUNT(*) FROM agents WHERE state <> ?2 AND last_seen < ?1 AND quarantine IS NULL");
  count.bind(1, gone_before).bind(2, AgentState::kAlive);
  SWEPT_ASSIGN_OR_RETURN(row, count.step());
  const int64_t n = row ? count.int64(0) : 0;
  count.reset();
  if (n == 0) return n;
  // Their GPUs first: agent_gpus references agents.
  SWEPT_CACHED(gpus, "DELETE FROM agent_gpus WHERE agent IN (SELECT name FROM agents WHERE state <> ?2 AND "
                     "last_seen < ?1 AND quarantine IS NULL)");
  gpus.bind(1, gone_before).bind(2, AgentState::kAlive);
  SWEPT_RETURN_IF_ERROR(gpus.run());
  SWEPT_CACHED(del, "DELETE FROM agents WHERE state <> ?2 AND last_seen < ?1 AND quarantine IS NULL");
  del.bind(1, gone_before).bind(2, AgentState::kAlive);
  SWEPT_RETURN_IF_ERROR(del.run());
  return n;
}

Result<bool> Writer::agent_known(const std::string& name) {
  SWEPT_CACHED(st, "SELECT 1 FROM agents WHERE name=?");
  st.bind(1, name);
  SWEPT_ASSIGN_OR_RETURN(row, st.step());
  st.reset();
  return row;
}

Status Writer::forget_agent(const std::string& name) {
  SWEPT_CACHED(gpus, "DELETE FROM agent_gpus WHERE agent IN (SELECT name FROM agents WHERE name=?1 AND "
                     "quarantine IS NULL)");
  gpus.bind(1, name);
  SWEPT_RETURN_IF_ERROR(gpus.run());
  SWEPT_CACHED(del, "DELETE FROM agents WHERE name=?1 AND quarantine IS NULL");
  del.bind(1, name);
  return del.run();
}

Status Writer::mark_all_agents(AgentState from_state, AgentState to_state) {
  SWEPT_CACHED(st, "UPDATE agents SET state=? WHERE state=?");
  st.bind(1, to_state);
  st.bind(2, from_state);
  SWEPT_RETURN_IF_ERROR(st.run());
  return Status::Ok();
}

}  // namespace swept::store
