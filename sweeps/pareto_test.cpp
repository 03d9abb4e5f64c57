// Pareto dominance, fronts, ranks, hypervolume and constraint violations
// against hand-computed cases (ties, infeasible points, NaN, maximised
// objectives), and the hypervolume against inclusion-exclusion over boxes.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "sweeps/metric.h"
#include "sweeps/numeric.h"
#include "sweeps/pareto.h"

namespace swept::sweeps {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const std::vector<Goal> kMinMin = {Goal::kMinimize, Goal::kMinimize};

TEST_CASE("pareto: dominance needs no worse everywhere and better somewhere") {
  CHECK(dominates({1, 2}, {2, 3}, kMinMin));
  CHECK(dominates({1, 3}, {2, 3}, kMinMin));
  CHECK_FALSE(dominates({2, 3}, {1, 2}, kMinMin));
  CHECK_FALSE(dominates({1, 3}, {2, 2}, kMinMin));  // a trade-off
  CHECK_FALSE(dominates({1, 2}, {1, 2}, kMinMin));  // equal points: neither
  // Accuracy maximised, loss minimised.
  const std::vector<Goal> acc_loss = {Goal::kMaximize, Goal::kMinimize};
  CHECK(dominates({0.9, 0.1}, {0.8, 0.1}, acc_loss));
  CHECK_FALSE(dominates({0.8, 0.1}, {0.9, 0.1}, acc_loss));
  // NaN or a wrong size: not comparable.
  CHECK_FALSE(dominates({kNaN, 0}, {1, 1}, kMinMin));
  CHECK_FALSE(dominates({0, 0}, {kNaN, 1}, kMinMin));
  CHECK_FALSE(dominates({0, 0, 0}, {1, 1}, kMinMin));
}

TEST_CASE("pareto: the front keeps ties and drops NaN and infeasible points") {
  const std::vector<std::vector<double>> v = {{1, 3}, {1, 3}, {2, 2}, {3, 1}, {2, 3}, {kNaN, 0}, {4, 0.5}};
  CHECK(pareto_front(v, kMinMin) == std::vector<size_t>{0, 1, 2, 3, 6});
  // An infeasible point that dominates the rest is not on the front, and no
  // longer hides what it dominated.
  const std::vector<std::vector<double>> w = {{1, 1}, {2, 2}, {3, 1.5}, {2.5, 3}};
  CHECK(pareto_front(w, kMinMin) == std::vector<size_t>{0});
  CHECK(pareto_front(w, kMinMin, {false, true, true, true}) == std::vector<size_t>{1, 2});
  CHECK(pareto_front(w, kMinMin, {false, false, false, true}) == std::vector<size_t>{3});
  CHECK(pareto_front({}, kMinMin).empty());
  // Maximised accuracy against minimised latency.
  const std::vector<Goal> acc_ms = {Goal::kMaximize, Goal::kMinimize};
  CHECK(pareto_front({{0.9, 30}, {0.95, 50}, {0.9, 40}, {0.8, 10}}, acc_ms) == std::vector<size_t>{0, 1, 3});
}

TEST_CASE("pareto: non-dominated ranks peel one front at a time, NaN last") {
  const std::vector<std::vector<double>> v = {{1, 1}, {2, 2}, {3, 3}, {1, 3}, {kNaN, 0}, {2, 2}, {0, 4}};
  CHECK(nondominated_ranks(v, kMinMin) == std::vector<int>{0, 1, 2, 1, 3, 1, 0});
  CHECK(nondominated_ranks({{kNaN, kNaN}}, kMinMin) == std::vector<int>{0});
}

TEST_CASE("pareto: hypervolume in 2-D is the staircase's area") {
  // Boxes [1,4]x[3,4], [2,4]x[2,4], [3,4]x[1,4]: 3 + 4 + 3 - 2 - 1 - 2 + 1 = 6.
  CHECK(hypervolume({{1, 3}, {2, 2}, {3, 1}}, kMinMin, {4, 4}) == doctest::Approx(6));
  // A duplicate and a dominated point add nothing; so do points on or beyond the reference.
  CHECK(hypervolume({{1, 3}, {2, 2}, {3, 1}, {2, 2}, {3, 3}, {0, 4}, {5, 0}, {kNaN, 0}}, kMinMin, {4, 4}) ==
        doctest::Approx(6));
  CHECK(hypervolume({}, kMinMin, {4, 4}) == 0);
  CHECK(hypervolume({{1, 1}}, kMinMin, {kNaN, 4}) == 0);
  // Maximised accuracy (reference 0) against minimised loss (reference 2): 0.5 x 1.
  CHECK(hypervolume({{0.5, 1}}, {Goal::kMaximize, Goal::kMinimize}, {0, 2}) == doctest::Approx(0.5));
  // One objective: the distance from the best to the reference.
  CHECK(hypervolume({{3}, {1}, {2}}, {Goal::kMinimize}, {4}) == doctest::Approx(3));
}

TEST_CASE("pareto: hypervolume in 3-D and 4-D by slicing") {
  const std::vector<Goal> min3(3, Goal::kMinimize), min4(4, Goal::kMinimize);
  // A = [0,2]x[0,2]x[1,2] (4), B = [1,2]x[1,2]x[0,2] (2), A and B = [1,2]^3 (1): 5.
  CHECK(hypervolume({{0, 0, 1}, {1, 1, 0}}, min3, {2, 2, 2}) == doctest::Approx(5));
  // With C = [1,2]x[0,2]x[0.5,2] (3): 4+2+3 - 1 - 2 - 1.5 + 1 = 5.5.
  CHECK(hypervolume({{0, 0, 1}, {1, 1, 0}, {1, 0, 0.5}}, min3, {2, 2, 2}) == doctest::Approx(5.5));
  // 0.5 + 0.125 - 0.0625.
  CHECK(hypervolume({{0, 0, 0, 0.5}, {0.5, 0.5, 0.5, 0}}, min4, {1, 1, 1, 1}) == doctest::Approx(0.5625));
}

// The volume of a union of boxes [p, ref] by inclusion-exclusion: an
// independent oracle for small sets.
double union_volume(const std::vector<std::vector<double>>& pts, const std::vector<double>& ref) {
  double total = 0;
  const size_t n = pts.size();
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    double vol = 1;
    int members = 0;
    for (size_t k = 0; k < ref.size(); ++k) {
      double lo = -std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < n; ++i)
        if (mask & (1u << i)) lo = std::max(lo, pts[i][k]);
      vol *= std::max(0.0, ref[k] - lo);
    }
    for (size_t i = 0; i < n; ++i) members += (mask >> i) & 1;
    total += members % 2 ? vol : -vol;
  }
  return total;
}

TEST_CASE("pareto: hypervolume matches inclusion-exclusion on random sets") {
  for (size_t dims = 2; dims <= 4; ++dims) {
    const std::vector<Goal> goals(dims, Goal::kMinimize);
    const std::vector<double> ref(dims, 1.0);
    for (uint64_t seed = 0; seed < 20; ++seed) {
      std::vector<std::vector<double>> pts(8, std::vector<double>(dims));
      for (size_t i = 0; i < pts.size(); ++i)
        for (size_t k = 0; k < dims; ++k) pts[i][k] = numeric::uniform_open01(seed, static_cast<int64_t>(i), k);
      CAPTURE(dims);
      CAPTURE(seed);
      CHECK(hypervolume(pts, goals, ref) == doctest::Approx(union_volume(pts, ref)).epsilon(1e-9));
    }
  }
}

TEST_CASE("pareto: the reference point is ref when given, else the worst value seen") {
  Metric loss{"loss", Goal::kMinimize, std::nullopt, std::nullopt};
  Metric acc{"acc", Goal::kMaximize, std::nullopt, std::nullopt};
  Metric ms{"ms", Goal::kMinimize, std::nullopt, 100.0};
  const std::vector<std::vector<double>> v = {{0.3, 0.9, 10}, {0.7, 0.6, 20}, {kNaN, kNaN, 30}, {0.5, 0.8, 40}};
  const std::vector<double> r = reference_point({loss, acc, ms}, v);
  REQUIRE(r.size() == 3);
  CHECK(r[0] == 0.7);
  CHECK(r[1] == 0.6);
  CHECK(r[2] == 100.0);
  CHECK(std::isnan(reference_point({loss}, {{kNaN}})[0]));
}

TEST_CASE("constraint: violation is the distance outside the bounds, NaN never feasible") {
  Constraint at_most{"mem", std::nullopt, 1.0};
  CHECK(at_most.violation(1.5) == doctest::Approx(0.5));
  CHECK(at_most.violation(0.25) == doctest::Approx(-0.75));
  CHECK(at_most.violation(1.0) == 0.0);  // on the bound: feasible (<= 0)
  Constraint at_least{"acc", 2.0, std::nullopt};
  CHECK(at_least.violation(1.0) == doctest::Approx(1.0));
  CHECK(at_least.violation(3.0) == doctest::Approx(-1.0));
  Constraint band{"x", 0.0, 10.0};
  CHECK(band.violation(4.0) == doctest::Approx(-4.0));   // nearer bound 4 away
  CHECK(band.violation(12.0) == doctest::Approx(2.0));
  CHECK(band.violation(-3.0) == doctest::Approx(3.0));
  CHECK(std::isinf(band.violation(kNaN)));
  CHECK(band.violation(kNaN) > 0);
}

}  // namespace
}  // namespace swept::sweeps
