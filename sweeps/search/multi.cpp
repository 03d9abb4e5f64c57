// suggest() with several objectives, constraints or method nsga2: the
// history turned into loss vectors and violations, the startup phase, and
// the three searchers:
// - nsga2 (nsga2.cpp);
// - tpe: swept's TPE (tpe.cpp) on Optuna 3.1's multi-objective and
//   constrained split (multi_objective_split below): "below" is the best
//   gamma(n) trials by violation, then non-dominated rank, the last rank cut
//   by greedy hypervolume subset selection (Optuna's _solve_hssp), each
//   weighted by its hypervolume contribution (MOTPE, Ozaki et al. 2020);
// - bayes: swept's GP (gp.cpp) on a ParEGO scalarisation (Knowles 2006) with
//   fresh random weights for every suggestion, so that successive suggestions
//   aim at different parts of the front; pending trials get the GP's fantasies
//   exactly as in the single-objective path. Expected hypervolume improvement
//   would need a GP per objective and a Monte Carlo integral per candidate:
//   ParEGO keeps one GP and the suggestion latency of the single path.
// Failed trials (an objective missing or not finite) are left out of tpe's
// and nsga2's ranking, as Optuna leaves out trials that are not COMPLETE;
// bayes gives them the worst score seen, as the single-objective path does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sweeps/pareto.h"
#include "sweeps/search/multi.h"
#include "sweeps/space.h"

namespace swept::sweeps::search {
namespace {

using nlohmann::json;

constexpr double kEps = 1e-12;  // Optuna's EPS in _tpe/sampler.py
constexpr double kInf = std::numeric_limits<double>::infinity();

// Optuna's default_gamma.
size_t default_gamma(size_t n) { return std::min<size_t>(static_cast<size_t>(std::ceil(0.1 * static_cast<double>(n))), 25); }

double hv_min(const std::vector<std::vector<double>>& pts, const std::vector<double>& ref) {
  return hypervolume(pts, std::vector<Goal>(ref.size(), Goal::kMinimize), ref);
}

// Optuna's reference point for the split and the weights: 1.1 x the worst
// value per objective (0.9 x when negative), 0 replaced by EPS.
std::vector<double> optuna_reference(const std::vector<std::vector<double>>& pts) {
  std::vector<double> ref(pts[0].size(), -kInf);
  for (const auto& p : pts)
    for (size_t k = 0; k < p.size(); ++k) ref[k] = std::max(ref[k], p[k]);
  for (double& r : ref) {
    r = std::max(1.1 * r, 0.9 * r);
    if (r == 0) r = kEps;
  }
  return ref;
}

// Optuna's _solve_hssp: `size` of `members` chosen greedily by hypervolume contribution.
std::vector<size_t> greedy_hssp(const MultiInput& in, const std::vector<size_t>& members, size_t size) {
  std::vector<std::vector<double>> pts;
  for (size_t i : members) pts.push_back(in.loss[i]);
  const std::vector<double> ref = optuna_reference(pts);
  std::vector<double> contribution(pts.size());
  for (size_t j = 0; j < pts.size(); ++j) contribution[j] = hv_min({pts[j]}, ref);
  std::vector<std::vector<double>> selected;
  std::vector<size_t> chosen;
  double hv_selected = 0;
  while (chosen.size() < size) {
    const size_t best = static_cast<size_t>(std::max_element(contribution.begin(), contribution.end()) - contribution.begin());
    contribution[best] = -1;  // selected
    for (size_t j = 0; j < pts.size(); ++j) {
      if (contribution[j] == -1) continue;
      std::vector<double> joint(pts[j].size());
      for (size_t k = 0; k < joint.size(); ++k) joint[k] = std::max(pts[best][k], pts[j][k]);
      // Inside what is already selected: the difference below is 0 (the common case; skip the volume).
      bool covered = false;
      for (const auto& q : selected) {
        bool all = true;
        for (size_t k = 0; all && k < q.size(); ++k) all = q[k] <= joint[k];
        if (all) {
          covered = true;
          break;
        }
      }
      if (covered) continue;
      auto with = selected;
      with.push_back(std::move(joint));
      contribution[j] -= hv_min(with, ref) - hv_selected;
    }
    selected.push_back(pts[best]);
    chosen.push_back(members[best]);
    hv_selected = hv_min(selected, ref);
  }
  return chosen;
}

// The unconstrained split of `members` (Optuna's _split_observation_pairs without violations).
std::vector<size_t> split_by_loss(const MultiInput& in, const std::vector<size_t>& members, size_t n_below) {
  if (in.loss[members[0]].size() == 1) {
    std::vector<size_t> order = members;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return in.loss[a][0] < in.loss[b][0]; });
    order.resize(n_below);
    return order;
  }
  // Fronts peeled one at a time, only until "below" is full (Optuna ranks
  // everything; the ranks past that point decide nothing).
  const std::vector<Goal> goals(in.loss[members[0]].size(), Goal::kMinimize);
  std::vector<size_t> below, rest = members;
  while (below.size() < n_below) {
    std::vector<std::vector<double>> pts;
    for (size_t i : rest) pts.push_back(in.loss[i]);
    std::vector<size_t> at, left;
    const std::vector<size_t> front = pareto_front(pts, goals);
    std::vector<char> on(rest.size(), 0);
    for (size_t j : front) on[j] = 1;
    for (size_t j = 0; j < rest.size(); ++j) (on[j] ? at : left).push_back(rest[j]);
    rest = std::move(left);
    if (below.size() + at.size() <= n_below) {
      below.insert(below.end(), at.begin(), at.end());
    } else {
      const std::vector<size_t> cut = greedy_hssp(in, at, n_below - below.size());
      below.insert(below.end(), cut.begin(), cut.end());
    }
  }
  return below;
}

Suggestion startup(const SweepSpec& spec, int64_t index, ModelState st, std::string note) {
  st.mode = "startup";
  st.note = std::move(note);
  return Suggestion{random_params(spec, index), std::move(st)};
}

}  // namespace

TpeSplit multi_objective_split(const MultiInput& in, size_t n_below) {
  const size_t n = in.loss.size();
  n_below = std::min(n_below, n);
  std::vector<size_t> all(n), below;
  std::iota(all.begin(), all.end(), 0);
  if (n_below == 0) return {std::vector<char>(n, 0), {}};
  if (!in.violation.empty()) {
    std::vector<size_t> order = all;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return in.violation[a] < in.violation[b]; });
    if (n_below >= n || in.violation[order[n_below]] > 0) {
      below.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n_below));
    } else {
      std::vector<size_t> feasible;
      for (size_t i : all)
        if (in.violation[i] == 0) feasible.push_back(i);
      below = split_by_loss(in, feasible, n_below);
    }
  } else {
    below = split_by_loss(in, all, n_below);
  }
  std::sort(below.begin(), below.end());
  TpeSplit split{std::vector<char>(n, 0), {}};
  for (size_t i : below) split.below[i] = 1;
  // Weights: hypervolume contributions of the feasible "below" trials, EPS for the rest.
  std::vector<size_t> feasible;
  for (size_t i : below)
    if (in.violation.empty() || in.violation[i] == 0) feasible.push_back(i);
  std::vector<double> contribution(feasible.size(), 1.0);
  if (in.loss[0].size() > 1 && feasible.size() > 1) {
    std::vector<std::vector<double>> pts;
    for (size_t i : feasible) pts.push_back(in.loss[i]);
    const std::vector<double> ref = optuna_reference(pts);
    const double hv = hv_min(pts, ref);
    for (size_t j = 0; j < pts.size(); ++j) {
      auto others = pts;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(j));
      contribution[j] = hv - hv_min(others, ref) + kEps;
    }
    const double top = *std::max_element(contribution.begin(), contribution.end());
    for (double& c : contribution) c = std::clamp(c / top, 0.0, 1.0);
  }
  size_t f = 0;
  for (size_t i : below) {
    const bool ok = in.violation.empty() || in.violation[i] == 0;
    split.weights.push_back(ok ? contribution[f++] : kEps);
  }
  return split;
}

std::vector<double> parego_scalarise(const MultiInput& in, const std::vector<double>& w) {
  const size_t n = in.loss.size(), m = w.size();
  std::vector<double> lo(m, kInf), hi(m, -kInf), s(n);
  for (const auto& l : in.loss)
    for (size_t k = 0; k < m; ++k) lo[k] = std::min(lo[k], l[k]), hi[k] = std::max(hi[k], l[k]);
  double worst = 0, max_violation = 0;
  for (size_t i = 0; i < n; ++i) {
    double chebyshev = 0, sum = 0;
    for (size_t k = 0; k < m; ++k) {
      const double f = hi[k] > lo[k] ? (in.loss[i][k] - lo[k]) / (hi[k] - lo[k]) : 0.0;
      chebyshev = std::max(chebyshev, w[k] * f);
      sum += w[k] * f;
    }
    s[i] = chebyshev + 0.05 * sum;
    worst = std::max(worst, s[i]);
    if (!in.violation.empty() && std::isfinite(in.violation[i])) max_violation = std::max(max_violation, in.violation[i]);
  }
  // Infeasible trials: above every feasible score, by violation (unknown = the most).
  for (size_t i = 0; i < n && !in.violation.empty(); ++i) {
    if (in.violation[i] <= 0) continue;
    const double share = std::isfinite(in.violation[i]) && max_violation > 0 ? in.violation[i] / max_violation : 1.0;
    s[i] = worst + 1.0 + share;
  }
  return s;
}

Result<Suggestion> suggest_multi(const SearchSettings& settings, const SweepSpec& spec, const SearchHistory& history,
                                 int64_t index) {
  const size_t m = spec.objectives.size();
  const char* method = method_name(settings.method);
  if (m == 0) return Status::InvalidArgument(std::string("metric: ") + method + " learns from a metric; the sweep has none");
  const Encoding enc = encode_space(*spec.space);
  ModelState st;
  st.method = method;
  st.best = std::numeric_limits<double>::quiet_NaN();
  st.n_finished = static_cast<int>(history.finished.size());
  st.n_pending = static_cast<int>(history.pending.size());
  MultiInput in;
  in.base.encoding = &enc;
  in.base.seed = spec.seed;
  in.base.index = index;
  std::vector<std::vector<double>> failed_x;  // bayes scores them as the worst
  for (const Observation& o : history.finished) {
    auto x = to_point(enc, o.params);
    if (!x) continue;  // params the space cannot hold: not evidence here
    std::vector<double> v = o.values;
    if (v.empty() && m == 1 && o.value) v = {*o.value};
    bool ok = v.size() == m;
    for (size_t k = 0; ok && k < m; ++k) ok = std::isfinite(v[k]);
    if (!ok) {
      ++st.n_failed;
      failed_x.push_back(std::move(*x));
      continue;
    }
    for (size_t k = 0; k < m; ++k)
      if (spec.objectives[k].goal == Goal::kMaximize) v[k] = -v[k];
    double violation = 0;
    if (!spec.constraints.empty()) {
      if (o.violations.size() != spec.constraints.size()) violation = kInf;
      for (double c : o.violations) violation += std::isnan(c) ? kInf : std::max(0.0, c);
      st.n_infeasible += violation > 0;
      in.violation.push_back(violation);
    }
    if (m == 1 && violation == 0 && (std::isnan(st.best) || v[0] < st.best)) st.best = v[0];
    in.base.x.push_back(std::move(*x));
    in.loss.push_back(std::move(v));
  }
  if (m == 1 && std::isfinite(st.best) && spec.objectives[0].goal == Goal::kMaximize) st.best = -st.best;
  for (const json& p : history.pending)
    if (auto x = to_point(enc, p)) in.base.pending.push_back(std::move(*x));
  const size_t n = in.loss.size();
  if (enc.dims.empty()) return startup(spec, index, st, "every parameter is a constant");

  Result<std::vector<double>> point = Status::FailedPrecondition("");
  if (settings.method == SearchMethod::kNsga2) {
    point = nsga2_suggest(settings.nsga2, in, &st);
    if (st.generation < 0) return startup(spec, index, st, point.status().message());
  } else if (settings.method == SearchMethod::kTpe) {
    if (static_cast<int>(n) < settings.tpe.n_startup_trials)
      return startup(spec, index, st, "random until " + std::to_string(settings.tpe.n_startup_trials) + " trials have finished");
    const TpeSplit split = multi_objective_split(in, default_gamma(n));
    in.base.below = split.below;
    in.base.below_weights = split.weights;
    in.base.y.assign(n, 0.0);
    point = tpe_suggest(settings.tpe, in.base, &st);
  } else {
    const int first = std::max(2, settings.bayes.n_startup_trials);
    if (static_cast<int>(n + failed_x.size()) < first || n == 0)
      return startup(spec, index, st, "random until " + std::to_string(first) + " trials have finished");
    // Weights uniform on the simplex: normalised exponential draws, fresh per suggestion.
    Stream rng(in.base, 0x70617265676f2d77ULL);  // "parego-w"
    std::vector<double> w(m);
    for (double& x : w) x = -std::log(rng.next());
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    for (double& x : w) x /= total;
    in.base.y = parego_scalarise(in, w);
    const double worst = *std::max_element(in.base.y.begin(), in.base.y.end());
    for (auto& x : failed_x) in.base.x.push_back(std::move(x)), in.base.y.push_back(worst);
    point = gp_suggest(settings.bayes, in.base, &st);
  }
  if (!point.ok()) {
    st.mode = "fallback";
    st.note = "random trial: the " + std::string(method) + " model could not be used: " + point.status().message();
    return Suggestion{random_params(spec, index), std::move(st)};
  }
  st.mode = "model";
  return Suggestion{to_params(enc, *point), std::move(st)};
}

}  // namespace swept::sweeps::search
