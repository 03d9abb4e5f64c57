// `swept submit FILE [--warm-start ID]`: sends a sweep file (YAML or JSON) to the scheduler and prints the new
// sweep's id on stdout (and nothing else, so scripts can capture it).
// A warm start (docs/sweep-format.md "Warm starts"): --warm-start ID seeds
// the sweep from sweep ID's trials (over the file's warm_start key); a
// warm_start.file is read here and its trials sent with the sweep. What was
// imported and skipped is said on stderr.
// Exit 2 with one line per problem for a bad file or warm start, 6 when the
// scheduler cannot be reached.

#include "cli/client_common.h"
#include "cli/command.h"
#include "cli/sweep_file.h"
#include "cli/warm_file.h"

namespace swept::cli {
namespace {

int run_submit(const std::vector<std::string>& args) {
  ClientFlags flags;
  std::string file;
  int64_t warm_start = 0;
  po::options_description desc("options");
  desc.add_options()("file", po::value(&file), "the sweep file (YAML or JSON)")(
      "warm-start", po::value(&warm_start),
      "seed the sweep with the trials of sweep ID that fit its space (docs/sweep-format.md, Warm starts)");
  add_client_flags(desc, flags, /*allow_db=*/false);
  po::positional_options_description pos;
  pos.add("file", 1);
  if (auto rc = parse_flags("submit", "swept submit FILE [--warm-start ID] [--scheduler ADDR]", args, desc, pos))
    return *rc;
  if (file.empty()) {
    std::cerr << "swept submit: name the sweep file: swept submit FILE\n";
    return kExitUsage;
  }
  std::optional<LoadedSweep> loaded = load_sweep_file(file);  // says why on failure
  if (!loaded) return kExitUsage;
  protocol::Submit submit{"", loaded->text, file};
  if (warm_start != 0) {
    if (warm_start < 0) return report("submit", Status::InvalidArgument("--warm-start: expected a sweep id, found " +
                                                                        std::to_string(warm_start)));
    submit.warm_sweep = warm_start;
  } else {
    auto trials = read_warm_start(file, loaded->spec);
    if (!trials.ok()) return report("submit", trials.status().WithContext(file));
    submit.warm_trials = std::move(*trials);
  }
  auto client = connect_client(flags);
  if (!client.ok()) return report("submit", client.status());
  auto reply = (*client)->call(submit);
  if (!reply.ok()) return report("submit", reply.status());
  auto* ok = std::get_if<protocol::Submitted>(&*reply);
  if (!ok) return report("submit", Status::Internal("unexpected reply"));
  std::cout << ok->sweep_id << "\n";
  std::cerr << "sweep " << ok->sweep_id << ": "
            << (ok->total_trials ? std::to_string(*ok->total_trials) + " trials" : std::string("unbounded")) << "\n";
  if (ok->warm_start) std::cerr << "sweep " << ok->sweep_id << ": " << *ok->warm_start << "\n";
  return kExitOk;
}

}  // namespace
SWEPT_COMMAND("submit", "send a sweep file to the scheduler; prints the sweep id", run_submit);
}  // namespace swept::cli
