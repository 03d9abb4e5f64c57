// The two models behind suggest(): what search.cpp hands them, and what they
// return. Internal to sweeps/search.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "sweeps/search/encoding.h"
#include "sweeps/search/search.h"

namespace swept::sweeps::search {

// The history in search coordinates. `y` is in minimize space (negated for
// maximize) and finite: failed trials already carry their imputed value.
struct ModelInput {
  const Encoding* encoding = nullptr;
  std::vector<std::vector<double>> x;  // finished trials, in completion order
  std::vector<double> y;
  std::vector<std::vector<double>> pending;  // encoded pending trials, in hand-out order
  uint64_t seed = 0;
  int64_t index = 0;  // the trial being suggested: names its random streams
  // Set by the multi-objective TPE (multi.cpp), which splits the trials
  // itself: below[i] says whether finished trial i is in "below", and
  // below_weights (one per "below" trial, completion order) weigh its
  // kernels. Empty = split by y, as single-objective TPE does.
  std::vector<char> below;
  std::vector<double> below_weights;
};

// A counter-based stream of uniforms in (0, 1) for one purpose of one suggestion.
class Stream {
 public:
  Stream(const ModelInput& in, uint64_t purpose) : seed_(in.seed), index_(in.index), purpose_(purpose) {}
  double next() { return uniform(seed_, index_, purpose_, k_++); }

 private:
  uint64_t seed_;
  int64_t index_;
  uint64_t purpose_;
  uint64_t k_ = 0;
};

// A point, or a Status saying why the model could not give one (the caller
// falls back to a random point and records the reason).
Result<std::vector<double>> tpe_suggest(const TpeSettings& settings, const ModelInput& in, ModelState* state);
Result<std::vector<double>> gp_suggest(const BayesSettings& settings, const ModelInput& in, ModelState* state);

// Random search's trial `index` (same seed, same streams): the startup and fall-back point.
nlohmann::json random_params(const SweepSpec& spec, int64_t index);

// Several objectives, constraints or method nsga2 (multi.cpp): suggest()'s
// counterpart, called by it after the common checks.
Result<Suggestion> suggest_multi(const SearchSettings& settings, const SweepSpec& spec, const SearchHistory& history,
                                 int64_t index);

}  // namespace swept::sweeps::search
