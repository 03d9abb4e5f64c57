// The stopping rules against the peers' own answers: every `wandb.hyperband`
// case of ../shared/conformance/wandb-sweeps-vectors.json and the optuna.pruner.*
// vectors of optuna-pruner-vectors.json (README.md there says how they were made).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "sweeps/stopping/stopping.h"

namespace swept::sweeps::stopping {
namespace {

using nlohmann::json;

json load(const char* name) {
  std::ifstream in(std::string(SWEPT_SOURCE_DIR "/../shared/conformance/") + name);
  REQUIRE_MESSAGE(in.good(), "missing conformance file " << name);
  return json::parse(in);
}

// The vectors write non-finite numbers as strings.
double number(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "NaN") return std::nan("");
    if (s == "Infinity") return HUGE_VAL;
    if (s == "-Infinity") return -HUGE_VAL;
  }
  return v.get<double>();
}

bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= 1e-9 + 1e-9 * std::fabs(b);
}

CurveState wandb_state(const std::string& s) {
  if (s == "running") return CurveState::kRunning;
  if (s == "finished") return CurveState::kFinished;
  if (s == "crashed" || s == "failed") return CurveState::kFailed;
  return CurveState::kOther;  // killed, pending, preempting, ...
}

// One W&B run: a history entry that is not a number is a row without the
// metric (skipped); "NaN"/"Infinity" strings become the non-finite values a
// swept trial would log, which the rule must skip itself.
TrialCurve wandb_run(const json& run, int64_t index) {
  TrialCurve t;
  t.number = index;
  t.state = wandb_state(run["state"].get<std::string>());
  int64_t step = 0;
  for (const json& v : run["history"]) {
    if (v.is_number() && !v.is_boolean()) t.reports.push_back({step++, v.get<double>()});
    else if (v.is_string() && (v == "NaN" || v == "Infinity" || v == "-Infinity")) t.reports.push_back({step++, number(v)});
  }
  return t;
}

TEST_CASE("sweeps.stopping.conformance: every wandb.hyperband case") {
  int cases = 0, passed = 0, errors = 0;
  for (const json& vec : load("wandb-sweeps-vectors.json")) {
    if (vec.value("kind", "") != "wandb.hyperband") continue;
    for (const json& c : vec["cases"]) {
      ++cases;
      const json& config = c["config"];
      CAPTURE(c["source"].get<std::string>());
      std::optional<Metric> metric;
      if (config.contains("metric")) {
        // W&B's fill replaces an invalid goal ("minimise") by the default.
        metric = Metric{config["metric"]["name"].get<std::string>(),
                        config["metric"].value("goal", "") == "maximize" ? Goal::kMaximize : Goal::kMinimize, std::nullopt};
      }
      json et = config.value("early_terminate", json());
      // validate=False: upstream drops keys its schema does not know.
      if (et.is_object())
        for (const char* k : {"extra_key"}) et.erase(k);
      auto rule = parse_rule(et, metric);
      if (c.contains("expected_error") && !c["expected_error"].is_null()) {
        CHECK_MESSAGE(!rule.ok(), "expected a refusal");
        if (!rule.ok()) ++passed, ++errors;
        continue;
      }
      REQUIRE_MESSAGE(rule.ok(), rule.status().ToString());
      std::vector<TrialCurve> trials;
      std::map<int64_t, std::string> names;
      for (const json& run : c["runs"]) {
        trials.push_back(wandb_run(run, static_cast<int64_t>(trials.size())));
        names[trials.back().number] = run["name"].get<std::string>();
      }
      json stopped = json::array();
      for (const Decision& d : decide(*rule, trials))
        if (d.stop) stopped.push_back(names[d.number]);
      const HyperbandBands hb = hyperband_bands(*rule, trials);
      bool ok = stopped == c["expected_stop"];
      CHECK(stopped == c["expected_stop"]);
      const json& prefix = c["expected_bands_prefix"];
      const json& thresholds = c["info_thresholds_in_minimize_space"];
      REQUIRE(hb.bands.size() >= prefix.size());
      for (size_t i = 0; i < prefix.size(); ++i) {
        ok = ok && hb.bands[i] == prefix[i].get<int64_t>();
        CHECK(hb.bands[i] == prefix[i].get<int64_t>());
        const double want = thresholds[i].is_null() ? HUGE_VAL : thresholds[i].get<double>();
        ok = ok && same(hb.thresholds[i], want);
        CHECK(same(hb.thresholds[i], want));
      }
      if (c["config"]["early_terminate"].contains("max_iter")) CHECK(hb.bands.size() == prefix.size());
      passed += ok;
    }
  }
  MESSAGE("wandb.hyperband: " << passed << "/" << cases << " cases pass (" << errors << " refusals)");
  CHECK(cases == 39);
  CHECK(passed == cases);
}

TrialCurve optuna_trial(const json& t, CurveState state) {
  TrialCurve c;
  c.number = t["number"].get<int64_t>();
  c.state = state;
  for (const auto& [step, v] : t["intermediate_values"].items()) c.reports.push_back({std::stoll(step), number(v)});
  if (t.contains("completed_rungs"))
    for (const auto& [rung, v] : t["completed_rungs"].items()) c.completed_rungs[std::stoi(rung)] = number(v);
  return c;
}

CurveState optuna_state(const std::string& s) {
  if (s == "COMPLETE") return CurveState::kFinished;
  if (s == "PRUNED") return CurveState::kEarlyStopped;
  if (s == "FAIL") return CurveState::kFailed;
  if (s == "RUNNING") return CurveState::kRunning;
  return CurveState::kOther;
}

Goal goal_of(const json& v) { return v.value("direction", "minimize") == "maximize" ? Goal::kMaximize : Goal::kMinimize; }

TEST_CASE("sweeps.stopping.conformance: optuna.pruner snapshot vectors") {
  std::map<std::string, std::pair<int, int>> counts;  // kind -> (passed, total)
  for (const json& vec : load("optuna-pruner-vectors.json")) {
    const std::string kind = vec.value("kind", "");
    if (kind.rfind("optuna.pruner.", 0) != 0 || !vec.contains("judged")) continue;
    CAPTURE(vec["id"].get<std::string>());
    auto& [pass, total] = counts[kind];
    ++total;
    auto rule = parse_optuna_pruner(vec["pruner"], goal_of(vec), vec.value("study_name", ""));
    REQUIRE_MESSAGE(rule.ok(), rule.status().ToString());
    std::vector<TrialCurve> others;
    for (const json& t : vec["trials"]) others.push_back(optuna_trial(t, optuna_state(t["state"].get<std::string>())));
    const TrialCurve judged = optuna_trial(vec["judged"], CurveState::kRunning);
    const Decision d = judge(*rule, judged, others);
    bool ok = d.stop == vec["expected_prune"].get<bool>();
    CHECK(d.stop == vec["expected_prune"].get<bool>());
    if (vec.contains("expected_judged_completed_rungs_after")) {
      std::map<int, double> want;
      for (const auto& [rung, v] : vec["expected_judged_completed_rungs_after"].items()) want[std::stoi(rung)] = number(v);
      bool rungs_ok = want.size() == d.completed_rungs.size();
      for (const auto& [rung, v] : want) rungs_ok = rungs_ok && d.completed_rungs.count(rung) && same(d.completed_rungs.at(rung), v);
      CHECK(rungs_ok);
      ok = ok && rungs_ok;
    }
    if (vec.contains("expected_bracket") && !vec["expected_bracket"].is_null()) {
      CHECK(d.bracket == vec["expected_bracket"].get<int64_t>());
      ok = ok && d.bracket == vec["expected_bracket"].get<int64_t>();
    }
    CHECK(!d.reason.empty());
    pass += ok;
  }
  for (const auto& [kind, pt] : counts) {
    MESSAGE(kind << ": " << pt.first << "/" << pt.second);
    CHECK(pt.first == pt.second);
  }
  CHECK(counts["optuna.pruner.hyperband"].second == 5);
  CHECK(counts["optuna.pruner.successive_halving"].second == 61);
  CHECK(counts["optuna.pruner.median"].second == 32);
}

const json& vector_by_id(const json& all, const std::string& id) {
  for (const json& v : all)
    if (v.value("id", "") == id) return v;
  FAIL("no vector " << id);
  static json none;
  return none;
}

TEST_CASE("sweeps.stopping.conformance: optuna compact vectors (sh-01, median-01, median-02, percentile-01)") {
  const json all = load("optuna-pruner-vectors.json");
  SUBCASE("optuna-sh-01: ten trials each report once at step 7") {
    const json& v = vector_by_id(all, "optuna-sh-01");
    auto rule = parse_optuna_pruner(v["pruner"], Goal::kMinimize);
    REQUIRE(rule.ok());
    std::vector<TrialCurve> done;
    for (size_t i = 0; i < v["trials_in_order_each_reports_once_at_step_7"].size(); ++i) {
      TrialCurve t;
      t.number = static_cast<int64_t>(i);
      t.reports.push_back({7, v["trials_in_order_each_reports_once_at_step_7"][i].get<double>()});
      const Decision d = judge(*rule, t, done);
      const json& want = v["expected"][i];
      CHECK(d.stop == want["pruned"].get<bool>());
      std::vector<int> rungs;
      for (const auto& [r, x] : d.completed_rungs) rungs.push_back(r);
      CHECK(json(rungs) == want["completed_rungs"]);
      t.completed_rungs = d.completed_rungs;
      t.state = d.stop ? CurveState::kEarlyStopped : CurveState::kFinished;
      done.push_back(t);
    }
  }
  SUBCASE("optuna-median-01: interval steps") {
    const json& v = vector_by_id(all, "optuna-median-01");
    for (const json& c : v["cases"]) {
      json pruner = {{"type", "median"}, {"n_startup_trials", 0}, {"n_warmup_steps", c["n_warmup_steps"]},
                     {"interval_steps", c["interval_steps"]}};
      auto rule = parse_optuna_pruner(pruner, Goal::kMinimize);
      REQUIRE(rule.ok());
      std::set<int64_t> expected;
      for (const json& s : c["expected_prune_steps"]) expected.insert(s.get<int64_t>());
      const int64_t last_step = *expected.rbegin() + 1;
      TrialCurve t0;
      t0.state = CurveState::kFinished;
      for (int64_t i = 0; i < last_step; ++i) t0.reports.push_back({i, 0.0});
      TrialCurve t1;
      t1.number = 1;
      std::set<int64_t> pruned;
      for (int64_t i = 0; i < last_step; ++i) {
        if (i % c["report_every"].get<int64_t>() == 0) t1.reports.push_back({i, 2.0});
        // Optuna's last_step is the largest reported step, whatever step we are "at".
        if (!t1.reports.empty() && judge(*rule, t1, {t0}).stop) pruned.insert(i);
      }
      CHECK(pruned == expected);
    }
  }
  SUBCASE("optuna-median-02: n_min_trials") {
    const json& v = vector_by_id(all, "optuna-median-02");
    auto rule = parse_optuna_pruner(v["pruner"], Goal::kMinimize);
    REQUIRE(rule.ok());
    std::vector<TrialCurve> done;
    for (const json& step : v["sequence"]) {
      TrialCurve t;
      t.number = static_cast<int64_t>(done.size());
      for (const auto& [k, x] : step["reports"].items()) t.reports.push_back({std::stoll(k), x.get<double>()});
      if (step.contains("expect_should_prune")) CHECK(judge(*rule, t, done).stop == step["expect_should_prune"].get<bool>());
      t.state = CurveState::kFinished;
      done.push_back(t);
    }
  }
  SUBCASE("optuna-percentile-01: 25th percentile, both directions") {
    const json& v = vector_by_id(all, "optuna-percentile-01");
    for (const json& c : v["cases"]) {
      const Goal goal = goal_of(c);
      auto rule = parse_optuna_pruner({{"type", "percentile"}, {"percentile", 25.0}, {"n_startup_trials", 0}}, goal);
      REQUIRE(rule.ok());
      std::vector<TrialCurve> done;
      for (int i = 1; i <= 5; ++i) {
        TrialCurve t;
        t.number = i - 1;
        t.state = CurveState::kFinished;
        t.reports.push_back({1, static_cast<double>(i)});
        done.push_back(t);
      }
      TrialCurve judged;
      judged.number = 5;
      judged.reports.push_back({1, c["latest"].get<double>()});
      CHECK(judge(*rule, judged, done).stop == c["expected_prune"].get<bool>());
    }
  }
}

TEST_CASE("sweeps.stopping.conformance: optuna hyperband brackets (hb-01, hb-02)") {
  const json all = load("optuna-pruner-vectors.json");
  int checked = 0;
  auto check = [&](const json& c, const std::string& study) {
    OptunaHyperbandSettings s;
    s.min_resource = c["min_resource"].get<int64_t>();
    s.reduction_factor = c["reduction_factor"].get<int64_t>();
    s.study_name = study;
    const int64_t max_resource = c["max_resource"].get<int64_t>();
    for (size_t i = 0; i < c["trial_numbers"].size(); ++i) {
      CHECK(optuna_hyperband_bracket(s, max_resource, c["trial_numbers"][i].get<int64_t>()) == c["expected_bracket"][i].get<int64_t>());
      ++checked;
    }
  };
  check(vector_by_id(all, "optuna-hb-01")["bracket_ids"], "my-study");
  for (const json& c : vector_by_id(all, "optuna-hb-02")["cases"]) check(c, c["study_name"].get<std::string>());
  MESSAGE("hyperband bracket ids checked: " << checked);
  CHECK(checked >= 90);
}

TEST_CASE("sweeps.stopping.conformance: optuna helpers and invalid settings") {
  const json all = load("optuna-pruner-vectors.json");
  int helpers = 0, invalid = 0, valid = 0;
  for (const json& vec : all) {
    const std::string kind = vec.value("kind", "");
    if (kind == "optuna.pruner.percentile.helper") {
      for (const json& c : vec["cases"]) {
        ++helpers;
        if (c["function"] == "percentile_over_completed_trials") {
          std::vector<double> values;
          for (const json& x : c["values_at_step"]) values.push_back(number(x));
          CHECK(same(percentile_of(values, c["percentile"].get<double>(), goal_of(c), c["n_min_trials"].get<int64_t>()),
                     number(c["expected"])));
        } else {
          std::vector<double> values;
          for (const auto& [k, x] : c["intermediate_values"].items()) values.push_back(number(x));
          CHECK(same(best_of(values, goal_of(c)), number(c["expected"])));
        }
      }
    }
    if (kind == "optuna.pruner.invalid_settings") {
      for (const json& c : vec["cases"]) {
        ++invalid;
        CAPTURE(c["pruner"].dump());
        auto rule = parse_optuna_pruner(c["pruner"], Goal::kMinimize);
        CHECK(!rule.ok());
        if (!rule.ok()) CHECK(rule.status().message().rfind("pruner", 0) == 0);
      }
      for (const json& c : vec["valid"]) {
        ++valid;
        CAPTURE(c["pruner"].dump());
        CHECK(parse_optuna_pruner(c["pruner"], Goal::kMinimize).ok());
      }
    }
  }
  MESSAGE("helpers " << helpers << ", refused settings " << invalid << ", accepted boundary settings " << valid);
  CHECK(helpers == 10);
  CHECK(invalid == 25);
}

}  // namespace
}  // namespace swept::sweeps::stopping
