// Downsampling of metric series, so that the read model never sends a chart
// more points than it can draw. Pure; no I/O; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace swept::store {

struct SeriesPoint {
  int64_t step;
  double value;
};

// Largest-Triangle-Three-Buckets (Steinarsson 2013): keeps the first and last
// point and, from each of `max_points - 2` equal buckets, the point forming the
// largest triangle with the previous kept point and the next bucket's mean.
// Preserves peaks and dips that plain striding would drop. Returns the input
// unchanged when it has at most `max_points` points; `max_points` below 3 is
// treated as 3. Input must be sorted by step.
std::vector<SeriesPoint> downsample_lttb(const std::vector<SeriesPoint>& points, size_t max_points);

}  // namespace swept::store
