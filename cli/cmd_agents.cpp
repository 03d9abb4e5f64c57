// `swept agents [--json]`: the hosts that registered, their GPUs, and which
// trial runs where (a whole GPU, or a share of one).
#include <map>

#include "cli/client_common.h"
#include "cli/command.h"

namespace swept::cli {
namespace {

int run_agents(const std::vector<std::string>& args) {
  ClientFlags flags;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()("json", po::bool_switch(&json), "print JSON");
  add_client_flags(desc, flags, true);
  po::positional_options_description pos;
  if (auto rc = parse_flags("agents", "swept agents [--json] [--scheduler ADDR | --db FILE]", args, desc, pos))
    return *rc;
  auto src = ResultSource::open(flags);
  if (!src.ok()) return report("agents", src.status());
  auto agents = src->agents();
  if (!agents.ok()) return report("agents", agents.status());
  if (json) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : *agents) a.push_back(protocol::to_json(x));
    std::cout << a.dump(2) << "\n";
    return kExitOk;
  }
  if (agents->empty()) {
    std::cout << "no agents have registered (start one: swept agent --scheduler ADDR)\n";
    return kExitOk;
  }
  for (const auto& a : *agents) {
    int cpu_trials = 0;
    std::map<int, std::string> on_gpu;
    for (const auto& r : a.running) {
      if (r.gpus.empty()) ++cpu_trials;
      for (int g : r.gpus) {
        std::string& s = on_gpu[g];
        s += (s.empty() ? "" : ", ") + std::string("trial ") + std::to_string(r.trial_id) +
             (r.gpu_fraction ? " (" + fmt_num(*r.gpu_fraction) + ")" : "");
      }
    }
    std::cout << terminal_safe(a.name) << " (" << terminal_safe(a.host) << "): " << name(a.state) << ", " << a.running.size() << " running, "
              << cpu_trials << "/" << a.slots << " CPU slots used\n";
    for (const auto& g : a.gpus)
      std::cout << "  GPU " << g.index << " " << terminal_safe(g.name) << " " << fmt_num(double(g.memory_bytes) / (1 << 30))
                << " GiB: " << (on_gpu.count(g.index) ? on_gpu[g.index] : std::string("free")) << "\n";
  }
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("agents", "list agents, their GPUs and what runs where", run_agents);
}  // namespace swept::cli
