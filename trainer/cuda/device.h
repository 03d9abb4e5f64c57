// Which GPUs swept-train uses: discovery and the meaning of --device=cuda[:K].
//
// CUDA numbers the GPUs in CUDA_VISIBLE_DEVICES from 0 (the agent sets it), so
// `cuda` means every visible GPU and `cuda:K` the K-th visible one.
// Errors name the cause and the fix: kUnavailable (no driver, no GPU visible) and
// kNotFound (index out of range); swept-train exits 4 on both.
// Thread safety: free functions, callable from any thread.
#pragma once

#include <cstdint>
#include <optional>
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

// The devices of a --device value: "cuda" (all visible) or "cuda:K".
// Errors: malformed value (kInvalidArgument), or those of visible_devices, or
// K out of range (kNotFound).
Result<std::vector<DeviceInfo>> devices_for(const std::string& device_flag);

// Which device each of `replicas` replicas runs on: one per GPU when the counts
// match; with one GPU every replica shares it; with several GPUs the count must be
// a multiple of the GPU count (replicas assigned round-robin in blocks).
// Errors: kInvalidArgument naming both counts.
Result<std::vector<int>> place_replicas(const std::vector<DeviceInfo>& devices, int replicas);

// "The CUDA backend is built (CUDA runtime X, cuDNN Y, cuBLAS Z)" for --version;
// never touches the driver, so it works on a machine without one.
std::string build_description();

}  // namespace swept::cuda
