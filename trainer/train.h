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
// Across processes (WORLD_SIZE > 1, trainer/dist/), each process holds its
// own replicas; the global batch is split over every replica of every
// process (replica r of process p takes shard p * replicas + r), the
// all-reduce averages over all of them, and the per-step loss sums are
// gathered from every process, so every process holds the same weights and
// the same metrics as one process with all those replicas would.
//
// run_training() wraps a Trainer into a whole run: data loading, metric
// lines (docs/metrics.md) on `metrics`, validation, the test set at the end,
// divergence, checkpoints, resume and stopping on request (SIGTERM); across
// processes only rank 0 prints metric lines and writes checkpoints.
//
// Thread safety: a Trainer is driven by one thread; it runs its replicas on
// threads of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "trainer/allreduce.h"
#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/dist/world.h"
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
  // Takes the backends (one per replica), the all-reduce over them and, in a
  // multi-process run, the other processes (`across`, which the all-reduce
  // may use: the Trainer destroys it last); copies the data each replica
  // needs into its backend's memory and the initial parameters (from
  // config.seed) into every replica.
  // Errors: allocation (kResourceExhausted), a config the data cannot serve
  // (kInvalidArgument: e.g. a batch larger than the training set, or not
  // divisible by the replicas of all processes).
  // ps_workers > 0: a parameter-server worker (one replica, no `across`):
  // the global batch is split into ps_workers shards, and ps_gradient()
  // computes any one of them.
  static Result<std::unique_ptr<Trainer>> create(const TrainConfig& config, const MnistData& data,
                                                 std::vector<std::unique_ptr<Backend>> backends,
                                                 std::unique_ptr<AllReduce> allreduce,
                                                 std::unique_ptr<CrossProcess> across = nullptr,
                                                 int ps_workers = 0);
  ~Trainer();

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_steps() const { return total_steps_; }
  int64_t step() const { return step_; }        // steps completed
  int64_t epoch() const;                        // epoch of the next step
  int64_t epoch_position() const { return epoch_position_; }  // samples of epoch() already trained
  int replicas() const { return static_cast<int>(replicas_.size()); }  // in this process
  int processes() const { return across_ ? across_->size() : 1; }
  int process_rank() const { return across_ ? across_->rank() : 0; }
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
  // Continues from `state` with this Trainer's hyperparameters: weights,
  // optimizer state, step, data position (in samples: a new batch size
  // continues the epoch where the old one stopped) and the metrics window
  // come from the checkpoint; the learning rate, momentum, weight decay,
  // dropout, batch size and the rest of hyperparameters() from the config.
  // With --epochs deciding the length, total_steps() becomes the steps that
  // finish those epochs at the new batch size. Fails with kInvalidArgument
  // when the checkpoint belongs to another model, optimizer, seed or data
  // set, or other shapes (naming the difference).
  Status restore(const CheckpointState& state);
  // The hyperparameters a resume may change, name and value as JSON text,
  // as snapshot() records them (CheckpointState::hyperparameters).
  std::vector<std::pair<std::string, std::string>> hyperparameters() const;

  // ---- parameter-server workers (dist/ps_run.cpp) ----
  // The gradient of shard `shard` of global batch `step` (its data and
  // dropout exactly as the all-reduce's replica `shard` would see them),
  // computed on `params`, into `grad` (layout order); its loss and accuracy
  // go into the window. No update: the servers apply it.
  Status ps_gradient(int64_t step, int shard, const std::vector<float>& params, std::vector<float>& grad);
  // Replica 0's parameters (for an evaluation of pulled parameters).
  Status set_params(const std::vector<float>& params);
  // The schedule's learning rate at `step`.
  double lr_at(int64_t step) const;

  // Collective (every process calls it after the same step): stop is true on
  // every process when `mine` is true on any, so that all stop after the
  // same step; next_step is rank 0's `next_check_step` (the others' is
  // ignored), so all make the next check after the same step too. One
  // process: {mine, step() + 1}, no communication.
  struct StopCheck {
    bool stop = false;
    int64_t next_step = 0;
  };
  Result<StopCheck> agree_on_stop(bool mine, int64_t next_check_step);
  // Collective: every process continues from rank 0's state (after rank 0
  // alone resumed from its checkpoint); returns rank 0's train_seconds.
  Result<double> adopt_rank0_state(double train_seconds);

 private:
  struct Replica;
  class ReplicaThreads;
  Trainer() = default;
  Status run_on_replicas(const std::function<Status(int)>& fn);
  Status replica_step(int r);
  Status upload_order(Replica& rep);
  int64_t steps_to_epochs_end() const;
  void advance_epoch_position();
  Result<EvalResult> evaluate(const Buffer& images, const Buffer& labels, const Buffer& order, int64_t count);

  TrainConfig config_;
  Split split_;
  ParamLayout layout_;
  int shard_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  int64_t step_ = 0;
  int64_t epoch_ = 0;           // of the next step
  int64_t epoch_position_ = 0;  // samples of epoch_'s order already trained
  int64_t test_count_ = 0;
  std::vector<int32_t> order_;  // of the epoch being trained
  int64_t order_epoch_ = -1;
  uint64_t order_version_ = 0;
  Window window_;
  int first_replica_ = 0;  // global index of this process's replica 0
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::unique_ptr<CrossProcess> across_;  // before allreduce_, which uses it: destroyed after it
  std::unique_ptr<AllReduce> allreduce_;
  std::unique_ptr<ReplicaThreads> threads_;
};

// Creates the backends the config asks for and, when world.size > 1, joins
// the other processes (errors: kUnavailable/kNotFound when the device is
// missing, e.g. --device=cuda in a build without CUDA; kIoError when the
// peers cannot be reached within world.timeout). Defined in run.cpp.
struct Backends {
  std::vector<std::unique_ptr<Backend>> replicas;
  std::unique_ptr<CrossProcess> across;  // null: one process
  std::unique_ptr<AllReduce> allreduce;
};
Result<Backends> make_backends(const TrainConfig& config, const World& world = World{});

// A whole run; returns the process exit code (common/exit_codes.h). Stops
// with a checkpoint (when --checkpoint_dir is set) and kExitInterrupted once
// *stop_requested becomes true (on any process of a multi-process run: all
// stop after the same step). Defined in run.cpp.
int run_training(const TrainConfig& config, const World& world, std::ostream& metrics,
                 const std::atomic<bool>& stop_requested);

}  // namespace swept::trainer
