// `swept validate FILE`: checks a sweep file against docs/sweep-format.md.
// Exit 0 with a one-line summary, or exit 2 with one line per problem
// ("FILE: path: expected ..., found ..."). Reads at most kMaxFileBytes + 1
// bytes, so a huge file is refused without being loaded.
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/command.h"
#include "common/exit_codes.h"
#include "sweeps/sweep.h"

namespace swept::cli {

// Reads a sweep file for validate/expand; on failure prints why and returns
// nullopt. Shared by cmd_expand.cpp (declared there).
std::optional<std::string> read_sweep_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << path << ": cannot open the file (does it exist, and may you read it?)\n";
    return std::nullopt;
  }
  std::string text(sweeps::kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    std::cerr << path << ": cannot read the file (is it a directory?)\n";
    return std::nullopt;
  }
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// Parses FILE and prints its problems; nullopt when there were any.
std::optional<sweeps::SweepSpec> load_sweep_file(const std::string& path) {
  auto text = read_sweep_file(path);
  if (!text) return std::nullopt;
  sweeps::ParseOutcome outcome = sweeps::parse_sweep(*text);
  if (!outcome.spec) {
    for (const auto& p : outcome.problems) std::cerr << path << ": " << p.ToString() << "\n";
    return std::nullopt;
  }
  return std::move(outcome.spec);
}

namespace {

int run_validate(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  po::options_description visible("usage: swept validate FILE\n\nChecks a sweep file (docs/sweep-format.md). Prints a "
                                  "one-line summary and exits 0,\nor prints one line per problem and exits 2.\n\noptions");
  visible.add_options()("help,h", "show this help");
  po::options_description all;
  all.add(visible).add_options()("file", po::value<std::string>(), "sweep file");
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "swept validate: " << e.what() << "; run 'swept validate --help'\n";
    return kExitUsage;
  }
  if (vm.count("help")) {
    std::cout << visible << "\n";
    return kExitOk;
  }
  if (!vm.count("file")) {
    std::cerr << "swept validate: expected a sweep FILE; run 'swept validate --help'\n";
    return kExitUsage;
  }
  const std::string path = vm["file"].as<std::string>();
  auto spec = load_sweep_file(path);
  if (!spec) return kExitUsage;
  std::cout << path << ": ok: " << sweeps::describe(*spec) << "\n";
  return kExitOk;
}

}  // namespace

SWEPT_COMMAND("validate", "check a sweep file and summarise it", run_validate);

}  // namespace swept::cli
