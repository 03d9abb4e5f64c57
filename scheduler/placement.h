// Placement: which queued trial goes to which agent, on which GPUs. Pure: no
// sockets, no store, no clock; the broker hands it a snapshot and applies the
// answer.
//
// Rules (issue 5, docs/protocol.md):
//  - `gpus: k` takes k distinct whole GPUs on one agent, all or nothing (a
//    gang). A whole GPU is never shared: not with another whole-GPU trial,
//    not with a fractional one.
//  - `gpu_memory_fraction: f` packs trials onto one GPU while the shares on it
//    sum to at most 1 (0.4: two per GPU, never three). Best fit: the fullest
//    GPU that still has room, so that whole GPUs stay free for gangs.
//  - Trials with neither take `cpus` CPU slots of one agent (the agent with
//    the most free slots, spreading load).
//  - Per sweep, at most `max_parallel` trials run at once (0: no limit).
//  - Sweeps share the cluster fairly: each free place goes to the sweep with
//    the fewest running trials, ties to the earliest submitted; a sweep whose
//    next trial does not fit anywhere does not block the others.
//  - `nodes: N` (issue 25) takes one node's demand on each of N different
//    agents that run gangs, all N or none: nothing is held for a trial that
//    is not placed whole, so two multi-node trials can never deadlock on
//    halves. A multi-node trial that has waited `reserve_after_ms` or more
//    (the longest-waiting one, one at a time) has N agents reserved for it:
//    those it fits on now first, then the emptiest; nothing else is placed on
//    them until it starts, so a stream of one-node trials cannot starve it
//    (Slurm's backfill reserves nodes for the job at the head of its queue
//    the same way).
//  - `ps: K` (issue 30) adds K parameter servers, each taking `cpus` CPU
//    slots (CPU slots count only where the workers need no GPU, as for any
//    trial): on the workers' nodes round-robin (Demand::server_node), or,
//    with `ps_nodes`, each on an agent of its own (K more nodes, no GPU).
//    A reservation for a waiting trial holds one agent per node, each for
//    that node's own demand (Demand::node), the most demanding nodes first.
// Thread safety: pure functions on values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace swept::scheduler {

// Shares within this tolerance of 1 still fit (0.1 x 10 sums to 0.9999999...).
inline constexpr double kFractionEpsilon = 1e-9;

struct GpuUse {
  int index = 0;
  bool whole = false;           // held by a whole-GPU trial
  double fraction_used = 0.0;   // sum of the shares placed on it
  bool free() const { return !whole && fraction_used <= kFractionEpsilon; }
};

struct AgentCapacity {
  std::string name;
  int total_slots = 0;
  int free_slots = 0;
  std::vector<GpuUse> gpus;
  bool gangs = false;     // runs nodes of multi-node trials (the REGISTER feature "gang")
  bool segments = false;  // runs pbt segments (the REGISTER feature "checkpoint_segments", issue 29)
  bool reserved = false;  // held for a waiting multi-node trial: nothing else goes here
};

// Per node: a trial with `nodes` > 1 asks for all of it on each node.
struct Demand {
  int gpus = 0;               // whole GPUs
  double gpu_fraction = 0.0;  // share of one GPU; 0 = none
  int cpus = 1;               // CPU slots, used only when the trial needs no GPU
  int nodes = 1;              // different agents, started together
  int procs_per_node = 1;     // processes per node (the agent must run gangs when > 1)
  bool segments = false;      // a pbt member: only on agents that run START_TRIAL `checkpoint`
  int ps = 0;                 // parameter servers (issue 30), each taking `cpus` of its own
  bool ps_nodes = false;      // each server on an extra agent of its own, not on the workers' nodes
  bool needs_gpu() const { return gpus > 0 || gpu_fraction > 0; }
  // Whether its agents must implement START_TRIAL `gang`.
  bool gang() const { return nodes > 1 || procs_per_node > 1 || ps > 0; }
  // Agents the trial spans: the workers' nodes, then one per server with ps_nodes.
  int total_nodes() const { return std::max(1, nodes) + (ps_nodes ? ps : 0); }
  // The node that parameter server `j` runs on: round-robin over the
  // workers' nodes (server j on node j mod nodes), or node nodes + j with ps_nodes.
  int server_node(int j) const { return ps_nodes ? std::max(1, nodes) + j : j % std::max(1, nodes); }
  // What node `n` (0 .. total_nodes() - 1) takes: a workers' node its
  // workers' share and `cpus` more per server on it; a server's own node
  // `cpus` CPU slots and no GPU.
  Demand node(int n) const;
};

struct Placement {
  size_t agent = 0;           // index into the capacity vector
  std::vector<int> gpus;      // GPU indices on that agent (empty for CPU trials)
  double gpu_fraction = 0.0;  // > 0 for a shared GPU
  int cpus = 0;               // CPU slots taken
  bool operator==(const Placement&) const = default;
};

// Where one node of a trial with `demand` fits, or nullopt: never on a
// reserved agent, only on agents that run gangs when demand.gang(), and
// only on agents that run pbt segments when demand.segments.
// Does not change `agents`.
std::optional<Placement> place_trial(const std::vector<AgentCapacity>& agents, const Demand& demand);

// Where all `demand.total_nodes()` nodes fit (each demand.node(n)), one per agent, node 0 first; nullopt
// unless all of them do. Does not change `agents`.
std::optional<std::vector<Placement>> place_nodes(const std::vector<AgentCapacity>& agents, const Demand& demand);

// Takes the resources of `p` from `agents` (after place_trial said it fits).
// Nothing gives them back: capacities are rebuilt from the live trials each
// time they are needed (Broker::dispatch), so no count can drift.
void reserve(std::vector<AgentCapacity>& agents, const Placement& p);

// Whether `demand` could ever fit on some agent when the cluster is empty:
// a trial asking for 3 GPUs when no agent has 3 waits, but the user should
// be told.
bool could_ever_fit(const std::vector<AgentCapacity>& agents, const Demand& demand);

struct SweepQueue {
  int64_t sweep_id = 0;      // also the submission order: lower first
  Demand demand;
  int running = 0;
  int max_parallel = 0;      // 0: no limit
  int64_t available = 0;     // trials ready to start (queued + not yet generated)
  int64_t waiting_ms = 0;    // multi-node sweeps: how long its next trial has found no place
};

struct Dispatch {
  int64_t sweep_id = 0;
  Placement placement;                // node 0 (the only one of a one-node trial)
  std::vector<Placement> more_nodes;  // nodes 1 .. N-1 of a multi-node trial
  bool operator==(const Dispatch&) const = default;
};

// A multi-node trial waiting this long has agents reserved for it (see above).
inline constexpr int64_t kGangReserveAfterMs = 30'000;

struct Plan {
  std::vector<Dispatch> starts;
  int64_t reserved_for = 0;           // the sweep whose waiting trial holds reservations; 0: none
  std::vector<std::string> reserved;  // the agents held for it
};

// Plans as many starts as fit now, fairly across sweeps (see above). Pure:
// `agents` is taken by value and the plan already accounts for each start.
Plan plan_dispatch(std::vector<AgentCapacity> agents, std::vector<SweepQueue> sweeps,
                   int64_t reserve_after_ms = kGangReserveAfterMs);

}  // namespace swept::scheduler
