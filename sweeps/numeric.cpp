// Portable numerics for random search (see numeric.h for the why).
// Invariants: no global state, no std:: random distributions, no long double.
#include "sweeps/numeric.h"

#include <cmath>
#include <limits>

namespace swept::sweeps::numeric {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio, odd

// Horner evaluation of c[0] + c[1] r + ... + c[7] r^7.
double poly7(const double (&c)[8], double r) {
  double v = c[7];
  for (int i = 6; i >= 0; --i) v = v * r + c[i];
  return v;
}

// Coefficients of AS 241 (Wichura 1988, Applied Statistics 37(3) 477-484).
constexpr double kA[8] = {3.3871328727963666080e0,  1.3314166789178437745e+2, 1.9715909503065514427e+3,
                          1.3731693765509461125e+4, 4.5921953931549871457e+4, 6.7265770927008700853e+4,
                          3.3430575583588128105e+4, 2.5090809287301226727e+3};
constexpr double kB[8] = {1.0,                      4.2313330701600911252e+1, 6.8718700749205790830e+2,
                          5.3941960214247511077e+3, 2.1213794301586595867e+4, 3.9307895800092710610e+4,
                          2.8729085735721942674e+4, 5.2264952788528545610e+3};
constexpr double kC[8] = {1.42343711074968357734e0,  4.63033784615654529590e0,  5.76949722146069140550e0,
                          3.64784832476320460504e0,  1.27045825245236838258e0,  2.41780725177450611770e-1,
                          2.27238449892691845833e-2, 7.74545014278341407640e-4};
constexpr double kD[8] = {1.0,                       2.05319162663775882187e0,  1.67638483018380384940e0,
                          6.89767334985100004550e-1, 1.48103976427480074590e-1, 1.51986665636164571966e-2,
                          5.47593808499534494600e-4, 1.05075007164441684324e-9};
constexpr double kE[8] = {6.65790464350110377720e0,  5.46378491116411436990e0,  1.78482653991729133580e0,
                          2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
                          2.71155556874348757815e-5, 2.01033439929228813265e-7};
constexpr double kF[8] = {1.0,                       5.99832206555887937690e-1, 1.36929880922735805310e-1,
                          1.48753612908506148525e-2, 7.86869131145613259100e-4, 1.84631831751005468180e-5,
                          1.42151175831644588870e-7, 2.04426310338993978564e-15};

// log B(a, b) through our own log_gamma.
double log_beta(double a, double b) { return log_gamma(a) + log_gamma(b) - log_gamma(a + b); }

// The continued fraction of I_x(a, b), valid (fast) for x < (a+1)/(a+b+2).
double beta_continued_fraction(double x, double a, double b) {
  constexpr double kTiny = 1e-300;
  double f = 1.0, c = 1.0, d = 0.0;
  for (int i = 0; i <= 600; ++i) {
    const double m = i / 2;
    double numerator;
    if (i == 0) {
      numerator = 1.0;
    } else if (i % 2 == 0) {
      numerator = (m * (b - m) * x) / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
    } else {
      numerator = -((a + m) * (a + b + m) * x) / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
    }
    d = 1.0 + numerator * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    d = 1.0 / d;
    c = 1.0 + numerator / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    const double cd = c * d;
    f *= cd;
    if (std::fabs(1.0 - cd) < 1e-16) break;
  }
  return f - 1.0;
}

}  // namespace

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  return h;
}

double uniform_open01(uint64_t seed, int64_t index, uint64_t stream) {
  const uint64_t trial_key = mix64(mix64(seed) + kGolden * (static_cast<uint64_t>(index) + 1));
  const uint64_t bits = mix64(trial_key ^ mix64(stream + kGolden));
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

double normal_quantile(double p) {
  if (!(p > 0.0)) return -std::numeric_limits<double>::infinity();
  if (!(p < 1.0)) return std::numeric_limits<double>::infinity();
  const double q = p - 0.5;
  if (std::fabs(q) <= 0.425) {
    const double r = 0.180625 - q * q;
    return q * poly7(kA, r) / poly7(kB, r);
  }
  double r = q < 0.0 ? p : 1.0 - p;
  r = std::sqrt(-std::log(r));
  double value;
  if (r <= 5.0) {
    r -= 1.6;
    value = poly7(kC, r) / poly7(kD, r);
  } else {
    r -= 5.0;
    value = poly7(kE, r) / poly7(kF, r);
  }
  return q < 0.0 ? -value : value;
}

double log_gamma(double x) {
  // Gamma(x) = Gamma(x + n) / (x (x+1) ... (x+n-1)); the Stirling series is
  // accurate to ~1e-17 relative once x >= 15 with terms through x^-11.
  double shift_product = 1.0;
  while (x < 15.0) {
    shift_product *= x;
    x += 1.0;
  }
  const double inv = 1.0 / x;
  const double inv2 = inv * inv;
  const double series =
      inv * (1.0 / 12 + inv2 * (-1.0 / 360 + inv2 * (1.0 / 1260 + inv2 * (-1.0 / 1680 + inv2 * (1.0 / 1188 + inv2 * (-691.0 / 360360))))));
  constexpr double kHalfLog2Pi = 0.91893853320467274178;
  return (x - 0.5) * std::log(x) - x + kHalfLog2Pi + series - std::log(shift_product);
}

double incomplete_beta(double x, double a, double b) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  // The continued fraction converges fast below the mean; above it, use the
  // symmetry I_x(a, b) = 1 - I_{1-x}(b, a).
  if (x > (a + 1.0) / (a + b + 2.0)) return 1.0 - incomplete_beta(1.0 - x, b, a);
  const double log_front = a * std::log(x) + b * std::log1p(-x) - log_beta(a, b);
  return std::exp(log_front) / a * beta_continued_fraction(x, a, b);
}

double beta_quantile(double p, double a, double b) {
  if (!(p > 0.0)) return 0.0;
  if (!(p < 1.0)) return 1.0;
  const double lb = log_beta(a, b);
  double lo = 0.0, hi = 1.0;
  double x = a / (a + b);  // the mean: a start inside the bracket
  for (int iteration = 0; iteration < 2000; ++iteration) {
    const double f = incomplete_beta(x, a, b) - p;
    if (f == 0.0) return x;
    if (f < 0.0) lo = x; else hi = x;
    const double log_pdf = (a - 1.0) * std::log(x) + (b - 1.0) * std::log1p(-x) - lb;
    double next = x - f / std::exp(log_pdf);
    if (!(next > lo && next < hi)) {
      // Newton left the bracket: bisect, geometrically near 0 so that tiny
      // quantiles (a < 1) are reached in a few dozen steps, not a thousand.
      next = (lo == 0.0 && hi < 0.25) ? hi * 0.0625 : 0.5 * (lo + hi);
      if (lo > 0.0 && hi / lo > 16.0) next = std::sqrt(lo) * std::sqrt(hi);
    }
    if (next == x || hi - lo <= 4 * std::numeric_limits<double>::epsilon() * hi) return next;
    if (std::fabs(next - x) <= 1e-15 * std::fabs(x)) return next;
    x = next;
  }
  return x;
}

double round_half_even(double x) {
  const double r = std::round(x);  // halves away from zero
  if (std::fabs(x - std::trunc(x)) == 0.5) return 2.0 * std::round(x / 2.0);
  return r;
}

uint64_t permute_index(uint64_t index, uint64_t n, uint64_t key) {
  if (n <= 1) return 0;
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  uint64_t x = index % n;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = mix64(key ^ (right + kGolden * (round + 1))) & mask;
      const uint64_t next_right = left ^ f;
      left = right;
      right = next_right;
    }
    x = (left << half) | right;
  } while (x >= n);  // cycle walking: at most a few steps, the domain is < 4n
  return x;
}

}  // namespace swept::sweeps::numeric
