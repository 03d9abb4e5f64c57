// Pareto dominance, fronts, non-dominated sorting and hypervolume (pareto.h).
// Everything is computed on "minimisation form": each maximised objective's
// sign flipped, so that smaller is better everywhere below.
//
// The front: points sorted lexicographically can only be dominated by points
// before them, and anything dominated by some earlier point is dominated by a
// front member (dominance is transitive), so each point is checked against
// the front found so far only: O(n * |front|) instead of O(n^2).
//
// The hypervolume: exact, by slicing (Knowles' HSO, "hypervolume by slicing
// objectives"): sort by the last objective; between two consecutive values of
// it, the dominated region's cross-section is the (d-1)-dimensional volume of
// the points seen so far. The 2-D base case is a sweep over a staircase.
// O(n^(d-1) log n): exact and fast enough for sweeps (thousands of trials in
// 2-D, hundreds in 3-D) and for the searchers' populations.
#include "sweeps/pareto.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace swept::sweeps {
namespace {

using Point = std::vector<double>;

// The point in minimisation form, or empty when it has a NaN or the wrong size.
Point minimised(const Point& p, const std::vector<Goal>& goals) {
  if (p.size() != goals.size()) return {};
  Point m(p.size());
  for (size_t k = 0; k < p.size(); ++k) {
    if (std::isnan(p[k])) return {};
    m[k] = goals[k] == Goal::kMaximize ? -p[k] : p[k];
  }
  return m;
}

// Dominance on minimisation form (both finite, same size).
bool dominates_min(const Point& a, const Point& b) {
  bool strictly = false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k] > b[k]) return false;
    if (a[k] < b[k]) strictly = true;
  }
  return strictly;
}

// The front among `candidates` (indices into `pts`, all minimised and
// non-empty), ascending.
std::vector<size_t> front_of(const std::vector<Point>& pts, std::vector<size_t> candidates) {
  std::sort(candidates.begin(), candidates.end(),
            [&](size_t a, size_t b) { return pts[a] < pts[b] || (pts[a] == pts[b] && a < b); });
  std::vector<size_t> front;
  for (size_t i : candidates) {
    bool dominated = false;
    for (size_t f : front) {
      if (dominates_min(pts[f], pts[i])) {
        dominated = true;
        break;
      }
    }
    if (!dominated) front.push_back(i);
  }
  std::sort(front.begin(), front.end());
  return front;
}

// 2-D staircase: points minimised and strictly inside ref.
double hv2(std::vector<Point> pts, const Point& ref) {
  std::sort(pts.begin(), pts.end());
  double area = 0, prev_y = ref[1];
  for (const Point& p : pts) {
    if (p[1] < prev_y) {
      area += (ref[0] - p[0]) * (prev_y - p[1]);
      prev_y = p[1];
    }
  }
  return area;
}

// d-dimensional (d = ref.size() >= 1) volume, points minimised and strictly inside ref.
double hv(std::vector<Point> pts, const Point& ref) {
  const size_t d = ref.size();
  if (pts.empty()) return 0;
  if (d == 1) {
    double best = ref[0];
    for (const Point& p : pts) best = std::min(best, p[0]);
    return ref[0] - best;
  }
  if (d == 2) return hv2(std::move(pts), ref);
  std::sort(pts.begin(), pts.end(), [&](const Point& a, const Point& b) { return a[d - 1] < b[d - 1]; });
  const Point sub_ref(ref.begin(), ref.end() - 1);
  std::vector<Point> slice;
  double volume = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    slice.emplace_back(pts[i].begin(), pts[i].end() - 1);
    const double next = i + 1 < pts.size() ? pts[i + 1][d - 1] : ref[d - 1];
    if (next > pts[i][d - 1]) volume += hv(slice, sub_ref) * (next - pts[i][d - 1]);
  }
  return volume;
}

}  // namespace

bool dominates(const std::vector<double>& a, const std::vector<double>& b, const std::vector<Goal>& goals) {
  const Point ma = minimised(a, goals), mb = minimised(b, goals);
  if (ma.empty() || mb.empty()) return false;
  return dominates_min(ma, mb);
}

std::vector<size_t> pareto_front(const std::vector<std::vector<double>>& values, const std::vector<Goal>& goals,
                                 const std::vector<bool>& feasible) {
  std::vector<Point> pts(values.size());
  std::vector<size_t> candidates;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!feasible.empty() && (i >= feasible.size() || !feasible[i])) continue;
    pts[i] = minimised(values[i], goals);
    if (!pts[i].empty() && !goals.empty()) candidates.push_back(i);
  }
  return front_of(pts, std::move(candidates));
}

std::vector<int> nondominated_ranks(const std::vector<std::vector<double>>& values, const std::vector<Goal>& goals) {
  std::vector<Point> pts(values.size());
  std::vector<size_t> rest;
  std::vector<int> rank(values.size(), -1);
  for (size_t i = 0; i < values.size(); ++i) {
    pts[i] = minimised(values[i], goals);
    if (!pts[i].empty() && !goals.empty()) rest.push_back(i);
  }
  // Peel fronts off what is left: each round's front is the next rank.
  int r = 0;
  for (; !rest.empty(); ++r) {
    const std::vector<size_t> front = front_of(pts, rest);
    for (size_t i : front) rank[i] = r;
    std::vector<size_t> left;
    std::set_difference(rest.begin(), rest.end(), front.begin(), front.end(), std::back_inserter(left));
    rest = std::move(left);
  }
  for (int& x : rank)
    if (x < 0) x = r;  // points with a NaN: one rank after every finite point
  return rank;
}

double hypervolume(const std::vector<std::vector<double>>& points, const std::vector<Goal>& goals,
                   const std::vector<double>& ref) {
  const Point mref = minimised(ref, goals);
  if (mref.empty() || goals.empty()) return 0;
  for (double r : mref)
    if (!std::isfinite(r)) return 0;
  std::vector<Point> inside;
  for (const Point& p : points) {
    Point m = minimised(p, goals);
    if (m.empty()) continue;
    bool strictly_better = true;
    for (size_t k = 0; k < m.size(); ++k) strictly_better = strictly_better && m[k] < mref[k];
    // A point at -inf (a maximised +inf) would make the volume infinite: it
    // is clipped to nothing, as no real trial reports one.
    for (double x : m) strictly_better = strictly_better && std::isfinite(x);
    if (strictly_better) inside.push_back(std::move(m));
  }
  // Only the front contributes: dropping the rest keeps the slices small.
  std::vector<size_t> all(inside.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<Point> front;
  for (size_t i : front_of(inside, all)) front.push_back(inside[i]);
  return hv(std::move(front), mref);
}

std::vector<double> reference_point(const std::vector<Metric>& objectives,
                                    const std::vector<std::vector<double>>& values) {
  std::vector<double> ref(objectives.size(), std::numeric_limits<double>::quiet_NaN());
  for (size_t k = 0; k < objectives.size(); ++k) {
    if (objectives[k].ref) {
      ref[k] = *objectives[k].ref;
      continue;
    }
    const bool maximize = objectives[k].goal == Goal::kMaximize;
    for (const Point& p : values) {
      if (k >= p.size() || !std::isfinite(p[k])) continue;
      if (std::isnan(ref[k]) || (maximize ? p[k] < ref[k] : p[k] > ref[k])) ref[k] = p[k];
    }
  }
  return ref;
}

}  // namespace swept::sweeps
