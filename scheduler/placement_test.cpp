// Tests of placement: gangs of whole GPUs, memory-fraction packing, CPU
// slots, max_parallel and fairness across sweeps.
#include "scheduler/placement.h"

#include <doctest/doctest.h>

#include <map>
#include <set>

using namespace swept::scheduler;

namespace {
AgentCapacity agent(std::string name, int gpus, int slots = 0) {
  AgentCapacity a;
  a.name = std::move(name);
  a.total_slots = a.free_slots = slots;
  for (int i = 0; i < gpus; ++i) a.gpus.push_back({i, false, 0.0});
  return a;
}

// What the broker does when a trial ends: capacities rebuilt from the idle
// agents and the placements still live (placement keeps no state of its own).
std::vector<AgentCapacity> rebuilt(std::vector<AgentCapacity> idle, const std::vector<Placement>& live) {
  for (const auto& p : live) reserve(idle, p);
  return idle;
}
}  // namespace

TEST_CASE("a gang of whole GPUs lands on one agent, all or nothing") {
  const std::vector<AgentCapacity> idle = {agent("a", 2), agent("b", 4)};
  std::vector<AgentCapacity> agents = idle;
  auto p = place_trial(agents, Demand{3, 0, 1});
  REQUIRE(p);
  CHECK(p->agent == 1);
  CHECK(p->gpus == std::vector<int>{0, 1, 2});
  reserve(agents, *p);
  // 1 GPU free on b, 2 on a: a gang of 3 fits nowhere, not even split.
  CHECK_FALSE(place_trial(agents, Demand{3, 0, 1}));
  CHECK(could_ever_fit(agents, Demand{3, 0, 1}));
  CHECK_FALSE(could_ever_fit(agents, Demand{5, 0, 1}));
  // A gang of 2 takes agent a (best fit leaves b's last GPU alone? b has 1): a.
  auto q = place_trial(agents, Demand{2, 0, 1});
  REQUIRE(q);
  CHECK(q->agent == 0);
  agents = rebuilt(idle, {});  // p ended (q was never reserved)
  CHECK(place_trial(agents, Demand{4, 0, 1})->agent == 1);
}

TEST_CASE("best fit keeps the larger free block for bigger gangs") {
  std::vector<AgentCapacity> agents = {agent("big", 4), agent("small", 1)};
  auto p = place_trial(agents, Demand{1, 0, 1});
  REQUIRE(p);
  CHECK(p->agent == 1);
}

TEST_CASE("memory fractions pack while their sum stays at most 1") {
  std::vector<AgentCapacity> agents = {agent("a", 1)};
  int placed = 0;
  while (auto p = place_trial(agents, Demand{0, 0.4, 1})) {
    CHECK(p->gpus == std::vector<int>{0});
    CHECK(p->gpu_fraction == doctest::Approx(0.4));
    reserve(agents, *p);
    ++placed;
    REQUIRE(placed < 10);
  }
  CHECK(placed == 2);  // 0.4 -> two per GPU, never three
  // A whole-GPU trial never shares a GPU with fractional ones.
  CHECK_FALSE(place_trial(agents, Demand{1, 0, 1}));
  // Ten shares of 0.1 fit exactly despite rounding.
  std::vector<AgentCapacity> b = {agent("b", 1)};
  for (int i = 0; i < 10; ++i) {
    auto p = place_trial(b, Demand{0, 0.1, 1});
    REQUIRE(p);
    reserve(b, *p);
  }
  CHECK_FALSE(place_trial(b, Demand{0, 0.1, 1}));
}

TEST_CASE("fractions fill the fullest GPU first and never a whole-held one") {
  const std::vector<AgentCapacity> idle = {agent("a", 2)};
  std::vector<AgentCapacity> agents = idle;
  auto whole = place_trial(agents, Demand{1, 0, 1});
  REQUIRE(whole);
  reserve(agents, *whole);  // GPU 0 whole
  auto f1 = place_trial(agents, Demand{0, 0.3, 1});
  REQUIRE(f1);
  CHECK(f1->gpus == std::vector<int>{1});
  reserve(agents, *f1);
  auto f2 = place_trial(agents, Demand{0, 0.5, 1});
  REQUIRE(f2);
  CHECK(f2->gpus == std::vector<int>{1});
  reserve(agents, *f2);
  CHECK_FALSE(place_trial(agents, Demand{0, 0.3, 1}));
  agents = rebuilt(idle, {*whole, *f2});  // f1 ended
  CHECK(place_trial(agents, Demand{0, 0.3, 1}));
}

TEST_CASE("CPU trials take slots, spread over agents") {
  std::vector<AgentCapacity> agents = {agent("a", 0, 2), agent("b", 2, 3)};
  std::map<size_t, int> per_agent;
  while (auto p = place_trial(agents, Demand{0, 0, 1})) {
    CHECK(p->gpus.empty());
    reserve(agents, *p);
    per_agent[p->agent]++;
  }
  CHECK(per_agent[0] == 2);
  CHECK(per_agent[1] == 3);
  // GPUs are untouched by CPU trials.
  CHECK(place_trial(agents, Demand{2, 0, 1}));
  // A 2-slot trial needs 2 free slots on one agent.
  std::vector<AgentCapacity> c = {agent("a", 0, 1), agent("b", 0, 1)};
  CHECK_FALSE(place_trial(c, Demand{0, 0, 2}));
}

TEST_CASE("plan_dispatch respects max_parallel and shares fairly in submission order") {
  std::vector<AgentCapacity> agents = {agent("a", 0, 5)};
  std::vector<SweepQueue> sweeps = {
      {1, Demand{}, 0, 0, 100},
      {2, Demand{}, 0, 1, 100},
      {3, Demand{}, 0, 0, 100},
  };
  auto plan = plan_dispatch(agents, sweeps);
  std::map<int64_t, int> n;
  for (const auto& d : plan) n[d.sweep_id]++;
  CHECK(plan.size() == 5);
  CHECK(n[1] == 2);  // 1, 2, 3, 1, 3: fewest running first, ties to the earliest
  CHECK(n[2] == 1);
  CHECK(n[3] == 2);
  CHECK(plan[0].sweep_id == 1);
  CHECK(plan[1].sweep_id == 2);
  CHECK(plan[2].sweep_id == 3);
  CHECK(plan[3].sweep_id == 1);

  // max_parallel is a ceiling even with room left.
  std::vector<AgentCapacity> big = {agent("a", 0, 50)};
  auto capped = plan_dispatch(big, {{7, Demand{}, 1, 3, 100}});
  CHECK(capped.size() == 2);
}

TEST_CASE("a sweep that does not fit does not block the others") {
  std::vector<AgentCapacity> agents = {agent("a", 2, 1)};
  std::vector<SweepQueue> sweeps = {
      {1, Demand{4, 0, 1}, 0, 0, 10},  // needs 4 GPUs: never here
      {2, Demand{1, 0, 1}, 0, 0, 10},
      {3, Demand{}, 0, 0, 10},
  };
  auto plan = plan_dispatch(agents, sweeps);
  std::map<int64_t, int> n;
  for (const auto& d : plan) n[d.sweep_id]++;
  CHECK(n[1] == 0);
  CHECK(n[2] == 2);
  CHECK(n[3] == 1);
  // Nothing placed beyond what is available.
  auto few = plan_dispatch(agents, {{5, Demand{}, 0, 0, 0}});
  CHECK(few.empty());
}

TEST_CASE("no two whole-GPU trials ever share a GPU across a random workload") {
  uint64_t x = 12345;
  auto next = [&] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  const std::vector<AgentCapacity> idle = {agent("a", 4, 4), agent("b", 8, 2)};
  std::vector<AgentCapacity> agents = idle;
  std::vector<Placement> live;
  for (int step = 0; step < 2000; ++step) {
    if (!live.empty() && next() % 3 == 0) {
      size_t k = next() % live.size();
      live.erase(live.begin() + k);
      agents = rebuilt(idle, live);
      continue;
    }
    Demand d;
    switch (next() % 3) {
      case 0: d.gpus = 1 + next() % 3; break;
      case 1: d.gpu_fraction = 0.1 * (1 + next() % 6); break;
      default: d.cpus = 1; break;
    }
    if (auto p = place_trial(agents, d)) {
      reserve(agents, *p);
      live.push_back(*p);
    }
    // Invariants over the live placements.
    std::map<std::pair<size_t, int>, int> whole;
    std::map<std::pair<size_t, int>, double> share;
    std::map<size_t, int> slots;
    for (const auto& p : live) {
      for (int g : p.gpus) {
        if (p.gpu_fraction > 0) share[{p.agent, g}] += p.gpu_fraction;
        else whole[{p.agent, g}]++;
      }
      slots[p.agent] += p.cpus;
    }
    for (const auto& [k, n] : whole) {
      CHECK(n == 1);
      CHECK(share.count(k) == 0);
    }
    for (const auto& [k, f] : share) CHECK(f <= 1.0 + kFractionEpsilon);
    CHECK(slots[0] <= 4);
    CHECK(slots[1] <= 2);
  }
}
