// Internal to the parser: the keys of several objectives (issue 28), apart
// from parse.cpp. `metrics:` (W&B's list, two or more), `constraints:`
// (swept's), `scheduler:` with `method: custom` (W&B's engines), and the
// refusals that go with them. docs/sweep-format.md, "Several objectives", is
// the user's contract.
// Thread safety: pure functions.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "sweeps/checks.h"
#include "sweeps/sweep.h"

namespace swept::sweeps {

// For `method: custom`: the whole file with `method` replaced by the method
// its engine runs (optuna -> "tpe", ax -> "bayes"), for parse_method to read
// as if written so; nullopt when there is no usable engine (the problem is
// parse_objectives'). Records nothing.
std::optional<nlohmann::json> custom_method_view(const nlohmann::json& root);

// metrics, constraints and scheduler, after parse_method and parse_metric:
// fills spec.objectives (for a `metrics:` list), spec.constraints and
// spec.engine, and records every problem with its path (W&B's rules on
// metric/metrics/method/scheduler/controller/early_terminate, swept's
// refusal of the Python hooks source/optimizer/search_space).
void parse_objectives(Checker& ck, const nlohmann::json& root, SweepSpec& spec);

}  // namespace swept::sweeps
