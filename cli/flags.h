// Flag parsing shared by every `swept` subcommand: Boost.Program_options with
// `--help`, one usage line, and usage errors as exit 2 (docs/exit-codes.md).
// Header-only so that each subcommand stays one cli/cmd_<name>.cpp file.
#pragma once

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "common/exit_codes.h"

namespace swept::cli {

namespace po = boost::program_options;

// Parses argv with `desc` (+ positional names), adding --help. Returns an exit
// code to return at once (help printed: 0; a usage error: 2), or nullopt to
// go on. `usage` is the command's synopsis, e.g. "swept expand FILE [--limit N]".
inline std::optional<int> parse_flags(const std::string& command, const std::string& usage,
                                      const std::vector<std::string>& args, po::options_description& desc,
                                      const po::positional_options_description& positional) {
  bool help = false;
  desc.add_options()("help,h", po::bool_switch(&help), "show this help");
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(desc).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "swept " << command << ": " << e.what() << "\nusage: " << usage << "\n";
    return kExitUsage;
  }
  if (help) {
    std::cout << "usage: " << usage << "\n\n" << desc << "\n";
    return kExitOk;
  }
  return std::nullopt;
}

}  // namespace swept::cli
