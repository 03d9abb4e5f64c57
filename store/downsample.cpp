// Downsampling of metric series for the read model: see downsample.h.
#include "store/downsample.h"

#include <algorithm>
#include <cmath>

namespace swept::store {

std::vector<SeriesPoint> downsample_lttb(const std::vector<SeriesPoint>& points, size_t max_points) {
  if (max_points < 3) max_points = 3;
  const size_t n = points.size();
  if (n <= max_points) return points;
  std::vector<SeriesPoint> out;
  out.reserve(max_points);
  out.push_back(points.front());
  // Interior points 1..n-2 split into max_points-2 buckets of (nearly) equal size.
  const double bucket = static_cast<double>(n - 2) / static_cast<double>(max_points - 2);
  size_t kept = 0;  // index of the last point kept
  for (size_t b = 0; b < max_points - 2; ++b) {
    size_t begin = 1 + static_cast<size_t>(std::floor(b * bucket));
    size_t end = 1 + static_cast<size_t>(std::floor((b + 1) * bucket));
    end = std::min(end, n - 1);
    // Mean of the next bucket (or the last point after the final bucket).
    size_t next_begin = end;
    size_t next_end = std::min(n - 1, 1 + static_cast<size_t>(std::floor((b + 2) * bucket)));
    if (b + 1 == max_points - 2) next_begin = n - 1, next_end = n;
    double mean_x = 0, mean_y = 0;
    size_t count = 0;
    for (size_t i = next_begin; i < next_end; ++i, ++count) {
      mean_x += static_cast<double>(points[i].step);
      mean_y += points[i].value;
    }
    if (count == 0) {
      mean_x = static_cast<double>(points[n - 1].step), mean_y = points[n - 1].value;
    } else {
      mean_x /= static_cast<double>(count), mean_y /= static_cast<double>(count);
    }
    const double ax = static_cast<double>(points[kept].step), ay = points[kept].value;
    double best_area = -1;
    size_t best = begin;
    for (size_t i = begin; i < end; ++i) {
      double area = std::fabs((ax - mean_x) * (points[i].value - ay) -
                              (ax - static_cast<double>(points[i].step)) * (mean_y - ay));
      if (std::isnan(area)) area = 0;
      if (area > best_area) best_area = area, best = i;
    }
    out.push_back(points[best]);
    kept = best;
  }
  out.push_back(points.back());
  return out;
}

}  // namespace swept::store
