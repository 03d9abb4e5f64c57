// swept: one command, many subcommands (cli/cmd_*.cpp). This file only
// dispatches; each subcommand owns its flags and its help.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/exit_codes.h"
#include "common/log.h"

#ifndef SWEPT_VERSION
#define SWEPT_VERSION "0.0.0"
#endif

namespace {

void print_usage(std::ostream& out) {
  out << "swept " << SWEPT_VERSION << ": hyperparameter sweeps on GPU clusters\n\n"
      << "usage: swept <command> [options]    (swept <command> --help for its options)\n\n"
      << "commands:\n";
  for (const auto& c : swept::cli::commands()) {
    out << "  " << c.name << std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ') << c.summary << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  swept::log::set_program("swept");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage(std::cerr);
    return swept::kExitUsage;
  }
  const std::string& name = args[0];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(std::cout);
    return swept::kExitOk;
  }
  if (name == "--version" || name == "version") {
    std::cout << "swept " << SWEPT_VERSION << "\n";
    return swept::kExitOk;
  }
  for (const auto& c : swept::cli::commands()) {
    if (c.name != name) continue;
    try {
      return c.run(std::vector<std::string>(args.begin() + 1, args.end()));
    } catch (const std::exception& e) {
      std::cerr << "swept " << name << ": internal error: " << e.what() << "\n";
      return swept::kExitInternal;
    }
  }
  std::cerr << "swept: unknown command '" << name << "'; run 'swept --help' for the list\n";
  return swept::kExitUsage;
}
