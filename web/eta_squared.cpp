// Parameter importance (eta^2): see eta_squared.h.
#include "web/eta_squared.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace swept::web {

namespace {

// Group labels for one parameter over the trials where it is present.
std::vector<size_t> group_labels(const std::vector<ParamValue>& values, const std::vector<size_t>& rows,
                                 size_t max_bins, size_t* groups) {
  bool all_numeric = std::all_of(rows.begin(), rows.end(),
                                 [&](size_t t) { return values[t].is_number; });
  std::vector<size_t> labels(rows.size());
  if (all_numeric) {
    std::vector<double> distinct;
    for (size_t t : rows) distinct.push_back(values[t].number);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    if (distinct.size() > max_bins) {
      // Equal-count bins by rank: robust to log-scaled parameters.
      std::vector<size_t> order(rows.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return values[rows[a]].number < values[rows[b]].number;
      });
      for (size_t r = 0; r < order.size(); ++r) labels[order[r]] = r * max_bins / order.size();
      *groups = std::min(max_bins, rows.size());
      return labels;
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      double v = values[rows[i]].number;
      labels[i] = static_cast<size_t>(std::lower_bound(distinct.begin(), distinct.end(), v) - distinct.begin());
    }
    *groups = distinct.size();
    return labels;
  }
  std::map<std::string, size_t> ids;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ParamValue& v = values[rows[i]];
    std::string key = v.is_number ? "n:" + std::to_string(v.number) : "s:" + v.text;
    auto it = ids.emplace(key, ids.size()).first;
    labels[i] = it->second;
  }
  *groups = ids.size();
  return labels;
}

}  // namespace

std::vector<ParameterImportance> parameter_importance(const ImportanceInput& input, size_t max_bins) {
  std::vector<ParameterImportance> out;
  if (max_bins < 2) max_bins = 2;
  for (size_t p = 0; p < input.names.size(); ++p) {
    ParameterImportance imp;
    imp.name = input.names[p];
    std::vector<size_t> rows;
    for (size_t t = 0; t < input.metric.size(); ++t) {
      if (input.present[p][t] && std::isfinite(input.metric[t])) rows.push_back(t);
    }
    imp.trials = rows.size();
    if (rows.size() >= 2) {
      size_t groups = 0;
      std::vector<size_t> labels = group_labels(input.values[p], rows, max_bins, &groups);
      imp.groups = groups;
      double mean = 0;
      for (size_t t : rows) mean += input.metric[t];
      mean /= static_cast<double>(rows.size());
      std::vector<double> sum(groups, 0.0);
      std::vector<size_t> count(groups, 0);
      double ss_total = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        double y = input.metric[rows[i]];
        sum[labels[i]] += y;
        ++count[labels[i]];
        ss_total += (y - mean) * (y - mean);
      }
      double ss_between = 0;
      for (size_t g = 0; g < groups; ++g) {
        if (count[g] == 0) continue;
        double gm = sum[g] / static_cast<double>(count[g]);
        ss_between += static_cast<double>(count[g]) * (gm - mean) * (gm - mean);
      }
      if (groups > 1 && ss_total > 0) imp.eta_squared = std::clamp(ss_between / ss_total, 0.0, 1.0);
    } else {
      imp.groups = rows.size();
    }
    // A parameter that never changed (one value over the trials with a
    // metric) explains nothing and is not a choice the sweep made: not listed.
    if (imp.groups < 2) continue;
    out.push_back(std::move(imp));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const ParameterImportance& a, const ParameterImportance& b) { return a.eta_squared > b.eta_squared; });
  return out;
}

}  // namespace swept::web
