// `swept run --local-agents N`: the machine shared out between N agents in
// one process, so that a multi-node sweep can be tried on one machine (its
// ranks then meet on loopback). Each agent gets its own name (local-1 ..
// local-N), its own work directory under --workdir, and its share of the CPU
// slots and GPUs: with --gpus auto the GPUs found are dealt out in index
// order, with fake:K the K fake GPUs; the first agents get one more when
// they do not divide evenly.
// Errors: InvalidArgument when N is out of range or there is not one slot
// per agent. Thread safety: pure but for GPU discovery (NVML).
#pragma once

#include <vector>

#include "agent/agent.h"
#include "common/status.h"

namespace swept::cli {

inline constexpr int kMaxLocalAgents = 64;

// The options of each of `n` agents, from the one agent `base` describes
// (base.slots 0: the CPUs this process may use).
Result<std::vector<agent::AgentOptions>> local_agent_options(const agent::AgentOptions& base, int n);

}  // namespace swept::cli
