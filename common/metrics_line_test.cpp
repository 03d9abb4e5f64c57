#include "common/metrics_line.h"

#include <doctest/doctest.h>

#include <string>

using swept::parse_metrics_line;

TEST_CASE("metric line: numbers become values, reserved members are read") {
  auto r = parse_metrics_line(R"({"step": 10, "epoch": 1, "loss": 0.25, "lr": 0.1, "note": "x"})");
  REQUIRE(r.has_value());
  REQUIRE(r->step.has_value());
  CHECK(*r->step == 10);
  REQUIRE(r->values.size() == 3);
  CHECK(r->values[0].first == "epoch");
  CHECK(r->values[1].first == "loss");
  CHECK(r->values[1].second == doctest::Approx(0.25));
  CHECK_FALSE(r->final);
}

TEST_CASE("metric line: final and diverged flags, null values skipped") {
  auto r = parse_metrics_line(R"(  {"final": true, "diverged": true, "loss": null, "test_accuracy": 0.98}  )");
  REQUIRE(r.has_value());
  CHECK(r->final);
  CHECK(r->diverged);
  CHECK_FALSE(r->step.has_value());
  REQUIRE(r->values.size() == 1);
  CHECK(r->values[0].first == "test_accuracy");
}

TEST_CASE("metric line: log lines are not metric lines") {
  CHECK_FALSE(parse_metrics_line("epoch 1 loss 0.3").has_value());
  CHECK_FALSE(parse_metrics_line("").has_value());
  CHECK_FALSE(parse_metrics_line("[1, 2]").has_value());
  CHECK_FALSE(parse_metrics_line("{not json").has_value());
  CHECK_FALSE(parse_metrics_line(R"({"step": -1, "loss": 1})").has_value());
  CHECK_FALSE(parse_metrics_line(R"({"step": 1.5, "loss": 1})").has_value());
  std::string huge = "{\"a\": \"" + std::string(swept::kMaxMetricLineBytes, 'x') + "\"}";
  CHECK_FALSE(parse_metrics_line(huge).has_value());
}
