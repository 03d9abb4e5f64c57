// `swept agents [--all] [--json]`: the hosts that registered, their GPUs,
// which trial runs where (a whole GPU, or a share of one), how each keeps its
// trials' processes together (containment: cgroup or subreaper, as its
// REGISTER said) and which are quarantined; live agents only unless --all.
// `swept agents --release NAME` lifts an agent's quarantine
// (docs/protocol.md, "Host faults and quarantine").
#include <map>

#include "cli/client_common.h"
#include "cli/command.h"

namespace swept::cli {
namespace {

int run_agents(const std::vector<std::string>& args) {
  ClientFlags flags;
  bool json = false, all = false;
  std::string release;
  po::options_description desc("options");
  desc.add_options()("json", po::bool_switch(&json), "print JSON")(
      "all", po::bool_switch(&all), "every agent the database keeps, not only live ones")(
      "release", po::value(&release), "lift the quarantine of agent NAME (needs the scheduler)");
  add_client_flags(desc, flags, true);
  po::positional_options_description pos;
  if (auto rc = parse_flags("agents",
                            "swept agents [--all] [--json] [--scheduler ADDR | --db FILE] | swept agents --release NAME",
                            args, desc, pos))
    return *rc;
  if (!release.empty()) {
    if (!flags.db.empty()) {
      std::cerr << "swept agents: --release asks the scheduler; it cannot be used with --db\n";
      return kExitUsage;
    }
    auto client = connect_client(flags);
    if (!client.ok()) return report("agents", client.status());
    auto reply = (*client)->call(protocol::ReleaseAgent{"", release});
    if (!reply.ok()) return report("agents", reply.status());
    if (auto* d = std::get_if<protocol::Done>(&*reply)) std::cout << terminal_safe(d->message) << "\n";
    return kExitOk;
  }
  auto src = ResultSource::open(flags);
  if (!src.ok()) return report("agents", src.status());
  auto agents = src->agents(all);
  if (!agents.ok()) return report("agents", agents.status());
  if (json) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : *agents) a.push_back(protocol::to_json(x));
    std::cout << a.dump(2) << "\n";
    return kExitOk;
  }
  if (agents->empty()) {
    std::cout << (all ? "no agents have registered (start one: swept agent --scheduler ADDR)\n"
                      : "no live agents (swept agents --all shows those gone; start one: swept agent --scheduler ADDR)\n");
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
              << cpu_trials << "/" << a.slots << " CPU slots used"
              << (a.containment ? ", containment: " + terminal_safe(*a.containment) : std::string()) << "\n";
    if (a.quarantine)
      std::cout << "  quarantined: " << terminal_safe(*a.quarantine) << " (swept agents --release "
                << terminal_safe(a.name) << ")\n";
    for (const auto& g : a.gpus)
      std::cout << "  GPU " << g.index << " " << terminal_safe(g.name) << " " << fmt_num(double(g.memory_bytes) / (1 << 30))
                << " GiB: " << (on_gpu.count(g.index) ? on_gpu[g.index] : std::string("free")) << "\n";
  }
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("agents", "list agents, their GPUs and what runs where", run_agents);
}  // namespace swept::cli
