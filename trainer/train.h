// The training loop, written once over trainer/backend.h.
//
// Trainer holds N synchronous replicas (one Backend each, N >= 1) of one
// Network. A step: every replica, on its own thread, gathers its shard of the
// global batch, runs forward, softmax cross-entropy and backward, the
// gradients are averaged with the AllReduce, and every replica applies the
// same optimizer update, so all replicas hold identical weights after every
// step (and N replicas follow the trajectory of one replica with the same
// global batch, up to float rounding).
//
// run_training() wraps a Trainer into a whole run: data loading, metric
// lines (docs/metrics.md) on `metrics`, validation, the test set at the end,
// divergence, checkpoints, resume and stopping on request (SIGTERM).
//
// Thread safety: a Trainer is driven by one thread; it runs its replicas on
// threads of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <vector>

#include "common/status.h"
#include "trainer/allreduce.h"
#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/model.h"
#include "trainer/options.h"

namespace swept::trainer {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
};

// Sums over the steps since the last take_window().
struct Window {
  double loss_sum = 0;  // Σ per-sample loss
  double correct = 0;   // samples whose argmax was the label
  int64_t samples = 0;
  int64_t steps = 0;
};

class Trainer {
 public:
  // Takes the backends (one per replica) and the all-reduce over them; copies
  // the data each replica needs into its backend's memory and the initial
  // parameters (from config.seed) into every replica.
  // Errors: allocation (kResourceExhausted), a config the data cannot serve
  // (kInvalidArgument: e.g. a batch larger than the training set).
  static Result<std::unique_ptr<Trainer>> create(const TrainConfig& config, const MnistData& data,
                                                 std::vector<std::unique_ptr<Backend>> backends,
                                                 std::unique_ptr<AllReduce> allreduce);
  ~Trainer();

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_steps() const { return total_steps_; }
  int64_t step() const { return step_; }        // steps completed
  int64_t epoch() const;                        // epoch of the next step
  int replicas() const { return static_cast<int>(replicas_.size()); }
  double current_lr() const;                    // of the next step
  const Split& split() const { return split_; }

  // Runs one synchronous step on every replica.
  Status train_step();

  // Adds the device-side loss sums into the host window (a fixed point of the
  // loop: called at log and checkpoint boundaries), then returns and clears
  // the window when `take`.
  Result<Window> fold_window(bool take);

  Result<EvalResult> evaluate_validation();
  Result<EvalResult> evaluate_test();

  // Replica r's parameters / optimizer state, copied to the host.
  Result<std::vector<float>> params(int replica);
  // The whole state of the run for a checkpoint (folds the window first).
  Result<CheckpointState> snapshot(double train_seconds);
  // Continues from `state`; fails with kInvalidArgument when it belongs to
  // another model, optimizer, batch size or data set (naming the difference).
  Status restore(const CheckpointState& state);

 private:
  struct Replica;
  class ReplicaThreads;
  Trainer() = default;
  Status run_on_replicas(const std::function<Status(int)>& fn);
  Status replica_step(int r);
  Status upload_order(Replica& rep);
  Result<EvalResult> evaluate(const Buffer& images, const Buffer& labels, const Buffer& order, int64_t count);

  TrainConfig config_;
  Split split_;
  ParamLayout layout_;
  int shard_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  int64_t step_ = 0;
  int64_t test_count_ = 0;
  std::vector<int32_t> order_;  // of the epoch being trained
  int64_t order_epoch_ = -1;
  uint64_t order_version_ = 0;
  Window window_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::unique_ptr<AllReduce> allreduce_;
  std::unique_ptr<ReplicaThreads> threads_;
};

// Creates the backends the config asks for (errors: kUnavailable/kNotFound
// when the device is missing, e.g. --device=cuda in a build without CUDA).
struct Backends {
  std::vector<std::unique_ptr<Backend>> replicas;
  std::unique_ptr<AllReduce> allreduce;
};
Result<Backends> make_backends(const TrainConfig& config);

// A whole run; returns the process exit code (common/exit_codes.h). Stops
// with a checkpoint (when --checkpoint_dir is set) and kExitInterrupted once
// *stop_requested becomes true.
int run_training(const TrainConfig& config, std::ostream& metrics, const std::atomic<bool>& stop_requested);

}  // namespace swept::trainer
