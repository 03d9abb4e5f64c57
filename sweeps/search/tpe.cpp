// Multivariate TPE after Optuna's TPESampler (multivariate=True,
// constant_liar=True, every other setting at Optuna v5's default).
//
// The finished trials are split by value: the best gamma(n) = min(ceil(0.1 n), 25)
// form "below", the rest (and, with constant liar, every pending trial, as if
// it had the worst value) form "above". Each group becomes a Parzen mixture:
// one product kernel per trial (a truncated normal per numeric coordinate on
// [0, 1], a categorical kernel per categorical one) plus the prior (a wide
// normal centred at 0.5; uniform over the choices) with weight prior_weight.
// n_ei_candidates points are drawn from the "below" mixture and the one with
// the largest log l(x) - log g(x) is suggested: Bergstra et al. (2011)'s
// expected-improvement argument for l/g, Falkner et al. (2018)'s multivariate
// kernel bandwidth 0.2 n^(-1/(d+4)) (Scott's rule) as Optuna uses it.
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
  std::vector<double> sigma;                 // per component (the same for every numeric dim in [0, 1])
  std::vector<std::vector<std::vector<double>>> cat_log_p;  // per component, per categorical dim, per choice
};

Mixture build(const Encoding& enc, const std::vector<const std::vector<double>*>& obs, const TpeSettings& s) {
  Mixture m;
  const size_t n = obs.size();
  std::vector<double> w = weights_of(n);
  w.push_back(s.prior_weight);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double x : w) m.log_weights.push_back(std::log(x / total));
  // Bandwidth: Optuna's multivariate rule, clipped to [(high-low)/min(100, 1 + components), high-low].
  const double d = static_cast<double>(enc.dims.size());
  double sigma = kSigma0 * std::pow(std::max<double>(static_cast<double>(n), 1.0), -1.0 / (d + 4.0));
  const double min_sigma = s.consider_magic_clip ? 1.0 / std::min(100.0, 1.0 + static_cast<double>(n + 1)) : 1e-12;
  sigma = std::clamp(sigma, min_sigma, 1.0);
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
    const double sg = prior ? 1.0 : sigma;
    std::vector<double> norms;
    for (double mu : mus) {
      const double mass = normal_cdf((1.0 - mu) / sg) - normal_cdf(-mu / sg);
      norms.push_back(-kLogSqrt2Pi - std::log(sg) - std::log(std::max(mass, 1e-300)));
    }
    m.mu.push_back(std::move(mus));
    m.log_norm.push_back(std::move(norms));
    m.sigma.push_back(sg);
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
    const double inv_sigma = 1.0 / m.sigma[c];
    size_t ni = 0, ci = 0;
    for (size_t k = 0; k < enc.dims.size(); ++k) {
      if (enc.dims[k].categorical) {
        t += m.cat_log_p[c][ci++][static_cast<size_t>(x[k])];
      } else {
        const double z = (x[k] - m.mu[c][ni]) * inv_sigma;
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
      x[k] = sample_truncnorm(m.mu[c][ni++], m.sigma[c], rng.next());
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
  for (size_t i = 0; i < n_below; ++i) is_below[order[i]] = 1;
  std::vector<const std::vector<double>*> below, above;
  for (size_t i = 0; i < n_finished; ++i) (is_below[i] ? below : above).push_back(&in.x[i]);
  if (s.constant_liar)
    for (const auto& p : in.pending) above.push_back(&p);
  const Mixture l = build(enc, below, s), g = build(enc, above, s);
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
