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

TEST_CASE("metric line: Python's and JSON's non-finite tokens mark the trial diverged") {
  // print(f'{{"step": 5, "loss": {float("nan")}}}') and json.dumps(float('inf')).
  for (const char* line : {R"({"step": 5, "loss": nan, "lr": 0.1})", R"({"step": 5, "loss": NaN, "lr": 0.1})",
                           R"({"step": 5, "loss": inf, "lr": 0.1})", R"({"step": 5, "loss": -inf, "lr": 0.1})",
                           R"({"step": 5, "loss": Infinity, "lr": 0.1})", R"({"step": 5,"loss":-Infinity,"lr": 0.1})",
                           R"({"step": 5, "loss": -nan, "lr": 0.1})"}) {
    CAPTURE(line);
    auto r = parse_metrics_line(line);
    REQUIRE(r.has_value());
    CHECK(r->diverged);
    REQUIRE(r->non_finite.size() == 1);
    CHECK(r->non_finite[0] == "loss");
    REQUIRE(r->values.size() == 1);  // the finite ones stay
    CHECK(r->values[0].first == "lr");
    REQUIRE(r->step.has_value());
    CHECK(*r->step == 5);
  }
}

TEST_CASE("metric line: non-finite tokens are only read where a value stands") {
  // Inside strings (names and values) they are text; a finite line is not diverged.
  auto r = parse_metrics_line(R"({"nan": 1.5, "note": "loss: nan, inf", "inf": 2})");
  REQUIRE(r.has_value());
  CHECK_FALSE(r->diverged);
  CHECK(r->non_finite.empty());
  REQUIRE(r->values.size() == 2);  // members named like the tokens are metrics like any other
  CHECK(((r->values[0].first == "nan" && r->values[1].first == "inf") ||
         (r->values[0].first == "inf" && r->values[1].first == "nan")));
  // Nested ones are ignored like the rest of nested values.
  r = parse_metrics_line(R"({"hist": [1, nan, inf], "loss": 0.5})");
  REQUIRE(r.has_value());
  CHECK_FALSE(r->diverged);
  REQUIRE(r->values.size() == 1);
  // A member given twice keeps its last value: finite after all, no divergence.
  r = parse_metrics_line(R"({"loss": nan, "loss": 0.5})");
  REQUIRE(r.has_value());
  CHECK_FALSE(r->diverged);
  // Words that only begin like the tokens are not JSON: log lines.
  CHECK_FALSE(parse_metrics_line(R"({"loss": infinity})").has_value());
  CHECK_FALSE(parse_metrics_line(R"({"loss": nano})").has_value());
  CHECK_FALSE(parse_metrics_line(R"({"loss": nan nan})").has_value());
  // A non-finite step is not an integer: log output, as before.
  CHECK_FALSE(parse_metrics_line(R"({"step": nan, "loss": 1})").has_value());
  // Reserved flags written non-finite count as false; no metric was non-finite.
  r = parse_metrics_line(R"({"final": nan, "loss": 1})");
  REQUIRE(r.has_value());
  CHECK_FALSE(r->final);
  CHECK_FALSE(r->diverged);
}
