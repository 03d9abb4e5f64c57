// Reading a sweep file from disk for the subcommands that take one
// (validate, expand, run, submit). sweeps/ reads no files; this is where the
// CLI hands it the text, and where the reader is chosen: by extension (.yaml
// and .yml are YAML, .json is JSON), by content for any other name
// (docs/sweep-format.md, "What is read how").
#pragma once

#include <optional>
#include <string>

#include "sweeps/sweep.h"

namespace swept::cli {

// The reader for a file name: kYaml, kJson, or kAuto (decide by content).
sweeps::Format format_for_path(const std::string& path);

struct LoadOptions {
  bool strict = false;   // warnings are problems (exit 2), for CI
  bool explain = false;  // print how each value with a rule-read spelling was read
};

// Reads FILE (at most sweeps::kMaxFileBytes + 1 bytes, so a huge file is
// refused without being loaded whole) and parses it with the reader its name
// picks. Prints warnings ("FILE: warning: path: ...") and, on problems, one
// line each ("FILE: path: expected ..., found ... (line L, column C)") to
// stderr; --explain lines go to `explain_to`. Returns the spec and the text,
// or nullopt when the file cannot be read or has problems.
struct LoadedSweep {
  sweeps::SweepSpec spec;
  std::string text;
};
std::optional<LoadedSweep> load_sweep_file(const std::string& path, const LoadOptions& options = {},
                                           std::ostream* explain_to = nullptr);

// The checked text of FILE for commands that hand it on (run, submit): as
// load_sweep_file, without the spec.
std::optional<std::string> read_sweep_file(const std::string& path);

}  // namespace swept::cli
