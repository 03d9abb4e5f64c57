// A stopping rule as a typed value: which rule, the goal it compares on, and
// its settings. SweepSpec holds one (sweep.h), parsed once by parse_sweep
// (stopping::parse_rule, stopping.h); the rules themselves (decide, judge)
// are in stopping.h. This header needs no sweep.h, so sweep.h can include it.
// Thread safety: plain values, immutable after parsing.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "sweeps/metric.h"

namespace swept::sweeps::stopping {

struct HyperbandSettings {
  std::optional<double> min_iter;  // bands min_iter * eta^k (100 of them)
  std::optional<double> max_iter;  // with s: bands max_iter / eta^k, k = 1..s
  int64_t s = 0;
  double eta = 3;
  bool strict = true;  // compare the value at the band, not the best so far
};

struct AshaSettings {
  std::optional<int64_t> min_resource;  // nullopt = "auto" (Optuna: max completed last step / 100)
  int64_t reduction_factor = 4;
  int64_t min_early_stopping_rate = 0;
  int64_t bootstrap_count = 0;
};

struct PercentileSettings {
  double percentile = 50;  // 50 = the median pruner
  int64_t n_startup_trials = 5;
  int64_t n_warmup_steps = 0;
  int64_t interval_steps = 1;
  int64_t n_min_trials = 1;
};

struct ThresholdSettings {
  double lower = -HUGE_VAL;
  double upper = HUGE_VAL;
  int64_t n_warmup_steps = 0;
  int64_t interval_steps = 1;
};

struct Rule;
struct PatientSettings {
  std::shared_ptr<const Rule> wrapped;  // null: stop whenever patience runs out
  int64_t patience = 0;
  double min_delta = 0;
};

// Optuna's HyperbandPruner: trials are spread over brackets by a hash of
// "<study_name>_<number>" (crc32, zlib's), each bracket runs successive
// halving with its own min_early_stopping_rate among its own trials.
struct OptunaHyperbandSettings {
  int64_t min_resource = 1;
  std::optional<int64_t> max_resource;  // nullopt = "auto": the longest finished trial's last step + 1
  int64_t reduction_factor = 3;
  int64_t bootstrap_count = 0;
  std::string study_name;
};

enum class RuleType { kHyperband, kAsha, kMedian, kPercentile, kThreshold, kPatient, kOptunaHyperband };
const char* rule_type_name(RuleType type);  // "hyperband", "asha", "median", ...

struct Rule {
  RuleType type = RuleType::kHyperband;
  Goal goal = Goal::kMinimize;
  std::variant<HyperbandSettings, AshaSettings, PercentileSettings, ThresholdSettings, PatientSettings,
               OptunaHyperbandSettings>
      settings;
};

}  // namespace swept::sweeps::stopping
