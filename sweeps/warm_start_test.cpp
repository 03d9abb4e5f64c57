// Warm starts in sweeps/: the `warm_start` key's problems, and which earlier
// trials fit a space (each way of not fitting counted), where grid points go.
#include "sweeps/warm_start.h"

#include <doctest/doctest.h>

#include <string>

namespace swept::sweeps {
namespace {

using json = nlohmann::json;

SweepSpec parsed(const std::string& text) {
  ParseOutcome out = parse_sweep(text);
  for (const auto& p : out.problems) INFO(p.ToString());
  REQUIRE(out.spec);
  return *out.spec;
}

std::vector<std::string> problems(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& p : parse_sweep(text).problems) out.push_back(p.ToString());
  return out;
}

WarmCandidate candidate(json params, std::optional<double> value, const std::string& origin = "t") {
  return WarmCandidate{std::move(params), value, origin, false};
}

const char* kRandomSpace = R"({"method": "tpe", "metric": {"name": "loss"}, "warm_start": {"sweep": 4},
  "parameters": {"lr": {"min": 0.0, "max": 1.0}, "layers": {"min": 1, "max": 4},
                 "act": {"values": ["relu", "tanh"]}, "opt": {"parameters": {"beta": {"value": 0.9}}}}})";

}  // namespace

TEST_CASE("warm_start: the key reads a sweep id or a file, and nothing else") {
  SweepSpec s = parsed(kRandomSpace);
  REQUIRE(s.warm_start);
  CHECK(s.warm_start->sweep == 4);
  CHECK_FALSE(s.warm_start->file);
  SweepSpec f = parsed(R"({"method": "grid", "metric": {"name": "loss"}, "warm_start": {"file": "runs.csv"},
                           "parameters": {"x": {"values": [1, 2]}}})");
  REQUIRE(f.warm_start);
  CHECK(f.warm_start->file == "runs.csv");
  CHECK_FALSE(parsed(R"({"method": "grid", "parameters": {"x": {"values": [1]}}})").warm_start);

  const std::string head = R"({"method": "grid", "metric": {"name": "loss"}, "parameters": {"x": {"values": [1]}}, )";
  CHECK(problems(head + R"("warm_start": {"sweep": 1, "file": "a.csv"}})") ==
        std::vector<std::string>{"warm_start: expected {sweep: ID} (a sweep in the same database) or {file: PATH} (a "
                                 "CSV or JSON file `swept export` wrote), found an object"});
  CHECK(problems(head + R"("warm_start": 3})").size() == 1);
  CHECK(problems(head + R"("warm_start": {"sweep": 0}})") ==
        std::vector<std::string>{"warm_start.sweep: expected a sweep id (a positive integer), found 0"});
  CHECK(problems(head + R"("warm_start": {"file": ""}})").front().rfind("warm_start.file: ", 0) == 0);
  CHECK(problems(R"({"method": "grid", "parameters": {"x": {"values": [1]}}, "warm_start": {"sweep": 2}})") ==
        std::vector<std::string>{
            "warm_start: expected a metric (a warm start seeds the search with earlier values of it), found none"});
}

TEST_CASE("warm_start: trials outside the space are skipped, each way counted, the first named") {
  const SweepSpec spec = parsed(kRandomSpace);
  const json ok = {{"lr", 0.5}, {"layers", 2}, {"act", "relu"}, {"opt", {{"beta", 0.9}}}, {"extra", 7}};
  auto with = [&](const std::string& key, json v) {
    json p = ok;
    if (v.is_null()) p.erase(key); else p[key] = v;
    return p;
  };
  std::vector<WarmCandidate> c = {
      candidate(ok, 0.3, "a"),
      candidate(with("lr", 3.0), 0.1, "b"),           // above max
      candidate(with("layers", 2.5), 0.1, "c"),       // not an integer
      candidate(with("act", "gelu"), 0.1, "d"),       // not among the values
      candidate(with("lr", nullptr), 0.1, "e"),       // missing
      candidate(with("lr", "0.5"), 0.1, "f"),         // a string where a number goes
      candidate(with("opt", json{{"beta", 0.8}}), 0.1, "g"),  // not the constant
      candidate(ok, std::nullopt, "h"),               // no value of the metric
  };
  WarmPlan plan = plan_warm_start(spec, c);
  REQUIRE(plan.seeds.size() == 1);
  CHECK(plan.seeds[0].params == json{{"lr", 0.5}, {"layers", 2}, {"act", "relu"}, {"opt", {{"beta", 0.9}}}});
  CHECK(plan.seeds[0].value == 0.3);
  CHECK_FALSE(plan.seeds[0].grid_index);
  CHECK(plan.offered == 8);
  CHECK(plan.outside_space == 6);
  CHECK(plan.without_value == 1);
  CHECK(plan.first_outside == "b: parameters.lr: 3.0 is outside [0, 1]");
  CHECK(plan.summary("loss") ==
        "1 of 8 earlier trials fit; 7 skipped: 6 outside this sweep's space (first: b: parameters.lr: 3.0 is outside "
        "[0, 1]), 1 without a final value of loss (not completed, or never reported it)");
  std::string why;
  CHECK_FALSE(fit_to_space(spec, with("layers", 2.5), false, &why));
  CHECK(why == "parameters.layers: 2.5 is not an integer");
}

TEST_CASE("warm_start: a grid seeds its own points, by index, once each, and CSV text finds them too") {
  const SweepSpec spec = parsed(R"({"method": "grid", "metric": {"name": "acc", "goal": "maximize"},
    "parameters": {"lr": {"values": [0.1, 0.01]}, "act": {"values": ["relu", "1"]}}})");
  // Grid order: the last leaf (by name: lr) varies fastest: (relu,0.1) (relu,0.01) ("1",0.1) ("1",0.01).
  std::vector<WarmCandidate> c = {
      candidate({{"lr", 0.01}, {"act", "relu"}}, 0.8, "a"),
      candidate({{"lr", 0.01}, {"act", "relu"}}, 0.7, "b"),  // the same point again
      candidate({{"lr", 0.05}, {"act", "relu"}}, 0.9, "c"),  // not among the values
  };
  WarmCandidate csv{{{"lr", 0.1}, {"act", 1}}, 0.6, "d", /*text_values=*/true};  // "1" read back as a number
  c.push_back(csv);
  WarmPlan plan = plan_warm_start(spec, c);
  REQUIRE(plan.seeds.size() == 2);
  CHECK(plan.seeds[0].grid_index == 1);
  CHECK(plan.seeds[1].grid_index == 2);
  CHECK(plan.seeds[1].params == json{{"lr", 0.1}, {"act", "1"}});  // the grid's own spelling
  CHECK(plan.duplicates == 1);
  CHECK(plan.outside_space == 1);
  csv.text_values = false;  // from JSON, types must fit
  CHECK(plan_warm_start(spec, {csv}).seeds.empty());
}

TEST_CASE("warm_start: a stored trial is a candidate with its latest value of this sweep's metric, if it completed") {
  TrialRow r;
  r.id = 17;
  r.state = TrialState::kCompleted;
  r.params = {{"x", 1}};
  r.latest = {{"loss", 0.25}, {"acc", 0.9}};
  WarmCandidate c = candidate_from_row(r, "loss", "sweep 3");
  CHECK(c.origin == "sweep 3, trial 17");
  CHECK(c.value == 0.25);
  CHECK_FALSE(candidate_from_row(r, "val_loss", "sweep 3").value);
  r.state = TrialState::kFailed;
  CHECK_FALSE(candidate_from_row(r, "loss", "sweep 3").value);
}

}  // namespace swept::sweeps
