// Checkpoints: everything a run needs to continue exactly where it stopped,
// in one file written atomically (temporary file, fsync, rename, fsync of
// the folder), so a crash leaves either the old set or the new file, never a
// half-written one under a checkpoint's name.
//
// File format (trainer/README.md), little-endian:
//   "SWEPTCK1" | u32 version (1) | u32 n | n bytes of JSON metadata |
//   params, state1, state2 (float32 ×param_count each, the states only when
//   the optimizer has them) | order (int32 ×order_count) |
//   u64 FNV-1a of every byte before it.
// Names: ckpt-<step, 12 digits>.swck; temporaries start with '.' and are
// never read.
// Metadata members added after version 1 was first written (epoch_position,
// hyperparameters) are optional on read: older files still load.
// Errors: kCorruption for a file that fails a check (short, bad magic, bad
// checksum, sizes that disagree), naming the file; kIoError when the system
// refuses a write. Thread safety: functions of their arguments and the files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace swept::trainer {

inline constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointState {
  // What the run is (checked against the resuming run).
  std::string model;      // "mlp" | "cnn"
  std::string optimizer;  // "sgd" | "momentum" | "adam"
  std::vector<std::pair<std::string, std::vector<int>>> tensors;  // name, shape
  int batch_size = 0;
  uint64_t train_count = 0;  // training samples (after the validation split)
  uint64_t seed = 0;
  // Where it is.
  int64_t step = 0;   // steps completed
  int64_t epoch = 0;  // epoch of the next step
  // Samples of `epoch`'s order already trained. Not derivable from step
  // once a resume has changed the batch size. -1 when the file predates it
  // (then it is (step - epoch × steps per epoch) × batch_size).
  int64_t epoch_position = -1;
  // The metrics window in progress (since the last loss line).
  double window_loss_sum = 0;
  double window_correct = 0;
  int64_t window_samples = 0;
  int64_t window_steps = 0;
  double train_seconds = 0;  // training time before this checkpoint
  // The hyperparameters the run had, name and value as JSON text ("0.002",
  // "true"), for the line a resume with other values logs. Empty when the
  // file predates them.
  std::vector<std::pair<std::string, std::string>> hyperparameters;
  // The numbers.
  std::vector<float> params, state1, state2;
  std::vector<int32_t> order;  // the current epoch's sample order
};

// "<dir>/ckpt-000000001200.swck"
std::string checkpoint_path(const std::string& dir, int64_t step);

// Writes `state` atomically as checkpoint_path(dir, state.step), creating
// `dir` if needed, then deletes all but the newest `keep` checkpoints.
Status write_checkpoint(const std::string& dir, const CheckpointState& state, int keep);

Result<CheckpointState> read_checkpoint(const std::string& path);

// Every checkpoint file in `dir`, newest (highest step) first.
std::vector<std::string> list_checkpoints(const std::string& dir);

// "lr 0.002 -> 0.004, batch_size 128 -> 256": each hyperparameter whose
// value differs between `before` (a checkpoint's) and `after` (the resuming
// run's), in `after`'s order; a name `before` lacks shows as "? -> value".
// Empty when nothing changed.
std::string describe_hyperparameter_changes(const std::vector<std::pair<std::string, std::string>>& before,
                                            const std::vector<std::pair<std::string, std::string>>& after);

}  // namespace swept::trainer
