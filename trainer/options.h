// swept-train's command line: every hyperparameter as --name=value in the
// underscore spelling sweep files use (hyphen spellings accepted too), plus
// --config FILE.json holding the same names (the command line wins over the
// file). Parsed once, here, into a typed TrainConfig; nothing after this sees
// strings. Every problem is an InvalidArgument Status that names the option
// and what to do (the trainer exits 2 with it).
// Thread-safe (pure apart from reading the --config file).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/backend.h"
#include "trainer/model.h"
#include "trainer/schedule.h"

namespace swept::trainer {

enum class DeviceKind { kCpu, kCuda };

// How the processes of a run share the work (trainer/README.md, "Parameter
// servers"): all-reduce among workers, or parameter servers (dist/ps_*.h).
enum class Strategy { kAllReduce, kParameterServer };
// --ps_mode: async applies every push as it arrives (optionally with bounded
// staleness); sync applies the mean of the first workers - backup_workers
// gradients of each version and drops the rest.
enum class PsMode { kAsync, kSync };

struct TrainConfig {
  ModelConfig model;
  OptimizerConfig optimizer;
  double lr = 0;  // before --scale_lr
  double weight_decay = 0;
  ScheduleKind schedule = ScheduleKind::kConstant;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;  // step schedule; 0: one epoch
  double decay_rate = 0.1;
  bool scale_lr = false;
  int base_batch = 100;

  int batch_size = 0;  // global batch, split over replicas
  int epochs = 0;
  int64_t max_steps = 0;  // 0: epochs × steps per epoch
  uint64_t seed = 0;
  double val_fraction = 0.1;
  std::string data_dir;

  DeviceKind device = DeviceKind::kCpu;
  int device_index = -1;  // cuda:N; -1: every visible GPU
  int replicas = 0;       // 0: 1 on the CPU, one per GPU on CUDA
  int threads = 0;        // CPU threads in all; 0: every core
  double gpu_memory_fraction = 0;  // 0: no cap

  std::string checkpoint_dir;  // empty: no checkpoints
  int64_t checkpoint_every = 0;  // 0: only at the end (and on SIGTERM)
  bool resume = false;
  int64_t log_every = 100;
  int64_t eval_every = 0;  // 0: at the end of each epoch

  Strategy strategy = Strategy::kAllReduce;
  PsMode ps_mode = PsMode::kAsync;
  int backup_workers = 0;  // sync: gradients of a version dropped (the slowest K)
  int max_staleness = 0;   // async: a worker this many pushes ahead of the slowest waits; 0: unbounded
  int64_t test_every = 0;  // 0: the test set only at the end
  // $SWEPT_PBT_STOP_STEP: save at this step and wait for SIGTERM (a PBT
  // segment's end, set by the scheduler); 0: none.
  int64_t stop_step = 0;
};

struct CommandLine {
  enum class Action { kTrain, kHelp, kVersion };
  Action action = Action::kTrain;
  TrainConfig config;  // for kTrain
  std::string text;    // for kHelp / kVersion
};

// Looks up an environment variable (std::getenv in production, a map in
// tests); nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// args: argv[1..]. Reads SWEPT_DATA_DIR (when --data is absent),
// SWEPT_CHECKPOINT_DIR (for --resume without --checkpoint_dir),
// SWEPT_PBT_STOP_STEP (TrainConfig::stop_step) and SWEPT_GPU_MEMORY_FRACTION (when --gpu_memory_fraction is absent; only
// validated and used for --device=cuda).
Result<CommandLine> parse_command_line(const std::vector<std::string>& args, const EnvLookup& env);

// "swept-train 0.1.0 (backends: cpu, cuda)" for --version.
std::string version_text();

}  // namespace swept::trainer
