// Pure computations behind the dashboard's charts: downsampling of metric
// series and parameter importance. No I/O, no SQLite, no threads: tested with
// hand-computed cases in analysis_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace swept::web {

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

// A parameter value as the importance computation sees it: a number, or
// anything else as its JSON text (a category).
struct ParamValue {
  ParamValue() = default;
  ParamValue(double n) : is_number(true), number(n) {}               // NOLINT: implicit by design
  ParamValue(std::string t) : is_number(false), text(std::move(t)) {}  // NOLINT: implicit by design
  bool is_number = true;
  double number = 0;
  std::string text;
};

struct ParameterImportance {
  std::string name;
  double eta_squared = 0;  // in [0, 1]: share of the metric's variance explained
  size_t groups = 0;       // how many bins or categories the trials fell into
  size_t trials = 0;       // how many trials had this parameter and a metric
};

// Parameter importance as the correlation ratio eta^2 (the R^2 of a one-way
// ANOVA): trials are grouped by the parameter's value (numbers with more than
// `max_bins` distinct values into `max_bins` equal-count bins by rank; anything
// else by value) and eta^2 = SS_between / SS_total of the metric. A parameter
// with a single group, or a metric with no variance, scores 0.
// `values[p][t]` is parameter p of trial t (nullopt-like: absent when the
// trial lacks it, represented by `present[p][t] == false`).
struct ImportanceInput {
  std::vector<std::string> names;                 // one per parameter
  std::vector<std::vector<ParamValue>> values;    // [parameter][trial]
  std::vector<std::vector<bool>> present;         // [parameter][trial]
  std::vector<double> metric;                     // [trial]
};
std::vector<ParameterImportance> parameter_importance(const ImportanceInput& input, size_t max_bins = 10);

}  // namespace swept::web
