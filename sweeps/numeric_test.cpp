// The portable numerics against closed forms and published values.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "sweeps/numeric.h"

namespace swept::sweeps::numeric {
namespace {

constexpr double kPi = 3.14159265358979323846;

TEST_CASE("sweeps.numeric: normal quantile matches published values and inverts erfc") {
  CHECK(normal_quantile(0.5) == 0.0);
  CHECK(normal_quantile(0.975) == doctest::Approx(1.959963984540054).epsilon(1e-14));
  CHECK(normal_quantile(0.8413447460685429) == doctest::Approx(1.0).epsilon(1e-13));  // Phi(1)
  CHECK(normal_quantile(0.001) == doctest::Approx(-3.090232306167813).epsilon(1e-13));
  CHECK(normal_quantile(1e-10) == doctest::Approx(-6.361340902404056).epsilon(1e-12));
  CHECK(normal_quantile(1e-300) == doctest::Approx(-37.0470962993612).epsilon(1e-11));  // far tail
  // Round trip through the library's own erfc on a sweep of points.
  for (double p = 0.0005; p < 1.0; p += 0.0125) {
    const double x = normal_quantile(p);
    CHECK(0.5 * std::erfc(-x / std::sqrt(2.0)) == doctest::Approx(p).epsilon(1e-13));
    CHECK(normal_quantile(1.0 - p) == doctest::Approx(-x).epsilon(1e-12));
  }
}

TEST_CASE("sweeps.numeric: log gamma against factorials and Gamma1/2") {
  CHECK(std::fabs(log_gamma(1.0)) < 1e-14);
  CHECK(log_gamma(10.0) == doctest::Approx(std::log(362880.0)).epsilon(1e-14));
  CHECK(log_gamma(0.5) == doctest::Approx(0.5 * std::log(kPi)).epsilon(1e-14));
  CHECK(log_gamma(100.0) == doctest::Approx(359.13420536957540).epsilon(1e-14));
  CHECK(log_gamma(1e-5) == doctest::Approx(11.512919692895824).epsilon(1e-12));
}

TEST_CASE("sweeps.numeric: incomplete beta against closed forms") {
  for (double x : {0.01, 0.1, 0.3, 0.5, 0.77, 0.99}) {
    CHECK(incomplete_beta(x, 1, 1) == doctest::Approx(x).epsilon(1e-14));
    CHECK(incomplete_beta(x, 2, 1) == doctest::Approx(x * x).epsilon(1e-13));
    CHECK(incomplete_beta(x, 1, 3) == doctest::Approx(1 - std::pow(1 - x, 3)).epsilon(1e-13));
    CHECK(incomplete_beta(x, 0.5, 0.5) == doctest::Approx(2 / kPi * std::asin(std::sqrt(x))).epsilon(1e-13));
    CHECK(incomplete_beta(x, 2, 2) == doctest::Approx(3 * x * x - 2 * x * x * x).epsilon(1e-13));
  }
  CHECK(incomplete_beta(0.0, 2, 3) == 0.0);
  CHECK(incomplete_beta(1.0, 2, 3) == 1.0);
}

TEST_CASE("sweeps.numeric: beta quantile inverts the closed forms also in the tails") {
  for (double p : {1e-12, 0.001, 0.05, 0.3, 0.5, 0.8, 0.999, 1 - 1e-12}) {
    CHECK(beta_quantile(p, 1, 1) == doctest::Approx(p).epsilon(1e-12));
    CHECK(beta_quantile(p, 2, 1) == doctest::Approx(std::sqrt(p)).epsilon(1e-12));
    CHECK(beta_quantile(p, 1, 3) == doctest::Approx(1 - std::cbrt(1 - p)).epsilon(1e-9));
    const double s = std::sin(kPi * p / 2);
    CHECK(beta_quantile(p, 0.5, 0.5) == doctest::Approx(s * s).epsilon(1e-11));
  }
  // A very skewed case: I_x(0.1, 1) = x^0.1, so the 1e-10 quantile is 1e-100.
  CHECK(beta_quantile(1e-10, 0.1, 1) == doctest::Approx(1e-100).epsilon(1e-9));
  for (double p : {0.01, 0.2, 0.6, 0.95}) {
    const double x = beta_quantile(p, 3.5, 7.25);
    CHECK(incomplete_beta(x, 3.5, 7.25) == doctest::Approx(p).epsilon(1e-12));
  }
}

TEST_CASE("sweeps.numeric: rounding halves to even like numpy.round") {
  CHECK(round_half_even(0.5) == 0.0);
  CHECK(round_half_even(1.5) == 2.0);
  CHECK(round_half_even(2.5) == 2.0);
  CHECK(round_half_even(-2.5) == -2.0);
  CHECK(round_half_even(-3.5) == -4.0);
  CHECK(round_half_even(2.4999999) == 2.0);
  CHECK(round_half_even(7.5) == 8.0);
  CHECK(round_half_even(-0.2) == 0.0);
}

TEST_CASE("sweeps.numeric: the PRNG is the documented SplitMix64 composition") {
  // mix64 is SplitMix64's finalizer: its first output for state 0 is mix64(golden).
  CHECK(mix64(0x9e3779b97f4a7c15ULL) == 0xe220a8397b1dcdafULL);
  CHECK(fnv1a64("") == 0xcbf29ce484222325ULL);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  // Uniform numbers lie strictly inside (0, 1), differ per index and stream,
  // and repeat for the same arguments.
  std::set<double> seen;
  for (int64_t i = 0; i < 1000; ++i) {
    const double u = uniform_open01(7, i, 1);
    CHECK(u > 0.0);
    CHECK(u < 1.0);
    CHECK(u == uniform_open01(7, i, 1));
    seen.insert(u);
  }
  CHECK(seen.size() == 1000);
  CHECK(uniform_open01(7, 0, 1) != uniform_open01(8, 0, 1));
  CHECK(uniform_open01(7, 0, 1) != uniform_open01(7, 0, 2));
}

TEST_CASE("sweeps.numeric: permute_index is a bijection of 0..n-1 that depends on the key") {
  for (uint64_t n : {1u, 2u, 3u, 4u, 5u, 17u, 64u, 100u, 1000u, 4097u}) {
    std::set<uint64_t> images;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t j = permute_index(i, n, 42);
      CHECK(j < n);
      images.insert(j);
    }
    CHECK(images.size() == n);
  }
  int moved = 0, differs = 0;
  for (uint64_t i = 0; i < 100; ++i) {
    moved += permute_index(i, 100, 1) != i;
    differs += permute_index(i, 100, 1) != permute_index(i, 100, 2);
  }
  CHECK(moved > 50);
  CHECK(differs > 50);
}

}  // namespace
}  // namespace swept::sweeps::numeric
