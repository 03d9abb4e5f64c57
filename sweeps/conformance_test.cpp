// Checks swept's sweeps library against W&B's own test vectors
// (../shared/conformance/wandb-sweeps-vectors.json, see its README): grid
// order and dedup, validation verdicts, command arguments, ${envvar:...} and
// the inverse CDFs of random search. Every sweep config of a vector goes
// through BOTH readers: as JSON text and as YAML text (written out below,
// block style, strings quoted), and both must give the same answer.
//
// Not run: the hyperband kind (a later issue), and W&B's controller resuming
// a grid from the runs it finds (wandb.grid.next, and wb-grid-03 with its
// existing_runs): swept resumes a grid by trial index, never by matching
// runs' values, so there is nothing of swept's for those vectors to check.
//
// Validation verdicts: W&B's schema (the vectors' source) refuses some files
// W&B's server and agent only warn about (an unknown top-level key, an
// invalid metric.goal, a deprecated distribution, a number in a string).
// swept warns there too, and `--strict` refuses; so the verdict compared is
// "no problems and no warnings", i.e. what `swept validate --strict` says.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "sweeps/space.h"
#include "sweeps/yaml_writer_test.h"
#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace swept::sweeps {
namespace {

using json = nlohmann::json;

json load_vectors() {
  const std::string path = SWEPT_SOURCE_DIR "/../shared/conformance/wandb-sweeps-vectors.json";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing conformance vectors at " << path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return json::parse(buffer.str());
}

// Equal as the vectors mean it: floats within 1e-9 (absolute and relative),
// integers exactly and only to integers (1 and 1.0 are different results).
bool same_value(const json& expected, const json& actual) {
  if (expected.is_number_float()) {
    if (!actual.is_number_float()) return false;
    const double e = expected.get<double>(), a = actual.get<double>();
    return std::fabs(e - a) <= 1e-9 + 1e-9 * std::fabs(e);
  }
  if (expected.is_number_integer()) return actual.is_number_integer() && expected == actual;
  if (expected.is_array()) {
    if (!actual.is_array() || actual.size() != expected.size()) return false;
    for (size_t i = 0; i < expected.size(); ++i) {
      if (!same_value(expected[i], actual[i])) return false;
    }
    return true;
  }
  if (expected.is_object()) {
    if (!actual.is_object() || actual.size() != expected.size()) return false;
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      if (!actual.contains(it.key()) || !same_value(it.value(), actual[it.key()])) return false;
    }
    return true;
  }
  return expected == actual;
}

json column(const json& params, const std::string& dotted) {
  const json* slot = &params;
  std::stringstream names(dotted);
  std::string name;
  while (std::getline(names, name, '.')) {
    if (!slot->is_object() || !slot->contains(name)) return json("<missing>");
    slot = &(*slot)[name];
  }
  return *slot;
}

// The reader a vector goes through: JSON text, or the same config as YAML.
enum class Reader { kJson, kYaml };
const char* reader_name(Reader r) { return r == Reader::kJson ? "JSON" : "YAML"; }

ParseOutcome parse_with(const json& config, Reader reader) {
  if (reader == Reader::kJson) return parse_sweep(config.dump(), Format::kJson);
  return parse_sweep(test::to_yaml(config), Format::kYaml);
}

SweepSpec parse_ok(const json& config, Reader reader) {
  ParseOutcome outcome = parse_with(config, reader);
  for (const auto& p : outcome.problems) INFO(p.ToString());
  REQUIRE_MESSAGE(outcome.spec.has_value(), reader_name(reader) << " config rejected: " << config.dump() << " first problem: "
                                                                << (outcome.problems.empty() ? "" : outcome.problems[0].ToString()));
  return *outcome.spec;
}

std::vector<std::string> expand(const json& params, const std::string& macro, const CommandContext& context, Reader reader) {
  SweepSpec spec = parse_ok(json{{"method", "grid"}, {"parameters", {{"x", {{"value", 1}}}}}, {"command", {macro}}}, reader);
  auto argv = build_command(spec, params, context);
  REQUIRE_MESSAGE(argv.ok(), argv.status().message());
  return *argv;
}

void check_vectors(Reader reader) {
  const json vectors = load_vectors();
  std::map<std::string, int> checked;
  int not_run = 0;
  INFO("reader " << std::string(reader_name(reader)));

  for (const json& v : vectors) {
    const std::string kind = v.at("kind");
    const std::string id = v.at("id");
    INFO("vector " << id);

    if (kind == "wandb.grid" && v.contains("existing_runs")) {
      ++not_run;  // W&B's controller resuming from runs' values (see the top)
    } else if (kind == "wandb.grid") {
      SweepSpec spec = parse_ok(v["config"], reader);
      const json& columns = v["expected"]["columns"];
      std::vector<json> rows;
      const auto count = trial_count(spec);
      REQUIRE(count.has_value());
      for (int64_t i = 0; i < *count; ++i) rows.push_back(trial_at(spec, i).params);
      const json& expected_rows = v["expected"]["rows"];
      REQUIRE(rows.size() == expected_rows.size());
      for (size_t r = 0; r < rows.size(); ++r) {
        for (size_t c = 0; c < columns.size(); ++c) {
          const json actual = column(rows[r], columns[c]);
          CHECK_MESSAGE(same_value(expected_rows[r][c], actual),
                        "row " << r << " column " << columns[c] << ": expected " << expected_rows[r][c] << ", got " << actual);
        }
      }
      ++checked[kind];
    } else if (kind == "wandb.grid.next") {
      not_run += static_cast<int>(v["cases"].size());  // W&B's controller resuming (see the top)
    } else if (kind == "wandb.validate") {
      for (const json& c : v["cases"]) {
        INFO("case " << c["source"] << " config " << c["config"].dump());
        const ParseOutcome outcome = parse_with(c["config"], reader);
        std::string problems;
        for (const auto& p : outcome.problems) problems += p.ToString() + "\n";
        for (const auto& p : outcome.warnings) problems += "warning: " + p.ToString() + "\n";
        INFO("problems:\n" << problems);
        // The verdict of `swept validate --strict` (see the top).
        const size_t strict_problems = outcome.problems.size() + outcome.warnings.size();
        CHECK((strict_problems == 0) == c["expected_valid"].get<bool>());
        CHECK(outcome.spec.has_value() == outcome.problems.empty());
        if (c.contains("expected_violation_count_upstream")) {
          const json& n = c["expected_violation_count_upstream"];
          if (n.is_number_integer()) CHECK(strict_problems == n.get<size_t>());
          else CHECK(strict_problems >= 1);
        }
        ++checked[kind];
      }
    } else if (kind == "wandb.command_args") {
      CommandContext context;
      for (auto it = v["expected"].begin(); it != v["expected"].end(); ++it) {
        INFO("macro ${" << it.key() << "}");
        const auto argv = expand(v["args"], "${" + it.key() + "}", context, reader);
        CHECK(json(argv) == it.value());
      }
      ++checked[kind];
    } else if (kind == "wandb.command_envvar") {
      CommandContext context;
      const json env = v["env"];
      context.getenv = [env](const std::string& name) -> std::optional<std::string> {
        if (!env.contains(name)) return std::nullopt;
        return env[name].get<std::string>();
      };
      // W&B's vector stops after the envvar pass; ours goes on to expand
      // ${env} and ${interpreter}, so expect those expanded too.
      auto finish = [&](const json& words) {
        std::vector<std::string> out;
        for (const auto& w : words) {
          if (w == "${env}") out.push_back(context.env);
          else if (w == "${interpreter}") out.push_back(context.interpreter);
          else if (w == "${program}") out.push_back("train.py");
          else if (w == "${args}") out.push_back("--lr=0.1");
          else out.push_back(w.get<std::string>());
        }
        return out;
      };
      SweepSpec spec = parse_ok(json{{"method", "grid"}, {"parameters", {{"lr", {{"value", 0.1}}}}}, {"command", v["command"]}}, reader);
      auto argv = build_command(spec, json{{"lr", 0.1}}, context);
      REQUIRE(argv.ok());
      CHECK(*argv == finish(v["expected_after_envvar_pass"]));
      // No command but a program: W&B's default command.
      SweepSpec by_program = parse_ok(json{{"method", "grid"}, {"program", "train.py"}, {"parameters", {{"lr", {{"value", 0.1}}}}}}, reader);
      auto default_argv = build_command(by_program, json{{"lr", 0.1}}, context);
      REQUIRE(default_argv.ok());
      CHECK(*default_argv == finish(v["default_command"]));
      ++checked[kind];
    } else if (kind == "wandb.random.inverse_cdf") {
      for (const json& c : v["cases"]) {
        INFO("case " << c["param"].dump());
        // The parameter as a reader gives it: through a whole sweep file.
        const json file = {{"method", "random"}, {"parameters", {{"value", c["param"]}}}};
        const ParseOutcome whole = parse_with(file, reader);
        REQUIRE_MESSAGE(whole.spec.has_value(), whole.problems[0].ToString());
        REQUIRE(whole.spec->space->leaves.size() == 1);
        const Leaf& leaf = whole.spec->space->leaves[0];
        for (size_t i = 0; i < c["u"].size(); ++i) {
          const json actual = value_at_quantile(leaf, c["u"][i].get<double>());
          CHECK_MESSAGE(same_value(c["expected"][i], actual),
                        "u=" << c["u"][i] << ": expected " << c["expected"][i] << ", got " << actual);
        }
        ++checked[kind];
      }
    } else if (kind == "wandb.hyperband") {
      ++not_run;  // early stopping: a later issue
    } else {
      FAIL("unknown vector kind " << kind << ": update this test");
    }
  }
  // Every kind this issue covers was found and checked (nothing silently empty).
  CHECK(checked["wandb.grid"] == 10);
  CHECK(checked["wandb.validate"] == 23);
  CHECK(checked["wandb.command_args"] == 1);
  CHECK(checked["wandb.command_envvar"] == 1);
  CHECK(checked["wandb.random.inverse_cdf"] == 10);
  MESSAGE(std::string(reader_name(reader)) << " checked: " << json(checked).dump() << "; not run (see the top): " << not_run);
}

TEST_CASE("sweeps.conformance: every WandB vector of the kinds swept covers, read as JSON") { check_vectors(Reader::kJson); }

TEST_CASE("sweeps.conformance: every WandB vector of the kinds swept covers, read as YAML") { check_vectors(Reader::kYaml); }

}  // namespace
}  // namespace swept::sweeps
