// `swept validate FILE`: checks a sweep file against docs/sweep-format.md.
// Exit 0 with a one-line summary, or exit 2 with one line per problem
// ("FILE: path: expected ..., found ..."). Reads at most kMaxFileBytes + 1
// bytes, so a huge file is refused without being loaded.
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/sweep_file.h"
#include "common/exit_codes.h"
#include "sweeps/sweep.h"

namespace swept::cli {
namespace {

int run_validate(const std::vector<std::string>& args) {
  std::string path;
  po::options_description desc(
      "Checks a sweep file (docs/sweep-format.md). Prints a one-line summary and exits 0,\n"
      "or prints one line per problem and exits 2.\n\noptions");
  desc.add_options()("file", po::value(&path), "the sweep file (JSON)");
  po::positional_options_description positional;
  positional.add("file", 1);
  if (auto rc = parse_flags("validate", "swept validate FILE", args, desc, positional)) return *rc;
  if (path.empty()) {
    std::cerr << "swept validate: expected a sweep FILE; run 'swept validate --help'\n";
    return kExitUsage;
  }
  auto spec = load_sweep_file(path);
  if (!spec) return kExitUsage;
  std::cout << path << ": ok: " << sweeps::describe(*spec) << "\n";
  return kExitOk;
}

}  // namespace

SWEPT_COMMAND("validate", "check a sweep file and summarise it", run_validate);

}  // namespace swept::cli
