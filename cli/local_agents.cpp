// local_agent_options: see local_agents.h.
#include "cli/local_agents.h"

#include <cstdlib>
#include <string>

#include "agent/gpu_inventory.h"

namespace swept::cli {

namespace {
// How many of `total` the k-th of n gets (the first total % n get one more).
int share(int total, int n, int k) { return total / n + (k < total % n ? 1 : 0); }
}  // namespace

Result<std::vector<agent::AgentOptions>> local_agent_options(const agent::AgentOptions& base, int n) {
  if (n < 1 || n > kMaxLocalAgents)
    return Status::InvalidArgument("--local-agents must be 1 to " + std::to_string(kMaxLocalAgents) + ", not " +
                                   std::to_string(n));
  if (n == 1) return std::vector<agent::AgentOptions>{base};
  const int slots = base.slots > 0 ? base.slots
                                   : agent::default_cpu_slots([](const char* v) {
                                       return static_cast<const char*>(std::getenv(v));
                                     });
  if (slots < n)
    return Status::InvalidArgument("--local-agents " + std::to_string(n) + " needs a CPU slot per agent, and there are " +
                                   std::to_string(slots) + ": give --slots " + std::to_string(n) + " or more");
  auto spec = agent::parse_gpu_spec(base.gpus);
  if (!spec.ok()) return spec.status();
  std::vector<agent::Gpu> found;
  if (spec->kind == agent::GpuSpec::Kind::kAuto) {
    auto gpus = agent::discover_gpus(*spec);
    if (!gpus.ok()) return gpus.status();
    found = std::move(*gpus);
  }
  std::vector<agent::AgentOptions> out;
  size_t next_gpu = 0;
  for (int k = 0; k < n; ++k) {
    agent::AgentOptions o = base;
    o.name = (base.name.empty() ? std::string("local") : base.name) + "-" + std::to_string(k + 1);
    o.workdir = (base.workdir.empty() ? std::string("swept-work") : base.workdir) + "/" + o.name;
    o.slots = share(slots, n, k);
    if (spec->kind == agent::GpuSpec::Kind::kFake) {
      const int count = share(spec->fake_count, n, k);
      o.gpus = count == 0 ? "none" : "fake:" + std::to_string(count) + "x" +
                                         std::to_string(spec->fake_memory_bytes >> 20) + "MiB";
    } else if (spec->kind == agent::GpuSpec::Kind::kAuto) {
      std::vector<std::string> mine;
      for (int g = share(static_cast<int>(found.size()), n, k); g > 0; --g)
        mine.push_back(std::to_string(found[next_gpu++].index));
      o.gpu_allocation = std::move(mine);
    }
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace swept::cli
