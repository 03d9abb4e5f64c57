// `swept keygen --out PREFIX`: a CurveZMQ key pair for a scheduler, an agent
// or a client (docs/deploy.md). PREFIX.key is the secret (mode 0600),
// PREFIX.pub the public key to copy into the scheduler's --authorized
// folder (agents/ or clients/) or, for the scheduler's own key, to give to
// every agent and client as --scheduler-pub. Never overwrites a key.
#include "cli/client_common.h"
#include "cli/command.h"
#include "common/curvezmq.h"

namespace swept::cli {
namespace {

int run_keygen(const std::vector<std::string>& args) {
  std::string prefix;
  po::options_description desc("options");
  desc.add_options()("out", po::value(&prefix), "write PREFIX.key (secret, mode 0600) and PREFIX.pub (public)");
  po::positional_options_description pos;
  if (auto rc = parse_flags("keygen", "swept keygen --out PREFIX", args, desc, pos)) return *rc;
  if (prefix.empty()) {
    std::cerr << "swept keygen: --out PREFIX is required (e.g. --out ~/.swept/alice writes alice.key and alice.pub)\n";
    return kExitUsage;
  }
  auto keys = curvezmq::generate();
  if (!keys.ok()) return report("keygen", keys.status());
  if (Status s = curvezmq::write_key_files(prefix, *keys); !s.ok()) return report("keygen", s);
  std::cout << "wrote " << prefix << ".key (secret: keep it private) and " << prefix << ".pub (public)\n";
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("keygen", "make a CURVE key pair (PREFIX.key, PREFIX.pub) for a scheduler, agent or client", run_keygen);
}  // namespace swept::cli
