// The metrics-line format: how any trial reports metrics on stdout.
// The contract is docs/metrics.md; this is its one parser, used by the agent
// (and by tests of swept-train, which writes such lines).
//
// A metric line is one JSON object on one line. Numeric members are metrics,
// except the reserved members `step`, `final` and `diverged`. Every other line
// is log output. Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace swept {

// Longest line read as a metric line; longer lines are log (docs/metrics.md).
inline constexpr size_t kMaxMetricLineBytes = 1 << 20;

struct MetricsRecord {
  std::optional<int64_t> step;  // absent: the reader uses the last step seen
  std::vector<std::pair<std::string, double>> values;  // in the line's order
  bool final = false;     // the trial's last metrics line
  bool diverged = false;  // the trial stopped because its loss was not finite (or: see non_finite)
  // Members whose value was written as NaN or an infinity (`nan`, `inf`,
  // `-inf`, `NaN`, `Infinity`, `-Infinity`, `-nan`), in the line's order.
  // Their values are not in `values` (nothing downstream stores a non-finite
  // number), and any of them makes `diverged` true: the trial then counts as
  // the worst (docs/metrics.md).
  std::vector<std::string> non_finite;
};

// Returns the record if `line` is a metric line, nullopt if it is log output.
// A line is a metric line when it is a JSON object (surrounding whitespace
// allowed) of at most kMaxMetricLineBytes, where the bare tokens of
// non-finite numbers that Python and C print are accepted as values; within
// it, numbers that are finite become values, non-finite ones are listed in
// `non_finite` (and set `diverged`), and members of other types (strings,
// null, arrays, objects, booleans other than the reserved ones) are ignored.
// A reserved member written as a non-finite number counts as null (so a
// non-finite `step` makes the line log output, like any non-integer one).
// A negative or non-integer `step` makes the whole line log output.
std::optional<MetricsRecord> parse_metrics_line(std::string_view line);

}  // namespace swept
