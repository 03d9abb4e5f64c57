// Placement: see placement.h for the rules. Everything here is a small loop
// over a snapshot; no state survives a call.
#include "scheduler/placement.h"

#include <algorithm>

namespace swept::scheduler {

std::optional<Placement> place_trial(const std::vector<AgentCapacity>& agents, const Demand& demand) {
  if (demand.gpus > 0) {
    // A gang of whole GPUs on one agent: the agent with the fewest free GPUs
    // that still has enough (best fit), lowest indices first.
    std::optional<Placement> best;
    size_t best_free = 0;
    for (size_t a = 0; a < agents.size(); ++a) {
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

bool could_ever_fit(const std::vector<AgentCapacity>& agents, const Demand& demand) {
  std::vector<AgentCapacity> empty = agents;
  for (auto& a : empty) {
    a.free_slots = a.total_slots;
    for (auto& g : a.gpus) g = GpuUse{g.index, false, 0.0};
  }
  return place_trial(empty, demand).has_value();
}

std::vector<Dispatch> plan_dispatch(std::vector<AgentCapacity> agents, std::vector<SweepQueue> sweeps) {
  std::vector<Dispatch> plan;
  // Sweeps that cannot place their next trial now drop out of this round.
  std::vector<bool> blocked(sweeps.size(), false);
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
    auto p = place_trial(agents, s.demand);
    if (!p) {
      blocked[pick] = true;
      continue;
    }
    reserve(agents, *p);
    plan.push_back({s.sweep_id, *p});
    s.running += 1;
    s.available -= 1;
  }
  return plan;
}

}  // namespace swept::scheduler
