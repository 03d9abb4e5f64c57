// Multivariate TPE after Optuna's TPESampler (multivariate=True,
// constant_liar=True, Optuna's other defaults) with two documented changes.
//
// The finished trials are split by value: the best gamma(n) = min(ceil(0.1 n), 25)
// form "below", the rest (and, with constant liar, every pending trial, as if
// it had the worst value) form "above". Each group becomes a Parzen mixture:
// one product kernel per trial (a truncated normal per numeric coordinate on
// [0, 1], a categorical kernel per categorical one) plus the prior (a wide
// normal centred at 0.5; uniform over the choices). n_ei_candidates points are
// drawn from the "below" mixture and the one with the largest
// log l(x) - log g(x) is suggested (Bergstra et al. 2011).
//
// The two changes (docs/sweep-format.md, "method: tpe"; each has its Optuna
// setting, and docs/benchmarks.md gives both side by side):
// - bandwidth: scott. Optuna gives every kernel of a group 0.2 n^(-1/(d+4)) of
//   the range in every parameter: a constant standing in for the spread of
//   uniform data, whatever the group's real spread. swept uses Scott's rule as
//   scipy.stats.gaussian_kde computes it, per parameter: the group's sample sd
//   (n - 1 in the denominator) times n^(-1/(d+4)); a group of one trial has no
//   spread and keeps Optuna's value. So once the best trials gather, l(x)
//   narrows around them, and g(x) keeps the width of the trials it is made of.
// - below_weights: improvement. Optuna weighs every "below" trial 1. swept
//   weighs each by its improvement on the best "above" value, y_gamma - y_i,
//   the prior taking their mean: the weighted-EI form of l(x) (Watanabe 2023,
//   "Tree-structured Parzen estimator: understanding its algorithm components",
//   the EI weighting, as in OptunaHub's tpe_tutorial sampler).
// Either way the bandwidth is clipped to [range / min(100, 1 + components), range]
// (Optuna's magic clip); Scott's is also floored at 1e-3 of the range (a group
// whose trials agree in a parameter would otherwise get none).
//
// An integer parameter is a discrete kernel, as in Optuna's
// _BatchedDiscreteTruncNormDistributions: a draw is rounded to its integer,
// and its likelihood is the normal's mass over the integer's cell (not the
// density at the cell's middle, which overstates a narrow kernel's own cell
// and understates its neighbours' when cells are wide, e.g. layers in 1..4).
//
// Compared with Debian's Optuna 3.1 (the benchmark's peer): its truncated-normal
// log-density (_truncnorm.logpdf) leaves out the -log(sigma) term, so each
// narrow kernel counts sigma^-1 times less than it should against the wide
// prior; later Optuna adds the term back, and so does this file.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sweeps/numeric.h"
#include "sweeps/search/models.h"

namespace swept::sweeps::search {
namespace {

constexpr double kSigma0 = 0.2;  // Optuna's _SIGMA0_MAGNITUDE
constexpr double kLogSqrt2Pi = 0.91893853320467274178;
constexpr double kMinBandwidth = 1e-3;  // a floor for groups whose trials agree in a parameter

// Optuna's default_gamma and default_weights.
size_t gamma_of(size_t n) { return std::min<size_t>(static_cast<size_t>(std::ceil(0.1 * static_cast<double>(n))), 25); }

std::vector<double> weights_of(size_t n) {
  std::vector<double> w(n, 1.0);
  if (n >= 25) {
    const size_t ramp = n - 25;  // numpy.linspace(1 / n, 1.0, n - 25)
    for (size_t i = 0; i < ramp; ++i) {
      const double lo = 1.0 / static_cast<double>(n);
      w[i] = ramp == 1 ? lo : lo + (1.0 - lo) * static_cast<double>(i) / static_cast<double>(ramp - 1);
    }
  }
  return w;
}

// A Parzen mixture over the encoded space.
struct Mixture {
  std::vector<double> log_weights;           // per component (the prior last)
  std::vector<std::vector<double>> mu;       // per component, per numeric dim
  std::vector<std::vector<double>> log_norm; // per component, per numeric dim: -log(sigma sqrt(2 pi) mass on [0, 1])
  std::vector<std::vector<double>> log_mass; // per component, per numeric dim: log of the normal's mass on [0, 1]
  std::vector<std::vector<double>> sigma;    // per component, per numeric dim
  std::vector<std::vector<std::vector<double>>> cat_log_p;  // per component, per categorical dim, per choice
};

// log(Phi(b) - Phi(a)) for a < b, computed in the tail where the CDF keeps its
// relative precision; far out in a tail (where the difference underflows) the
// density at the nearer end times the width stands in.
double log_gauss_mass(double a, double b) {
  if (a >= 0) std::swap(a, b), a = -a, b = -b;  // mirror into the lower half
  const double diff = b <= 0 ? normal_cdf(b) - normal_cdf(a) : 1.0 - normal_cdf(a) - normal_cdf(-b);
  if (diff > 1e-300) return std::log(diff);
  const double near = std::min(std::fabs(a), std::fabs(b));
  return std::log(b - a) - kLogSqrt2Pi - 0.5 * near * near;
}

// The kernels' weights: Optuna's ramp, or for "below" with
// below_weights: improvement, each trial's improvement on the best "above"
// value (weighted EI), the prior taking their mean (Watanabe 2023, sec. 3.3).
Mixture build(const Encoding& enc, const std::vector<const std::vector<double>*>& obs, const TpeSettings& s,
              const std::vector<double>* weights = nullptr) {
  Mixture m;
  const size_t n = obs.size();
  std::vector<double> w = weights ? *weights : weights_of(n);
  w.push_back(weights && n > 0 ? std::accumulate(w.begin(), w.end(), 0.0) / static_cast<double>(n) : s.prior_weight);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double x : w) m.log_weights.push_back(std::log(x / total));
  // Bandwidth per numeric parameter (see the top of the file): Optuna's
  // 0.2 n^(-1/(d+4)) of the range, or Scott's rule on the group's sample sd.
  const double d = static_cast<double>(enc.dims.size());
  const double shrink = std::pow(std::max<double>(static_cast<double>(n), 1.0), -1.0 / (d + 4.0));
  const double min_sigma = s.consider_magic_clip ? 1.0 / std::min(100.0, 1.0 + static_cast<double>(n + 1)) : 1e-12;
  std::vector<double> sigma(enc.dims.size(), std::clamp(kSigma0 * shrink, min_sigma, 1.0));
  if (s.bandwidth == TpeBandwidth::kScott && n >= 2) {
    for (size_t k = 0; k < enc.dims.size(); ++k) {
      if (enc.dims[k].categorical) continue;
      double mean = 0, sq = 0;
      for (const auto* o : obs) mean += (*o)[k];
      mean /= static_cast<double>(n);
      for (const auto* o : obs) sq += ((*o)[k] - mean) * ((*o)[k] - mean);
      const double sd = std::sqrt(sq / static_cast<double>(n - 1));
      sigma[k] = std::clamp(sd * shrink, std::max(min_sigma, kMinBandwidth), 1.0);
    }
  }
  for (size_t c = 0; c <= n; ++c) {
    const bool prior = c == n;
    std::vector<double> mus;
    std::vector<std::vector<double>> cats;
    for (size_t k = 0; k < enc.dims.size(); ++k) {
      const Dimension& dim = enc.dims[k];
      if (!dim.categorical) {
        mus.push_back(prior ? 0.5 : (*obs[c])[k]);
        continue;
      }
      // Optuna: every row starts at prior_weight / (n + 1); an observation adds 1 to its choice.
      const double base = s.prior_weight / static_cast<double>(n + 1);
      std::vector<double> p(dim.n_choices, prior ? 1.0 : base);
      if (!prior) p[static_cast<size_t>((*obs[c])[k])] += 1.0;
      const double sum = std::accumulate(p.begin(), p.end(), 0.0);
      for (double& x : p) x = std::log(x / sum);
      cats.push_back(std::move(p));
    }
    std::vector<double> norms, masses, sgs;
    for (size_t k = 0; k < enc.dims.size(); ++k)
      if (!enc.dims[k].categorical) sgs.push_back(prior ? 1.0 : sigma[k]);
    for (size_t q = 0; q < mus.size(); ++q) {
      const double mu = mus[q], sg = sgs[q];
      const double log_mass = log_gauss_mass(-mu / sg, (1.0 - mu) / sg);
      masses.push_back(log_mass);
      norms.push_back(-kLogSqrt2Pi - std::log(sg) - log_mass);
    }
    m.mu.push_back(std::move(mus));
    m.log_norm.push_back(std::move(norms));
    m.log_mass.push_back(std::move(masses));
    m.sigma.push_back(std::move(sgs));
    m.cat_log_p.push_back(std::move(cats));
  }
  return m;
}

double sample_truncnorm(double mu, double sigma, double u) {
  double a = -mu / sigma, b = (1.0 - mu) / sigma;
  const bool flip = a > 0;  // sample in the lower tail, where the CDF keeps its precision
  if (flip) std::swap(a, b), a = -a, b = -b;
  const double pa = normal_cdf(a), pb = normal_cdf(b);
  double p = pa + u * (pb - pa);
  p = std::clamp(p, 1e-300, 1.0 - 1e-16);
  double z = numeric::normal_quantile(p);
  if (flip) z = -z;
  return std::clamp(mu + sigma * z, 0.0, 1.0);
}

double log_density(const Mixture& m, const Encoding& enc, const std::vector<double>& x) {
  double best = -std::numeric_limits<double>::infinity();
  std::vector<double> terms(m.log_weights.size());
  for (size_t c = 0; c < m.log_weights.size(); ++c) {
    // log of the product kernel: truncated normals on [0, 1] and categorical kernels.
    double t = m.log_weights[c];
    size_t ni = 0, ci = 0;
    for (size_t k = 0; k < enc.dims.size(); ++k) {
      if (enc.dims[k].categorical) {
        t += m.cat_log_p[c][ci++][static_cast<size_t>(x[k])];
      } else if (enc.dims[k].cells > 0) {
        // The normal's mass over the integer's cell, over its mass on [0, 1].
        const double inv_sigma = 1.0 / m.sigma[c][ni];
        const double cells = static_cast<double>(enc.dims[k].cells);
        const double lo = std::floor(std::clamp(x[k], 0.0, 1.0) * cells);
        const double left = std::min(lo, cells - 1) / cells, right = left + 1.0 / cells;
        t += log_gauss_mass((left - m.mu[c][ni]) * inv_sigma, (right - m.mu[c][ni]) * inv_sigma) - m.log_mass[c][ni];
        ++ni;
      } else {
        const double z = (x[k] - m.mu[c][ni]) / m.sigma[c][ni];
        t += -0.5 * z * z + m.log_norm[c][ni++];
      }
    }
    terms[c] = t;
    best = std::max(best, t);
  }
  double sum = 0;
  for (double t : terms) sum += std::exp(t - best);
  return best + std::log(sum);
}

std::vector<double> sample(const Mixture& m, const Encoding& enc, Stream& rng) {
  double u = rng.next(), acc = 0;
  size_t c = 0;
  for (; c + 1 < m.log_weights.size(); ++c) {
    acc += std::exp(m.log_weights[c]);
    if (u < acc) break;
  }
  std::vector<double> x(enc.dims.size());
  size_t ni = 0, ci = 0;
  for (size_t k = 0; k < enc.dims.size(); ++k) {
    if (enc.dims[k].categorical) {
      const auto& lp = m.cat_log_p[c][ci++];
      double v = rng.next(), a = 0;
      size_t j = 0;
      for (; j + 1 < lp.size(); ++j) {
        a += std::exp(lp[j]);
        if (v < a) break;
      }
      x[k] = static_cast<double>(j);
    } else {
      x[k] = sample_truncnorm(m.mu[c][ni], m.sigma[c][ni], rng.next());
      ++ni;
      if (const int64_t cells = enc.dims[k].cells; cells > 0) {  // round to the integer: the middle of its cell
        const double cell = std::min(std::floor(x[k] * static_cast<double>(cells)), static_cast<double>(cells - 1));
        x[k] = (cell + 0.5) / static_cast<double>(cells);
      }
    }
  }
  return x;
}

}  // namespace

Result<std::vector<double>> tpe_suggest(const TpeSettings& s, const ModelInput& in, ModelState* state) {
  const Encoding& enc = *in.encoding;
  const size_t n_finished = in.x.size();
  if (n_finished == 0) return Status::FailedPrecondition("no finished trial to learn from");
  const size_t n_below = std::min(gamma_of(n_finished), n_finished);  // pending trials do not count, as in Optuna
  // The best n_below finished trials (ties: the earlier one), kept in completion order.
  std::vector<size_t> order(n_finished);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return in.y[a] < in.y[b]; });
  std::vector<char> is_below(n_finished, 0);
  const bool split_given = in.below.size() == n_finished;  // multi-objective TPE (multi.cpp) split them
  if (split_given) is_below = in.below;
  else
    for (size_t i = 0; i < n_below; ++i) is_below[order[i]] = 1;
  std::vector<const std::vector<double>*> below, above;
  for (size_t i = 0; i < n_finished; ++i) (is_below[i] ? below : above).push_back(&in.x[i]);
  if (s.constant_liar)
    for (const auto& p : in.pending) above.push_back(&p);
  // Weighted EI: a "below" trial counts by how much it improves on the best
  // "above" value (a tiny floor keeps a tie from vanishing).
  std::vector<double> improvement;
  if (split_given) {
    improvement = in.below_weights;
  } else if (s.below_weights == TpeBelowWeights::kImprovement && n_below < n_finished) {
    const double threshold = in.y[order[n_below]];
    for (size_t i = 0; i < n_finished; ++i)
      if (is_below[i]) improvement.push_back(std::max(1e-12, threshold - in.y[i]));
  }
  const Mixture l = build(enc, below, s, improvement.empty() ? nullptr : &improvement), g = build(enc, above, s);
  Stream rng(in, 0x7470652d63616e64ULL);  // "tpe-cand"
  std::vector<double> best_x;
  double best_score = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < s.n_ei_candidates; ++i) {
    std::vector<double> x = sample(l, enc, rng);
    const double score = log_density(l, enc, x) - log_density(g, enc, x);
    if (score > best_score || best_x.empty()) best_score = score, best_x = std::move(x);
  }
  state->n_below = static_cast<int>(below.size());
  state->n_above = static_cast<int>(above.size());
  state->n_model = static_cast<int>(below.size() + above.size());
  state->acquisition = best_score;
  return best_x;
}

}  // namespace swept::sweeps::search
