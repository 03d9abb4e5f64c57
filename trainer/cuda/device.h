// GPU discovery: the GPUs CUDA sees (those in CUDA_VISIBLE_DEVICES, which the
// agent sets, numbered from 0). trainer/train.cpp maps --device=cuda[:K] onto them.
// Errors name the cause and the fix: kUnavailable (no driver, no GPU visible);
// swept-train exits 4 on it (a missing library is kMissingDependency, exit 8: cuda_libraries.h).
// Thread safety: free functions, callable from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace swept::cuda {

struct DeviceInfo {
  int index = 0;             // CUDA's ordinal among the visible devices
  std::string name;          // "NVIDIA H100 80GB HBM3"
  uint64_t total_bytes = 0;  // global memory
  int sm_major = 0, sm_minor = 0;
  std::string label() const;  // "cuda:0 (NVIDIA H100 80GB HBM3)"
};

// The visible GPUs. Errors: no driver, no device (never an empty vector).
Result<std::vector<DeviceInfo>> visible_devices();

}  // namespace swept::cuda
