// The arithmetic of the GPU memory budget (memory_budget.h).
#include "trainer/cuda/memory_budget.h"

#include <cmath>
#include <cstdio>

namespace swept::cuda {

namespace {
std::string format_fraction(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}
}  // namespace

std::string format_mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / static_cast<double>(kMiB));
  return buf;
}

MemoryBudget::MemoryBudget(std::string device_label, uint64_t device_total_bytes,
                           std::optional<double> fraction)
    : label_(std::move(device_label)), total_(device_total_bytes), fraction_(fraction) {
  cap_ = fraction ? static_cast<uint64_t>(std::floor(*fraction * static_cast<double>(total_)))
                  : total_;
}

Status MemoryBudget::reserve(uint64_t bytes, std::string_view what) {
  MutexLock lock(mu_);
  if (bytes > cap_ - in_use_) {  // in_use_ <= cap_ always, so no underflow
    std::string budget = fraction_
        ? "budget " + format_mib(cap_) + " (gpu_memory_fraction " + format_fraction(*fraction_) +
              " of " + format_mib(total_) + " on " + label_ + ")"
        : "the device's " + format_mib(total_) + " on " + label_;
    return Status::ResourceExhausted(
        "GPU memory budget exceeded: needed " + format_mib(bytes) + " for " + std::string(what) +
        " with " + format_mib(in_use_) + " already in use (" + format_mib(in_use_ + bytes) +
        " in all), " + budget +
        "; raise --gpu_memory_fraction (or SWEPT_GPU_MEMORY_FRACTION) or lower --batch_size");
  }
  in_use_ += bytes;
  if (in_use_ > peak_) peak_ = in_use_;
  return Status::Ok();
}

void MemoryBudget::release(uint64_t bytes) {
  MutexLock lock(mu_);
  in_use_ = bytes > in_use_ ? 0 : in_use_ - bytes;
}

uint64_t MemoryBudget::in_use_bytes() const {
  MutexLock lock(mu_);
  return in_use_;
}

uint64_t MemoryBudget::peak_bytes() const {
  MutexLock lock(mu_);
  return peak_;
}

}  // namespace swept::cuda
