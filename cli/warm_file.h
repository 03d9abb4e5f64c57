// Reading a warm start's file (docs/sweep-format.md "Warm starts"): the CSV
// or JSON that `swept export` writes, turned into the earlier trials a
// sweep is offered. sweeps/ reads no files; the CLI reads this one at the
// edge (submit, run, validate) and sends its trials with SUBMIT.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/protocol.h"
#include "common/status.h"
#include "sweeps/sweep.h"

namespace swept::cli {

// Where warm_start.file points: as written when absolute, else relative to
// the folder of the sweep file that names it.
std::string warm_file_path(const std::string& sweep_file, const std::string& file);

// The trials of an export file for a sweep whose metric is `metric`. JSON
// (by a .json name, or text starting with '['): an array of the protocol's
// trial objects. CSV otherwise: the header's `state`, `param.NAME` and
// `metric.NAME` columns, RFC 4180 quoting. A trial's value is its value of
// `metric`, only for a completed (or imported) trial; a CSV cell is read as
// a JSON number or true/false/null when it spells one, else as text.
// Errors: InvalidArgument starting "warm_start.file: " and naming the file:
// it cannot be read, is neither form, or holds no value of `metric` at all.
Result<std::vector<protocol::WarmTrial>> read_warm_file(const std::string& path, const std::string& metric);

// The trials the sweep's warm_start.file names (nullopt when it names none),
// as read_warm_file reads them; `sweep_file` is the sweep's own path.
Result<std::optional<std::vector<protocol::WarmTrial>>> read_warm_start(const std::string& sweep_file,
                                                                        const sweeps::SweepSpec& spec);

}  // namespace swept::cli
