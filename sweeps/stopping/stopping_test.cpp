// Unit tests of the stopping rules beyond the vectors: refusals that name the
// field, reasons on every decision, ASHA rung records recomputed from history.
#include <doctest/doctest.h>

#include <cmath>

#include "sweeps/stopping/stopping.h"

namespace swept::sweeps::stopping {
namespace {

using nlohmann::json;

const Metric kLoss{"loss", Goal::kMinimize, std::nullopt};

std::string refusal(const json& et, std::optional<Metric> metric = kLoss) {
  auto r = parse_rule(et, metric);
  return r.ok() ? std::string("accepted") : r.status().message();
}

TEST_CASE("sweeps.stopping: settings that cannot work are refused with the field named") {
  CHECK(refusal({{"type", "hyperband"}, {"min_iter", 3}, {"eta", 1}}).rfind("early_terminate.eta:", 0) == 0);
  CHECK(refusal({{"type", "hyperband"}, {"min_iter", 3}, {"eta", 0.5}}).rfind("early_terminate.eta:", 0) == 0);
  CHECK(refusal({{"type", "hyperband"}, {"min_iter", 0}}).rfind("early_terminate.min_iter:", 0) == 0);
  CHECK(refusal({{"type", "hyperband"}, {"min_iter", 9}, {"max_iter", 9}, {"s", 2}}).rfind("early_terminate.max_iter:", 0) == 0);
  CHECK(refusal({{"type", "hyperband"}, {"max_iter", 27}}).rfind("early_terminate.s:", 0) == 0);
  CHECK(refusal({{"type", "hyperband"}, {"max_iter", 2}, {"s", 1}, {"eta", 3}}).rfind("early_terminate.max_iter:", 0) == 0);
  CHECK(refusal({{"type", "hyperband"}}).rfind("early_terminate:", 0) == 0);
  CHECK(refusal({{"type", "asha"}, {"reduction_factor", 1}}).rfind("early_terminate.reduction_factor:", 0) == 0);
  CHECK(refusal({{"type", "asha"}, {"min_resource", 0}}).rfind("early_terminate.min_resource:", 0) == 0);
  CHECK(refusal({{"type", "asha"}, {"min_early_stopping_rate", -1}}).rfind("early_terminate.min_early_stopping_rate:", 0) == 0);
  CHECK(refusal({{"type", "median"}, {"interval_steps", 0}}).rfind("early_terminate.interval_steps:", 0) == 0);
  CHECK(refusal({{"type", "median"}, {"n_startup_trials", -1}}).rfind("early_terminate.n_startup_trials:", 0) == 0);
  CHECK(refusal({{"type", "median"}, {"warmup", 3}}).rfind("early_terminate.warmup:", 0) == 0);
  CHECK(refusal({{"type", "bohb"}}).rfind("early_terminate.type:", 0) == 0);
  CHECK(refusal({{"type", "median"}}, std::nullopt).rfind("metric:", 0) == 0);
  CHECK(refusal(json("hyperband")).rfind("early_terminate:", 0) == 0);
  CHECK(refusal({{"type", "hyperband"}, {"min_iter", 3}, {"eta", 2}, {"strict", false}}) == "accepted");
  CHECK(refusal({{"type", "asha"}, {"min_resource", "auto"}}) == "accepted");
  CHECK(refusal({{"type", "median"}, {"n_startup_trials", 0}, {"n_warmup_steps", 3}}) == "accepted");
}

TrialCurve curve(int64_t number, CurveState state, std::vector<double> values) {
  TrialCurve t;
  t.number = number;
  t.state = state;
  for (size_t i = 0; i < values.size(); ++i) t.reports.push_back({static_cast<int64_t>(i + 1), values[i]});
  return t;
}

TEST_CASE("sweeps.stopping: a hyperband decision carries its band, threshold and value in the metric's own sign") {
  auto rule = parse_rule({{"type", "hyperband"}, {"min_iter", 2}, {"eta", 2}}, Metric{"acc", Goal::kMaximize, std::nullopt});
  REQUIRE(rule.ok());
  // band 2 sees 0.9, 0.8, 0.85, 0.3: in minimize space [-0.9, -0.85, -0.8, -0.3], index int(0.5 * 4) = 2.
  const auto ds = decide(*rule, {curve(0, CurveState::kFinished, {0.5, 0.9}), curve(1, CurveState::kRunning, {0.4, 0.3}),
                                 curve(2, CurveState::kRunning, {0.6}), curve(3, CurveState::kFailed, {0.5, 0.8}),
                                 curve(4, CurveState::kFinished, {0.5, 0.85})});
  REQUIRE(ds.size() == 2);
  CHECK(ds[0].stop);
  CHECK(ds[0].judged);
  CHECK(ds[0].at == 2);
  CHECK(ds[0].value == doctest::Approx(0.3));
  CHECK(ds[0].threshold == doctest::Approx(0.8));
  CHECK(ds[0].reason.find("band 2") != std::string::npos);
  CHECK_FALSE(ds[1].judged);  // one iteration: no band reached
  CHECK_FALSE(ds[1].stop);
}

TEST_CASE("sweeps.stopping: a diverged trial (NaN) is stopped by asha and median, skipped by hyperband") {
  auto asha = parse_rule({{"type", "asha"}, {"min_resource", 1}, {"reduction_factor", 2}}, kLoss);
  REQUIRE(asha.ok());
  const TrialCurve nan_trial = curve(3, CurveState::kRunning, {NAN});
  CHECK(judge(*asha, nan_trial, {}).stop);
  auto median = parse_rule({{"type", "median"}, {"n_startup_trials", 1}}, kLoss);
  REQUIRE(median.ok());
  CHECK(judge(*median, nan_trial, {curve(0, CurveState::kFinished, {1.0})}).stop);
  auto hb = parse_rule({{"type", "hyperband"}, {"min_iter", 1}}, kLoss);
  REQUIRE(hb.ok());
  CHECK_FALSE(judge(*hb, nan_trial, {curve(0, CurveState::kFinished, {1.0})}).judged);
}

TEST_CASE("sweeps.stopping: asha rung records recomputed from reports match those decisions return") {
  auto rule = parse_rule({{"type", "asha"}, {"min_resource", 1}, {"reduction_factor", 3}}, kLoss);
  REQUIRE(rule.ok());
  const auto& s = std::get<AshaSettings>(rule->settings);
  TrialCurve t = curve(0, CurveState::kRunning, {});
  const std::vector<double> values{5, 4, 3, 2.5, 2, 1.9, 1.8, 1.7, 1.6, 1.5};
  for (size_t i = 0; i < values.size(); ++i) {
    t.reports.push_back({static_cast<int64_t>(i + 1), values[i]});
    const Decision d = judge(*rule, t, {});
    REQUIRE_FALSE(d.stop);  // alone, a trial is always promoted
    t.completed_rungs = d.completed_rungs;
  }
  CHECK(t.completed_rungs == asha_rungs_from_reports(s, 1, t.reports));
  CHECK(t.completed_rungs == std::map<int, double>{{0, 5}, {1, 3}, {2, 1.6}});
}

}  // namespace
}  // namespace swept::sweeps::stopping
