// Parameter importance as the correlation ratio eta^2, the pure computation
// over values already in memory (web/sweep_importance.h feeds it a sweep's
// sample from the store). No I/O, no SQLite, no threads: tested with
// hand-computed cases in eta_squared_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace swept::web {

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
// with a single group (it never changed over the trials with a metric value)
// is left out of the result; with a metric of no variance, one scores 0.
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
