// The trials a sweep describes, and the command each runs: one trial's
// parameter values (nested as in the sweep file, any JSON value a W&B
// sweep file allows: a categorical value may be a list or an object), the
// trial at an index of a grid or random sweep, and the argv and the
// parameter file's text that the command macros expand to. Pure.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/status.h"
#include "sweeps/sweep.h"

namespace swept::sweeps {

// One trial's parameter values, nested as in the sweep file:
// {"lr": 0.1, "optimizer": {"name": "adam", "beta1": 0.9}}.
struct Trial {
  int64_t index = 0;
  nlohmann::json params;
};

// The trial at `index`, deterministic in (spec, spec.seed, index).
// Precondition: 0 <= index < trial_count(spec) when that is bounded.
Trial trial_at(const SweepSpec& spec, int64_t index);

// What the command macros may read from the machine that runs the trial.
struct CommandContext {
  // Looks up ${envvar:NAME}; nullopt when unset.
  std::function<std::optional<std::string>(const std::string&)> getenv;
  std::string env = "/usr/bin/env";            // ${env}
  std::string interpreter = "python3";         // ${interpreter}
  std::string args_json_file{protocol::kParamsFileName};  // ${args_json_file}
};

// Expands the sweep's command (or the default `swept-train ${args}`) for one
// trial into an argv. Errors: an unset ${envvar:NAME}, ${program} without a program.
// A whole element ${unknown} expands to nothing, as W&B's agent does.
Result<std::vector<std::string>> build_command(const SweepSpec& spec, const nlohmann::json& params,
                                               const CommandContext& context);

// The text of ${args_json} and of the file ${args_json_file} names: the params
// as Python's json.dumps writes them (", " and ": " separators, ASCII only), so
// scripts written for W&B read the same text. The launcher writes this file.
std::string args_json(const nlohmann::json& params);

}  // namespace swept::sweeps
