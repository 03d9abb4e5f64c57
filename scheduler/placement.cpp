// Placement: see placement.h for the rules. Everything here is a small loop
// over a snapshot; no state survives a call.
#include "scheduler/placement.h"

#include <algorithm>
#include <tuple>

namespace swept::scheduler {

namespace {
// Whether a node of `demand` may go to `a` at all (reserved, gang feature).
bool eligible(const AgentCapacity& a, const Demand& demand) {
  return !a.reserved && (a.gangs || !demand.gang()) && (a.segments || !demand.segments);
}
}  // namespace

Demand Demand::node(int n) const {
  Demand d = *this;
  if (ps <= 0) return d;
  if (n >= std::max(1, nodes)) {  // a server's own node: one process, CPU slots only
    d.gpus = 0;
    d.gpu_fraction = 0;
    d.procs_per_node = 1;
    return d;
  }
  int servers = 0;
  for (int j = 0; j < ps; ++j) servers += server_node(j) == n ? 1 : 0;
  d.cpus = std::max(1, cpus) * (1 + servers);
  return d;
}

std::optional<Placement> place_trial(const std::vector<AgentCapacity>& agents, const Demand& demand) {
  if (demand.gpus > 0) {
    // A gang of whole GPUs on one agent: the agent with the fewest free GPUs
    // that still has enough (best fit), lowest indices first.
    std::optional<Placement> best;
    size_t best_free = 0;
    for (size_t a = 0; a < agents.size(); ++a) {
      if (!eligible(agents[a], demand)) continue;
      std::vector<int> free;
      for (const auto& g : agents[a].gpus)
        if (g.free()) free.push_back(g.index);
      if (free.size() < static_cast<size_t>(demand.gpus)) continue;
      if (best && free.size() >= best_free) continue;
      best_free = free.size();
      std::sort(free.begin(), free.end());
      free.resize(static_cast<size_t>(demand.gpus));
      best = Placement{a, free, 0.0, 0};
    }
    return best;
  }
  if (demand.gpu_fraction > 0) {
    // Best fit: the GPU with the most used that still has room.
    std::optional<Placement> best;
    double best_used = -1;
    for (size_t a = 0; a < agents.size(); ++a) {
      if (!eligible(agents[a], demand)) continue;
      for (const auto& g : agents[a].gpus) {
        if (g.whole) continue;
        if (g.fraction_used + demand.gpu_fraction > 1.0 + kFractionEpsilon) continue;
        if (g.fraction_used > best_used) {
          best_used = g.fraction_used;
          best = Placement{a, {g.index}, demand.gpu_fraction, 0};
        }
      }
    }
    return best;
  }
  int cpus = std::max(1, demand.cpus);
  std::optional<Placement> best;
  int best_free = 0;
  for (size_t a = 0; a < agents.size(); ++a) {
    if (!eligible(agents[a], demand)) continue;
    if (agents[a].free_slots >= cpus && agents[a].free_slots > best_free) {
      best_free = agents[a].free_slots;
      best = Placement{a, {}, 0.0, cpus};
    }
  }
  return best;
}

namespace {
GpuUse* find_gpu(AgentCapacity& agent, int index) {
  for (auto& g : agent.gpus)
    if (g.index == index) return &g;
  return nullptr;
}
}  // namespace

void reserve(std::vector<AgentCapacity>& agents, const Placement& p) {
  if (p.agent >= agents.size()) return;
  AgentCapacity& a = agents[p.agent];
  a.free_slots -= p.cpus;
  for (int idx : p.gpus) {
    GpuUse* g = find_gpu(a, idx);
    if (!g) continue;
    if (p.gpu_fraction > 0)
      g->fraction_used += p.gpu_fraction;
    else
      g->whole = true;
  }
}

std::optional<std::vector<Placement>> place_nodes(const std::vector<AgentCapacity>& agents, const Demand& demand) {
  // Nodes are independent of one another except that each needs its own
  // agent, so placing them one by one (best fit each) finds N whenever N
  // agents can each take one.
  std::vector<AgentCapacity> view = agents;
  std::vector<Placement> nodes;
  for (int n = 0; n < demand.total_nodes(); ++n) {
    auto p = place_trial(view, demand.node(n));
    if (!p) return std::nullopt;
    view[p->agent].reserved = true;  // one node per agent
    nodes.push_back(*p);
  }
  return nodes;
}

namespace {
std::vector<AgentCapacity> emptied(std::vector<AgentCapacity> agents) {
  for (auto& a : agents) {
    a.free_slots = a.total_slots;
    a.reserved = false;
    for (auto& g : a.gpus) g = GpuUse{g.index, false, 0.0};
  }
  return agents;
}

// Marks the agents a waiting multi-node trial is to have, one per node, each
// for that node's own demand (Demand::node: a server's own node needs CPU
// slots and no GPU; round-robin servers make some workers' nodes larger than
// others): an agent the node fits on now first, else one it would fit on
// once empty, the emptiest first. The most demanding nodes choose first, so
// that a node any agent could hold does not take the one agent that a GPU
// node needs. Returns the agents' names, in node order (empty when some node
// finds no agent: nothing is held then).
std::vector<std::string> reserve_agents(std::vector<AgentCapacity>& agents, const Demand& trial) {
  const std::vector<AgentCapacity> idle = emptied(agents);
  const int total = trial.total_nodes();
  std::vector<int> order(static_cast<size_t>(total));
  for (int n = 0; n < total; ++n) order[static_cast<size_t>(n)] = n;
  auto weight = [&](int n) {
    const Demand d = trial.node(n);
    return std::make_tuple(d.needs_gpu(), d.gpus, d.gpu_fraction, d.needs_gpu() ? 0 : std::max(1, d.cpus));
  };
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return weight(x) > weight(y); });
  auto used = [&](size_t a) {
    int busy_gpus = 0;
    for (const auto& g : agents[a].gpus) busy_gpus += g.free() ? 0 : 1;
    return std::make_pair(busy_gpus, agents[a].total_slots - agents[a].free_slots);
  };
  std::vector<bool> taken(agents.size(), false);
  std::vector<size_t> pick(static_cast<size_t>(total), agents.size());
  for (int n : order) {
    const Demand demand = trial.node(n);
    size_t now = agents.size(), later = agents.size();
    for (size_t a = 0; a < agents.size() && now == agents.size(); ++a) {
      if (agents[a].reserved || taken[a]) continue;
      std::vector<AgentCapacity> one = {agents[a]}, one_idle = {idle[a]};
      if (place_trial(one, demand))
        now = a;
      else if (place_trial(one_idle, demand) && (later == agents.size() || used(a) < used(later)))
        later = a;
    }
    const size_t a = now < agents.size() ? now : later;
    if (a == agents.size()) return {};
    taken[a] = true;
    pick[static_cast<size_t>(n)] = a;
  }
  std::vector<std::string> names;
  for (size_t a : pick) {
    agents[a].reserved = true;
    names.push_back(agents[a].name);
  }
  return names;
}
}  // namespace

bool could_ever_fit(const std::vector<AgentCapacity>& agents, const Demand& demand) {
  return place_nodes(emptied(agents), demand).has_value();
}

Plan plan_dispatch(std::vector<AgentCapacity> agents, std::vector<SweepQueue> sweeps, int64_t reserve_after_ms) {
  Plan plan;
  // Sweeps that cannot place their next trial now drop out of this round.
  std::vector<bool> blocked(sweeps.size(), false);
  // The multi-node trial that has waited longest, past the bound: placed
  // first if it fits, else it gets its agents reserved.
  size_t head = sweeps.size();
  for (size_t i = 0; i < sweeps.size(); ++i) {
    const SweepQueue& s = sweeps[i];
    if (s.demand.total_nodes() <= 1 || s.available <= 0 || s.waiting_ms < reserve_after_ms) continue;
    if (s.max_parallel > 0 && s.running >= s.max_parallel) continue;
    if (head == sweeps.size() || s.waiting_ms > sweeps[head].waiting_ms) head = i;
  }
  if (head < sweeps.size()) {
    SweepQueue& s = sweeps[head];
    if (auto nodes = place_nodes(agents, s.demand)) {
      for (const auto& p : *nodes) reserve(agents, p);
      plan.starts.push_back({s.sweep_id, nodes->front(), {nodes->begin() + 1, nodes->end()}});
      s.running += 1;
      s.available -= 1;
    } else {
      plan.reserved = reserve_agents(agents, s.demand);
      if (!plan.reserved.empty()) plan.reserved_for = s.sweep_id;
      blocked[head] = true;
    }
  }
  for (;;) {
    // The sweep with the fewest running trials, ties to the earliest.
    size_t pick = sweeps.size();
    for (size_t i = 0; i < sweeps.size(); ++i) {
      const SweepQueue& s = sweeps[i];
      if (blocked[i] || s.available <= 0) continue;
      if (s.max_parallel > 0 && s.running >= s.max_parallel) continue;
      if (pick == sweeps.size() || s.running < sweeps[pick].running ||
          (s.running == sweeps[pick].running && s.sweep_id < sweeps[pick].sweep_id))
        pick = i;
    }
    if (pick == sweeps.size()) break;
    SweepQueue& s = sweeps[pick];
    auto nodes = place_nodes(agents, s.demand);
    if (!nodes) {
      blocked[pick] = true;
      continue;
    }
    for (const auto& p : *nodes) reserve(agents, p);
    plan.starts.push_back({s.sweep_id, nodes->front(), {nodes->begin() + 1, nodes->end()}});
    s.running += 1;
    s.available -= 1;
  }
  return plan;
}

}  // namespace swept::scheduler
