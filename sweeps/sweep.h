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
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>


#include "common/status.h"
#include "sweeps/metric.h"         // Goal, Metric
#include "sweeps/stopping/rule.h"  // stopping::Rule

namespace swept::sweeps {

// One problem (or warning) found in a sweep file. `path` names the field with
// dots ("parameters.lr.min", "run_cap"; "" for the whole file), `message` says
// what was expected and what was found. `line` and `column` (1-based) say
// where the value at `path` starts in the file, when the reader knows (YAML
// always; JSON for syntax errors); 0 when not.
struct Problem {
  std::string path;
  std::string message;
  int line = 0;
  int column = 0;
  std::string ToString() const;  // "parameters.lr.min: expected ... (line 7, column 10)"; no position when line is 0
};

// How one value was read, for `swept expand|validate --explain`: the spelling
// in the file, the value it became (JSON text) and the rule that decided it.
struct Reading {
  std::string path;
  int line = 0, column = 0;
  std::string spelling;  // as written: 1e-5
  std::string value;     // as read: 1e-05
  std::string rule;      // why, in words
};

// Which reader a sweep file's text goes to. kAuto decides by content: text
// whose first character (after blanks) is '{' or '[' is JSON, unless it is not
// valid JSON but reads as a valid sweep in YAML (flow style); anything else is
// YAML (docs/sweep-format.md, "What is read how").
enum class Format { kAuto, kJson, kYaml };

// kBayes, kTpe and kNsga2 choose each trial from the results of earlier ones
// (search/search.h); trial_at draws their trials as random search would.
// `method: custom` has no Method of its own: the parser resolves it to the
// method its engine runs (SweepSpec::engine: optuna -> kTpe, ax -> kBayes,
// wandb -> the file's own method).
// kPbt (population-based training, pbt.h): `population` members drawn as
// random search draws them, which then learn from each other's checkpoints.
enum class Method { kGrid, kRandom, kBayes, kTpe, kNsga2, kPbt };

namespace search {
struct SearchSettings;  // search/search.h
}
// resources.pids when the file says none: room for a data loader's workers
// and a framework's threads, far below what takes a host down.
inline constexpr int64_t kDefaultTrialPids = 4096;
namespace pbt {
struct PbtSettings;  // pbt.h
}
// swept's `resources` key.
// Per node: a trial with `nodes` > 1 takes all of this on each of `nodes`
// different agents (issue 25).
struct Resources {
  int gpus = 0;                      // whole GPUs per node (a gang on one agent)
  double gpu_memory_fraction = 0.0;  // share of one GPU in (0, 1]; 0 = none
  int cpus = 1;                      // CPU slots per node
  int nodes = 1;                     // agents the trial spans, started together (1 to 1024)
  int procs_per_node = 1;            // processes on each node, torchrun's --nproc_per_node (1 to 64)
  // Parameter servers (issue 30): `ps` server processes besides the workers
  // (0 to 64), each taking `cpus` of its own; on the trial's nodes round-robin,
  // or, with `ps_nodes`, each on an extra agent of its own.
  int ps = 0;
  bool ps_nodes = false;
  // Per node, enforced by the agent in the trial's cgroup where the host can
  // (docs/deploy.md, "Trial limits"): the most memory its processes may hold
  // (0: no limit) and the most processes and threads at once.
  int64_t memory_bytes = 0;
  int64_t pids = kDefaultTrialPids;
};

struct ParameterSpace;  // the parsed parameter tree; opaque outside sweeps/

// swept's `warm_start` key (issue 28; sweeps/warm_start.h): the earlier
// trials that seed this sweep, from a sweep in the same database or from a
// file `swept export` wrote. Exactly one of the two is set.
struct WarmStartSource {
  std::optional<int64_t> sweep;     // warm_start.sweep: a sweep id
  std::optional<std::string> file;  // warm_start.file: a path, relative to the sweep file's folder
};

struct SweepSpec {
  std::string name;         // "" when the file gives none
  std::string description;
  Method method = Method::kGrid;
  // The file's `metric`: set for single-objective sweeps only (nullopt with a
  // `metrics:` list, or without a metric).
  std::optional<Metric> metric;
  // Every objective the sweep optimizes: {*metric} for one, the `metrics:`
  // list (two or more) for several; empty = no metric at all.
  std::vector<Metric> objectives;
  // swept's `constraints:`: a trial violating any of them is infeasible
  // (never best, never on the Pareto front). Empty = none.
  std::vector<Constraint> constraints;
  // The file's `scheduler.engine`: "optuna" or "ax" (with `method: custom`,
  // which then runs tpe or bayes), or "wandb" (beside grid, random or bayes,
  // which it keeps); "" without a scheduler block.
  std::string engine;
  std::optional<int64_t> run_cap;
  std::optional<std::string> program;
  std::vector<std::string> command;  // with macros; empty = the default command
  // The early_terminate rule, parsed once here, comparing on the metric's goal;
  // nullopt when the file has none (or one W&B accepts that swept cannot apply: a warning).
  std::optional<stopping::Rule> early_terminate;
  // method bayes or tpe: the searcher's settings (search::parse_search_settings); null otherwise.
  std::shared_ptr<const search::SearchSettings> search;
  // method pbt: the `pbt:` block (pbt.h); null otherwise.
  std::shared_ptr<const pbt::PbtSettings> pbt;
  Resources resources;
  int max_parallel = 0;   // 0 = no limit
  uint64_t seed = 0;      // from the file's `seed`, or 0
  int max_retries = 0;    // extra attempts after a trial is lost
  double timeout_s = 0;   // 0 = no limit
  std::shared_ptr<const ParameterSpace> space;  // never null after parsing
  std::optional<WarmStartSource> warm_start;    // nullopt: the sweep starts from nothing
};

struct ParseOutcome {
  std::optional<SweepSpec> spec;  // set exactly when problems is empty
  std::vector<Problem> problems;
  // What W&B accepts with a warning (an unknown top-level key, a deprecated
  // distribution, ...): the spec is still set. `--strict` treats them as problems.
  std::vector<Problem> warnings;
  std::vector<Reading> readings;  // values whose spelling was read by a rule (--explain)
  Format format = Format::kAuto;  // the reader that read the text (kJson or kYaml)
};

// Documented limits (docs/sweep-format.md, "Limits"). Files beyond them are
// rejected with a problem, before anything large is allocated.
inline constexpr size_t kMaxFileBytes = 1 << 20;         // 1 MiB of text (JSON or YAML)
inline constexpr int kMaxJsonDepth = 64;                 // nested arrays/objects (YAML: sequences/mappings)
inline constexpr int kMaxParameterDepth = 8;             // nested `parameters` blocks
inline constexpr int64_t kMaxGridTrials = 1000000;       // grid product, by arithmetic
inline constexpr size_t kMaxProblems = 100;              // listed before "N more"
inline constexpr int64_t kMaxYamlValues = 100000;        // values copied by YAML aliases (4x: values per file)

// Parses and validates a sweep file's text. Never throws, never aborts; every
// problem found is listed. `format` picks the reader (kAuto: by content).
ParseOutcome parse_sweep(std::string_view text, Format format);
ParseOutcome parse_sweep(std::string_view text);  // Format::kAuto

// The reader kAuto starts with: kJson when the first character after blanks
// is '{' or '[', else kYaml.
Format detect_format(std::string_view text);

// Whether trials are chosen from earlier results (method bayes, tpe or nsga2).
inline bool is_adaptive(Method m) { return m == Method::kBayes || m == Method::kTpe || m == Method::kNsga2; }

// Whether the sweep optimizes several objectives (a `metrics:` list): its
// best trials are a Pareto front (pareto.h), not one trial.
inline bool is_multi_objective(const SweepSpec& s) { return s.objectives.size() > 1; }

// How many trials the sweep produces (grid product, explicit list, run_cap),
// or nullopt when unbounded (random search without run_cap).
std::optional<int64_t> trial_count(const SweepSpec& spec);

// How many parameters the sweep sets per trial (leaves of the parameter tree;
// for explicit trials, the distinct top-level names used).
int parameter_count(const SweepSpec& spec);

// One-line summary for `swept validate`: "grid, 3 parameters, 12 trials",
// "random, 2 parameters, unbounded".
std::string describe(const SweepSpec& spec);

}  // namespace swept::sweeps
