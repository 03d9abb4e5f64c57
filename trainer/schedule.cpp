// Learning-rate schedules (see schedule.h).
#include "trainer/schedule.h"

#include <algorithm>
#include <cmath>

namespace swept::trainer {

double scaled_lr(double lr, bool scale, int global_batch, int base_batch) {
  return scale ? lr * static_cast<double>(global_batch) / static_cast<double>(base_batch) : lr;
}

double learning_rate(const ScheduleConfig& c, int64_t step) {
  if (step < c.warmup_steps) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  const int64_t t = step - c.warmup_steps;
  switch (c.kind) {
    case ScheduleKind::kConstant:
      return c.lr;
    case ScheduleKind::kStep:
      return c.lr * std::pow(c.decay_rate, static_cast<double>(t / std::max<int64_t>(1, c.decay_steps)));
    case ScheduleKind::kCosine: {
      const int64_t span = std::max<int64_t>(1, c.total_steps - c.warmup_steps);
      const double progress = std::min(1.0, static_cast<double>(t) / static_cast<double>(span));
      return c.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
    }
  }
  return c.lr;
}

}  // namespace swept::trainer
