// The Gaussian process of `method: bayes`.
//
// Model: y (minimize space, as normal scores of their ranks: see below) ~ GP(0, k) + noise,
// k = s2 * [(1 - w) M(r) + w (1/P) sum_p M(r_p)], M the Matern 5/2 correlation,
// r^2 = sum_p r_p^2 the joint scaled distance and r_p = d_p(x, x') / l_p one
// parameter's, one lengthscale l_p per sweep parameter (ARD): d_p is the
// difference of the CDF coordinates for a numeric parameter and of the one-hot
// vectors for a categorical one (so two different choices are sqrt(2) apart,
// whatever their order in the file: no ordinal encoding). The hyperparameters
// (log l_p, log s2, log noise, logit w) maximise the log marginal likelihood
// plus a weak log-normal prior on each lengthscale and a weak normal prior on
// logit w (centred on w = 1/2), by L-BFGS-B (LBFGS++) within documented bounds,
// with the analytic gradient (Rasmussen & Williams, eq. 5.9).
//
// Why the additive part (Duvenaud et al. 2011, "Additive Gaussian processes":
// orders 1 and P of their kernel): under the joint kernel alone, a point that
// moves one parameter far from every trial is as unknown as a point that moves
// them all, so on functions whose parameters act mostly one at a time (many
// local minima along each axis, as Levy or Rastrigin; or a learning rate whose
// best value hardly depends on the rest) the model cannot say "keep what works
// in the others, try this one elsewhere", and EI stays trapped in the basin
// the best trials share. The additive part predicts exactly that, and the
// marginal likelihood decides how much of it the data support (w near 0 for a
// rotated valley, whose parameters only act together). docs/benchmarks.md
// ("Search and early termination", "the additive kernel") has the
// measurements; `bayes: {additive: false}` keeps the joint kernel alone.
//
// Cost cap: when more than max_model_trials trials have finished, the model
// keeps the best half of max_model_trials (by value; ties to the earlier) and
// the most recent of the rest, in completion order; deterministic, and it
// keeps both where the optimum is and what the search is doing now. The cap
// bounds every Cholesky at (max_model_trials + pending)^3.
//
// Pending trials: kriging believer. Each pending point joins the model with
// the posterior mean as its value, so the variance there collapses and the
// next slot's expected improvement points elsewhere.
//
// Acquisition: expected improvement over the incumbent, computed in log space
// (stable far from it), maximised over random and local candidates, then
// refined by shrinking local perturbations around the best few. The incumbent
// is the lowest posterior mean at a finished trial (the "plug-in" incumbent of
// Picheny et al. 2013, "A benchmark of kriging-based infill criteria for noisy
// optimization"), not the lowest observed score: wherever the fit puts part of
// the values into the noise term (many local minima, a steep valley the model
// cannot follow), the best observed score is a lucky draw of that noise, which
// the posterior mean near the trials never reaches, so EI against it is largest
// where the model knows least, the corners of the box, and the search leaves
// the good region (docs/benchmarks.md, "Search: shapes where bayes lost").
#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <LBFGSB.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "sweeps/numeric.h"
#include "sweeps/search/models.h"

namespace swept::sweeps::search {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

constexpr double kSqrt5 = 2.23606797749978969641;
constexpr double kLog2Pi = 1.83787706640934548356;
constexpr double kLogLsMin = -4.6051701859880914;  // log 0.01
constexpr double kLogLsMax = 2.9957322735539909;   // log 20
constexpr double kLsPriorMean = -0.69314718055994531;  // log 0.5
constexpr double kLsPriorSd = 1.5;
constexpr double kAdditivePriorMean = 0.0;  // the additive weight w = logistic(theta): 0.5
constexpr double kAdditivePriorSd = 1.5;
constexpr double kLogitMax = 5.0;  // w within [0.007, 0.993]: neither part ever quite vanishes from the fit

// Rows of features: numeric coordinates as they are, categoricals one-hot.
struct Features {
  std::vector<int> param_of_col;
  std::vector<int> first_col, n_cols;  // per parameter: its columns (a categorical's one-hot block)
  std::vector<char> categorical;       // per parameter
  int n_params = 0;
};

Features features_of(const Encoding& enc) {
  Features f;
  for (size_t k = 0; k < enc.dims.size(); ++k) {
    const size_t cols = enc.dims[k].categorical ? enc.dims[k].n_choices : 1;
    f.first_col.push_back(static_cast<int>(f.param_of_col.size()));
    f.n_cols.push_back(static_cast<int>(cols));
    f.categorical.push_back(enc.dims[k].categorical ? 1 : 0);
    for (size_t c = 0; c < cols; ++c) f.param_of_col.push_back(static_cast<int>(k));
  }
  f.n_params = static_cast<int>(enc.dims.size());
  return f;
}

VectorXd featurize(const Encoding& enc, const Features& f, const std::vector<double>& x) {
  VectorXd row = VectorXd::Zero(static_cast<Eigen::Index>(f.param_of_col.size()));
  Eigen::Index col = 0;
  for (size_t k = 0; k < enc.dims.size(); ++k) {
    if (enc.dims[k].categorical) {
      row(col + static_cast<Eigen::Index>(x[k])) = 1.0;
      col += static_cast<Eigen::Index>(enc.dims[k].n_choices);
    } else {
      row(col++) = x[k];
    }
  }
  return row;
}

// Per-parameter squared differences between the rows of A and B.
std::vector<MatrixXd> squared_differences(const MatrixXd& a, const MatrixXd& b, const Features& f) {
  std::vector<MatrixXd> s(static_cast<size_t>(f.n_params), MatrixXd::Zero(a.rows(), b.rows()));
  for (Eigen::Index c = 0; c < a.cols(); ++c) {
    MatrixXd& sp = s[static_cast<size_t>(f.param_of_col[static_cast<size_t>(c)])];
    for (Eigen::Index j = 0; j < b.rows(); ++j)
      sp.col(j).array() += (a.col(c).array() - b(j, c)).square();
  }
  return s;
}

// Matern 5/2 correlation of a matrix of scaled squared distances.
MatrixXd matern52(const MatrixXd& r2) {
  const Eigen::ArrayXXd r2c = r2.array().max(0.0);
  const Eigen::ArrayXXd r = r2c.sqrt();
  return ((1.0 + kSqrt5 * r + (5.0 / 3.0) * r2c) * (-kSqrt5 * r).exp()).matrix();
}

// Matern 5/2 correlation of the scaled distance, given per-parameter S_p and 1/l_p^2.
MatrixXd correlation(const std::vector<MatrixXd>& s, const VectorXd& inv_ls2) {
  MatrixXd r2 = MatrixXd::Zero(s[0].rows(), s[0].cols());
  for (size_t p = 0; p < s.size(); ++p) r2 += s[p] * inv_ls2(static_cast<Eigen::Index>(p));
  return matern52(r2);
}

// The same correlation between the rows of A (many candidates) and B (the
// model's rows) without a matrix per parameter: every column of parameter p
// is scaled by 1/l_p (a one-hot block too, so two different choices stay
// sqrt(2)/l_p apart), and r^2 = |a|^2 + |b|^2 - 2 a.b comes from one
// matrix product. Candidate scoring costs one GEMM instead of P passes over
// an m x n matrix, and allocates one m x n matrix instead of P of them.
MatrixXd cross_correlation(const MatrixXd& a, const MatrixXd& b, const Features& f, const VectorXd& inv_ls2) {
  VectorXd scale(a.cols());
  for (Eigen::Index c = 0; c < a.cols(); ++c)
    scale(c) = std::sqrt(inv_ls2(f.param_of_col[static_cast<size_t>(c)]));
  const MatrixXd as = a * scale.asDiagonal(), bs = b * scale.asDiagonal();
  MatrixXd r2 = -2.0 * (as * bs.transpose());
  r2.colwise() += as.rowwise().squaredNorm();
  r2.rowwise() += bs.rowwise().squaredNorm().transpose();
  return matern52(r2);
}

// One numeric parameter's own Matern 5/2 correlation between coordinates a
// (m) and b (n), with r = |a_i - b_j| / l, and (when factor is given) the
// factor (5/3)(1 + sqrt5 r) e^{-sqrt5 r} of its derivative by log l. The
// exponential separates, e^{-sqrt5 |a - b| / l} = e^{-sqrt5 a / l} e^{sqrt5 b / l}
// for a >= b (and the mirror image), so it costs m + n exponentials instead
// of m n: the additive part's cost is then close to the joint kernel's. With
// coordinates in [0, 1] and l >= 0.01 the factors stay below e^224, far from
// overflow, and each product is exact to a rounding.
void matern_1d(const Eigen::Ref<const VectorXd>& a, const Eigen::Ref<const VectorXd>& b, double inv_l, MatrixXd* corr,
               MatrixXd* factor) {
  const Eigen::ArrayXd ua = (kSqrt5 * inv_l * a.array()).exp(), va = ua.inverse();
  const Eigen::ArrayXd ub = (kSqrt5 * inv_l * b.array()).exp(), vb = ub.inverse();
  corr->resize(a.size(), b.size());
  if (factor) factor->resize(a.size(), b.size());
  for (Eigen::Index j = 0; j < b.size(); ++j) {
    const Eigen::ArrayXd r = (a.array() - b(j)).abs() * inv_l;
    const Eigen::ArrayXd e = (a.array() >= b(j)).select(va * ub(j), ua * vb(j));
    corr->col(j).array() = (1.0 + kSqrt5 * r + (5.0 / 3.0) * r.square()) * e;
    if (factor) factor->col(j).array() = (5.0 / 3.0) * (1.0 + kSqrt5 * r) * e;
  }
}

// The additive part: the mean over parameters of each one's own Matern 5/2
// correlation, with the same lengthscales, between the rows of A and B
// (`factors`, when given, gets each parameter's derivative factor, as
// matern_1d's). A categorical parameter's distance is sqrt(2) / l or 0, so its
// correlation is one constant where the choices differ and 1 where they agree
// (the one-hot blocks' dot product says which), and its factor that
// constant's.
MatrixXd additive_correlation(const MatrixXd& a, const MatrixXd& b, const Features& f, const VectorXd& inv_ls2,
                              std::vector<MatrixXd>* factors = nullptr) {
  MatrixXd acc = MatrixXd::Zero(a.rows(), b.rows()), one;
  if (factors) factors->assign(static_cast<size_t>(f.n_params), MatrixXd());
  for (int p = 0; p < f.n_params; ++p) {
    const double inv_l = std::sqrt(inv_ls2(p));
    const Eigen::Index c0 = f.first_col[static_cast<size_t>(p)];
    MatrixXd* factor = factors ? &(*factors)[static_cast<size_t>(p)] : nullptr;
    if (f.categorical[static_cast<size_t>(p)]) {
      const Eigen::Index k = f.n_cols[static_cast<size_t>(p)];
      const double r = std::sqrt(2.0) * inv_l, e = std::exp(-kSqrt5 * r);
      const double differ = (1.0 + kSqrt5 * r + (5.0 / 3.0) * r * r) * e;
      const MatrixXd same = a.middleCols(c0, k) * b.middleCols(c0, k).transpose();
      acc.array() += differ + (1.0 - differ) * same.array();
      if (factor) *factor = ((5.0 / 3.0) * (1.0 + kSqrt5 * r) * e) * (1.0 - same.array()).matrix();
      continue;
    }
    matern_1d(a.col(c0), b.col(c0), inv_l, &one, factor);
    acc += one;
  }
  return acc / static_cast<double>(f.n_params);
}

// theta = [log l_1 .. log l_P, log s2, log noise] and, with the additive part,
// logit w last; returns -(log ML + log prior).
class NegLogPosterior {
 public:
  // x and f: the model's rows and their features, for the additive part (null: the joint kernel alone).
  NegLogPosterior(const std::vector<MatrixXd>& s, const VectorXd& y, const MatrixXd* x, const Features* f)
      : s_(s), y_(y), x_(x), f_(f), additive_(x != nullptr) {}

  double operator()(const VectorXd& theta, VectorXd& grad) {
    const Eigen::Index n = y_.size(), p = static_cast<Eigen::Index>(s_.size());
    const VectorXd inv_ls2 = (-2.0 * theta.head(p)).array().exp();
    const double s2 = std::exp(theta(p)), noise = std::exp(theta(p + 1));
    const double w = additive_ ? 1.0 / (1.0 + std::exp(-theta(p + 2))) : 0.0;
    // r, the Matern correlation and its derivative factor, from the same r2.
    MatrixXd r2 = MatrixXd::Zero(n, n);
    for (Eigen::Index q = 0; q < p; ++q) r2 += s_[static_cast<size_t>(q)] * inv_ls2(q);
    const Eigen::ArrayXXd r = r2.array().max(0.0).sqrt();
    const Eigen::ArrayXXd e = (-kSqrt5 * r).exp();
    const MatrixXd corr = ((1.0 + kSqrt5 * r + (5.0 / 3.0) * r2.array()) * e).matrix();
    // The additive part: per parameter, its correlation and its derivative factor (5/3)(1 + sqrt5 r_q) e^{-sqrt5 r_q}.
    std::vector<MatrixXd> add_factor;
    const MatrixXd add = additive_ ? additive_correlation(*x_, *x_, *f_, inv_ls2, &add_factor) : MatrixXd();
    const MatrixXd mixed = additive_ ? MatrixXd((1.0 - w) * corr + w * add) : corr;
    MatrixXd k = s2 * mixed;
    k.diagonal().array() += noise + 1e-8;
    Eigen::LLT<MatrixXd> llt(k);
    grad.setZero(theta.size());
    if (llt.info() != Eigen::Success) return 1e10;
    const VectorXd alpha = llt.solve(y_);
    const MatrixXd l = llt.matrixL();
    const double log_det = 2.0 * l.diagonal().array().log().sum();
    double value = 0.5 * y_.dot(alpha) + 0.5 * log_det + 0.5 * static_cast<double>(n) * kLog2Pi;
    const MatrixXd wm = alpha * alpha.transpose() - llt.solve(MatrixXd::Identity(n, n));
    // d/dlog l_q: s2 (5/3)(1 + sqrt5 r) e^{-sqrt5 r} S_q / l_q^2, times (1 - w), plus the additive term's share.
    const Eigen::ArrayXXd common = (wm.array() * (s2 * (1.0 - w) * (5.0 / 3.0)) * (1.0 + kSqrt5 * r) * e);
    for (Eigen::Index q = 0; q < p; ++q) {
      double d = 0.5 * (common * s_[static_cast<size_t>(q)].array()).sum() * inv_ls2(q);
      if (additive_)
        d += 0.5 * (wm.array() * add_factor[static_cast<size_t>(q)].array() * s_[static_cast<size_t>(q)].array()).sum() * inv_ls2(q) *
             s2 * w / static_cast<double>(p);
      const double z = (theta(q) - kLsPriorMean) / kLsPriorSd;
      value += 0.5 * z * z;
      grad(q) = -d + z / kLsPriorSd;
    }
    grad(p) = -0.5 * (wm.array() * mixed.array()).sum() * s2;
    grad(p + 1) = -0.5 * wm.trace() * noise;
    if (additive_) {
      const double z = (theta(p + 2) - kAdditivePriorMean) / kAdditivePriorSd;
      value += 0.5 * z * z;
      grad(p + 2) = -0.5 * (wm.array() * (add - corr).array()).sum() * s2 * w * (1.0 - w) + z / kAdditivePriorSd;
    }
    if (!std::isfinite(value) || !grad.allFinite()) return 1e10;
    if (value < best_value_) best_value_ = value, best_theta_ = theta;
    return value;
  }

  double best_value() const { return best_value_; }
  const VectorXd& best_theta() const { return best_theta_; }

 private:
  const std::vector<MatrixXd>& s_;
  const VectorXd& y_;
  const MatrixXd* x_;
  const Features* f_;
  bool additive_;
  double best_value_ = std::numeric_limits<double>::infinity();
  VectorXd best_theta_;
};

// log(z Phi(z) + phi(z)), stable for very negative z.
double log_h(double z) {
  if (z > -6.0) return std::log(std::max(z * normal_cdf(z) + std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI), 1e-300));
  const double t2 = z * z;
  return -0.5 * t2 - 0.5 * kLog2Pi + std::log(1.0 / t2 - 3.0 / (t2 * t2) + 15.0 / (t2 * t2 * t2));
}

struct Posterior {
  const Encoding* enc;
  const Features* f;
  MatrixXd x;  // model rows
  VectorXd inv_ls2;
  double s2 = 1;
  double w = 0;  // the additive part's weight
  Eigen::LLT<MatrixXd> llt;
  VectorXd alpha;

  // Mean and variance (of the latent function) at the rows of c.
  void predict(const MatrixXd& c, VectorXd* mean, VectorXd* var) const {
    MatrixXd kstar = s2 * cross_correlation(c, x, *f, inv_ls2);  // m x n
    if (w > 0) kstar = (1.0 - w) * kstar + (s2 * w) * additive_correlation(c, x, *f, inv_ls2);
    *mean = kstar * alpha;
    const MatrixXd v = llt.matrixL().solve(kstar.transpose());
    *var = (s2 - v.colwise().squaredNorm().array()).max(1e-12).matrix().transpose();
  }
};

bool factor(Posterior* post, const VectorXd& y, double noise) {
  MatrixXd k = post->s2 * correlation(squared_differences(post->x, post->x, *post->f), post->inv_ls2);
  if (post->w > 0) k = (1.0 - post->w) * k + (post->s2 * post->w) * additive_correlation(post->x, post->x, *post->f, post->inv_ls2);
  for (double jitter : {1e-8, 1e-6, 1e-4}) {
    MatrixXd kj = k;
    kj.diagonal().array() += noise + jitter;
    post->llt.compute(kj);
    if (post->llt.info() == Eigen::Success) {
      post->alpha = post->llt.solve(y);
      return post->alpha.allFinite();
    }
  }
  return false;
}

// The plug-in incumbent: the lowest posterior mean at the model's rows (call it
// before the pending fantasies join them: those are not trials).
double plugin_incumbent(const Posterior& post) {
  VectorXd mean, var;
  post.predict(post.x, &mean, &var);
  return mean.minCoeff();
}

// The model's points: all finished trials, or past the cap the best half and the most recent rest.
std::vector<size_t> model_points(const ModelInput& in, size_t cap) {
  const size_t n = in.x.size();
  std::vector<size_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  if (n <= cap) return all;
  std::vector<size_t> by_value = all;
  std::stable_sort(by_value.begin(), by_value.end(), [&](size_t a, size_t b) { return in.y[a] < in.y[b]; });
  std::vector<char> keep(n, 0);
  for (size_t i = 0; i < cap / 2; ++i) keep[by_value[i]] = 1;
  size_t kept = cap / 2;
  for (size_t i = n; i-- > 0 && kept < cap;)
    if (!keep[i]) keep[i] = 1, ++kept;
  std::vector<size_t> out;
  for (size_t i = 0; i < n; ++i)
    if (keep[i]) out.push_back(i);
  return out;
}

// The model's training rows: the features of the chosen points, and their values.
void training_rows(const ModelInput& in, const Features& f, const std::vector<size_t>& idx, MatrixXd* x, VectorXd* y) {
  const auto n = static_cast<Eigen::Index>(idx.size());
  x->resize(n, static_cast<Eigen::Index>(f.param_of_col.size()));
  y->resize(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    x->row(i) = featurize(*in.encoding, f, in.x[idx[static_cast<size_t>(i)]]).transpose();
    (*y)(i) = in.y[idx[static_cast<size_t>(i)]];
  }
}

// Copula transform (Salinas et al. 2020): each value becomes the normal score
// of its rank, ties sharing their mean rank. The GP then models the order of
// the values, not their scale, so one diverged or imputed trial (or a cliff
// in the objective) cannot flatten the rest; EI is taken on that scale too.
VectorXd normal_scores(const VectorXd& y) {
  const Eigen::Index n = y.size();
  VectorXd ys(n);
  std::vector<Eigen::Index> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](Eigen::Index a, Eigen::Index b) { return y(a) < y(b); });
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && y(order[j + 1]) == y(order[i])) ++j;
    const double rank = 0.5 * static_cast<double>(i + j);  // mean rank of the tie group, from 0
    const double q = (rank + 0.5) / static_cast<double>(n);
    for (size_t k = i; k <= j; ++k) ys(order[k]) = numeric::normal_quantile(q);
    i = j + 1;
  }
  ys.array() -= ys.mean();
  return ys;
}

// The hyperparameters theta = [log l_1 .. log l_P, log s2, log noise] that
// minimise NegLogPosterior, and its value there.
struct Fit {
  VectorXd theta;
  double neg_log_posterior = 0;
};

Result<Fit> fit_hyperparameters(const MatrixXd& x, const Features& f, const VectorXd& ys, bool additive) {
  const int p = f.n_params;
  const int m = p + 2 + (additive ? 1 : 0);
  const std::vector<MatrixXd> sq = squared_differences(x, x, f);
  NegLogPosterior objective(sq, ys, additive ? &x : nullptr, &f);
  VectorXd theta(m), lb(m), ub(m);
  theta.head(p).setConstant(std::log(0.4));
  lb.head(p).setConstant(kLogLsMin);
  ub.head(p).setConstant(kLogLsMax);
  theta(p) = 0.0, lb(p) = std::log(0.05), ub(p) = std::log(20.0);
  theta(p + 1) = std::log(1e-3), lb(p + 1) = std::log(1e-6), ub(p + 1) = std::log(0.5);
  if (additive) theta(p + 2) = kAdditivePriorMean, lb(p + 2) = -kLogitMax, ub(p + 2) = kLogitMax;
  LBFGSpp::LBFGSBParam<double> param;
  param.max_iterations = 30;
  param.epsilon = 1e-4;
  param.epsilon_rel = 1e-4;
  param.max_linesearch = 20;
  LBFGSpp::LBFGSBSolver<double> solver(param);
  double fx = 0;
  try {
    solver.minimize(objective, theta, fx, lb, ub);
  } catch (const std::exception&) {
    // A line search that gives up still leaves the best point it evaluated.
  }
  if (!std::isfinite(objective.best_value()) || objective.best_value() >= 1e10)
    return Status::FailedPrecondition("the kernel matrix could not be factored for any hyperparameters tried");
  return Fit{objective.best_theta(), objective.best_value()};
}

// Kriging believer: the newest pending points (at most `cap`) join the model
// with the posterior mean as their value.
Status add_pending(Posterior* post, const ModelInput& in, const VectorXd& ys, double noise, size_t cap) {
  if (in.pending.empty()) return Status::Ok();
  const Eigen::Index cols = post->x.cols();
  const size_t n_pending = std::min(in.pending.size(), cap);
  MatrixXd xp(static_cast<Eigen::Index>(n_pending), cols);
  for (size_t i = 0; i < n_pending; ++i)
    xp.row(static_cast<Eigen::Index>(i)) = featurize(*in.encoding, *post->f, in.pending[in.pending.size() - n_pending + i]).transpose();
  VectorXd mp, vp;
  post->predict(xp, &mp, &vp);
  MatrixXd xa(post->x.rows() + xp.rows(), cols);
  xa << post->x, xp;
  VectorXd ya(ys.size() + xp.rows());
  ya << ys, mp;
  post->x = xa;
  if (!factor(post, ya, noise)) return Status::FailedPrecondition("the model with pending trials is not positive definite");
  return Status::Ok();
}

// Candidate points: uniform ones and perturbations of given ones, all drawn
// from one stream, so the order of the calls is part of the result.
class CandidateSampler {
 public:
  explicit CandidateSampler(const ModelInput& in) : enc_(*in.encoding), rng_(in, 0x62617965732d6361ULL) {}  // "bayes-ca"

  std::vector<double> random_point() {
    std::vector<double> c(enc_.dims.size());
    for (size_t k = 0; k < enc_.dims.size(); ++k)
      c[k] = enc_.dims[k].categorical ? std::floor(rng_.next() * static_cast<double>(enc_.dims[k].n_choices)) : rng_.next();
    return c;
  }

  // Numeric coordinates moved by a normal step of `scale`; each categorical
  // one redrawn with probability 0.15.
  std::vector<double> perturb(const std::vector<double>& base, double scale) {
    std::vector<double> c = base;
    for (size_t k = 0; k < enc_.dims.size(); ++k) {
      if (enc_.dims[k].categorical) {
        if (rng_.next() < 0.15) c[k] = std::floor(rng_.next() * static_cast<double>(enc_.dims[k].n_choices));
      } else {
        c[k] = std::clamp(c[k] + scale * numeric::normal_quantile(rng_.next()), 0.0, 1.0);
      }
    }
    return c;
  }

 private:
  const Encoding& enc_;
  Stream rng_;
};

// The first candidates: half of n_candidates uniform, the rest perturbations
// of the best five model points (by normal score, ties to the earlier) in turn.
std::vector<std::vector<double>> first_candidates(CandidateSampler& sampler, const BayesSettings& s, const ModelInput& in,
                                                  const std::vector<size_t>& idx, const VectorXd& ys) {
  std::vector<std::vector<double>> cand;
  const size_t n_random = static_cast<size_t>(s.n_candidates) / 2;
  for (size_t i = 0; i < n_random; ++i) cand.push_back(sampler.random_point());
  std::vector<size_t> best_points(idx.size());
  std::iota(best_points.begin(), best_points.end(), 0);
  std::stable_sort(best_points.begin(), best_points.end(), [&](size_t a, size_t b) { return ys(static_cast<Eigen::Index>(a)) < ys(static_cast<Eigen::Index>(b)); });
  const size_t n_seeds = std::min<size_t>(5, best_points.size());
  for (size_t i = n_random; i < static_cast<size_t>(s.n_candidates); ++i)
    cand.push_back(sampler.perturb(in.x[idx[best_points[i % n_seeds]]], 0.1));
  return cand;
}

// Candidates with their scores: log expected improvement, and the
// posterior mean and variance it came from, one entry per point.
struct Scored {
  std::vector<std::vector<double>> points;
  std::vector<double> log_ei;
  VectorXd mu, var;
};

// The acquisition: log EI below `incumbent` (less the margin xi) at each point.
void score(const Posterior& post, double incumbent, double xi, const std::vector<std::vector<double>>& pts,
           std::vector<double>* log_ei, VectorXd* mu, VectorXd* var) {
  MatrixXd c(static_cast<Eigen::Index>(pts.size()), static_cast<Eigen::Index>(post.f->param_of_col.size()));
  for (size_t i = 0; i < pts.size(); ++i) c.row(static_cast<Eigen::Index>(i)) = featurize(*post.enc, *post.f, pts[i]).transpose();
  post.predict(c, mu, var);
  log_ei->resize(pts.size());
  for (size_t i = 0; i < pts.size(); ++i) {
    const double sigma = std::sqrt((*var)(static_cast<Eigen::Index>(i)));
    const double z = (incumbent - (*mu)(static_cast<Eigen::Index>(i)) - xi) / sigma;
    (*log_ei)[i] = std::log(sigma) + log_h(z);
  }
}

// Four rounds of shrinking perturbations (32 each) around the n_local_starts
// best candidates so far, each round's points scored and appended.
void refine(const Posterior& post, double incumbent, const BayesSettings& s, CandidateSampler& sampler, Scored* sc) {
  for (int round = 0; round < 4; ++round) {
    std::vector<size_t> order(sc->points.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + std::min<size_t>(s.n_local_starts, order.size()), order.end(),
                      [&](size_t a, size_t b) { return sc->log_ei[a] > sc->log_ei[b]; });
    std::vector<std::vector<double>> local;
    for (int st = 0; st < s.n_local_starts && st < static_cast<int>(order.size()); ++st)
      for (int j = 0; j < 32; ++j) local.push_back(sampler.perturb(sc->points[order[static_cast<size_t>(st)]], 0.1 / std::pow(3.0, round)));
    std::vector<double> lei2;
    VectorXd mu2, var2;
    score(post, incumbent, s.xi, local, &lei2, &mu2, &var2);
    sc->points.insert(sc->points.end(), local.begin(), local.end());
    sc->log_ei.insert(sc->log_ei.end(), lei2.begin(), lei2.end());
    VectorXd m3(sc->mu.size() + mu2.size()), v3(sc->var.size() + var2.size());
    m3 << sc->mu, mu2;
    v3 << sc->var, var2;
    sc->mu = m3, sc->var = v3;
  }
}

// The best candidate that, snapped to the values it stands for, is not a
// trial already run or pending (among the best 32; else the best one,
// snapped): its point, and its index among the candidates.
std::pair<std::vector<double>, size_t> choose(const Encoding& enc, const ModelInput& in, const Scored& sc) {
  std::vector<size_t> order(sc.points.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sc.log_ei[a] > sc.log_ei[b]; });
  for (size_t t = 0; t < std::min<size_t>(32, order.size()); ++t) {
    std::vector<double> snapped = snap(enc, sc.points[order[t]]);
    bool seen = std::find(in.x.begin(), in.x.end(), snapped) != in.x.end() ||
                std::find(in.pending.begin(), in.pending.end(), snapped) != in.pending.end();
    if (!seen) return {std::move(snapped), order[t]};
  }
  return {snap(enc, sc.points[order[0]]), order[0]};
}

}  // namespace

Result<std::vector<double>> gp_suggest(const BayesSettings& s, const ModelInput& in, ModelState* state) {
  const Encoding& enc = *in.encoding;
  const Features f = features_of(enc);
  const std::vector<size_t> idx = model_points(in, static_cast<size_t>(s.max_model_trials));
  if (idx.size() < 2) return Status::FailedPrecondition("a single trial: nothing to fit");
  MatrixXd x;
  VectorXd y;
  training_rows(in, f, idx, &x, &y);
  const Eigen::Index n = x.rows();
  const double mean = y.mean();
  const double sd = std::sqrt((y.array() - mean).square().sum() / static_cast<double>(n));
  if (!(sd > 1e-12 * std::max(1.0, std::fabs(mean))))
    return Status::FailedPrecondition("all " + std::to_string(n) + " values are equal: nothing to learn from");
  const VectorXd ys = normal_scores(y);
  // One parameter: the additive part would be the joint kernel again.
  const bool additive = s.additive && f.n_params >= 2;
  SWEPT_ASSIGN_OR_RETURN(fit, fit_hyperparameters(x, f, ys, additive));

  const int p = f.n_params;
  Posterior post;
  post.enc = &enc;
  post.f = &f;
  post.x = x;
  post.inv_ls2 = (-2.0 * fit.theta.head(p)).array().exp();
  post.s2 = std::exp(fit.theta(p));
  post.w = additive ? 1.0 / (1.0 + std::exp(-fit.theta(p + 2))) : 0.0;
  const double noise = std::exp(fit.theta(p + 1));
  if (!factor(&post, ys, noise)) return Status::FailedPrecondition("the fitted kernel matrix is not positive definite");
  const double incumbent = plugin_incumbent(post);
  SWEPT_RETURN_IF_ERROR(add_pending(&post, in, ys, noise, static_cast<size_t>(s.max_model_trials)));

  CandidateSampler sampler(in);
  Scored sc;
  sc.points = first_candidates(sampler, s, in, idx, ys);
  score(post, incumbent, s.xi, sc.points, &sc.log_ei, &sc.mu, &sc.var);
  refine(post, incumbent, s, sampler, &sc);
  auto [chosen, chosen_i] = choose(enc, in, sc);

  state->n_model = static_cast<int>(post.x.rows());
  state->acquisition = sc.log_ei[chosen_i];
  state->lengthscales.clear();
  for (int q = 0; q < p; ++q) state->lengthscales.push_back(std::exp(fit.theta(q)));
  state->signal_variance = post.s2;
  state->noise_variance = noise;
  state->additive_weight = post.w;
  state->log_marginal_likelihood = -fit.neg_log_posterior;
  state->predicted_quantile = normal_cdf(sc.mu(static_cast<Eigen::Index>(chosen_i)));
  state->predicted_sd = std::sqrt(sc.var(static_cast<Eigen::Index>(chosen_i)));
  return chosen;
}

}  // namespace swept::sweeps::search
