// Tests of store/downsample.h against hand-computed cases.
#include <doctest/doctest.h>

#include <cmath>

#include "store/downsample.h"

using swept::store::downsample_lttb;
using swept::store::SeriesPoint;

TEST_CASE("store: lttb returns short series unchanged") {
  std::vector<SeriesPoint> pts = {{0, 1}, {1, 2}, {2, 3}};
  auto out = downsample_lttb(pts, 10);
  REQUIRE(out.size() == 3);
  CHECK(out[1].step == 1);
}

TEST_CASE("store: lttb keeps endpoints, the requested count, order and a lone spike") {
  std::vector<SeriesPoint> pts;
  for (int i = 0; i < 10000; ++i) pts.push_back({i, i == 5003 ? 100.0 : std::sin(i / 500.0)});
  auto out = downsample_lttb(pts, 200);
  REQUIRE(out.size() == 200);
  CHECK(out.front().step == 0);
  CHECK(out.back().step == 9999);
  bool spike = false;
  for (size_t i = 1; i < out.size(); ++i) {
    CHECK(out[i].step > out[i - 1].step);
    if (out[i].value == 100.0) spike = true;
  }
  CHECK(spike);  // plain striding would drop it
}

TEST_CASE("store: lttb treats fewer than 3 points as 3") {
  std::vector<SeriesPoint> pts = {{0, 0}, {1, 5}, {2, 0}, {3, 0}, {4, 1}};
  auto out = downsample_lttb(pts, 1);
  REQUIRE(out.size() == 3);
  CHECK(out[1].step == 1);  // the peak forms the largest triangle
}
