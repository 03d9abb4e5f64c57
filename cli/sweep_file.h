// Reading a sweep file from disk for the subcommands that take one
// (validate, expand). sweeps/ reads no files; this is where the CLI hands it
// the text.
#pragma once

#include <optional>
#include <string>

#include "sweeps/sweep.h"

namespace swept::cli {

// The file's text, read up to sweeps::kMaxFileBytes + 1 bytes so that a huge
// file is refused by the parser without being loaded whole. On failure prints
// why (naming the file) to stderr and returns nullopt.
std::optional<std::string> read_sweep_file(const std::string& path);

// Reads and parses FILE; on problems prints one line each ("FILE: path:
// expected ..., found ...") to stderr and returns nullopt.
std::optional<sweeps::SweepSpec> load_sweep_file(const std::string& path);

}  // namespace swept::cli
