// The multi-objective searchers: Optuna's TPE split and weights and the
// ParEGO scalarisation against hand-computed cases, NSGA-II's elite and
// constrained domination seen through its children, reproducibility from the
// history alone, and each method beating random search's hypervolume on a
// two-objective problem (same seed, same budget).
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "sweeps/pareto.h"
#include "sweeps/search/encoding.h"
#include "sweeps/search/multi.h"
#include "sweeps/search/search.h"
#include "sweeps/space.h"
#include "sweeps/trial.h"

namespace swept::sweeps::search {
namespace {

using nlohmann::json;

MultiInput input_of(std::vector<std::vector<double>> loss, std::vector<double> violation = {}) {
  MultiInput in;
  in.loss = std::move(loss);
  in.violation = std::move(violation);
  return in;
}

const std::vector<std::vector<double>> kEight = {{1, 5}, {2, 4}, {3, 3}, {4, 2}, {5, 1}, {3, 5}, {4, 4}, {5, 5}};

TEST_CASE("multi: the TPE split takes whole ranks, then the last by greedy hypervolume subset selection") {
  // Rank 0 is the first five; three fit. Reference (5.5, 5.5): (3,3) adds
  // 6.25 alone; after it (2,4) and (4,2) each add 1.5, the first listed wins;
  // then (4,2) adds 1.5 against (1,5)'s and (5,1)'s 0.5 and 1.0.
  const TpeSplit split = multi_objective_split(input_of(kEight), 3);
  CHECK(split.below == std::vector<char>{0, 1, 1, 1, 0, 0, 0, 0});
  // Weights: hypervolume contributions against 1.1 x the worst "below"
  // point (4.4, 4.4): 0.4, 1.0, 0.4 of 2.76, over the largest.
  REQUIRE(split.weights.size() == 3);
  CHECK(split.weights[0] == doctest::Approx(0.4));
  CHECK(split.weights[1] == doctest::Approx(1.0));
  CHECK(split.weights[2] == doctest::Approx(0.4));
  // Everything fits: whole ranks only.
  const TpeSplit six = multi_objective_split(input_of(kEight), 6);
  // Rank 1 is (3,5) and (4,4); one fits: against (4.4, 5.5) (3,5) adds 0.7, (4,4) 0.6.
  CHECK(six.below == std::vector<char>{1, 1, 1, 1, 1, 1, 0, 0});
}

TEST_CASE("multi: the constrained TPE split puts feasible trials first, infeasible ones by violation") {
  // (3,3) infeasible: the front of the feasible is (1,5), (2,4), (4,2), (5,1);
  // greedy selection keeps (2,4), then (4,2) (3.0), then the first of two 0.5s.
  const TpeSplit feasible = multi_objective_split(input_of(kEight, {0, 0, 0.5, 0, 0, 0, 0, 0}), 3);
  CHECK(feasible.below == std::vector<char>{1, 1, 0, 1, 0, 0, 0, 0});
  // Too few feasible trials: the three least violating, infeasible ones weighed EPS.
  const TpeSplit few = multi_objective_split(input_of(kEight, {0, 1, 0, 2, 3, 4, 5, 6}), 3);
  CHECK(few.below == std::vector<char>{1, 1, 1, 0, 0, 0, 0, 0});
  REQUIRE(few.weights.size() == 3);
  // (1,5) and (3,3) against (3.3, 5.5): contributions 1.0 and 0.6 of 1.75.
  CHECK(few.weights[0] == doctest::Approx(1.0));
  CHECK(few.weights[1] == doctest::Approx(1e-12));
  CHECK(few.weights[2] == doctest::Approx(0.6));
}

TEST_CASE("multi: ParEGO scores each trial by its weighted Chebyshev distance, infeasible ones above all") {
  MultiInput in = input_of({{0, 10}, {1, 0}, {0.5, 5}});
  // Scaled to (0,1), (1,0), (0.5,0.5); weights (0.5, 0.5).
  std::vector<double> s = parego_scalarise(in, {0.5, 0.5});
  CHECK(s[0] == doctest::Approx(0.525));
  CHECK(s[1] == doctest::Approx(0.525));
  CHECK(s[2] == doctest::Approx(0.275));
  in.violation = {0, 0, 2};
  s = parego_scalarise(in, {0.5, 0.5});
  CHECK(s[2] == doctest::Approx(2.525));
  // All the weight on the first objective: its order alone (plus the 0.05 term).
  s = parego_scalarise(input_of({{0, 10}, {1, 0}, {0.5, 5}}), {1.0, 0.0});
  CHECK(s[0] < s[2]);
  CHECK(s[2] < s[1]);
}

// A sweep over x, y in [0, 1] with the given objectives.
SweepSpec two_d(const char* method, const json& extra = json::object(), uint64_t seed = 5) {
  json file = {{"method", method},
               {"metrics", {{{"name", "f1"}}, {{"name", "f2"}}}},
               {"parameters", {{"x", {{"min", 0.0}, {"max", 1.0}}}, {"y", {{"min", 0.0}, {"max", 1.0}}}}},
               {"seed", seed}};
  file.update(extra);
  ParseOutcome out = parse_sweep(file.dump());
  REQUIRE_MESSAGE(out.problems.empty(), (out.problems.empty() ? "" : out.problems[0].ToString()));
  return *out.spec;
}

// ZDT1 in two variables: a convex front f2 = 1 - sqrt(f1) at y = 0.
std::vector<double> zdt1(const json& p) {
  const double x = p["x"].get<double>(), g = 1 + 9 * p["y"].get<double>();
  return {x, g * (1 - std::sqrt(x / g))};
}

SearchHistory run(const SweepSpec& spec, int n) {
  SearchHistory h;
  for (int i = 0; i < n; ++i) {
    if (!spec.search) {  // random search
      const json p = trial_at(spec, i).params;
      h.finished.push_back({p, std::nullopt, zdt1(p)});
      continue;
    }
    auto sug = suggest(*spec.search, spec, h, i);
    REQUIRE_MESSAGE(sug.ok(), sug.status().ToString());
    REQUIRE_MESSAGE(sug->model.mode != "fallback", sug->model.note);
    Observation o{sug->params, std::nullopt, zdt1(sug->params), {}};
    h.finished.push_back(std::move(o));
  }
  return h;
}

double hv_of(const SearchHistory& h) {
  std::vector<std::vector<double>> pts;
  for (const Observation& o : h.finished) pts.push_back(o.values);
  return hypervolume(pts, {Goal::kMinimize, Goal::kMinimize}, {1.1, 11.0});
}

TEST_CASE("multi: nsga2 breeds from the elite only, and constraints change the elite") {
  // population 2: generation 0 = A (1,1), B (2,2); generation 1 = C (3,3), D (0.5,4).
  // The elite of {C, D, A, B} is the front {A, D}; with crossover copying the
  // first parent and no mutation, every child is A's or D's point.
  const SweepSpec spec = two_d("nsga2", {{"nsga2", {{"population_size", 2}, {"crossover_prob", 1.0},
                                                    {"swapping_prob", 0.0}, {"mutation_prob", 0.0}}}});
  const std::vector<json> params = {{{"x", 0.1}, {"y", 0.1}}, {{"x", 0.2}, {"y", 0.2}}, {{"x", 0.3}, {"y", 0.3}},
                                    {{"x", 0.4}, {"y", 0.4}}};
  const std::vector<std::vector<double>> values = {{1, 1}, {2, 2}, {3, 3}, {0.5, 4}};
  SearchHistory h;
  for (size_t i = 0; i < 4; ++i) h.finished.push_back({params[i], std::nullopt, values[i], {}});
  std::set<double> xs;
  for (int64_t i = 4; i < 40; ++i) {
    auto sug = suggest(*spec.search, spec, h, i);
    REQUIRE(sug.ok());
    CHECK(sug->model.mode == "model");
    CHECK(sug->model.generation == 1);
    xs.insert(std::round(sug->params["x"].get<double>() * 10) / 10);
  }
  CHECK(xs == std::set<double>{0.1, 0.4});
  // A infeasible: the elite is {B, D} (C is dominated by B).
  SweepSpec constrained = two_d("nsga2", {{"nsga2", {{"population_size", 2}, {"crossover_prob", 1.0},
                                                     {"swapping_prob", 0.0}, {"mutation_prob", 0.0}}},
                                          {"constraints", {{{"name", "mem"}, {"max", 1.0}}}}});
  for (size_t i = 0; i < 4; ++i) h.finished[i].violations = {i == 0 ? 0.5 : -1.0};
  xs.clear();
  for (int64_t i = 4; i < 40; ++i) xs.insert(std::round((*suggest(*constrained.search, constrained, h, i)).params["x"].get<double>() * 10) / 10);
  CHECK(xs == std::set<double>{0.2, 0.4});
}

TEST_CASE("multi: nsga2's first generation is random search's trials, later ones follow from the history alone") {
  const SweepSpec spec = two_d("nsga2", {{"nsga2", {{"population_size", 6}}}});
  SearchHistory h;
  for (int64_t i = 0; i < 6; ++i) {
    auto sug = suggest(*spec.search, spec, h, i);
    REQUIRE(sug.ok());
    CHECK(sug->model.mode == "startup");
    CHECK(sug->params == trial_at(spec, i).params);
    h.finished.push_back({sug->params, std::nullopt, zdt1(sug->params), {}});
  }
  // A restarted scheduler feeding the same history gets the same child.
  for (const char* method : {"nsga2", "tpe", "bayes"}) {
    CAPTURE(method);
    const SweepSpec s = two_d(method, method == std::string("nsga2") ? json{{"nsga2", {{"population_size", 6}}}} : json::object());
    SearchHistory longer = run(s, 14);
    auto a = suggest(*s.search, s, longer, 14), b = suggest(*s.search, s, longer, 14);
    REQUIRE((a.ok() && b.ok()));
    CHECK(a->model.mode == "model");
    CHECK(a->params == b->params);
    CHECK(a->model.to_json() == b->model.to_json());
  }
}

TEST_CASE("multi: failed trials are left out (nsga2, tpe) or scored worst (bayes), never a fall-back") {
  for (const char* method : {"nsga2", "tpe", "bayes"}) {
    CAPTURE(method);
    const SweepSpec s = two_d(method, method == std::string("nsga2") ? json{{"nsga2", {{"population_size", 4}}}} : json::object());
    SearchHistory h = run(s, 14);
    h.finished[3].values = {};                          // lost
    h.finished[5].values = {0.5, std::nan("")};         // diverged
    h.finished[7].values = {0.5};                       // one objective missing
    auto sug = suggest(*s.search, s, h, 14);  // 11 trials left: past tpe's 10 startup trials
    REQUIRE(sug.ok());
    CHECK(sug->model.mode == "model");
    CHECK(sug->model.n_failed == 3);
  }
}

TEST_CASE("multi: each method beats random search's hypervolume on ZDT1 (same seed, same budget)") {
  for (uint64_t seed : {1, 2}) {
    const double random = hv_of(run(two_d("random", json::object(), seed), 60));
    for (const char* method : {"nsga2", "tpe", "bayes"}) {
      CAPTURE(method);
      CAPTURE(seed);
      const SweepSpec s = two_d(method, method == std::string("nsga2") ? json{{"nsga2", {{"population_size", 10}}}} : json::object(), seed);
      CHECK(hv_of(run(s, 60)) > random);
    }
  }
}

}  // namespace
}  // namespace swept::sweeps::search
