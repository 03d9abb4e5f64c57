// `swept retry SWEEP`: requeues the sweep's failed and lost trials (their earlier
// attempts stay in the history); a finished sweep runs again until they end.
#include "cli/client_common.h"
#include "cli/command.h"

namespace swept::cli {
namespace {

int run_retry(const std::vector<std::string>& args) {
  ClientFlags flags;
  std::string sweep;
  po::options_description desc("options");
  desc.add_options()("sweep", po::value(&sweep), "a sweep id");
  add_client_flags(desc, flags, false);
  po::positional_options_description pos;
  pos.add("sweep", 1);
  if (auto rc = parse_flags("retry", "swept retry SWEEP [--scheduler ADDR]", args, desc, pos)) return *rc;
  auto id = parse_id("SWEEP", sweep);
  if (!id.ok()) return report("retry", id.status());
  auto client = connect_client(flags);
  if (!client.ok()) return report("retry", client.status());
  auto reply = (*client)->call(protocol::Retry{"", *id});
  if (!reply.ok()) return report("retry", reply.status());
  if (auto* d = std::get_if<protocol::Done>(&*reply)) std::cout << d->message << "\n";
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("retry", "requeue a sweep's failed and lost trials", run_retry);
}  // namespace swept::cli
