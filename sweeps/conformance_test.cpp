// Checks swept's sweeps library against W&B's own test vectors
// (../shared/conformance/wandb-sweeps-vectors.json, see its README): grid
// order and dedup, next-run suggestions, validation verdicts, command
// arguments, ${envvar:...} and the inverse CDFs of random search. The
// hyperband kind belongs to a later issue and is neither run nor counted.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "sweeps/space.h"
#include "sweeps/sweep.h"

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

SweepSpec parse_ok(const json& config) {
  ParseOutcome outcome = parse_sweep(config.dump());
  for (const auto& p : outcome.problems) INFO(p.ToString());
  REQUIRE_MESSAGE(outcome.spec.has_value(), "config rejected: " << config.dump() << " first problem: "
                                                                << (outcome.problems.empty() ? "" : outcome.problems[0].ToString()));
  return *outcome.spec;
}

// W&B's wire form {"name": {"value": v, "desc": ...}} -> our nested params.
json from_wire(const json& run_config) {
  json params = json::object();
  for (auto it = run_config.begin(); it != run_config.end(); ++it) {
    if (it.value().is_object() && it.value().contains("value")) params[it.key()] = it.value()["value"];
  }
  return params;
}

std::vector<std::string> expand(const json& params, const std::string& macro, const CommandContext& context) {
  SweepSpec spec = parse_ok(json{{"method", "grid"}, {"parameters", {{"x", {{"value", 1}}}}}, {"command", {macro}}});
  auto argv = build_command(spec, params, context);
  REQUIRE_MESSAGE(argv.ok(), argv.status().message());
  return *argv;
}

TEST_CASE("sweeps.conformance: every WandB vector of the kinds this issue covers") {
  const json vectors = load_vectors();
  std::map<std::string, int> checked;
  int skipped_later_issue = 0;

  for (const json& v : vectors) {
    const std::string kind = v.at("kind");
    const std::string id = v.at("id");
    INFO("vector " << id);

    if (kind == "wandb.grid") {
      SweepSpec spec = parse_ok(v["config"]);
      const json& columns = v["expected"]["columns"];
      std::vector<json> rows;
      if (v.contains("existing_runs")) {
        // Continue a grid that has some runs already: suggestions in order.
        std::vector<json> tried(v["existing_runs"].begin(), v["existing_runs"].end());
        while (auto next = next_untried_trial(spec, tried)) {
          rows.push_back(next->params);
          tried.push_back(next->params);
          REQUIRE(rows.size() < 10000);
        }
      } else {
        const auto count = trial_count(spec);
        REQUIRE(count.has_value());
        for (int64_t i = 0; i < *count; ++i) rows.push_back(trial_at(spec, i).params);
      }
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
      for (const json& c : v["cases"]) {
        INFO("case " << c["source"]);
        SweepSpec spec = parse_ok(c["config"]);
        std::vector<json> tried;
        for (const json& run : c["existing_run_configs"]) tried.push_back(from_wire(run));
        const auto next = next_untried_trial(spec, tried);
        if (c["expected_next"].is_null()) {
          CHECK_MESSAGE(!next.has_value(), "expected the grid to be exhausted, got " << (next ? next->params.dump() : ""));
        } else {
          REQUIRE(next.has_value());
          CHECK_MESSAGE(same_value(c["expected_next"], next->params), "got " << next->params);
        }
        ++checked[kind];
      }
    } else if (kind == "wandb.validate") {
      for (const json& c : v["cases"]) {
        INFO("case " << c["source"] << " config " << c["config"].dump());
        const ParseOutcome outcome = parse_sweep(c["config"].dump());
        std::string problems;
        for (const auto& p : outcome.problems) problems += p.ToString() + "\n";
        INFO("problems:\n" << problems);
        CHECK(outcome.spec.has_value() == c["expected_valid"].get<bool>());
        if (c.contains("expected_violation_count_upstream")) {
          const json& n = c["expected_violation_count_upstream"];
          if (n.is_number_integer()) CHECK(outcome.problems.size() == n.get<size_t>());
          else CHECK(outcome.problems.size() >= 1);
        }
        ++checked[kind];
      }
    } else if (kind == "wandb.command_args") {
      CommandContext context;
      for (auto it = v["expected"].begin(); it != v["expected"].end(); ++it) {
        INFO("macro ${" << it.key() << "}");
        const auto argv = expand(v["args"], "${" + it.key() + "}", context);
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
      SweepSpec spec = parse_ok(json{{"method", "grid"}, {"parameters", {{"lr", {{"value", 0.1}}}}}, {"command", v["command"]}});
      auto argv = build_command(spec, json{{"lr", 0.1}}, context);
      REQUIRE(argv.ok());
      CHECK(*argv == finish(v["expected_after_envvar_pass"]));
      // No command but a program: W&B's default command.
      SweepSpec by_program = parse_ok(json{{"method", "grid"}, {"program", "train.py"}, {"parameters", {{"lr", {{"value", 0.1}}}}}});
      auto default_argv = build_command(by_program, json{{"lr", 0.1}}, context);
      REQUIRE(default_argv.ok());
      CHECK(*default_argv == finish(v["default_command"]));
      ++checked[kind];
    } else if (kind == "wandb.random.inverse_cdf") {
      for (const json& c : v["cases"]) {
        INFO("case " << c["param"].dump());
        Leaf leaf;
        const ParseOutcome outcome = parse_single_parameter(c["param"], &leaf);
        REQUIRE_MESSAGE(outcome.problems.empty(), outcome.problems[0].ToString());
        for (size_t i = 0; i < c["u"].size(); ++i) {
          const json actual = value_at_quantile(leaf, c["u"][i].get<double>());
          CHECK_MESSAGE(same_value(c["expected"][i], actual),
                        "u=" << c["u"][i] << ": expected " << c["expected"][i] << ", got " << actual);
        }
        ++checked[kind];
      }
    } else if (kind == "wandb.hyperband") {
      ++skipped_later_issue;  // early stopping: a later issue
    } else {
      FAIL("unknown vector kind " << kind << ": update this test");
    }
  }
  // Every kind this issue covers was found and checked (nothing silently empty).
  CHECK(checked["wandb.grid"] == 11);
  CHECK(checked["wandb.grid.next"] == 6);
  CHECK(checked["wandb.validate"] == 23);
  CHECK(checked["wandb.command_args"] == 1);
  CHECK(checked["wandb.command_envvar"] == 1);
  CHECK(checked["wandb.random.inverse_cdf"] == 10);
  MESSAGE("checked: " << json(checked).dump() << "; hyperband vectors left to their issue: " << skipped_later_issue);
}

}  // namespace
}  // namespace swept::sweeps
