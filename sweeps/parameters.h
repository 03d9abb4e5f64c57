// The `parameters` block of a sweep file: each parameter's settings -> a Leaf
// (space.h), checked against docs/sweep-format.md. Internal to sweeps/;
// parse.cpp calls parse_block for the whole block.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweeps/checks.h"
#include "sweeps/space.h"

namespace swept::sweeps {

// W&B's rule for parameter names: a letter or '_', then letters, digits, '_', '.', '-'.
bool valid_parameter_name(const std::string& name);

// Checks a parameter name at `path`: W&B's rule holds, or the name is still
// one word a command line carries safely (printable ASCII, no '=', quotes,
// '$' or '\\', not starting with '-'), which is a warning: W&B's schema
// refuses it, its agent runs it (LightningCLI-style "model/lr"). Otherwise a
// problem, and false.
bool check_parameter_name(Checker& ck, const std::string& name, const std::string& path);

// Whether a grid (or sampling without replacement) can enumerate it.
bool is_gridable(Distribution d);

// Walks a `parameters` block at `path`; appends leaves in sorted, depth-first
// order (space.h's invariant). `depth` is 1 for the top block.
void parse_block(Checker& ck, const nlohmann::json& block, const std::string& path, const std::vector<std::string>& prefix,
                 int depth, std::vector<Leaf>& leaves);

// Parses one parameter's settings into `leaf` (names, dotted, stream already
// set). Returns false when problems were recorded.
bool parse_leaf(Checker& ck, const nlohmann::json& config, const std::string& path, Leaf& leaf);

// The grid product with overflow caught; nullopt (and a problem) past kMaxGridTrials.
std::optional<std::vector<int64_t>> grid_radix_checked(Checker& ck, const std::vector<Leaf>& leaves, const std::string& why);

}  // namespace swept::sweeps
