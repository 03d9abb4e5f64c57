// Broker, multi-node trials (issue 25; docs/protocol.md, "Multi-node
// trials"): the rendezvous a planned gang gets, and the waiting times that
// let placement reserve agents for a multi-node trial that found no place.
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

int Broker::pick_master_port(const AgentSession& node0) {
  const int lo = node0.ports_lo > 0 ? node0.ports_lo : kDefaultPortsLo;
  const int hi = node0.ports_lo > 0 ? node0.ports_hi : kDefaultPortsHi;
  std::set<int> taken;  // ports of the live gangs whose node 0 is this agent
  for (const auto& [id, lt] : lifecycle_.live())
    if (lt.master_port > 0 && lt.agent == node0.name) taken.insert(lt.master_port);
  // Round robin over the range, so that a port another program held (the
  // agent then refused it: a host fault) is not the next trial's too.
  const int span = hi - lo + 1;
  int& next = next_port_[node0.name];
  for (int i = 0; i < span; ++i) {
    const int port = lo + (next + i) % span;
    if (taken.count(port)) continue;
    next = (port - lo + 1) % span;
    return port;
  }
  return lo + next % span;  // every port in use: the agent refuses it, and the trial is requeued
}

GangDispatch Broker::gang_of(const Dispatch& d, const std::vector<AgentCapacity>& caps, int procs_per_node) {
  GangDispatch g;
  g.procs_per_node = procs_per_node;
  for (const Placement& p : d.more_nodes) g.more_nodes.push_back({caps[p.agent].name, p});
  const AgentSession* node0 = agents_.by_name(caps[d.placement.agent].name);
  g.master_addr = node0 && !node0->addr.empty() ? node0->addr : node0 ? node0->host : "127.0.0.1";
  g.master_port = node0 ? pick_master_port(*node0) : kDefaultPortsLo;
  return g;
}

void Broker::note_gang_waits(const std::vector<SweepQueue>& queues, const Plan& plan) {
  const int64_t now = clock_.now_ms();
  std::set<int64_t> placed;
  for (const Dispatch& d : plan.starts) placed.insert(d.sweep_id);
  for (const SweepQueue& q : queues) {
    if (q.demand.nodes <= 1 || q.available <= 0 || (q.max_parallel > 0 && q.running >= q.max_parallel)) {
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
