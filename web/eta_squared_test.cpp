// Tests of web/eta_squared.h (parameter importance) against hand-computed cases.
#include <doctest/doctest.h>

#include <cmath>

#include "web/eta_squared.h"

using swept::web::ImportanceInput;
using swept::web::parameter_importance;

TEST_CASE("web: eta squared matches a hand-computed one-way ANOVA") {
  ImportanceInput in;
  in.names = {"a", "b", "c"};
  in.metric = {1, 2, 3, 4};
  in.values = {{std::string("x"), std::string("x"), std::string("y"), std::string("y")},  // groups {1,2} {3,4}
               {1.0, 1.0, 1.0, 1.0},                                                     // constant
               {1.0, 2.0, 3.0, 4.0}};                                                    // explains all
  in.present.assign(3, std::vector<bool>(4, true));
  auto out = parameter_importance(in, 10);
  // b never changed: it is not listed at all (not listed with eta^2 0).
  REQUIRE(out.size() == 2);
  // SS_total = 5; SS_between(a) = 2*1 + 2*1 = 4 -> 0.8; c: one trial per group -> 1.
  CHECK(out[0].name == "c");
  CHECK(out[0].eta_squared == doctest::Approx(1.0));
  CHECK(out[1].name == "a");
  CHECK(out[1].eta_squared == doctest::Approx(0.8));
  CHECK(out[1].groups == 2);
}

TEST_CASE("web: eta squared leaves out parameters that never changed over the trials with a metric") {
  ImportanceInput in;
  in.names = {"fixed", "varied", "changed_only_without_metric"};
  in.metric = {1, 2, NAN};
  in.values = {{std::string("adam"), std::string("adam"), std::string("adam")},
               {1.0, 2.0, 3.0},
               {5.0, 5.0, 6.0}};  // its one change is on the trial without a metric value
  in.present.assign(3, std::vector<bool>(3, true));
  auto out = parameter_importance(in, 10);
  REQUIRE(out.size() == 1);
  CHECK(out[0].name == "varied");
}

TEST_CASE("web: eta squared bins many numeric values by rank and skips absent values") {
  ImportanceInput in;
  in.names = {"lr"};
  in.values.resize(1);
  in.present.resize(1);
  for (int i = 0; i < 100; ++i) {
    double lr = std::pow(10.0, -5 + i * 0.04);  // log-spaced
    in.values[0].push_back(lr);
    in.present[0].push_back(i != 7);
    in.metric.push_back(i < 50 ? 1.0 : 2.0);  // a step at the median
  }
  auto out = parameter_importance(in, 10);
  REQUIRE(out.size() == 1);
  CHECK(out[0].groups == 10);
  CHECK(out[0].trials == 99);
  CHECK(out[0].eta_squared > 0.95);  // rank bins separate the two halves almost exactly
}
