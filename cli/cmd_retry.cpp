// `swept retry SWEEP [--early-stopped]`: requeues the sweep's failed and lost
// trials (their earlier attempts stay in the history); a finished sweep runs
// again until they end. Early-stopped trials stay as they are unless
// --early-stopped asks for them too.
#include "cli/client_common.h"
#include "cli/command.h"

namespace swept::cli {
namespace {

int run_retry(const std::vector<std::string>& args) {
  ClientFlags flags;
  std::string sweep;
  bool early_stopped = false;
  po::options_description desc("options");
  desc.add_options()("sweep", po::value(&sweep), "a sweep id")(
      "early-stopped", po::bool_switch(&early_stopped),
      "also requeue the trials the sweep's early_terminate rule stopped (left alone without it)");
  add_client_flags(desc, flags, false);
  po::positional_options_description pos;
  pos.add("sweep", 1);
  if (auto rc = parse_flags("retry", "swept retry SWEEP [--early-stopped] [--scheduler ADDR]", args, desc, pos)) return *rc;
  auto id = parse_id("SWEEP", sweep);
  if (!id.ok()) return report("retry", id.status());
  auto client = connect_client(flags);
  if (!client.ok()) return report("retry", client.status());
  auto reply = (*client)->call(protocol::Retry{"", *id, early_stopped});
  if (!reply.ok()) return report("retry", reply.status());
  if (auto* d = std::get_if<protocol::Done>(&*reply)) std::cout << d->message << "\n";
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("retry", "requeue a sweep's failed and lost trials (--early-stopped: early-stopped ones too)", run_retry);
}  // namespace swept::cli
