// The registry of `swept` subcommands.
//
// Each subcommand lives in its own cli/cmd_*.cpp and registers itself with
// SWEPT_COMMAND; main.cpp dispatches on the first argument. A subcommand gets
// the arguments after its name, parses them with Boost.Program_options, and
// returns an exit code from common/exit_codes.h. It must not throw: main.cpp
// catches what escapes, but only to report an internal error (exit 70).
#pragma once

#include <string>
#include <vector>

namespace swept::cli {

using CommandFn = int (*)(const std::vector<std::string>& args);

struct CommandInfo {
  std::string name;
  std::string summary;  // one line for `swept --help`
  CommandFn run;
};

// All registered subcommands, sorted by name.
const std::vector<CommandInfo>& commands();

struct Registrar {
  Registrar(const char* name, const char* summary, CommandFn fn);
};

}  // namespace swept::cli

#define SWEPT_CLI_CONCAT2(a, b) a##b
#define SWEPT_CLI_CONCAT(a, b) SWEPT_CLI_CONCAT2(a, b)
#define SWEPT_COMMAND(name, summary, fn) \
  static ::swept::cli::Registrar SWEPT_CLI_CONCAT(swept_registrar_, __LINE__)(name, summary, fn)
