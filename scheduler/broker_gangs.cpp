// Broker, multi-node trials (issue 25; docs/protocol.md, "Multi-node
// trials"): the rendezvous a planned gang gets (with issue 30, every
// process's address and port, for TF_CONFIG and parameter servers), and the
// waiting times that let placement reserve agents for a multi-node trial
// that found no place.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "common/log.h"
#include "scheduler/broker.h"

namespace swept::scheduler {

namespace {
// The range an agent that names none is assumed to have (torchrun's
// default MASTER_PORT is its first port).
constexpr int kDefaultPortsLo = 29500;
constexpr int kDefaultPortsHi = 29999;
}  // namespace

namespace {
// Where an agent's ports live: agents on one host (swept run --local-agents,
// several agents of one Slurm node) share one space of ports.
std::string host_of(const AgentSession& s) { return s.addr.empty() ? s.host : s.addr; }
}  // namespace

std::map<std::string, std::set<int>> Broker::ports_in_use() const {
  // One pass over the live trials for a whole gang: looking them all up again
  // for each port a gang needs made a gang's start grow with live trials
  // times its processes (issue 25's gang placement cost).
  std::map<std::string, std::set<int>> used;
  auto hold = [&](const std::string& agent, int port) {
    if (const AgentSession* s = agents_.by_name(agent)) used[host_of(*s)].insert(port);
  };
  for (const auto& [id, lt] : lifecycle_.live()) {
    if (lt.master_port > 0) hold(lt.agent, lt.master_port);
    for (const auto& [name, port] : lt.ports) hold(name, port);
  }
  return used;
}

int Broker::pick_port(const AgentSession& agent, const std::set<int>& taken) {
  const int lo = agent.ports_lo > 0 ? agent.ports_lo : kDefaultPortsLo;
  const int hi = agent.ports_lo > 0 ? agent.ports_hi : kDefaultPortsHi;
  // Round robin over the range, so that a port another program held (the
  // agent then refused it: a host fault) is not the next trial's too. One
  // rotation per host and range: agents of one host with different ranges
  // sharing a counter would each jump about in their own range, and a
  // refused port could come back every other attempt.
  const int span = hi - lo + 1;
  int& next = next_port_[{host_of(agent), lo, hi}];
  for (int i = 0; i < span; ++i) {
    const int port = lo + (next + i) % span;
    if (taken.count(port)) continue;
    next = (port - lo + 1) % span;
    return port;
  }
  return lo + next % span;  // every port in use: the agent refuses it, and the trial is requeued
}

GangDispatch Broker::gang_of(const Dispatch& d, const std::vector<AgentCapacity>& caps, const Demand& demand) {
  GangDispatch g;
  g.procs_per_node = demand.procs_per_node;
  for (const Placement& p : d.more_nodes) g.more_nodes.push_back({caps[p.agent].name, p});
  std::vector<const AgentSession*> sessions = {agents_.by_name(caps[d.placement.agent].name)};
  for (const Placement& p : d.more_nodes) sessions.push_back(agents_.by_name(caps[p.agent].name));
  auto addr_of = [](const AgentSession* s) { return s && !s->addr.empty() ? s->addr : s ? s->host : "127.0.0.1"; };
  const AgentSession* node0 = sessions.front();
  g.master_addr = addr_of(node0);
  // Ports live trials hold and those this gang took, by host.
  std::map<std::string, std::set<int>> taken = ports_in_use();
  auto port_on = [&](size_t node) {
    if (!sessions[node]) return kDefaultPortsLo;  // never: placement saw every agent
    std::set<int>& here = taken[host_of(*sessions[node])];
    const int port = pick_port(*sessions[node], here);
    here.insert(port);
    return port;
  };
  g.master_port = port_on(0);
  // TF_CONFIG's cluster (issue 30): every node's address, a port per worker
  // and per server, each from its own node's range.
  g.worker_nodes = std::max(1, demand.nodes);
  for (const AgentSession* s : sessions) g.addrs.push_back(addr_of(s));
  for (int node = 0; node < g.worker_nodes && static_cast<size_t>(node) < sessions.size(); ++node)
    for (int local = 0; local < g.procs_per_node; ++local) g.worker_ports.push_back(port_on(static_cast<size_t>(node)));
  for (int j = 0; j < demand.ps; ++j) {
    const int node = demand.server_node(j);
    if (static_cast<size_t>(node) >= sessions.size()) break;  // never: placement gave every node
    g.ps_node.push_back(node);
    g.ps_ports.push_back(port_on(static_cast<size_t>(node)));
  }
  return g;
}

void Broker::note_gang_waits(const std::vector<SweepQueue>& queues, const Plan& plan) {
  const int64_t now = clock_.now_ms();
  std::set<int64_t> placed;
  for (const Dispatch& d : plan.starts) placed.insert(d.sweep_id);
  for (const SweepQueue& q : queues) {
    if (q.demand.total_nodes() <= 1 || q.available <= 0 || (q.max_parallel > 0 && q.running >= q.max_parallel)) {
      gang_waiting_since_ms_.erase(q.sweep_id);
      continue;
    }
    // A trial placed now: the next one starts waiting now.
    if (placed.count(q.sweep_id))
      gang_waiting_since_ms_[q.sweep_id] = now;
    else
      gang_waiting_since_ms_.try_emplace(q.sweep_id, now);
  }
  std::erase_if(gang_waiting_since_ms_, [&](const auto& w) {
    for (const SweepQueue& q : queues)
      if (q.sweep_id == w.first) return false;
    return true;
  });
  std::string line;
  if (plan.reserved_for) {
    line = "sweep " + std::to_string(plan.reserved_for) + "'s next multi-node trial has waited " +
           std::to_string(options_.gang_reserve_after_ms / 1000) + " s or more: agents held for it:";
    for (const auto& a : plan.reserved) line += " " + a;
  }
  if (line != reserved_logged_) {
    if (!line.empty()) log::info(line);
    reserved_logged_ = line;
  }
}

}  // namespace swept::scheduler
