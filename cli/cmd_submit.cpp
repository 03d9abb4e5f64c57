// `swept submit FILE`: sends a sweep file (YAML or JSON) to the scheduler and prints the new
// sweep's id on stdout (and nothing else, so scripts can capture it).
// Exit 2 with one line per problem for a bad file, 6 when the scheduler
// cannot be reached.

#include "cli/client_common.h"
#include "cli/command.h"
#include "cli/sweep_file.h"

namespace swept::cli {
namespace {

int run_submit(const std::vector<std::string>& args) {
  ClientFlags flags;
  std::string file;
  po::options_description desc("options");
  desc.add_options()("file", po::value(&file), "the sweep file (YAML or JSON)");
  add_client_flags(desc, flags, /*allow_db=*/false);
  po::positional_options_description pos;
  pos.add("file", 1);
  if (auto rc = parse_flags("submit", "swept submit FILE [--scheduler ADDR]", args, desc, pos)) return *rc;
  if (file.empty()) {
    std::cerr << "swept submit: name the sweep file: swept submit FILE\n";
    return kExitUsage;
  }
  std::optional<std::string> text = read_sweep_file(file);  // says why on failure
  if (!text) return kExitUsage;
  auto client = connect_client(flags);
  if (!client.ok()) return report("submit", client.status());
  auto reply = (*client)->call(protocol::Submit{"", *text, file});
  if (!reply.ok()) return report("submit", reply.status());
  auto* ok = std::get_if<protocol::Submitted>(&*reply);
  if (!ok) return report("submit", Status::Internal("unexpected reply"));
  std::cout << ok->sweep_id << "\n";
  std::cerr << "sweep " << ok->sweep_id << ": "
            << (ok->total_trials ? std::to_string(*ok->total_trials) + " trials" : std::string("unbounded")) << "\n";
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("submit", "send a sweep file to the scheduler; prints the sweep id", run_submit);
}  // namespace swept::cli
