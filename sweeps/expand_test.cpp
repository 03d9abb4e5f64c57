// Grid and random expansion: order, dedup, every distribution's bounds and
// quantization, reproducibility, and draws recomputed here from the documented
// recipe (docs/sweep-format.md, "Random search").
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "sweeps/sweep.h"
#include "sweeps/trial.h"

namespace swept::sweeps {
namespace {

using json = nlohmann::json;

SweepSpec parse_ok(const std::string& text) {
  ParseOutcome outcome = parse_sweep(text);
  REQUIRE_MESSAGE(outcome.spec.has_value(), (outcome.problems.empty() ? "" : outcome.problems[0].ToString()));
  return *outcome.spec;
}

std::vector<json> all_trials(const SweepSpec& spec) {
  std::vector<json> out;
  const auto n = trial_count(spec);
  REQUIRE(n.has_value());
  for (int64_t i = 0; i < *n; ++i) out.push_back(trial_at(spec, i).params);
  return out;
}

// The documented recipe, written again from docs/sweep-format.md.
uint64_t splitmix_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
double documented_u(uint64_t seed, int64_t index, const std::string& path) {
  const uint64_t g = 0x9e3779b97f4a7c15ULL;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : path) h = (h ^ c) * 0x100000001b3ULL;
  const uint64_t key = splitmix_mix(splitmix_mix(seed) + g * (static_cast<uint64_t>(index) + 1));
  const uint64_t bits = splitmix_mix(key ^ splitmix_mix(h + g));
  return (static_cast<double>(bits >> 11) + 0.5) / 9007199254740992.0;
}

TEST_CASE("sweeps.grid: sorted names the last varying fastest - constants in every trial") {
  SweepSpec spec = parse_ok(R"({"method": "grid", "parameters": {
      "b": {"values": [1, 2]}, "a": {"values": ["x", "y", "z"]}, "c": {"value": "k"}}})");
  CHECK(trial_count(spec) == 6);
  const auto trials = all_trials(spec);
  CHECK(trials[0] == json::parse(R"({"a": "x", "b": 1, "c": "k"})"));
  CHECK(trials[1] == json::parse(R"({"a": "x", "b": 2, "c": "k"})"));
  CHECK(trials[2] == json::parse(R"({"a": "y", "b": 1, "c": "k"})"));
  CHECK(trials[5] == json::parse(R"({"a": "z", "b": 2, "c": "k"})"));
  CHECK(describe(spec) == "grid, 3 parameters, 6 trials");
}

TEST_CASE("sweeps.grid: duplicates dropped keeping the first - 3.0 == 3 true != 1 objects by content") {
  SweepSpec spec = parse_ok(R"({"method": "grid", "parameters": {
      "v": {"values": [3, true, 3.0, 1, {"a": 1, "b": 2}, {"b": 2, "a": 1}, "3", [1, 2], [1.0, 2]]}}})");
  const auto trials = all_trials(spec);
  REQUIRE(trials.size() == 6);
  CHECK(trials[0]["v"].is_number_integer());  // the first occurrence (3, not 3.0) is kept
  CHECK(trials[0]["v"] == 3);
  CHECK(trials[1]["v"] == true);
  CHECK(trials[2]["v"] == 1);
  CHECK(trials[2]["v"].is_number_integer());
  CHECK(trials[3]["v"] == json::parse(R"({"a": 1, "b": 2})"));
  CHECK(trials[4]["v"] == "3");
  CHECK(trials[5]["v"] == json::parse("[1, 2]"));
}

TEST_CASE("sweeps.grid: int_uniform includes both ends - q_uniform is numpy.arange max excluded") {
  SweepSpec spec = parse_ok(R"({"method": "grid", "parameters": {"n": {"min": -2, "max": 2}}})");
  std::vector<int64_t> ns;
  for (const auto& t : all_trials(spec)) ns.push_back(t["n"].get<int64_t>());
  CHECK(ns == std::vector<int64_t>{-2, -1, 0, 1, 2});

  SweepSpec q = parse_ok(R"({"method": "grid", "parameters": {"x": {"distribution": "q_uniform", "min": 0, "max": 1, "q": 0.25}}})");
  const auto xs = all_trials(q);
  REQUIRE(xs.size() == 4);
  CHECK(xs[0]["x"].is_number_float());
  CHECK(xs[3]["x"].get<double>() == doctest::Approx(0.75));

  SweepSpec qi = parse_ok(R"({"method": "grid", "parameters": {"x": {"distribution": "q_uniform", "min": 1, "max": 10, "q": 3}}})");
  const auto is = all_trials(qi);
  REQUIRE(is.size() == 3);  // 1, 4, 7 (10 is max: excluded)
  CHECK(is[2]["x"] == 7);
  CHECK(is[2]["x"].is_number_integer());
}

TEST_CASE("sweeps.grid: nested blocks sort per level and come back nested") {
  SweepSpec spec = parse_ok(R"({"method": "grid", "parameters": {
      "opt": {"parameters": {"name": {"values": ["adam", "sgd"]}, "beta": {"values": [0.9, 0.99]}}},
      "lr": {"values": [0.1, 0.01]}}})");
  const auto trials = all_trials(spec);
  REQUIRE(trials.size() == 8);
  CHECK(trials[0] == json::parse(R"({"lr": 0.1, "opt": {"beta": 0.9, "name": "adam"}})"));
  CHECK(trials[1] == json::parse(R"({"lr": 0.1, "opt": {"beta": 0.9, "name": "sgd"}})"));
  CHECK(trials[2] == json::parse(R"({"lr": 0.1, "opt": {"beta": 0.99, "name": "adam"}})"));
  CHECK(trials[4]["lr"] == 0.01);
  CHECK(parameter_count(spec) == 3);
}

TEST_CASE("sweeps.grid: run_cap caps - order random is a seeded permutation of the same trials") {
  const std::string base = R"({"method": "grid", "parameters": {"a": {"values": [1,2,3,4,5]}, "b": {"values": [1,2,3,4]}}})";
  SweepSpec capped = parse_ok(base.substr(0, base.size() - 1) + R"(, "run_cap": 7})");
  CHECK(trial_count(capped) == 7);

  SweepSpec sequential = parse_ok(base);
  SweepSpec shuffled = parse_ok(base.substr(0, base.size() - 1) + R"(, "order": "random", "seed": 5})");
  SweepSpec shuffled_again = parse_ok(base.substr(0, base.size() - 1) + R"(, "order": "random", "seed": 5})");
  SweepSpec other_seed = parse_ok(base.substr(0, base.size() - 1) + R"(, "order": "random", "seed": 6})");
  const auto a = all_trials(sequential), b = all_trials(shuffled), c = all_trials(shuffled_again), d = all_trials(other_seed);
  CHECK(b == c);
  CHECK(b != a);
  CHECK(b != d);
  std::set<std::string> sa, sb;
  for (const auto& t : a) sa.insert(t.dump());
  for (const auto& t : b) sb.insert(t.dump());
  CHECK(sa == sb);
  CHECK(sb.size() == 20);
}

TEST_CASE("sweeps.explicit trials: listed in order constants merged run_cap applies") {
  SweepSpec spec = parse_ok(R"({"parameters": {"epochs": {"value": 2}},
      "trials": [{"lr": 0.1, "opt": {"name": "adam"}}, {"lr": 0.01, "opt": {"name": "sgd"}}, {"lr": 1e-3}]})");
  const auto trials = all_trials(spec);
  REQUIRE(trials.size() == 3);
  CHECK(trials[0] == json::parse(R"({"epochs": 2, "lr": 0.1, "opt": {"name": "adam"}})"));
  CHECK(trials[2] == json::parse(R"({"epochs": 2, "lr": 0.001})"));
  CHECK(describe(spec) == "explicit trials, 3 parameters, 3 trials");
}

TEST_CASE("sweeps.random: same seed same trials other seed other trials - run_cap or unbounded") {
  const std::string text = R"({"method": "random", "seed": 11, "run_cap": 50, "parameters": {
      "lr": {"distribution": "log_uniform_values", "min": 1e-5, "max": 1e-1},
      "layers": {"min": 1, "max": 8}, "act": {"values": ["relu", "gelu"]}}})";
  SweepSpec a = parse_ok(text), b = parse_ok(text);
  CHECK(trial_count(a) == 50);
  CHECK(all_trials(a) == all_trials(b));
  SweepSpec c = a;
  c.seed = 12;
  CHECK(all_trials(a) != all_trials(c));
  // trial_at(i) does not depend on which trials were computed before.
  CHECK(trial_at(a, 37).params == all_trials(b)[37]);
  SweepSpec unbounded = parse_ok(R"({"method": "random", "parameters": {"x": {"min": 0.0, "max": 1.0}}})");
  CHECK_FALSE(trial_count(unbounded).has_value());
  CHECK(describe(unbounded) == "random, 1 parameter, unbounded (no run_cap)");
  SweepSpec gang = parse_ok(R"({"method": "grid", "resources": {"nodes": 4, "procs_per_node": 8},
      "parameters": {"x": {"values": [1, 2]}}})");
  CHECK(describe(gang) == "grid, 1 parameter, 2 trials, each on 4 nodes x 8 processes");
}

TEST_CASE("sweeps.random: draws follow the documented recipe recomputed here") {
  SweepSpec spec = parse_ok(R"({"method": "random", "seed": 42, "parameters": {
      "u": {"min": 2.0, "max": 6.0},
      "i": {"min": 1, "max": 10},
      "c": {"values": ["a", "b", "c", "d"]},
      "n": {"distribution": "normal", "mu": 1, "sigma": 2},
      "b": {"distribution": "beta", "a": 2, "b": 1},
      "l": {"distribution": "log_uniform_values", "min": 0.001, "max": 10},
      "q": {"distribution": "q_uniform", "min": 0, "max": 100, "q": 5},
      "nested": {"parameters": {"x": {"min": 0.0, "max": 1.0}}}}})");
  for (int64_t index : {0, 1, 2, 1000, 123456789}) {
    INFO("index " << index);
    const json p = trial_at(spec, index).params;
    const double uu = documented_u(42, index, "u");
    CHECK(p["u"].get<double>() == uu * 4.0 + 2.0);
    const double ui = documented_u(42, index, "i");
    CHECK(p["i"] == static_cast<int64_t>(std::ceil(ui * 10)));
    const double uc = documented_u(42, index, "c");
    CHECK(p["c"] == std::string(1, static_cast<char>('a' + static_cast<int>(std::ceil(uc * 4)) - 1)));
    // Normal: check through erfc, independent of our quantile code.
    const double x = p["n"].get<double>();
    CHECK(0.5 * std::erfc(-(x - 1.0) / (2.0 * std::sqrt(2.0))) == doctest::Approx(documented_u(42, index, "n")).epsilon(1e-12));
    // beta(2, 1) has CDF x^2.
    CHECK(p["b"].get<double>() == doctest::Approx(std::sqrt(documented_u(42, index, "b"))).epsilon(1e-12));
    const double ul = documented_u(42, index, "l");
    CHECK(p["l"].get<double>() == doctest::Approx(0.001 * std::pow(10000.0, ul)).epsilon(1e-12));
    const double uq = documented_u(42, index, "q");
    CHECK(p["q"] == static_cast<int64_t>(std::nearbyint(uq * 100.0 / 5.0) * 5));
    CHECK(p["nested"]["x"].get<double>() == documented_u(42, index, "nested.x"));
  }
}

TEST_CASE("sweeps.random: pinned draws identical on every machine") {
  // Computed once from the recipe; a change here breaks reproducibility of
  // every random sweep already run.
  SweepSpec spec = parse_ok(R"({"method": "random", "seed": 42, "parameters": {"x": {"min": 0.0, "max": 1.0}}})");
  CHECK(trial_at(spec, 0).params["x"].get<double>() == documented_u(42, 0, "x"));
  CHECK(documented_u(42, 0, "x") == 0.9922582449710726);
}

// Every distribution: many draws stay in bounds, quantized ones are multiples
// of q, integer-typed exactly where the format says.
struct Case {
  const char* config;
  double lo, hi;
  double q;        // 0: not quantized
  bool integers;   // results are JSON integers
};

TEST_CASE("sweeps.random: every distributions bounds quantization and result type") {
  const Case cases[] = {
      {R"({"value": 7})", 7, 7, 0, true},
      {R"({"values": [1, 5, 9]})", 1, 9, 0, true},
      {R"({"values": [1, 5, 9], "probabilities": [0.2, 0.0, 0.8]})", 1, 9, 0, true},
      {R"({"min": -3, "max": 4})", -3, 4, 0, true},
      {R"({"min": -3, "max": 4.5})", -3, 4.5, 0, false},
      {R"({"distribution": "uniform", "min": 0, "max": 1})", 0, 1, 0, false},
      {R"({"distribution": "q_uniform", "min": 0, "max": 10, "q": 2})", 0, 10, 2, true},
      {R"({"distribution": "q_uniform", "min": 0, "max": 1, "q": 0.25})", 0, 1, 0.25, false},
      {R"({"distribution": "q_uniform", "min": 0.5, "max": 10.5, "q": 1})", 0, 11, 1, false},
      {R"({"distribution": "log_uniform_values", "min": 1e-4, "max": 1})", 1e-4, 1, 0, false},
      {R"({"distribution": "inv_log_uniform_values", "min": 0.01, "max": 100})", 0.01, 100, 0, false},
      {R"({"distribution": "q_log_uniform_values", "min": 1, "max": 1024, "q": 8})", 0, 1024, 8, true},
      {R"({"distribution": "normal", "mu": 5, "sigma": 0.5})", 5 - 4.5, 5 + 4.5, 0, false},
      {R"({"distribution": "q_normal", "mu": 0, "sigma": 10, "q": 5})", -90, 90, 5, true},
      {R"({"distribution": "log_normal", "mu": 0, "sigma": 1})", 0, std::exp(9.0), 0, false},
      {R"({"distribution": "q_log_normal", "mu": 2, "sigma": 0.5, "q": 0.5})", 0, std::exp(6.5), 0.5, false},
      {R"({"distribution": "beta", "a": 0.5, "b": 3})", 0, 1, 0, false},
      {R"({"distribution": "q_beta", "a": 2, "b": 2, "q": 0.1})", 0, 1, 0.1, false},
  };
  for (const Case& c : cases) {
    INFO(c.config);
    SweepSpec spec = parse_ok(std::string(R"({"method": "random", "seed": 3, "parameters": {"p": )") + c.config + "}}");
    std::set<std::string> distinct;
    for (int64_t i = 0; i < 2000; ++i) {
      const json v = trial_at(spec, i).params["p"];
      REQUIRE(v.is_number());
      CHECK(v.is_number_integer() == c.integers);
      const double x = v.get<double>();
      CHECK(x >= c.lo);
      CHECK(x <= c.hi);
      if (c.q > 0) CHECK(std::fabs(x / c.q - std::nearbyint(x / c.q)) < 1e-9);
      distinct.insert(v.dump());
    }
    CHECK(distinct.size() >= (c.lo == c.hi ? 1u : 2u));
  }
}

TEST_CASE("sweeps.random: categorical probabilities are honoured zero never drawn") {
  SweepSpec spec = parse_ok(R"({"method": "random", "seed": 1, "parameters": {
      "v": {"values": ["a", "b", "c"], "probabilities": [0.25, 0.0, 0.75]}}})");
  int a = 0, c = 0;
  for (int64_t i = 0; i < 4000; ++i) {
    const std::string v = trial_at(spec, i).params["v"];
    CHECK(v != "b");
    (v == "a" ? a : c)++;
  }
  CHECK(a > 850);   // expected 1000, sd ~27
  CHECK(a < 1150);
  CHECK(a + c == 4000);
}

TEST_CASE("sweeps.random without replacement: every combination once capped by run_cap") {
  SweepSpec spec = parse_ok(R"({"method": "random", "seed": 9, "without_replacement": true, "run_cap": 10,
      "parameters": {"a": {"values": [1, 2, 3]}, "b": {"min": 0, "max": 3}}})");
  CHECK(trial_count(spec) == 10);
  std::set<std::string> seen;
  for (const auto& t : all_trials(spec)) seen.insert(t.dump());
  CHECK(seen.size() == 10);
  SweepSpec uncapped = parse_ok(R"({"method": "random", "seed": 9, "without_replacement": true,
      "parameters": {"a": {"values": [1, 2, 3]}, "b": {"min": 0, "max": 3}}})");
  CHECK(trial_count(uncapped) == 12);
  seen.clear();
  for (const auto& t : all_trials(uncapped)) seen.insert(t.dump());
  CHECK(seen.size() == 12);
  CHECK(describe(uncapped) == "random without replacement, 2 parameters, 12 trials");
}

}  // namespace
}  // namespace swept::sweeps

namespace swept::sweeps {
namespace {

TEST_CASE("sweeps.grid: dedup of a long values list keeps first occurrences in order") {
  // 60000 values, each written twice (as int, then as the equal float):
  // dedup must be hash-based, not quadratic.
  std::string values;
  for (int i = 0; i < 60000; ++i) {
    if (i) values += ',';
    values += std::to_string(i);
  }
  for (int i = 0; i < 60000; ++i) {
    values += ',';
    values += std::to_string(i);
    values += ".0";
  }
  const ParseOutcome outcome = parse_sweep(R"({"method": "grid", "parameters": {"v": {"values": [)" + values + "]}}}");
  REQUIRE(outcome.spec.has_value());
  CHECK(trial_count(*outcome.spec) == 60000);
  CHECK(trial_at(*outcome.spec, 59999).params["v"] == 59999);
  CHECK(trial_at(*outcome.spec, 59999).params["v"].is_number_integer());
}

}  // namespace
}  // namespace swept::sweeps
