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
  auto plan = plan_dispatch(agents, sweeps).starts;
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
  auto capped = plan_dispatch(big, {{7, Demand{}, 1, 3, 100}}).starts;
  CHECK(capped.size() == 2);
}

TEST_CASE("a sweep that does not fit does not block the others") {
  std::vector<AgentCapacity> agents = {agent("a", 2, 1)};
  std::vector<SweepQueue> sweeps = {
      {1, Demand{4, 0, 1}, 0, 0, 10},  // needs 4 GPUs: never here
      {2, Demand{1, 0, 1}, 0, 0, 10},
      {3, Demand{}, 0, 0, 10},
  };
  auto plan = plan_dispatch(agents, sweeps).starts;
  std::map<int64_t, int> n;
  for (const auto& d : plan) n[d.sweep_id]++;
  CHECK(n[1] == 0);
  CHECK(n[2] == 2);
  CHECK(n[3] == 1);
  // Nothing placed beyond what is available.
  auto few = plan_dispatch(agents, {{5, Demand{}, 0, 0, 0}}).starts;
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

// ---- multi-node trials (issue 25) ----

namespace {
AgentCapacity gang_agent(std::string name, int gpus, int slots) {
  AgentCapacity a = agent(std::move(name), gpus, slots);
  a.gangs = true;
  return a;
}
Demand nodes_of(int nodes, int gpus = 0) {
  Demand d;
  d.nodes = nodes;
  d.gpus = gpus;
  return d;
}
}  // namespace

TEST_CASE("a multi-node trial takes one node on each of N different agents that run gangs, or none") {
  std::vector<AgentCapacity> agents = {gang_agent("a", 2, 1), agent("old", 8, 8), gang_agent("b", 1, 1),
                                       gang_agent("c", 4, 1)};
  auto nodes = place_nodes(agents, nodes_of(3, 1));
  REQUIRE(nodes);
  REQUIRE(nodes->size() == 3);
  std::set<size_t> used;
  for (const auto& p : *nodes) {
    used.insert(p.agent);
    CHECK(p.gpus.size() == 1);
  }
  CHECK(used == std::set<size_t>{0, 2, 3});  // never "old", which lacks the feature
  CHECK_FALSE(place_nodes(agents, nodes_of(4, 1)));  // only three agents run gangs
  CHECK_FALSE(place_nodes(agents, nodes_of(2, 3)));  // only c has 3 GPUs
  CHECK(could_ever_fit(agents, nodes_of(3, 1)));
  CHECK_FALSE(could_ever_fit(agents, nodes_of(4)));
  // One process per node on an old agent is still a plain trial.
  CHECK(place_nodes(agents, Demand{8, 0, 1})->front().agent == 1);
  // Several processes on one node need the feature too.
  Demand procs;
  procs.procs_per_node = 2;
  procs.gpus = 5;
  CHECK_FALSE(place_nodes(agents, procs));
}

TEST_CASE("two multi-node trials never hold halves: a plan places each whole or not at all") {
  // Two agents, one slot each, and two 2-node sweeps: one trial runs on both,
  // the other waits whole (no agent is held by a trial that is not placed).
  std::vector<AgentCapacity> agents = {gang_agent("a", 0, 1), gang_agent("b", 0, 1)};
  std::vector<SweepQueue> sweeps = {{1, nodes_of(2), 0, 0, 5}, {2, nodes_of(2), 0, 0, 5}};
  Plan plan = plan_dispatch(agents, sweeps);
  REQUIRE(plan.starts.size() == 1);
  CHECK(plan.starts[0].sweep_id == 1);
  CHECK(plan.starts[0].more_nodes.size() == 1);
  CHECK(plan.starts[0].placement.agent != plan.starts[0].more_nodes[0].agent);
}

TEST_CASE("a multi-node trial that waits past the bound gets its agents, whatever one-node trials keep coming") {
  // Fake time: each round is 1 s. Two one-slot agents; sweep 1 keeps them
  // busy with one-node trials of 3 s each, one ending every round or so;
  // sweep 2 (later) needs both agents at once.
  const std::vector<AgentCapacity> idle = {gang_agent("a", 0, 1), gang_agent("b", 0, 1)};
  struct Run {
    size_t agent;
    int64_t sweep;
    int ends_at;
  };
  std::vector<Run> running = {{0, 1, 1}, {1, 1, 2}};  // staggered: the agents never free up together
  int64_t waited_ms = 0;
  int gang_started_at = -1;
  const int64_t bound_ms = 5'000;
  for (int t = 0; t < 60 && gang_started_at < 0; ++t) {
    std::erase_if(running, [&](const Run& r) { return r.ends_at <= t; });
    std::vector<AgentCapacity> agents = idle;
    for (const auto& r : running) reserve(agents, Placement{r.agent, {}, 0, 1});
    int ones = 0, gangs = 0;
    for (const auto& r : running) (r.sweep == 1 ? ones : gangs)++;
    std::vector<SweepQueue> sweeps = {{1, Demand{}, ones, 0, 1000}, {2, nodes_of(2), gangs, 0, 1, waited_ms}};
    Plan plan = plan_dispatch(agents, sweeps, bound_ms);
    bool gang_placed = false;
    for (const auto& d : plan.starts) {
      running.push_back({d.placement.agent, d.sweep_id, t + 3});
      for (const auto& p : d.more_nodes) running.push_back({p.agent, d.sweep_id, t + 3});
      if (d.sweep_id == 2) gang_placed = true;
    }
    if (gang_placed) gang_started_at = t;
    waited_ms += 1000;
    if (waited_ms > bound_ms) {
      // Past the bound, the reservation holds both agents: no one-node trial starts.
      for (const auto& d : plan.starts) CHECK(d.sweep_id == 2);
      if (!gang_placed) {
        CHECK(plan.reserved_for == 2);
        CHECK(std::set<std::string>(plan.reserved.begin(), plan.reserved.end()) == std::set<std::string>{"a", "b"});
      }
    }
  }
  // Without the reservation the one-node stream keeps one agent busy for
  // ever; with it the gang starts within the bound plus one trial's length.
  REQUIRE(gang_started_at >= 0);
  CHECK(gang_started_at <= 5 + 3 + 1);
}

TEST_CASE("without a waiting bound reached, one-node trials take what is free") {
  std::vector<AgentCapacity> agents = {gang_agent("a", 0, 1), gang_agent("b", 0, 1)};
  reserve(agents, Placement{0, {}, 0, 1});
  std::vector<SweepQueue> sweeps = {{1, Demand{}, 1, 0, 10}, {2, nodes_of(2), 0, 0, 1, 1000}};
  Plan plan = plan_dispatch(agents, sweeps, 5000);
  REQUIRE(plan.starts.size() == 1);
  CHECK(plan.starts[0].sweep_id == 1);
  CHECK(plan.reserved.empty());
}

// ---- parameter servers (issue 30) ----

TEST_CASE("parameter servers take CPU slots of their own, round-robin on the workers' nodes or on agents of their own") {
  Demand d = nodes_of(2);
  d.cpus = 2;
  d.ps = 3;  // servers 0 and 2 on node 0, server 1 on node 1
  CHECK(d.gang());
  CHECK(d.total_nodes() == 2);
  CHECK(d.server_node(0) == 0);
  CHECK(d.server_node(1) == 1);
  CHECK(d.server_node(2) == 0);
  CHECK(d.node(0).cpus == 6);
  CHECK(d.node(1).cpus == 4);
  // Node 0 needs 6 slots: only "big" has them, and "mid" takes node 1.
  std::vector<AgentCapacity> agents = {gang_agent("mid", 0, 4), gang_agent("big", 0, 6), gang_agent("small", 0, 3)};
  auto nodes = place_nodes(agents, d);
  REQUIRE(nodes);
  CHECK((*nodes)[0] == Placement{1, {}, 0.0, 6});
  CHECK((*nodes)[1] == Placement{0, {}, 0.0, 4});
  agents[1].free_slots = 5;
  CHECK_FALSE(place_nodes(agents, d));
  CHECK(could_ever_fit(agents, d));

  // ps_nodes: each server on an extra agent, CPU slots only, whatever the workers' GPUs.
  Demand own = nodes_of(2, 1);
  own.ps = 1;
  own.ps_nodes = true;
  CHECK(own.total_nodes() == 3);
  CHECK(own.server_node(0) == 2);
  CHECK(own.node(0).cpus == 1);  // the workers' nodes carry no server
  CHECK(own.node(2).gpus == 0);
  std::vector<AgentCapacity> mixed = {gang_agent("g1", 1, 1), gang_agent("cpu", 0, 1), gang_agent("g2", 1, 1)};
  auto placed = place_nodes(mixed, own);
  REQUIRE(placed);
  REQUIRE(placed->size() == 3);
  CHECK((*placed)[2] == Placement{1, {}, 0.0, 1});  // the server's node: the CPU agent
  mixed.pop_back();
  CHECK_FALSE(place_nodes(mixed, own));  // three agents or none
  // A one-node trial with servers is a gang all the same (its agent must run them).
  Demand single;
  single.ps = 1;
  CHECK(single.gang());
  CHECK_FALSE(place_nodes({agent("old", 0, 8)}, single));
}

TEST_CASE("a waiting trial with parameter servers reserves an agent for each node's own demand") {
  // GPU workers on two nodes, one server on an agent of its own (ps_nodes):
  // the server's node needs a CPU slot and no GPU, so the CPU-only agent is
  // the one to hold for it. Reserving as if every node needed node 0's GPU
  // found only two agents for three nodes, and held none.
  Demand own = nodes_of(2, 1);
  own.ps = 1;
  own.ps_nodes = true;
  std::vector<AgentCapacity> agents = {gang_agent("g1", 1, 1), gang_agent("g2", 1, 1), gang_agent("cpu", 0, 2)};
  reserve(agents, Placement{0, {0}, 0.0, 0});  // every agent busy: nothing places now
  reserve(agents, Placement{1, {0}, 0.0, 0});
  reserve(agents, Placement{2, {}, 0.0, 2});
  std::vector<SweepQueue> sweeps = {{1, Demand{}, 1, 0, 10}, {2, own, 0, 0, 1, 60'000}};
  Plan plan = plan_dispatch(agents, sweeps, 5000);
  CHECK(plan.starts.empty());
  CHECK(plan.reserved_for == 2);
  CHECK(std::set<std::string>(plan.reserved.begin(), plan.reserved.end()) ==
        std::set<std::string>{"g1", "g2", "cpu"});

  // Servers round-robin on the workers' nodes: node 0 (workers and two
  // servers) needs 3 slots, node 1 (workers and one server) 2. Only "big"
  // can ever hold node 0; "two" is enough for node 1, and the smaller agent
  // is left to others. Reserving node 0's 3 slots on each found one agent.
  Demand shared = nodes_of(2);
  shared.ps = 3;
  REQUIRE(shared.node(0).cpus == 3);
  REQUIRE(shared.node(1).cpus == 2);
  std::vector<AgentCapacity> slots = {gang_agent("one", 0, 1), gang_agent("two", 0, 2), gang_agent("big", 0, 3)};
  for (size_t a = 0; a < slots.size(); ++a) reserve(slots, Placement{a, {}, 0.0, 1});  // all busy
  plan = plan_dispatch(slots, {{1, Demand{}, 3, 0, 10}, {2, shared, 0, 0, 1, 60'000}}, 5000);
  CHECK(plan.starts.empty());
  CHECK(plan.reserved_for == 2);
  CHECK(std::set<std::string>(plan.reserved.begin(), plan.reserved.end()) == std::set<std::string>{"big", "two"});
}
