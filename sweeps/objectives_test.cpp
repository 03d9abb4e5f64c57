// The keys of several objectives: `metrics:`, `constraints:`, `scheduler:`
// with `method: custom`, `method: nsga2` and its block. One case per rule of
// W&B's validator (wandb/sweeps b1dfc5f, tests/test_config.py), each with the
// exact problem swept reports, and the typed values of well-formed files.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sweeps/search/search.h"
#include "sweeps/sweep.h"

namespace swept::sweeps {
namespace {

using json = nlohmann::json;

const json kSpace = {{"v1", {{"values", {1, 2, 3}}}}};
const json kTwo = json::array({{{"name", "loss"}, {"goal", "minimize"}}, {{"name", "accuracy"}, {"goal", "maximize"}}});

json file_with(json extra) {
  json f = {{"parameters", kSpace}};
  f.update(extra);
  return f;
}

std::vector<std::string> problems_of(const json& file) {
  std::vector<std::string> out;
  for (const Problem& p : parse_sweep(file.dump()).problems) out.push_back(p.ToString());
  return out;
}

std::vector<std::string> warnings_of(const json& file) {
  std::vector<std::string> out;
  for (const Problem& p : parse_sweep(file.dump()).warnings) out.push_back(p.ToString());
  return out;
}

TEST_CASE("objectives: W&B's multi-objective file (metrics, method custom, engine optuna) runs tpe on both") {
  const ParseOutcome out = parse_sweep(file_with({{"method", "custom"}, {"metrics", kTwo}, {"scheduler", {{"engine", "optuna"}}}}).dump());
  REQUIRE_MESSAGE(out.problems.empty(), (out.problems.empty() ? "" : out.problems[0].ToString()));
  const SweepSpec& s = *out.spec;
  CHECK(s.method == Method::kTpe);
  CHECK(s.engine == "optuna");
  CHECK(!s.metric);
  REQUIRE(s.objectives.size() == 2);
  CHECK(s.objectives[0].name == "loss");
  CHECK(s.objectives[0].goal == Goal::kMinimize);
  CHECK(s.objectives[1].name == "accuracy");
  CHECK(s.objectives[1].goal == Goal::kMaximize);
  CHECK(is_multi_objective(s));
  REQUIRE(s.search);
  CHECK(s.search->method == search::SearchMethod::kTpe);
  // W&B's validator does not run optuna yet: said, so --strict refuses as W&B does.
  CHECK(warnings_of(file_with({{"method", "custom"}, {"metrics", kTwo}, {"scheduler", {{"engine", "optuna"}}}})) ==
        std::vector<std::string>{"scheduler.engine: W&B's validator does not run engine optuna yet; swept runs it as "
                                 "method tpe"});
  const ParseOutcome ax = parse_sweep(file_with({{"method", "custom"}, {"metrics", kTwo}, {"scheduler", {{"engine", "ax"}}}}).dump());
  REQUIRE(ax.spec);
  CHECK(ax.spec->method == Method::kBayes);
  CHECK(ax.spec->engine == "ax");
  CHECK(ax.spec->search->method == search::SearchMethod::kBayes);
}

TEST_CASE("objectives: metrics items take W&B's defaults and swept's target and ref") {
  const json metrics = json::array({{{"name", "loss"}}, {{"name", "ms"}, {"target", 5}, {"ref", 100}, {"impute", "best"}}});
  const ParseOutcome out = parse_sweep(file_with({{"method", "random"}, {"metrics", metrics}}).dump());
  REQUIRE(out.spec);
  const SweepSpec& s = *out.spec;
  REQUIRE(s.objectives.size() == 2);
  CHECK(s.objectives[0].goal == Goal::kMinimize);  // W&B's default (test_metrics_filled_with_defaults)
  CHECK(s.objectives[1].goal == Goal::kMinimize);
  CHECK(!s.objectives[0].target);
  CHECK(!s.objectives[0].ref);
  CHECK(s.objectives[1].target == 5.0);
  CHECK(s.objectives[1].ref == 100.0);
  CHECK(s.engine.empty());
  // One metric: objectives holds it, and the sweep is single-objective.
  const ParseOutcome one = parse_sweep(file_with({{"method", "random"}, {"metric", {{"name", "loss"}}}}).dump());
  REQUIRE(one.spec);
  REQUIRE(one.spec->objectives.size() == 1);
  CHECK(one.spec->objectives[0].name == "loss");
  CHECK(!is_multi_objective(*one.spec));
  CHECK(parse_sweep(file_with({{"method", "random"}}).dump()).spec->objectives.empty());
  // An invalid goal: W&B fills in minimize (test_fill_validate_metrics_invalid_goal_replaced_with_default).
  const json odd = json::array({{{"name", "loss"}, {"goal", "not-a-real-goal"}}, {{"name", "acc"}, {"goal", "maximize"}}});
  const ParseOutcome filled = parse_sweep(file_with({{"method", "tpe"}, {"metrics", odd}}).dump());
  REQUIRE(filled.spec);
  CHECK(filled.spec->objectives[0].goal == Goal::kMinimize);
  CHECK(filled.spec->objectives[1].goal == Goal::kMaximize);
  CHECK(warnings_of(file_with({{"method", "tpe"}, {"metrics", odd}})) ==
        std::vector<std::string>{"metrics[0].goal: expected \"minimize\" or \"maximize\", found \"not-a-real-goal\"; "
                                 "minimizing, as W&B does"});
}

TEST_CASE("objectives: swept's own form - metrics with its methods directly, W&B's methods said in a warning") {
  for (const char* method : {"tpe", "nsga2"}) {
    const ParseOutcome out = parse_sweep(file_with({{"method", method}, {"metrics", kTwo}}).dump());
    CAPTURE(method);
    REQUIRE(out.spec);
    CHECK(out.warnings.empty());
    CHECK(out.spec->objectives.size() == 2);
  }
  CHECK(parse_sweep(file_with({{"method", "nsga2"}, {"metrics", kTwo}}).dump()).spec->method == Method::kNsga2);
  CHECK(describe(*parse_sweep(file_with({{"method", "nsga2"}, {"metrics", kTwo}, {"run_cap", 9}}).dump()).spec) ==
        "nsga2 (each generation bred from the best of earlier ones), 2 objectives, 1 parameter, 9 trials");
  // W&B refuses metrics without method custom (test_metrics_requires_custom_method): swept runs
  // it, and says so, so that --strict refuses as W&B does.
  for (const char* method : {"grid", "random", "bayes"}) {
    CAPTURE(method);
    CHECK(parse_sweep(file_with({{"method", method}, {"metrics", kTwo}}).dump()).spec);
    CHECK(warnings_of(file_with({{"method", method}, {"metrics", kTwo}})) ==
          std::vector<std::string>{"metrics: W&B accepts metrics only with method: custom (its validator refuses this "
                                   "file); swept runs method " + std::string(method) + " on all 2 objectives"});
  }
}

TEST_CASE("objectives: W&B's rules on metric and metrics, each a problem naming the field") {
  // test_metric_and_metrics_mutually_exclusive
  CHECK(problems_of(file_with({{"method", "custom"}, {"metric", {{"name", "loss"}}}, {"metrics", kTwo},
                               {"scheduler", {{"engine", "optuna"}}}})) ==
        std::vector<std::string>{"metrics: metric and metrics cannot both be set: use metric for a single objective, "
                                 "or metrics (a list of two or more) for several"});
  // test_metrics_requires_at_least_two
  CHECK(problems_of(file_with({{"method", "tpe"}, {"metrics", json::array({{{"name", "loss"}}})}})) ==
        std::vector<std::string>{"metrics: expected at least two metrics, found 1; for one objective write metric: "
                                 "{name: ..., goal: ...}"});
  // test_fill_validate_metrics_rejects_non_list
  CHECK(problems_of(file_with({{"method", "tpe"}, {"metrics", "not-a-list"}})) ==
        std::vector<std::string>{"metrics: expected a list of two or more metrics like [{\"name\": \"loss\"}, "
                                 "{\"name\": \"acc\", \"goal\": \"maximize\"}], found \"not-a-list\""});
  // test_fill_validate_metrics_rejects_non_dict_items
  CHECK(problems_of(file_with({{"method", "tpe"}, {"metrics", json::array({{{"name", "loss"}}, "not-a-dict"})}})) ==
        std::vector<std::string>{"metrics[1]: expected an object like {\"name\": \"val_loss\", \"goal\": \"minimize\"}, "
                                 "found \"not-a-dict\""});
  // The schema's metric definition: name required, impute from its enum, no other keys.
  CHECK(problems_of(file_with({{"method", "tpe"}, {"metrics", json::array({{{"goal", "maximize"}}, {{"name", "a"}}})}})) ==
        std::vector<std::string>{"metrics[0]: expected key name (the metric to optimize), found none"});
  CHECK(problems_of(file_with({{"method", "tpe"},
                               {"metrics", json::array({{{"name", "l"}, {"impute", "often"}}, {{"name", "a"}}})}})) ==
        std::vector<std::string>{"metrics[0].impute: expected \"latest\", \"best\" or \"worst\", found \"often\""});
  CHECK(problems_of(file_with({{"method", "tpe"}, {"metrics", json::array({{{"name", "l"}, {"ref", "far"}}, {{"name", "a"}}})}})) ==
        std::vector<std::string>{"metrics[0].ref: expected a number, found \"far\""});
  CHECK(problems_of(file_with({{"method", "tpe"}, {"metrics", json::array({{{"name", "l"}}, {{"name", "l"}, {"goal", "maximize"}}})}})) ==
        std::vector<std::string>{"metrics[1].name: metric \"l\" is listed twice; list each objective once"});
  // Early termination compares trials on one metric: refused with several.
  CHECK(problems_of(file_with({{"method", "tpe"}, {"metrics", kTwo},
                               {"early_terminate", {{"type", "hyperband"}, {"min_iter", 3}}}})) ==
        std::vector<std::string>{"early_terminate: expected no early_terminate with several objectives (metrics): no "
                                 "stopping rule compares trials on several metrics; remove early_terminate or "
                                 "optimize one metric"});
}

TEST_CASE("objectives: W&B's rules on scheduler, and the Python hooks swept does not run") {
  const json space_only = {{"parameters", kSpace}};
  // test_scheduler_wandb_engine_valid minus the hooks: engine wandb keeps W&B's method.
  const ParseOutcome wandb = parse_sweep(file_with({{"method", "bayes"}, {"metric", {{"name", "l"}}},
                                                    {"scheduler", {{"engine", "wandb"}}}}).dump());
  REQUIRE(wandb.spec);
  CHECK(wandb.spec->method == Method::kBayes);
  CHECK(wandb.spec->engine == "wandb");
  // test_scheduler_unavailable_engine_raises: optuna/ax with a method other than custom.
  CHECK(problems_of(file_with({{"method", "bayes"}, {"metric", {{"name", "l"}}}, {"scheduler", {{"engine", "optuna"}}}})) ==
        std::vector<std::string>{"method: expected method: custom with scheduler.engine optuna (the engine chooses "
                                 "the trials: optuna runs tpe), found method bayes; or remove scheduler"});
  // test_scheduler_invalid_engine_rejected
  CHECK(problems_of(file_with({{"method", "bayes"}, {"metric", {{"name", "l"}}}, {"scheduler", {{"engine", "hyperopt"}}}})) ==
        std::vector<std::string>{"scheduler.engine: expected \"optuna\", \"ax\" or \"wandb\", found \"hyperopt\""});
  // test_scheduler_missing_required_field
  CHECK(problems_of(file_with({{"method", "random"}, {"scheduler", json::object()}})) ==
        std::vector<std::string>{"scheduler: expected key engine (optuna, ax or wandb), found none"});
  // test_scheduler_engine_wandb_requires_method: engine wandb with method custom.
  CHECK(problems_of(file_with({{"method", "custom"}, {"scheduler", {{"engine", "wandb"}}}})) ==
        std::vector<std::string>{"scheduler.engine: engine wandb runs W&B's own methods, not method: custom; write "
                                 "method: grid, random or bayes with it, or engine: optuna or ax with method custom"});
  // test_scheduler_and_early_terminate_mutually_exclusive
  CHECK(problems_of(file_with({{"method", "bayes"}, {"metric", {{"name", "l"}}}, {"scheduler", {{"engine", "wandb"}}},
                               {"early_terminate", {{"type", "hyperband"}, {"min_iter", 3}}}})) ==
        std::vector<std::string>{"early_terminate: early_terminate cannot be used together with scheduler (W&B's "
                                 "rule: the custom scheduler stops trials itself); remove one of them"});
  // test_scheduler_and_controller_mutually_exclusive: local refused, cloud accepted.
  CHECK(problems_of(file_with({{"method", "random"}, {"scheduler", {{"engine", "wandb"}}}, {"controller", {{"type", "local"}}}})) ==
        std::vector<std::string>{"controller: controller: {type: local} cannot be used together with scheduler "
                                 "(W&B's rule): remove controller"});
  CHECK(parse_sweep(file_with({{"method", "random"}, {"scheduler", {{"engine", "wandb"}}}, {"controller", {{"type", "cloud"}}}}).dump()).spec);
  // The hooks name Python code: refused, saying what to write instead;
  // optimizer without source is also W&B's refusal (test_scheduler_optimizer_or_search_space_requires_source).
  const std::string instead =
      "swept does not run Python optimizer code; choose the searcher with scheduler.engine (optuna runs tpe, ax runs "
      "bayes) or with method: tpe | bayes | nsga2 and their settings blocks, and give the space under parameters";
  CHECK(problems_of(file_with({{"method", "random"}, {"scheduler", {{"engine", "wandb"}, {"source", "s.py"}}}})) ==
        std::vector<std::string>{"scheduler.source: a Python file W&B's custom scheduler loads: " + instead});
  CHECK(problems_of(file_with({{"method", "random"}, {"scheduler", {{"engine", "wandb"}, {"optimizer", "build"}}}})) ==
        std::vector<std::string>{"scheduler.optimizer: a function of scheduler.source (which W&B requires beside it, "
                                 "and which is missing): " + instead});
  CHECK(problems_of(file_with({{"method", "random"}, {"scheduler", {{"engine", "wandb"}, {"source", "s.py"}, {"search_space", "f"}}}})) ==
        std::vector<std::string>{"scheduler.source: a Python file W&B's custom scheduler loads: " + instead,
                                 "scheduler.search_space: a function of scheduler.source: " + instead});
  CHECK(problems_of(file_with({{"method", "random"}, {"scheduler", {{"engine", "wandb"}, {"workers", 2}}}})) ==
        std::vector<std::string>{"scheduler.workers: unknown key; expected one of: engine, source, optimizer, search_space"});
  // Swept's methods are not W&B's engine's.
  CHECK(problems_of(file_with({{"method", "tpe"}, {"metric", {{"name", "l"}}}, {"scheduler", {{"engine", "wandb"}}}})) ==
        std::vector<std::string>{"method: engine wandb runs the methods grid, random and bayes (W&B's), found tpe; "
                                 "remove scheduler to run tpe"});
}

TEST_CASE("objectives: constraints are bounds on named metrics, at least one each") {
  const json cons = json::array({{{"name", "mem"}, {"max", 16}}, {{"name", "acc"}, {"min", 0.5}, {"max", 1}}});
  const ParseOutcome out = parse_sweep(file_with({{"method", "nsga2"}, {"metrics", kTwo}, {"constraints", cons}}).dump());
  REQUIRE(out.spec);
  REQUIRE(out.spec->constraints.size() == 2);
  CHECK(out.spec->constraints[0].name == "mem");
  CHECK(!out.spec->constraints[0].min);
  CHECK(out.spec->constraints[0].max == 16.0);
  CHECK(out.spec->constraints[1].min == 0.5);
  CHECK(problems_of(file_with({{"method", "random"}, {"metric", {{"name", "l"}}}, {"constraints", {{"name", "mem"}}}})) ==
        std::vector<std::string>{"constraints: expected a list like [{\"name\": \"gpu_mem_gb\", \"max\": 16}], found an object"});
  CHECK(problems_of(file_with({{"method", "random"}, {"metric", {{"name", "l"}}}, {"constraints", json::array({{{"name", "mem"}}})}})) ==
        std::vector<std::string>{"constraints[0]: expected min, max or both (the bounds a feasible trial's final value "
                                 "keeps), found neither"});
  CHECK(problems_of(file_with({{"method", "random"}, {"metric", {{"name", "l"}}},
                               {"constraints", json::array({{{"name", "m"}, {"min", 2}, {"max", 1}}, {{"max", 1}}})}})) ==
        std::vector<std::string>{"constraints[0].min: expected min <= max, found min 2 > max 1",
                                 "constraints[1]: expected key name (the metric whose final value is bounded), found none"});
  CHECK(problems_of(file_with({{"method", "random"}, {"constraints", json::array({{{"name", "m"}, {"max", 1}}})}})) ==
        std::vector<std::string>{"constraints: expected a metric or metrics beside constraints (they choose among "
                                 "trials ranked by an objective), found neither"});
}

TEST_CASE("objectives: method nsga2 carries Optuna's NSGA-II defaults and its settings block") {
  const ParseOutcome out = parse_sweep(file_with({{"method", "nsga2"}, {"metrics", kTwo}}).dump());
  REQUIRE(out.spec);
  REQUIRE(out.spec->search);
  CHECK(is_adaptive(out.spec->method));
  const search::Nsga2Settings& d = out.spec->search->nsga2;
  CHECK(out.spec->search->method == search::SearchMethod::kNsga2);
  CHECK(d.population_size == 50);
  CHECK(d.crossover_prob == 0.9);
  CHECK(d.swapping_prob == 0.5);
  CHECK(!d.mutation_prob);
  const ParseOutcome set = parse_sweep(file_with({{"method", "nsga2"}, {"metrics", kTwo},
                                                  {"nsga2", {{"population_size", 8}, {"mutation_prob", 0.25}, {"crossover_prob", 1}}}}).dump());
  REQUIRE(set.spec);
  CHECK(set.spec->search->nsga2.population_size == 8);
  CHECK(set.spec->search->nsga2.mutation_prob == 0.25);
  CHECK(set.spec->search->nsga2.crossover_prob == 1.0);
  CHECK(problems_of(file_with({{"method", "nsga2"}, {"metrics", kTwo}, {"nsga2", {{"population_size", 1}}}})) ==
        std::vector<std::string>{"nsga2.population_size: expected a whole number in [2, 100000], found 1"});
  CHECK(problems_of(file_with({{"method", "nsga2"}, {"metrics", kTwo}, {"nsga2", {{"crossover", "sbx"}}}})) ==
        std::vector<std::string>{"nsga2.crossover: unknown key; expected one of population_size, crossover_prob, "
                                 "swapping_prob, mutation_prob"});
  CHECK(problems_of(file_with({{"method", "tpe"}, {"metrics", kTwo}, {"nsga2", {{"population_size", 8}}}})) ==
        std::vector<std::string>{"nsga2: settings for method: nsga2, but the method is tpe"});
  CHECK(problems_of(file_with({{"method", "nsga2"}})) ==
        std::vector<std::string>{"metric: nsga2 learns from a metric; add metric: {name: ..., goal: minimize|maximize}"});
}

}  // namespace
}  // namespace swept::sweeps
