// stopping_bench: metric steps saved by the early-termination rules on a sweep
// of synthetic learning curves, against running every trial to the end (the
// peer: no early termination, same curves, same slots, same order).
//
//   stopping_bench [--trials 81] [--steps 81] [--slots 8] [--seeds 1-5] [--curves FILE]
//
// Curve i: loss(t) = final_i + gap_i * exp(-t / tau_i) + noise, t = 1..steps,
// with final_i, gap_i, tau_i drawn per trial (slow starters with good finals
// exist, so keeping the best trial is not automatic). Trials start in index
// order as slots free up; every running trial logs one value per tick and the
// rule judges after every tick, as the scheduler would as metrics arrive.
// Prints one JSON line per (seed, rule): steps run, steps saved (share), and
// whether the best trial ran to the end, judged two ways:
//  - "best_kept": the trial with the lowest logged last value (noise included).
//    The noise (sd kNoise per logged value) is larger than the gap between the
//    top few trials' true finals, so this names one of a dozen near-equal trials
//    by chance, and a rule that keeps all but one of them can "lose the best".
//  - "regret": the true (noiseless) last value of the best trial that ran to the
//    end, minus the best true last value of all; "within_noise" when that is at
//    most kNoise, i.e. a user could not tell the kept best from the true best by
//    one more run of it. This is the honest measure.
// --curves PREFIX writes the first seed's curves.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweeps/numeric.h"
#include "sweeps/stopping/stopping.h"

namespace {

using nlohmann::json;
using namespace swept::sweeps;
using namespace swept::sweeps::stopping;

// family "independent": how fast a trial learns says nothing about where it
// ends (the hard case); "correlated": half of the start gap and of the time
// constant follow the final value, as when a good configuration also learns faster.
constexpr double kNoise = 0.01;  // sd of the noise on each logged value

std::vector<std::vector<double>> make_curves(uint64_t seed, int trials, int steps, bool correlated,
                                             std::vector<double>* true_last) {
  std::vector<std::vector<double>> curves;
  for (int i = 0; i < trials; ++i) {
    auto u = [&](uint64_t k) { return numeric::uniform_open01(seed, i, k); };
    const double quality = u(1) * u(1);                          // many mediocre, few good
    const double final_value = 0.1 + 0.4 * quality;
    const double g = correlated ? 0.5 * u(2) + 0.5 * quality : u(2);
    const double s = correlated ? 0.5 * u(3) + 0.5 * quality : u(3);
    const double gap = 0.3 + 1.2 * g;                            // how far above its final it starts
    const double tau = 3.0 + 0.35 * static_cast<double>(steps) * s;  // slow and fast learners
    std::vector<double> c;
    for (int t = 1; t <= steps; ++t) {
      const double noise = kNoise * numeric::normal_quantile(numeric::uniform_open01(seed, i, 1000 + static_cast<uint64_t>(t)));
      c.push_back(final_value + gap * std::exp(-t / tau) + noise);
    }
    curves.push_back(std::move(c));
    true_last->push_back(final_value + gap * std::exp(-steps / tau));
  }
  return curves;
}

struct Outcome {
  int64_t steps_run = 0;
  bool best_kept = false;
  int stopped = 0;
  double best_final_kept = HUGE_VAL;  // the best final value among trials run to the end
  double best_final = 0;              // the best final value of all trials
  double regret = 0;                  // true last value: best kept trial's minus the best of all
};

Outcome simulate(const Rule* rule, const std::vector<std::vector<double>>& curves, const std::vector<double>& true_last,
                 int slots) {
  const int n = static_cast<int>(curves.size());
  std::vector<TrialCurve> all(static_cast<size_t>(n));
  std::vector<char> started(static_cast<size_t>(n), 0);
  int next = 0, running = 0;
  Outcome out;
  for (;;) {
    while (running < slots && next < n) {
      all[static_cast<size_t>(next)].number = next;
      all[static_cast<size_t>(next)].state = CurveState::kRunning;
      started[static_cast<size_t>(next)] = 1;
      ++next, ++running;
    }
    if (running == 0) break;
    // One tick: every running trial logs its next value; a trial at its last step finishes.
    for (int i = 0; i < n; ++i) {
      TrialCurve& t = all[static_cast<size_t>(i)];
      if (!started[static_cast<size_t>(i)] || t.state != CurveState::kRunning) continue;
      const size_t k = t.reports.size();
      t.reports.push_back({static_cast<int64_t>(k + 1), curves[static_cast<size_t>(i)][k]});
      ++out.steps_run;
    }
    if (rule) {
      std::vector<TrialCurve> seen;
      for (int i = 0; i < n; ++i)
        if (started[static_cast<size_t>(i)]) seen.push_back(all[static_cast<size_t>(i)]);
      for (const Decision& d : decide(*rule, seen)) {
        TrialCurve& t = all[static_cast<size_t>(d.number)];
        t.completed_rungs = d.completed_rungs;
        if (d.stop && t.reports.size() < curves[0].size()) {
          t.state = CurveState::kEarlyStopped;
          --running, ++out.stopped;
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      TrialCurve& t = all[static_cast<size_t>(i)];
      if (started[static_cast<size_t>(i)] && t.state == CurveState::kRunning && t.reports.size() == curves[0].size()) {
        t.state = CurveState::kFinished;
        --running;
      }
    }
  }
  size_t best = 0;
  for (size_t i = 1; i < curves.size(); ++i)
    if (curves[i].back() < curves[best].back()) best = i;
  out.best_kept = all[best].state == CurveState::kFinished;
  out.best_final = curves[best].back();
  double true_best = HUGE_VAL, true_best_kept = HUGE_VAL;
  for (size_t i = 0; i < curves.size(); ++i) {
    true_best = std::min(true_best, true_last[i]);
    if (all[i].state != CurveState::kFinished) continue;
    out.best_final_kept = std::min(out.best_final_kept, curves[i].back());
    true_best_kept = std::min(true_best_kept, true_last[i]);
  }
  out.regret = true_best_kept - true_best;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int trials = 81, steps = 81, slots = 8, lo = 1, hi = 5;
  std::string curves_file;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], v = argv[i + 1];
    if (flag == "--trials") trials = std::stoi(v);
    else if (flag == "--steps") steps = std::stoi(v);
    else if (flag == "--slots") slots = std::stoi(v);
    else if (flag == "--seeds") lo = std::stoi(v.substr(0, v.find('-'))), hi = std::stoi(v.substr(v.find('-') + 1));
    else if (flag == "--curves") curves_file = v;
    else {
      std::cerr << "stopping_bench: unknown flag " << flag << "\n";
      return 2;
    }
  }
  const Metric loss{"loss", Goal::kMinimize, std::nullopt};
  const std::vector<std::pair<std::string, json>> rules = {
      {"none", json()},
      {"hyperband", {{"type", "hyperband"}, {"min_iter", 3}, {"eta", 3}}},
      {"asha", {{"type", "asha"}, {"min_resource", 3}, {"reduction_factor", 3}}},
      {"median", {{"type", "median"}, {"n_startup_trials", 5}, {"n_warmup_steps", 10}}},
      // The same rules with a later first judgement (a ninth of the run instead of a 27th).
      {"hyperband-9", {{"type", "hyperband"}, {"min_iter", 9}, {"eta", 3}}},
      {"asha-9", {{"type", "asha"}, {"min_resource", 9}, {"reduction_factor", 3}}},
      {"median-27", {{"type", "median"}, {"n_startup_trials", 5}, {"n_warmup_steps", 27}}},
  };
  for (const char* family : {"independent", "correlated"})
  for (int seed = lo; seed <= hi; ++seed) {
    std::vector<double> true_last;
    const auto curves = make_curves(static_cast<uint64_t>(seed), trials, steps, std::string(family) == "correlated", &true_last);
    if (seed == lo && !curves_file.empty()) std::ofstream(curves_file + "." + family + ".json") << json(curves).dump() << "\n";
    const int64_t total = static_cast<int64_t>(trials) * steps;
    for (const auto& [name, config] : rules) {
      std::optional<Rule> rule;
      if (!config.is_null()) {
        auto r = parse_rule(config, loss);
        if (!r.ok()) {
          std::cerr << "stopping_bench: " << r.status().ToString() << "\n";
          return 1;
        }
        rule = *r;
      }
      const Outcome o = simulate(rule ? &*rule : nullptr, curves, true_last, slots);
      std::cout << json{{"family", family}, {"seed", seed}, {"rule", name}, {"best_final", o.best_final},
                        {"best_final_kept", o.best_final_kept}, {"config", config}, {"steps_run", o.steps_run}, {"steps_total", total},
                        {"saved", 1.0 - static_cast<double>(o.steps_run) / static_cast<double>(total)},
                        {"stopped", o.stopped}, {"best_kept", o.best_kept}, {"regret", o.regret},
                        {"noise", kNoise}, {"within_noise", o.regret <= kNoise}}.dump()
                << std::endl;
    }
  }
  return 0;
}
