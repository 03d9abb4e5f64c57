// EarlyStopper: see early_stop.h.
#include "scheduler/early_stop.h"

#include <algorithm>

namespace swept::scheduler {

namespace st = sweeps::stopping;

st::CurveState curve_state(TrialState state) {
  switch (state) {
    case TrialState::kRunning: return st::CurveState::kRunning;
    case TrialState::kCompleted: return st::CurveState::kFinished;
    case TrialState::kEarlyStopped: return st::CurveState::kEarlyStopped;
    case TrialState::kFailed: return st::CurveState::kFailed;
    default: return st::CurveState::kOther;  // queued, stopped (cancelled), lost
  }
}

namespace {

// Puts (step, value) where the store would have it: a step already there
// takes the new value, a new one goes in step order.
void place(std::vector<st::Report>& reports, int64_t step, double value) {
  if (reports.empty() || reports.back().step < step) {
    reports.push_back({step, value});
    return;
  }
  auto it = std::lower_bound(reports.begin(), reports.end(), step,
                             [](const st::Report& r, int64_t s) { return r.step < s; });
  if (it != reports.end() && it->step == step) it->value = value;
  else reports.insert(it, {step, value});
}

// Optuna's "auto" min_resource: the longest finished trial's last step / 100
// (at least 1); nullopt before any trial finished.
std::optional<int64_t> auto_min_resource(const std::vector<st::TrialCurve>& curves) {
  std::optional<int64_t> last;
  for (const auto& c : curves)
    if (c.state == st::CurveState::kFinished && !c.reports.empty())
      last = std::max(last.value_or(c.reports.back().step), c.reports.back().step);
  if (!last) return std::nullopt;
  return std::max<int64_t>(*last / 100, 1);
}

}  // namespace

st::TrialCurve& EarlyStopper::curve_for(int64_t trial_id, int64_t index) {
  auto it = by_trial_.find(trial_id);
  if (it != by_trial_.end()) return curves_[it->second];
  by_trial_[trial_id] = curves_.size();
  st::TrialCurve c;
  c.number = index;
  c.state = st::CurveState::kRunning;
  curves_.push_back(std::move(c));
  return curves_.back();
}

void EarlyStopper::load(const std::vector<store::Writer::CurveRows>& rows) {
  curves_.clear();
  by_trial_.clear();
  decided_.clear();
  for (const auto& r : rows) {
    st::TrialCurve& c = curve_for(r.trial_id, r.index);
    c.state = curve_state(r.state);
    c.reports.reserve(r.points.size());
    for (const auto& [step, value] : r.points) c.reports.push_back({step, value});
    if (r.stop_decided || r.state == TrialState::kEarlyStopped) decided_[r.trial_id] = true;
  }
  if (rule_.type == st::RuleType::kAsha) {
    const auto& s = std::get<st::AshaSettings>(rule_.settings);
    std::optional<int64_t> min_resource = s.min_resource ? s.min_resource : auto_min_resource(curves_);
    if (min_resource)
      for (size_t i = 0; i < curves_.size(); ++i) {
        // A stopped trial's records end where it was judged: values it sent
        // while being stopped were never judged.
        std::vector<st::Report> judged = curves_[i].reports;
        if (rows[i].stop_step)
          judged.erase(std::remove_if(judged.begin(), judged.end(),
                                      [&](const st::Report& r) { return r.step > *rows[i].stop_step; }),
                       judged.end());
        curves_[i].completed_rungs = st::asha_rungs_from_reports(s, *min_resource, judged);
      }
  }
}

void EarlyStopper::set_state(int64_t trial_id, int64_t index, TrialState state) {
  if (index < 0 && !by_trial_.count(trial_id)) return;
  curve_for(trial_id, index).state = curve_state(state);
}

std::optional<StopVerdict> EarlyStopper::observe(int64_t trial_id, int64_t index,
                                                 const std::vector<protocol::MetricRecord>& records) {
  curve_for(trial_id, index);
  const size_t pos = by_trial_.at(trial_id);
  std::optional<StopVerdict> verdict;
  for (const auto& r : records) {
    if (r.name != metric_) continue;
    place(curves_[pos].reports, r.step, r.value);
    if (decided(trial_id) || curves_[pos].state != st::CurveState::kRunning) continue;
    st::Decision d = st::judge(rule_, curves_[pos], curves_);
    curves_[pos].completed_rungs = d.completed_rungs;
    if (!d.stop) continue;
    decided_[trial_id] = true;
    verdict = StopVerdict{trial_id, std::move(d), r.step, st::rule_type_name(rule_.type)};
  }
  return verdict;
}

bool EarlyStopper::decided(int64_t trial_id) const {
  auto it = decided_.find(trial_id);
  return it != decided_.end() && it->second;
}

void EarlyStopper::forget_decision(int64_t trial_id, TrialState state) {
  decided_.erase(trial_id);
  set_state(trial_id, -1, state);
}

const st::TrialCurve* EarlyStopper::curve(int64_t trial_id) const {
  auto it = by_trial_.find(trial_id);
  return it == by_trial_.end() ? nullptr : &curves_[it->second];
}

}  // namespace swept::scheduler
