// sweeps: a sweep file goes in, typed values come out.
//
// This is the public contract of the sweeps library (docs/sweep-format.md is
// the user-facing one). It is pure: no sockets, no SQLite, no files, no clock,
// no threads. Everything here is deterministic in its arguments, so the same
// file and seed give the same trials on any machine, and a restarted scheduler
// can recompute trial `i` from (spec, i) alone.
// Thread safety: all functions are pure; a SweepSpec is an immutable value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace swept::sweeps {

// One problem found in a sweep file. `path` names the field with dots
// ("parameters.lr.min", "run_cap"; "" for the whole file), `message` says what
// was expected and what was found.
struct Problem {
  std::string path;
  std::string message;
  std::string ToString() const;  // "parameters.lr.min: expected ..."
};

enum class Method { kGrid, kRandom };
enum class Goal { kMinimize, kMaximize };

struct Metric {
  std::string name;
  Goal goal = Goal::kMinimize;
};

// swept's `resources` key.
struct Resources {
  int gpus = 0;                      // whole GPUs per trial (a gang on one agent)
  double gpu_memory_fraction = 0.0;  // share of one GPU in (0, 1]; 0 = none
  int cpus = 1;                      // CPU slots per trial
};

struct ParameterSpace;  // the parsed parameter tree; opaque outside sweeps/

struct SweepSpec {
  std::string name;         // "" when the file gives none
  std::string description;
  Method method = Method::kGrid;
  std::optional<Metric> metric;
  std::optional<int64_t> run_cap;
  std::optional<std::string> program;
  std::vector<std::string> command;  // with macros; empty = the default command
  nlohmann::json early_terminate;    // validated, not yet acted on; null when absent
  Resources resources;
  int max_parallel = 0;   // 0 = no limit
  uint64_t seed = 0;      // from the file's `seed`, or 0
  int max_retries = 0;    // extra attempts after a trial is lost
  double timeout_s = 0;   // 0 = no limit
  std::shared_ptr<const ParameterSpace> space;  // never null after parsing
};

struct ParseOutcome {
  std::optional<SweepSpec> spec;  // set exactly when problems is empty
  std::vector<Problem> problems;
};

// Documented limits (docs/sweep-format.md, "Limits"). Files beyond them are
// rejected with a problem, before anything large is allocated.
inline constexpr size_t kMaxFileBytes = 1 << 20;         // 1 MiB of JSON text
inline constexpr int kMaxJsonDepth = 64;                 // nested arrays/objects
inline constexpr int kMaxParameterDepth = 8;             // nested `parameters` blocks
inline constexpr int64_t kMaxGridTrials = 1000000;       // grid product, by arithmetic
inline constexpr size_t kMaxProblems = 100;              // listed before "N more"

// Parses and validates a sweep file's text (JSON). Never throws, never aborts;
// every problem found is listed.
ParseOutcome parse_sweep(std::string_view text);

// How many trials the sweep produces (grid product, explicit list, run_cap),
// or nullopt when unbounded (random search without run_cap).
std::optional<int64_t> trial_count(const SweepSpec& spec);

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
  std::string args_json_file = "swept-params.json";  // ${args_json_file}
};

// Expands the sweep's command (or the default `swept-train ${args}`) for one
// trial into an argv. Errors: an unset ${envvar:NAME}, an unknown macro.
Result<std::vector<std::string>> build_command(const SweepSpec& spec, const nlohmann::json& params,
                                               const CommandContext& context);

// How many parameters the sweep sets per trial (leaves of the parameter tree;
// for explicit trials, the distinct top-level names used).
int parameter_count(const SweepSpec& spec);

// One-line summary for `swept validate`: "grid, 3 parameters, 12 trials",
// "random, 2 parameters, unbounded".
std::string describe(const SweepSpec& spec);

// The first trial, in the sweep's own order, whose parameter values match none
// of `tried` (each tried run's params, nested as in Trial::params), following
// W&B's grid rule: a whole-number float equals the integer, `true` is not `1`,
// objects compare regardless of key order, and an object value matches a run
// whose object has extra keys (keys injected by the training code). nullopt
// when every trial has been tried, or when trial_count(spec) is unbounded.
// Random search (with replacement) draws independently, so there the answer
// is simply the trial at index tried.size().
std::optional<Trial> next_untried_trial(const SweepSpec& spec, const std::vector<nlohmann::json>& tried);

// The text of ${args_json} and of the file ${args_json_file} names: the params
// as Python's json.dumps writes them (", " and ": " separators, ASCII only), so
// scripts written for W&B read the same text. The launcher writes this file.
std::string args_json(const nlohmann::json& params);

}  // namespace swept::sweeps
