// `swept expand FILE [--limit N] [--seed S] [--explain]`: prints the trials a
// sweep file (YAML or JSON) describes, one JSON object per line:
//   {"index":0,"params":{...},"command":["swept-train","--lr=0.1"]}
// params keep the file's nesting; command is the argv after macro expansion
// on this machine (its environment for ${envvar:NAME}). An unbounded sweep
// (random without run_cap) needs --limit; otherwise the first 10 are shown.
// --explain prints to stderr how each value whose spelling a rule decided was
// read (stdout stays one JSON object per line).
// method bayes/tpe: only the startup trials (random, chosen before the model
// has results: the first n_startup_trials) can be listed before the sweep
// runs; those are printed exactly as the scheduler will start them, and
// stderr says that the later trials depend on results (exit 0).
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/sweep_file.h"
#include "common/exit_codes.h"
#include "sweeps/search/search.h"
#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace swept::cli {

namespace {

constexpr int64_t kDefaultUnboundedLimit = 10;

// Trial i's params: trial_at, or for bayes/tpe the searcher's suggestion with
// no history (a startup trial, as the scheduler draws it).
nlohmann::json trial_params(const sweeps::SweepSpec& spec, int64_t i) {
  if (!sweeps::is_adaptive(spec.method)) return sweeps::trial_at(spec, i).params;
  auto s = sweeps::search::suggest(*spec.search, spec, {}, i);
  return s.ok() ? std::move(s->params) : nlohmann::json::object();
}

int run_expand(const std::vector<std::string>& args) {
  std::string path;
  std::optional<int64_t> limit;
  std::optional<uint64_t> seed;
  LoadOptions options;
  po::options_description desc(
      "Prints the trials of a sweep file, one JSON object per line:\n"
      "{\"index\": i, \"params\": {...}, \"command\": [...]}.\n\noptions");
  desc.add_options()("file", po::value(&path), "the sweep file (.yaml, .yml or .json; otherwise by content)")(
      "limit", po::value<int64_t>()->notifier([&](int64_t v) { limit = v; }),
      "print at most N trials (default: all; 10 for an unbounded random search)")(
      "seed", po::value<uint64_t>()->notifier([&](uint64_t v) { seed = v; }), "use seed S instead of the file's seed")(
      "explain", po::bool_switch(&options.explain), "show (on stderr) how each value whose spelling a rule decided was read");
  po::positional_options_description positional;
  positional.add("file", 1);
  if (auto rc = parse_flags("expand", "swept expand FILE [--limit N] [--seed S] [--explain]", args, desc, positional)) return *rc;
  if (path.empty()) {
    std::cerr << "swept expand: expected a sweep FILE; run 'swept expand --help'\n";
    return kExitUsage;
  }
  if (limit && *limit < 0) {
    std::cerr << "swept expand: --limit: expected a count >= 0, found " << *limit << "\n";
    return kExitUsage;
  }
  auto loaded = load_sweep_file(path, options, &std::cerr);
  if (!loaded) return kExitUsage;
  sweeps::SweepSpec* spec = &loaded->spec;
  if (seed) spec->seed = *seed;

  std::optional<int64_t> count = sweeps::trial_count(*spec);
  const bool adaptive = sweeps::is_adaptive(spec->method);
  int64_t n;
  if (adaptive) {
    const auto& s = *spec->search;
    const int64_t startup = sweeps::search::startup_trials(s);
    const int64_t shown = count ? std::min(startup, *count) : startup;
    n = limit ? std::min(*limit, shown) : shown;
    std::cerr << path << ": method " << sweeps::search::method_name(s.method)
              << " chooses each trial from the results of earlier ones: showing the " << shown
              << " random startup trials (n_startup_trials), exactly as the scheduler starts them; the trials after "
                 "them depend on results and are known only when the sweep runs\n";
  } else if (count) {
    n = limit ? std::min(*limit, *count) : *count;
  } else {
    n = limit ? *limit : kDefaultUnboundedLimit;
    if (!limit) {
      std::cerr << path << ": unbounded random search (no run_cap): showing the first " << n
                << " trials; use --limit N for more\n";
    }
  }
  sweeps::CommandContext context;
  context.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
  // Command errors (an unset ${envvar:NAME}) do not depend on the trial, so
  // checking trial 0 first means an error never leaves partial output.
  if (n > 0) {
    auto first = sweeps::build_command(*spec, trial_params(*spec, 0), context);
    if (!first.ok()) {
      std::cerr << path << ": " << first.status().message() << "\n";
      return kExitUsage;
    }
  }
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    sweeps::Trial trial{i, trial_params(*spec, i)};
    auto argv = sweeps::build_command(*spec, trial.params, context);
    if (!argv.ok()) {
      std::cerr << path << ": trial " << i << ": " << argv.status().message() << "\n";
      return kExitUsage;
    }
    const auto replace = nlohmann::json::error_handler_t::replace;
    out += "{\"index\":" + std::to_string(trial.index) + ",\"params\":" + trial.params.dump(-1, ' ', false, replace) +
           ",\"command\":" + nlohmann::json(*argv).dump(-1, ' ', false, replace) + "}\n";
    if (out.size() > (1u << 20)) {
      std::cout << out;
      out.clear();
    }
  }
  std::cout << out << std::flush;
  return kExitOk;
}

}  // namespace

SWEPT_COMMAND("expand", "print the trials of a sweep file, one JSON line each", run_expand);

}  // namespace swept::cli
