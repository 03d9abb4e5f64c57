// EarlyStopper: one running sweep's learning curves and its early_terminate
// rule (sweeps/stopping/stopping.h), judging each trial as its values arrive.
//
// The curves are the sweep's metric values per trial exactly as the store
// keeps them: in step order, a step reported twice keeping its last value
// (store/schema.sql, `metrics`). The broker feeds each stored METRICS batch
// (observe); every value of the sweep's metric is judged as it arrives, one
// at a time, so a decision does not depend on how the agent cut its output
// into batches. A restarted scheduler rebuilds the curves from the store
// (load) and, fed the same values after that, makes the same decisions: the
// rule is pure and everything it reads is in the store.
//
// ASHA's rung records (Optuna's completed_rung_<k>) are carried from one
// judgement to the next; load() recomputes them with asha_rungs_from_reports,
// which gives the same records when every value was judged as it arrived and
// min_resource is a number (with min_resource "auto", the records of values
// judged before the first trial finished may differ after a restart: see
// docs/sweep-format.md).
//
// A trial judged to stop is not judged again (its process is being stopped;
// values it still sends are kept in its curve).
// Thread safety: one thread (the broker's loop). Pure apart from its state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/protocol.h"
#include "common/states.h"
#include "store/writer.h"
#include "sweeps/stopping/stopping.h"

namespace swept::scheduler {

// A decision to stop one trial, with what the store records of it.
struct StopVerdict {
  int64_t trial_id = 0;
  sweeps::stopping::Decision decision;
  int64_t step = 0;  // the step of the value that was judged
  std::string rule;  // "hyperband", "asha", "median"
};

class EarlyStopper {
 public:
  EarlyStopper(sweeps::stopping::Rule rule, std::string metric) : rule_(std::move(rule)), metric_(std::move(metric)) {}

  const std::string& metric() const { return metric_; }
  const sweeps::stopping::Rule& rule() const { return rule_; }

  // Rebuilds every curve from the store (recover, or a sweep run again by
  // retry); trials with a recorded decision count as decided.
  void load(const std::vector<store::Writer::CurveRows>& rows);

  // A trial's state changed (dispatched or adopted: running; ended; requeued).
  // Creates its curve when it has none (unless `index` < 0: then an unknown
  // trial is left unknown).
  void set_state(int64_t trial_id, int64_t index, TrialState state);

  // A stored METRICS batch of a running trial: its values of the sweep's
  // metric (others ignored) join the curve one at a time, each judged. The
  // first decision to stop is returned; nullopt when the trial goes on (or
  // was decided before). `index`: the trial's index, for a curve not yet known.
  std::optional<StopVerdict> observe(int64_t trial_id, int64_t index,
                                     const std::vector<protocol::MetricRecord>& records);

  bool decided(int64_t trial_id) const;
  // `swept retry --early-stopped`: the trial is judged again when it runs.
  void forget_decision(int64_t trial_id, TrialState state);
  // The curve of a trial (nullptr when unknown): for tests.
  const sweeps::stopping::TrialCurve* curve(int64_t trial_id) const;

 private:
  sweeps::stopping::TrialCurve& curve_for(int64_t trial_id, int64_t index);

  sweeps::stopping::Rule rule_;
  std::string metric_;
  std::vector<sweeps::stopping::TrialCurve> curves_;  // in the order trials became known
  std::unordered_map<int64_t, size_t> by_trial_;      // trial id -> position in curves_
  std::unordered_map<int64_t, bool> decided_;          // trial id -> judged to stop
};

// A trial state as the stopping rules distinguish it.
sweeps::stopping::CurveState curve_state(TrialState state);

}  // namespace swept::scheduler
