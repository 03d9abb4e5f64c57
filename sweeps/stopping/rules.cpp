// The stopping rules themselves. Each follows its peer's published algorithm
// step by step (see stopping.h for which); the comments say where a detail is
// the peer's and matters for the vectors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <zlib.h>

#include "sweeps/stopping/stopping.h"

namespace swept::sweeps::stopping {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// ---- W&B hyperband --------------------------------------------------------

// The values W&B counts as iterations: finite ones, in logging order, negated
// for maximize so that smaller is better.
std::vector<double> minimize_space_history(const TrialCurve& t, Goal goal) {
  std::vector<double> h;
  h.reserve(t.reports.size());
  for (const Report& r : t.reports)
    if (std::isfinite(r.value)) h.push_back(goal == Goal::kMaximize ? -r.value : r.value);
  return h;
}

std::vector<int64_t> bands_of(const HyperbandSettings& s) {
  std::vector<int64_t> bands;
  if (s.max_iter) {  // max_iter wins over min_iter, as in W&B
    double band = *s.max_iter;
    for (int64_t i = 0; i < s.s; ++i) {
      band /= s.eta;  // repeated division, as upstream
      if (band < 1) break;
      bands.push_back(static_cast<int64_t>(band));
    }
    std::sort(bands.begin(), bands.end());
  } else if (s.min_iter) {
    // W&B lists 100 bands; those past 2^53 iterations cannot be reached by a
    // real history (nor held in an int64 for eta^100), so the list ends there.
    double band = *s.min_iter;
    for (int i = 0; i < 100 && band < 9007199254740992.0; ++i) {
      bands.push_back(static_cast<int64_t>(band));
      band *= s.eta;
    }
  }
  return bands;
}

std::vector<Decision> decide_hyperband(const Rule& rule, const std::vector<TrialCurve>& trials) {
  const auto& s = std::get<HyperbandSettings>(rule.settings);
  const HyperbandBands hb = hyperband_bands(rule, trials);
  const double sign = rule.goal == Goal::kMaximize ? -1 : 1;
  std::vector<Decision> out;
  for (const TrialCurve& t : trials) {
    if (t.state != CurveState::kRunning) continue;
    Decision d;
    d.number = t.number;
    const std::vector<double> h = minimize_space_history(t, rule.goal);
    int64_t band = -1;
    double threshold = 0;
    for (size_t i = 0; i < hb.bands.size(); ++i) {
      if (hb.bands[i] > static_cast<int64_t>(h.size())) break;
      band = hb.bands[i];
      threshold = hb.thresholds[i];
    }
    if (band < 1) {
      d.reason = "hyperband: " + std::to_string(h.size()) + " iterations, first band " +
                 (hb.bands.empty() ? std::string("none") : std::to_string(hb.bands[0])) + " not reached";
      out.push_back(std::move(d));
      continue;
    }
    const double value = s.strict ? h[static_cast<size_t>(band - 1)] : *std::min_element(h.begin(), h.end());
    d.judged = true;
    d.at = band;
    d.value = sign * value;
    d.threshold = sign * threshold;
    d.stop = value > threshold;
    d.reason = std::string("hyperband: band ") + std::to_string(band) + ", " + (s.strict ? "value " : "best so far ") +
               fmt(d.value) + (d.stop ? " worse than" : " within") + " threshold " + fmt(d.threshold) +
               " (the best 1/" + fmt(s.eta) + " at that band)" + (d.stop ? ": stop" : ": continue");
    out.push_back(std::move(d));
  }
  return out;
}

// ---- Optuna's helpers -----------------------------------------------------

// Optuna's intermediate_values: step -> value, a later report of the same step winning.
std::map<int64_t, double> by_step(const TrialCurve& t) {
  std::map<int64_t, double> m;
  for (const Report& r : t.reports) m[r.step] = r.value;
  return m;
}

// MedianPruner's _is_first_in_interval_step.
bool first_in_interval(int64_t step, const std::map<int64_t, double>& values, int64_t warmup, int64_t interval) {
  const int64_t nearest_lower = (step - warmup) / interval * interval + warmup;
  int64_t second_last = -1;
  for (const auto& [s, v] : values)
    if (s > second_last && s != step) second_last = s;
  return second_last < nearest_lower;
}

Decision judge_percentile(const Rule& rule, const TrialCurve& judged, const std::vector<TrialCurve>& others) {
  const auto& s = std::get<PercentileSettings>(rule.settings);
  const char* name = rule_type_name(rule.type);
  Decision d;
  d.number = judged.number;
  std::vector<const TrialCurve*> completed;
  for (const TrialCurve& t : others)
    if (t.state == CurveState::kFinished && t.number != judged.number) completed.push_back(&t);
  const auto values = by_step(judged);
  if (completed.empty() || static_cast<int64_t>(completed.size()) < s.n_startup_trials) {
    d.reason = std::string(name) + ": " + std::to_string(completed.size()) + " finished trials, needs " +
               std::to_string(std::max<int64_t>(1, s.n_startup_trials)) + " before judging";
    return d;
  }
  if (values.empty()) return d.reason = std::string(name) + ": nothing reported yet", d;
  const int64_t step = values.rbegin()->first;
  if (step < s.n_warmup_steps) return d.reason = std::string(name) + ": warm-up until step " + std::to_string(s.n_warmup_steps), d;
  if (!first_in_interval(step, values, s.n_warmup_steps, s.interval_steps))
    return d.reason = std::string(name) + ": step " + std::to_string(step) + " is not a judging step", d;
  std::vector<double> own;
  for (const auto& [k, v] : values) own.push_back(v);
  const double best = best_of(own, rule.goal);
  d.at = step;
  d.value = best;
  if (std::isnan(best)) {
    d.judged = d.stop = true;
    d.reason = std::string(name) + ": every value so far is NaN: stop";
    return d;
  }
  std::vector<double> at_step;
  for (const TrialCurve* t : completed) {
    const auto m = by_step(*t);
    if (auto it = m.find(step); it != m.end()) at_step.push_back(it->second);
  }
  const double p = percentile_of(at_step, s.percentile, rule.goal, s.n_min_trials);
  if (std::isnan(p)) {
    d.reason = std::string(name) + ": too few finished trials reported step " + std::to_string(step);
    return d;
  }
  d.judged = true;
  d.threshold = p;
  d.stop = rule.goal == Goal::kMaximize ? best < p : best > p;
  d.reason = std::string(name) + ": step " + std::to_string(step) + ", best so far " + fmt(best) +
             (d.stop ? " worse than " : " within ") + (rule.type == RuleType::kMedian ? "the median " : "the percentile ") +
             fmt(p) + " of " + std::to_string(at_step.size()) + " finished trials" + (d.stop ? ": stop" : ": continue");
  return d;
}

Decision judge_threshold(const Rule& rule, const TrialCurve& judged) {
  const auto& s = std::get<ThresholdSettings>(rule.settings);
  Decision d;
  d.number = judged.number;
  const auto values = by_step(judged);
  if (values.empty()) return d.reason = "threshold: nothing reported yet", d;
  const int64_t step = values.rbegin()->first;
  if (step < s.n_warmup_steps) return d.reason = "threshold: warm-up", d;
  if (!first_in_interval(step, values, s.n_warmup_steps, s.interval_steps)) return d.reason = "threshold: not a judging step", d;
  const double v = values.rbegin()->second;
  d.judged = true;
  d.at = step;
  d.value = v;
  d.stop = std::isnan(v) || v < s.lower || v > s.upper;
  d.threshold = v < s.lower ? s.lower : s.upper;
  d.reason = "threshold: step " + std::to_string(step) + ", value " + fmt(v) + (d.stop ? " outside [" : " inside [") +
             fmt(s.lower) + ", " + fmt(s.upper) + "]" + (d.stop ? ": stop" : ": continue");
  return d;
}

Decision judge_patient(const Rule& rule, const TrialCurve& judged, const std::vector<TrialCurve>& others) {
  const auto& s = std::get<PatientSettings>(rule.settings);
  Decision d;
  d.number = judged.number;
  const auto values = by_step(judged);
  if (static_cast<int64_t>(values.size()) <= s.patience + 1) return d.reason = "patient: too few steps yet", d;
  std::vector<double> before, after;
  const size_t split = values.size() - static_cast<size_t>(s.patience) - 1;
  size_t i = 0;
  for (const auto& [k, v] : values) (i++ < split ? before : after).push_back(v);
  const double b = best_of(before, rule.goal), a = best_of(after, rule.goal);
  const bool no_progress = rule.goal == Goal::kMinimize ? b + s.min_delta < a : b - s.min_delta > a;
  d.at = values.rbegin()->first;
  d.value = a;
  d.threshold = b;
  if (!no_progress) {
    d.judged = true;
    d.reason = "patient: improved within " + std::to_string(s.patience) + " steps: continue";
    return d;
  }
  if (s.wrapped) {
    Decision inner = judge(*s.wrapped, judged, others);
    inner.reason = "patient: no progress in " + std::to_string(s.patience) + " steps; " + inner.reason;
    return inner;
  }
  d.judged = d.stop = true;
  d.reason = "patient: best of the last " + std::to_string(s.patience + 1) + " steps " + fmt(a) + " no better than " + fmt(b) + ": stop";
  return d;
}

std::optional<int64_t> estimate_min_resource(const std::vector<TrialCurve>& others) {
  std::optional<int64_t> last;
  for (const TrialCurve& t : others) {
    if (t.state != CurveState::kFinished || t.reports.empty()) continue;
    const int64_t step = by_step(t).rbegin()->first;
    last = std::max(last.value_or(step), step);
  }
  if (!last) return std::nullopt;
  return std::max<int64_t>(*last / 100, 1);
}

int64_t rung_step(const AshaSettings& s, int64_t min_resource, int64_t rung) {
  double f = static_cast<double>(min_resource);
  for (int64_t i = 0; i < s.min_early_stopping_rate + rung; ++i) f *= static_cast<double>(s.reduction_factor);
  return f > 9e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(f);
}

// Optuna's SuccessiveHalvingPruner.prune, with the judged trial's rung records
// carried in and out instead of written to a study.
Decision judge_asha(const Rule& rule, const TrialCurve& judged, const std::vector<TrialCurve>& others) {
  const auto& s = std::get<AshaSettings>(rule.settings);
  Decision d;
  d.number = judged.number;
  d.completed_rungs = judged.completed_rungs;
  const auto values = by_step(judged);
  if (values.empty()) return d.reason = "asha: nothing reported yet", d;
  const int64_t step = values.rbegin()->first;
  const double value = values.rbegin()->second;
  int rung = 0;
  while (d.completed_rungs.count(rung)) ++rung;
  std::optional<int64_t> min_resource = s.min_resource;
  if (!min_resource) min_resource = estimate_min_resource(others);
  if (!min_resource) return d.reason = "asha: min_resource is auto and no trial has finished yet", d;
  d.at = rung;
  d.value = value;
  for (;; ++rung) {
    const int64_t promotion_step = rung_step(s, *min_resource, rung);
    if (step < promotion_step) {
      d.reason = d.judged ? d.reason : "asha: step " + std::to_string(step) + ", rung " + std::to_string(rung) +
                                           " completes at step " + std::to_string(promotion_step);
      return d;
    }
    d.at = rung;
    if (std::isnan(value)) {
      d.judged = d.stop = true;
      d.reason = "asha: NaN at rung " + std::to_string(rung) + ": stop";
      return d;
    }
    d.completed_rungs[rung] = value;
    std::vector<double> competing;
    for (const TrialCurve& t : others) {
      if (t.number == judged.number) continue;
      if (auto it = t.completed_rungs.find(rung); it != t.completed_rungs.end()) competing.push_back(it->second);
    }
    competing.push_back(value);
    d.judged = true;
    if (static_cast<int64_t>(competing.size()) <= s.bootstrap_count) {
      d.stop = true;
      d.reason = "asha: rung " + std::to_string(rung) + " has " + std::to_string(competing.size()) +
                 " trials, bootstrap needs more: stop";
      return d;
    }
    int64_t idx = static_cast<int64_t>(competing.size()) / s.reduction_factor - 1;
    if (idx < 0) idx = 0;
    std::sort(competing.begin(), competing.end());
    const bool maximize = rule.goal == Goal::kMaximize;
    d.threshold = maximize ? competing[competing.size() - 1 - static_cast<size_t>(idx)] : competing[static_cast<size_t>(idx)];
    const bool promoted = maximize ? value >= d.threshold : value <= d.threshold;
    d.reason = "asha: rung " + std::to_string(rung) + " (step " + std::to_string(promotion_step) + "), value " + fmt(value) +
               (promoted ? " within" : " worse than") + " the top 1/" + std::to_string(s.reduction_factor) + " of " +
               std::to_string(competing.size()) + " (threshold " + fmt(d.threshold) + ")" + (promoted ? ": promoted" : ": stop");
    if (!promoted) {
      d.stop = true;
      return d;
    }
  }
}

// Optuna's HyperbandPruner: n_brackets = floor(log(max/min) / log(rf)) + 1
// (Python's math.log(x, base), so 243/1 with rf 3 gives 5), bracket b gets
// ceil(n * rf^s / (s + 1)) of every sum(budgets) trials, s = n - 1 - b.
std::vector<int64_t> optuna_budgets(const OptunaHyperbandSettings& s, int64_t max_resource) {
  const double ratio = static_cast<double>(max_resource) / static_cast<double>(s.min_resource);
  const auto n = static_cast<int64_t>(std::floor(std::log(ratio) / std::log(static_cast<double>(s.reduction_factor)))) + 1;
  std::vector<int64_t> budgets;
  for (int64_t b = 0; b < std::max<int64_t>(n, 1); ++b) {
    const int64_t k = n - 1 - b;
    double pow = 1;
    for (int64_t i = 0; i < k; ++i) pow *= static_cast<double>(s.reduction_factor);
    budgets.push_back(static_cast<int64_t>(std::ceil(static_cast<double>(n) * pow / static_cast<double>(k + 1))));
  }
  return budgets;
}

Decision judge_optuna_hyperband(const Rule& rule, const TrialCurve& judged, const std::vector<TrialCurve>& others) {
  const auto& s = std::get<OptunaHyperbandSettings>(rule.settings);
  std::optional<int64_t> max_resource = s.max_resource;
  if (!max_resource) {
    for (const TrialCurve& t : others) {
      if (t.state != CurveState::kFinished || t.reports.empty() || t.number == judged.number) continue;
      max_resource = std::max(max_resource.value_or(0), by_step(t).rbegin()->first + 1);
    }
  }
  if (!max_resource) {
    Decision d;
    d.number = judged.number;
    d.completed_rungs = judged.completed_rungs;
    d.reason = "hyperband: max_resource is auto and no trial has finished yet";
    return d;
  }
  const int64_t bracket = optuna_hyperband_bracket(s, *max_resource, judged.number);
  std::vector<TrialCurve> same_bracket;
  for (const TrialCurve& t : others)
    if (t.number != judged.number && optuna_hyperband_bracket(s, *max_resource, t.number) == bracket) same_bracket.push_back(t);
  Rule sh;
  sh.type = RuleType::kAsha;
  sh.goal = rule.goal;
  sh.settings = AshaSettings{s.min_resource, s.reduction_factor, bracket, s.bootstrap_count};
  Decision d = judge_asha(sh, judged, same_bracket);
  d.bracket = bracket;
  d.reason = "hyperband bracket " + std::to_string(bracket) + ", " + d.reason;
  return d;
}

}  // namespace

int64_t optuna_hyperband_bracket(const OptunaHyperbandSettings& settings, int64_t max_resource, int64_t number) {
  const std::vector<int64_t> budgets = optuna_budgets(settings, max_resource);
  int64_t total = 0;
  for (int64_t b : budgets) total += b;
  const std::string key = settings.study_name + "_" + std::to_string(number);
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(key.data()), static_cast<uInt>(key.size()));
  int64_t n = static_cast<int64_t>(crc % static_cast<uLong>(total));
  for (size_t b = 0; b < budgets.size(); ++b) {
    n -= budgets[b];
    if (n < 0) return static_cast<int64_t>(b);
  }
  return static_cast<int64_t>(budgets.size()) - 1;
}

HyperbandBands hyperband_bands(const Rule& rule, const std::vector<TrialCurve>& trials) {
  const auto& s = std::get<HyperbandSettings>(rule.settings);
  HyperbandBands out;
  out.bands = bands_of(s);
  std::vector<std::vector<double>> histories;
  for (const TrialCurve& t : trials) {
    auto h = minimize_space_history(t, rule.goal);
    if (!h.empty()) histories.push_back(std::move(h));
  }
  const double r = 1.0 / s.eta;
  for (int64_t band : out.bands) {
    std::vector<double> at_band;
    if (band >= 1)
      for (const auto& h : histories)
        if (static_cast<int64_t>(h.size()) >= band) at_band.push_back(h[static_cast<size_t>(band - 1)]);
    if (at_band.empty()) {
      out.thresholds.push_back(kInf);
      continue;
    }
    std::sort(at_band.begin(), at_band.end());
    // int(r * n) in IEEE double, as upstream; r < 1 keeps it below n.
    size_t idx = static_cast<size_t>(r * static_cast<double>(at_band.size()));
    idx = std::min(idx, at_band.size() - 1);
    out.thresholds.push_back(at_band[idx]);
  }
  return out;
}

std::map<int, double> asha_rungs_from_reports(const AshaSettings& settings, int64_t min_resource,
                                              const std::vector<Report>& reports) {
  std::map<int, double> rungs;
  std::map<int64_t, double> seen;
  for (const Report& r : reports) {
    seen[r.step] = r.value;
    const int64_t step = seen.rbegin()->first;
    const double value = seen.rbegin()->second;
    int rung = static_cast<int>(rungs.size());
    while (step >= rung_step(settings, min_resource, rung)) {
      if (std::isnan(value)) return rungs;
      rungs[rung++] = value;
    }
  }
  return rungs;
}

double percentile_of(std::vector<double> values, double percentile, Goal goal, int64_t n_min_trials) {
  if (static_cast<int64_t>(values.size()) < n_min_trials) return kNaN;
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
  if (values.empty()) return kNaN;
  if (goal == Goal::kMaximize) percentile = 100 - percentile;
  std::sort(values.begin(), values.end());
  // numpy's "linear" method, with its lerp (from the upper end when t >= 0.5).
  const double rank = percentile / 100.0 * static_cast<double>(values.size() - 1);
  const double lo_rank = std::floor(rank);
  const size_t lo = static_cast<size_t>(lo_rank), hi = std::min(lo + 1, values.size() - 1);
  const double t = rank - lo_rank, a = values[lo], b = values[hi];
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

double best_of(const std::vector<double>& values, Goal goal) {
  double best = kNaN;
  for (double v : values) {
    if (std::isnan(v)) continue;
    if (std::isnan(best) || (goal == Goal::kMaximize ? v > best : v < best)) best = v;
  }
  return best;
}

Decision judge(const Rule& rule, const TrialCurve& judged, const std::vector<TrialCurve>& others) {
  switch (rule.type) {
    case RuleType::kHyperband: {
      std::vector<TrialCurve> all = others;
      all.erase(std::remove_if(all.begin(), all.end(), [&](const TrialCurve& t) { return t.number == judged.number; }), all.end());
      all.push_back(judged);
      all.back().state = CurveState::kRunning;
      return decide_hyperband(rule, all).back();
    }
    case RuleType::kAsha: return judge_asha(rule, judged, others);
    case RuleType::kMedian:
    case RuleType::kPercentile: return judge_percentile(rule, judged, others);
    case RuleType::kThreshold: return judge_threshold(rule, judged);
    case RuleType::kPatient: return judge_patient(rule, judged, others);
    case RuleType::kOptunaHyperband: return judge_optuna_hyperband(rule, judged, others);
  }
  return Decision{};
}

std::vector<Decision> decide(const Rule& rule, const std::vector<TrialCurve>& trials) {
  if (rule.type == RuleType::kHyperband) return decide_hyperband(rule, trials);
  std::vector<Decision> out;
  for (const TrialCurve& t : trials)
    if (t.state == CurveState::kRunning) out.push_back(judge(rule, t, trials));
  return out;
}

}  // namespace swept::sweeps::stopping
