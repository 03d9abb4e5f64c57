// Early termination: which running trials to stop, decided from their metric
// histories alone (issue 16; docs/sweep-format.md, "early_terminate").
//
// Pure, like the rest of sweeps/: history in, decisions out. No clock, no
// store, no state kept between calls, so a restarted scheduler that feeds the
// same stored history gets the same decisions. The scheduler acts on them
// (stop message, SIGTERM, the trial's "early-stopped" state) and records each
// Decision with its reason.
//
// Rules and whose semantics they follow:
// - kHyperband: W&B's `early_terminate: {type: hyperband}` exactly
//   (wandb/sweeps hyperband_stopping.py at b1dfc5f; the `wandb.hyperband`
//   conformance vectors). An iteration is one logged finite value of the
//   metric; non-finite values are skipped before counting, as W&B does.
// - kAsha: Optuna's SuccessiveHalvingPruner (asynchronous successive halving
//   with promotion): swept's key `type: asha`.
// - kMedian / kPercentile: Optuna's MedianPruner / PercentilePruner (`type:
//   median`; percentile is the same rule at another percentile).
// - kThreshold, kPatient, kOptunaHyperband: Optuna's ThresholdPruner,
//   PatientPruner and HyperbandPruner; checked against the vectors too,
//   reachable only through parse_optuna_pruner (no sweep-file key yet).
// Thread safety: every function is pure; values are immutable after parsing.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "sweeps/metric.h"
#include "sweeps/stopping/rule.h"

namespace swept::sweeps::stopping {

// The trial states a rule distinguishes. Only kRunning trials are judged;
// the others feed thresholds as each rule says (W&B: all; Optuna: kFinished
// for median/percentile, any trial with rung records for asha).
enum class CurveState { kRunning, kFinished, kEarlyStopped, kFailed, kOther };

// One logged value of the sweep's metric. `value` may be NaN or infinite
// (a diverged trial); each rule handles that as its peer does.
struct Report {
  int64_t step = 0;  // the metrics line's step (Optuna's step); W&B ignores it
  double value = 0;
};

struct TrialCurve {
  int64_t number = 0;  // the trial's index in the sweep
  CurveState state = CurveState::kRunning;
  std::vector<Report> reports;  // in the order they were logged
  // kAsha only: rung -> the value recorded when the trial passed that rung
  // (Optuna's completed_rung_<k>). Decisions return the judged trial's new
  // records; the scheduler stores them, or recomputes them with
  // asha_rungs_from_reports when every report was judged as it arrived.
  std::map<int, double> completed_rungs;
};

// Builds a rule from a sweep's `early_terminate` object and `metric`.
// Keys (defaults in docs/sweep-format.md):
//   {type: hyperband, min_iter | max_iter + s, eta, strict}
//   {type: asha, min_resource ("auto" or >= 1), reduction_factor, min_early_stopping_rate, bootstrap_count}
//   {type: median, n_startup_trials, n_warmup_steps, interval_steps, n_min_trials}
// Errors (kInvalidArgument, message starting with the field's path): no
// metric; unknown type or key; eta <= 1; min_iter < 1; max_iter <= min_iter;
// max_iter without s, or bands that come out empty; reduction_factor < 2;
// negative counts; interval_steps < 1.
Result<Rule> parse_rule(const nlohmann::json& early_terminate, const std::optional<Metric>& metric);

// Builds an Optuna pruner as the conformance vectors describe it ({"type":
// "median"|"percentile"|"successive_halving"|"threshold"|"patient"|"hyperband", ...}),
// refusing what Optuna's constructors refuse (the field named). `study_name`
// feeds Optuna's hyperband bracket hash.
Result<Rule> parse_optuna_pruner(const nlohmann::json& pruner, Goal goal, const std::string& study_name = "");

// One judgement of one running trial, with the reason it was made.
struct Decision {
  int64_t number = 0;  // the judged trial
  bool stop = false;
  bool judged = false;  // false: too early to judge (no band reached, warm-up, startup, between intervals)
  // The reason: the band (hyperband: iteration count), rung (asha) or step
  // (median, ...) it was judged at; the value compared; the threshold it had
  // to beat (NaN when there was none).
  int64_t at = -1;
  double value = std::nan("");
  double threshold = std::nan("");
  std::string reason;  // one line for logs and the dashboard
  std::map<int, double> completed_rungs;  // kAsha, kOptunaHyperband: the judged trial's records after this call
  int64_t bracket = -1;                   // kOptunaHyperband: the judged trial's bracket (-1: not resolved yet)
};

// kOptunaHyperband: the bracket of trial `number` given the resolved max_resource.
int64_t optuna_hyperband_bracket(const OptunaHyperbandSettings& settings, int64_t max_resource, int64_t number);

// Judges every kRunning trial of `trials` (in input order; the others are
// context). Hyperband judges all of them against one set of band thresholds;
// the Optuna rules judge each at its last reported step against the rest.
std::vector<Decision> decide(const Rule& rule, const std::vector<TrialCurve>& trials);

// Judges one trial (it need not be in `others`) at its last reported step.
Decision judge(const Rule& rule, const TrialCurve& judged, const std::vector<TrialCurve>& others);

// The hyperband bands (in iterations, ascending) and, for `trials`, the
// threshold of each band in minimize space (+inf where no trial reached it).
struct HyperbandBands {
  std::vector<int64_t> bands;
  std::vector<double> thresholds;
};
HyperbandBands hyperband_bands(const Rule& rule, const std::vector<TrialCurve>& trials);

// kAsha: the rung records a trial gets when every one of its reports is
// judged as it arrives (value at the first report at or past each rung's
// completion step, up to the last rung reached; a NaN there ends the list).
std::map<int, double> asha_rungs_from_reports(const AshaSettings& settings, int64_t min_resource,
                                              const std::vector<Report>& reports);

// Optuna's two helpers behind median/percentile, exposed for their vectors:
// numpy.nanpercentile (linear) over `values`, NaN when fewer than
// n_min_trials; and the best (nanmin / nanmax) of a trial's values.
double percentile_of(std::vector<double> values, double percentile, Goal goal, int64_t n_min_trials);
double best_of(const std::vector<double>& values, Goal goal);

}  // namespace swept::sweeps::stopping
