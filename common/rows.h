// The rows of the store's tables, one type per table (issue 24): what the
// writer reads back for the scheduler, what the read model answers the
// dashboard and the CLI, and what the protocol's SWEEPS and TRIALS carry
// (docs/protocol.md), so that a column has one name and one type from
// SQLite to the wire. store/ reads each with one row reader
// (store/rows.h); common/protocol_rows.cpp writes them on the wire.
//
// A row holds every column a reader may ask for; each reader says which it
// fills (a field it does not fill keeps its default). Values are plain:
// copy and compare them like any value.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/states.h"

namespace swept {

// Trials of a sweep per state (common/states.h), indexed by the state.
struct StateCounts {
  std::array<int64_t, kTrialStateCount> n{};
  int64_t& operator[](TrialState s) { return n[index_of(s)]; }
  int64_t operator[](TrialState s) const { return n[index_of(s)]; }
  int64_t total() const {
    int64_t t = 0;
    for (int64_t v : n) t += v;
    return t;
  }
  // Trials in a final state.
  int64_t done() const {
    int64_t t = 0;
    for (const auto& s : kTrialStates)
      if (s.final) t += n[index_of(s.state)];
    return t;
  }
  bool operator==(const StateCounts&) const = default;
};

// A sweep's metric that no trial reports (docs/metrics.md): the number of
// its trials that completed without any trial of the sweep reporting it, and
// the metric names those trials did report (a typo shows as a near miss).
struct MetricMissing {
  int64_t completed = 0;
  std::vector<std::string> reported;
  bool operator==(const MetricMissing&) const = default;
};

// A row of agent_gpus: one GPU of an agent, as its REGISTER offered it.
struct GpuInfo {
  int index = 0;
  std::string uuid;
  std::string name;
  int64_t memory_bytes = 0;
  bool operator==(const GpuInfo&) const = default;
};

// A running trial on an agent, and the GPUs (or share of one) it holds.
struct AgentTrial {
  int64_t trial_id = 0;
  std::vector<int> gpus;
  std::optional<double> gpu_fraction;
  int64_t sweep_id = 0;  // not on the wire
  bool operator==(const AgentTrial&) const = default;
};

// A row of `agents` (store/schema.sql), with its GPUs and what runs there
// (derived from the running trials).
struct AgentRow {
  std::string name;
  std::string host;
  AgentState state = AgentState::kAlive;
  int slots = 0;
  double registered_at = 0;  // not on the wire
  double last_seen = 0;
  std::vector<GpuInfo> gpus;
  std::vector<AgentTrial> running;  // every running trial here, by id
  // Why the scheduler sends it no work (host faults); nullopt when it may
  // have work. Optional on the wire.
  std::optional<std::string> quarantine;
  // The containment mode its last REGISTER named ("cgroup", "subreaper");
  // nullopt when it named none. Optional on the wire.
  std::optional<std::string> containment;
  bool operator==(const AgentRow&) const = default;
};

// A sweep's best trial, as store/reader.h defines "best".
struct BestTrial {
  int64_t trial_id = 0;
  double value = 0;
  nlohmann::json params = nlohmann::json::object();  // nested, as in the sweep file
  bool operator==(const BestTrial&) const = default;
};

// One objective of a sweep with several (a `metrics:` item,
// docs/sweep-format.md): its metric's name and which way is better.
struct Objective {
  std::string name;
  std::string goal;  // minimize | maximize
  bool operator==(const Objective&) const = default;
};

// The Pareto front of a sweep with several objectives, as store/reader.h
// defines it ("Several objectives"): the non-dominated trials among its
// completed, feasible trials with a value of every objective, and the
// hypervolume they dominate.
struct ParetoFront {
  std::vector<Objective> objectives;
  std::vector<int64_t> trial_ids;  // on the front, ascending
  int64_t evaluated = 0;           // completed trials with a value of every objective
  int64_t infeasible = 0;          // of those, the ones that violate a constraint
  std::vector<double> reference;   // the hypervolume's reference point, one value per objective
  double hypervolume = 0;          // dominated by the front, bounded by `reference`
  bool operator==(const ParetoFront&) const = default;
};

// A `constraints:` item: a trial whose final value of `name` falls outside
// [min, max] is infeasible (never best, never on a front).
struct ConstraintBound {
  std::string name;
  std::optional<double> min, max;
  bool operator==(const ConstraintBound&) const = default;
};

// A row of `sweeps` (store/schema.sql), with what the read model derives
// from the sweep's trials.
struct SweepRow {
  int64_t id = 0;
  std::string name;
  std::string method;
  SweepState state = SweepState::kRunning;
  std::optional<std::string> metric_name;
  std::optional<std::string> metric_goal;  // minimize | maximize
  std::string spec;                        // the sweep file as submitted (the writer's reads; not on the wire)
  std::optional<int64_t> total_trials;     // nullopt: unbounded
  int64_t next_index = 0;                  // trials 0..next_index-1 exist (not on the wire)
  double created_at = 0;
  std::optional<double> finished_at;
  // Derived by the read model (not by the writer's reads):
  StateCounts counts;                           // per trial state
  std::optional<BestTrial> best;                // see store/reader.h, "Best"
  std::optional<MetricMissing> metric_missing;  // see store/reader.h, "A metric never reported"
  std::vector<ConstraintBound> constraints;     // the sweep's `constraints:` (optional on the wire)
  std::optional<ParetoFront> front;             // several objectives only (optional on the wire)
  bool operator==(const SweepRow&) const = default;
};

// The early_terminate decision that stopped a trial (store/schema.sql v4,
// trials.stop_*).
struct TrialStop {
  std::string rule;  // hyperband | asha | median
  int64_t at = -1;   // band (iterations), rung or step it judged at
  int64_t step = 0;  // the step of the value judged
  std::optional<double> value, threshold;
  std::string reason;
  double decided_at = 0;
  bool operator==(const TrialStop&) const = default;
};

// One step of a pbt member's parameter schedule (issue 29; store's
// pbt_lineage): from `from_step` on it ran with `params`, resumed from the
// checkpoint of segment `donor_segment` of `donor_trial_id` (none: its own).
// Round 0 is its first parameters.
struct PbtStep {
  int64_t round = 0;
  int64_t from_step = 0;
  std::optional<int64_t> donor_trial_id;
  std::optional<int> donor_segment;
  nlohmann::json params = nlohmann::json::object();
  std::vector<std::string> changes;  // "lr: 0.01 -> 0.012 (x1.2)"
  bool operator==(const PbtStep&) const = default;
};

// A node of a multi-node trial (issue 25): the agent it runs on, its GPUs.
struct TrialNode {
  std::string agent;
  std::vector<int> gpus;
  bool operator==(const TrialNode&) const = default;
};
// The one JSON shape of a trial's nodes, [{"agent": name, "gpus": [...]}, ...],
// node 0 first: trials.nodes, QUERY_TRIALS and the dashboard's API alike.
inline nlohmann::json nodes_json(const std::vector<TrialNode>& nodes) {
  nlohmann::json j = nlohmann::json::array();
  for (const TrialNode& n : nodes) j.push_back({{"agent", n.agent}, {"gpus", n.gpus}});
  return j;
}

// The processes of a multi-node trial's attempt (issue 30; attempts.gang,
// schema 9), as START_TRIAL `gang` gave them out: each worker and parameter
// server with its TF_CONFIG task (role "worker" | "ps", index), the node
// that runs it (0 = node 0, as trials.nodes counts) and its port (0: not
// known, a row recovered from the sweep's file). Nodes 0 .. worker_nodes-1
// run workers; any later node runs servers only (resources.ps_nodes).
// What a restarted scheduler needs to adopt the attempt whole: which nodes
// end the trial (the workers') and which are stopped after them (servers),
// and which ports the attempt holds.
struct StoredGangProcess {
  std::string role;  // "worker" | "ps"
  int index = 0;     // TF_CONFIG task index (a worker's RANK)
  int node = 0;
  int port = 0;
  bool operator==(const StoredGangProcess&) const = default;
};
struct GangRecord {
  int worker_nodes = 1;
  int master_port = 0;  // the rendezvous (MASTER_PORT) on node 0; 0: not known
  std::vector<StoredGangProcess> processes;
  std::vector<int> slots;  // CPU slots each node holds, node 0 first (placement's; 0 on a GPU node)
  bool has_servers() const {
    for (const StoredGangProcess& p : processes)
      if (p.role == "ps") return true;
    return false;
  }
  bool operator==(const GangRecord&) const = default;
};

// A row of `trials` (store/schema.sql), with its latest metric values.
struct TrialRow {
  int64_t id = 0;
  int64_t sweep_id = 0;
  int64_t index = 0;  // trials.idx: its place in the sweep
  TrialState state = TrialState::kQueued;
  int attempts = 0;
  std::optional<std::string> agent;  // where its current (or last) attempt runs
  std::vector<int> gpus;
  std::optional<double> gpu_fraction;
  std::optional<int> exit_code;
  std::optional<std::string> reason;
  std::optional<double> metric_value;  // the sweep's metric (trials.metric_value)
  nlohmann::json params = nlohmann::json::object();  // nested, as in the sweep file
  std::vector<std::string> command;                  // the argv, macros expanded
  std::optional<double> started_at;  // set once its current attempt reported TRIAL_STARTED
  std::optional<double> ended_at;
  // Filled by the readers that ask for them:
  std::map<std::string, double> latest;  // the latest value of each metric (trial_latest)
  // method bayes/tpe: the model state that chose its params
  // (search::ModelState::to_json); null for grid and random trials.
  nlohmann::json suggestion;
  std::optional<TrialStop> stop;
  // A multi-node trial's nodes, node 0 (agent, gpus above) first
  // (trials.nodes, schema 7); empty for a one-node trial.
  std::vector<TrialNode> nodes;
  // A sweep with constraints: for a completed trial, whether its final values
  // satisfy every one (a metric it never reported violates), and the names of
  // those it violates; nullopt otherwise (store/reader.h, "Constraints").
  // Optional on the wire.
  std::optional<bool> feasible;
  std::vector<std::string> violated;
  // A pbt member's parameter schedule, by round (pbt_lineage, schema 8);
  // empty for other trials.
  std::vector<PbtStep> schedule;
  // Why the row could not be read whole (the dashboard shows it; the
  // scheduler's reads refuse such a row with Corruption instead).
  std::optional<std::string> damaged;
  bool operator==(const TrialRow&) const = default;
};

// A trial the user stopped whose process has not ended yet (its grace to
// stop in): `stopped` in the store, not ended; shown as "stopping" (issue 26).
inline bool stopping(const TrialRow& r) {
  return r.state == TrialState::kStopped && !r.ended_at && r.attempts > 0;
}

}  // namespace swept
