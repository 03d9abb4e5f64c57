// The learning-rate schedule: a pure function of the step.
//   base = lr × (scale_lr ? global_batch / base_batch : 1)   (linear scaling rule)
//   constant: base
//   step:     base × decay_rate^floor((t - warmup) / decay_steps)
//   cosine:   base × ½(1 + cos(π · (t - warmup) / (total - warmup)))
// with linear warmup over the first warmup_steps steps: base × (t + 1) / warmup_steps.
// t is the 0-based index of the step about to run. Thread-safe (pure).
#pragma once

#include <cstdint>

namespace swept::trainer {

enum class ScheduleKind { kConstant, kStep, kCosine };

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::kConstant;
  double lr = 0.1;             // after scaling (see scaled_lr)
  int64_t warmup_steps = 0;
  int64_t decay_steps = 1;     // step schedule: steps between decays (>= 1)
  double decay_rate = 0.1;     // step schedule: factor per decay
  int64_t total_steps = 1;     // cosine: the step count at which lr reaches 0
};

// lr × global_batch / base_batch when scale is set, else lr.
double scaled_lr(double lr, bool scale, int global_batch, int base_batch);

double learning_rate(const ScheduleConfig& config, int64_t step);

}  // namespace swept::trainer
