// The GPU memory budget: the seeds' per_process_gpu_memory_fraction.
//
// With a fraction F (from --gpu_memory_fraction, else SWEPT_GPU_MEMORY_FRACTION;
// trainer/options.cpp parses and validates it),
// every device allocation swept-train makes on a GPU is first reserved here, and
// the sum of live reservations never exceeds floor(F x the device's total memory).
// A reservation that would pass the cap fails with kResourceExhausted and a
// message saying what needed how many MiB against which budget (swept-train exits
// 5), before any cudaMalloc, so a run that is too big never crashes or hangs.
// Without a fraction the cap is the device's total: the trainer still allocates
// only what it needs (no caching pool grabbing the card).
// What is NOT counted: the CUDA context and the private state of cuBLAS/cuDNN
// handles (a few hundred MiB per process, allocated by the driver), so two
// trainers at 0.4 leave room for those two contexts within the remaining 0.2.
// This file has no CUDA dependency: its arithmetic is tested without a GPU.
// Thread safety: MemoryBudget is safe to share between threads (a mutex).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/status.h"

namespace swept::cuda {

constexpr uint64_t kMiB = 1024ull * 1024ull;

class MemoryBudget {
 public:
  // `device_label` names the device in messages ("cuda:0 (NVIDIA H100)").
  // `fraction` must be in (0, 1] when set (trainer/options.cpp validates it).
  MemoryBudget(std::string device_label, uint64_t device_total_bytes,
               std::optional<double> fraction);

  // Reserves `bytes` for `what` ("conv2 weights gradient"). Errors:
  // kResourceExhausted "... needed X MiB for <what> with Y MiB in use; budget
  // Z MiB (gpu_memory_fraction F of T MiB on <device>) ...".
  Status reserve(uint64_t bytes, std::string_view what);
  // Returns a reservation; `bytes` must match an earlier successful reserve.
  void release(uint64_t bytes);

  uint64_t cap_bytes() const { return cap_; }
  uint64_t total_bytes() const { return total_; }
  std::optional<double> fraction() const { return fraction_; }
  uint64_t in_use_bytes() const;
  uint64_t peak_bytes() const;

 private:
  std::string label_;
  uint64_t total_;
  std::optional<double> fraction_;
  uint64_t cap_;
  mutable Mutex mu_;
  uint64_t in_use_ SWEPT_GUARDED_BY(mu_) = 0;
  uint64_t peak_ SWEPT_GUARDED_BY(mu_) = 0;
};

// "12.3 MiB": bytes in MiB with one decimal, as every budget message shows them.
std::string format_mib(uint64_t bytes);

}  // namespace swept::cuda
