// `swept validate FILE [--strict] [--explain]`: checks a sweep file (YAML or
// JSON) against docs/sweep-format.md. Exit 0 with a one-line summary (and a
// line per warning on stderr), or exit 2 with one line per problem
// ("FILE: path: expected ..., found ... (line L, column C)"). --strict makes
// every warning a problem (for CI); --explain prints how each value whose
// spelling a rule decided was read ("1e-5 read as 1e-05"). Reads at most
// kMaxFileBytes + 1 bytes, so a huge file is refused without being loaded.
// A warm start (docs/sweep-format.md "Warm starts"): how many of the earlier
// trials fit, when it can read them (warm_start.file; warm_start.sweep with
// --db DB); a file that cannot be read is exit 2 naming warm_start.file.
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/sweep_file.h"
#include "cli/warm_file.h"
#include "common/exit_codes.h"
#include "store/reader.h"
#include "sweeps/sweep.h"
#include "sweeps/warm_start.h"

namespace swept::cli {
namespace {

// The warm start's line: "warm start: 3 of 5 earlier trials fit; ...", or
// why it cannot be counted. Returns the exit code when the trials cannot be read.
std::optional<int> say_warm_start(const std::string& path, const sweeps::SweepSpec& spec, const std::string& db) {
  if (!spec.warm_start) return std::nullopt;
  std::vector<sweeps::WarmCandidate> candidates;
  if (spec.warm_start->file) {
    auto trials = read_warm_start(path, spec);
    if (!trials.ok()) {
      std::cerr << path << ": " << trials.status().message() << "\n";
      return kExitUsage;
    }
    candidates = std::move(**trials);
  } else if (db.empty()) {
    std::cout << path << ": warm start from sweep " << *spec.warm_start->sweep
              << ": give --db FILE to count the trials that fit\n";
    return std::nullopt;
  } else {
    const int64_t id = *spec.warm_start->sweep;
    auto conn = store::open_reader(db);
    auto rows = conn.ok() ? store::trial_rows(**conn, id) : Result<std::vector<TrialRow>>(conn.status());
    if (!rows.ok()) {
      const bool missing = rows.status().code() == StatusCode::kNotFound;
      std::cerr << path << ": warm_start.sweep: "
                << (missing ? "there is no sweep " + std::to_string(id) + " in " + db : rows.status().message())
                << "\n";
      return kExitUsage;
    }
    for (const TrialRow& r : *rows)
      candidates.push_back(sweeps::candidate_from_row(r, spec.metric->name, "sweep " + std::to_string(id)));
  }
  std::cout << path << ": warm start: " << sweeps::plan_warm_start(spec, candidates).summary(spec.metric->name)
            << "\n";
  return std::nullopt;
}

int run_validate(const std::vector<std::string>& args) {
  std::string path, db;
  LoadOptions options;
  po::options_description desc(
      "Checks a sweep file (docs/sweep-format.md). Prints a one-line summary and exits 0,\n"
      "or prints one line per problem and exits 2. Warnings (what W&B accepts with a\n"
      "warning) go to stderr and do not change the exit code, unless --strict.\n\noptions");
  desc.add_options()("file", po::value(&path), "the sweep file (.yaml, .yml or .json; otherwise by content)")(
      "strict", po::bool_switch(&options.strict), "treat every warning as a problem (exit 2)")(
      "explain", po::bool_switch(&options.explain), "show how each value whose spelling a rule decided was read")(
      "db", po::value(&db), "a swept database, read-only: count the trials of warm_start.sweep that fit");
  po::positional_options_description positional;
  positional.add("file", 1);
  if (auto rc = parse_flags("validate", "swept validate FILE [--strict] [--explain] [--db DB]", args, desc, positional)) return *rc;
  if (path.empty()) {
    std::cerr << "swept validate: expected a sweep FILE; run 'swept validate --help'\n";
    return kExitUsage;
  }
  auto loaded = load_sweep_file(path, options, &std::cout);
  if (!loaded) return kExitUsage;
  if (auto rc = say_warm_start(path, loaded->spec, db)) return *rc;
  std::cout << path << ": ok: " << sweeps::describe(loaded->spec) << "\n";
  return kExitOk;
}

}  // namespace

SWEPT_COMMAND("validate", "check a sweep file and summarise it", run_validate);

}  // namespace swept::cli
