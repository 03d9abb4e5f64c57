// `swept validate FILE [--strict] [--explain]`: checks a sweep file (YAML or
// JSON) against docs/sweep-format.md. Exit 0 with a one-line summary (and a
// line per warning on stderr), or exit 2 with one line per problem
// ("FILE: path: expected ..., found ... (line L, column C)"). --strict makes
// every warning a problem (for CI); --explain prints how each value whose
// spelling a rule decided was read ("1e-5 read as 1e-05"). Reads at most
// kMaxFileBytes + 1 bytes, so a huge file is refused without being loaded.
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
  LoadOptions options;
  po::options_description desc(
      "Checks a sweep file (docs/sweep-format.md). Prints a one-line summary and exits 0,\n"
      "or prints one line per problem and exits 2. Warnings (what W&B accepts with a\n"
      "warning) go to stderr and do not change the exit code, unless --strict.\n\noptions");
  desc.add_options()("file", po::value(&path), "the sweep file (.yaml, .yml or .json; otherwise by content)")(
      "strict", po::bool_switch(&options.strict), "treat every warning as a problem (exit 2)")(
      "explain", po::bool_switch(&options.explain), "show how each value whose spelling a rule decided was read");
  po::positional_options_description positional;
  positional.add("file", 1);
  if (auto rc = parse_flags("validate", "swept validate FILE [--strict] [--explain]", args, desc, positional)) return *rc;
  if (path.empty()) {
    std::cerr << "swept validate: expected a sweep FILE; run 'swept validate --help'\n";
    return kExitUsage;
  }
  auto loaded = load_sweep_file(path, options, &std::cout);
  if (!loaded) return kExitUsage;
  std::cout << path << ": ok: " << sweeps::describe(loaded->spec) << "\n";
  return kExitOk;
}

}  // namespace

SWEPT_COMMAND("validate", "check a sweep file and summarise it", run_validate);

}  // namespace swept::cli
