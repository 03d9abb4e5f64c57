// DeviceAllocator: the one way swept-train allocates GPU memory.
//
// Every allocation is reserved in the device's MemoryBudget before cudaMalloc,
// so the gpu_memory_fraction cap holds for weights, gradients, optimizer state,
// activations, the resident dataset and cuDNN/cuBLAS workspaces alike.
// DeviceBuffer owns its memory (RAII, move-only) and returns it and its
// reservation when destroyed; it must not outlive its allocator.
// Thread safety: allocate() may be called from several threads; a DeviceBuffer
// is owned by one thread at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "trainer/cuda/memory_budget.h"

namespace swept::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  void reset();

 private:
  friend class DeviceAllocator;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
  MemoryBudget* budget_ = nullptr;
};

class DeviceAllocator {
 public:
  // Borrows `budget`, which must outlive the allocator and its buffers.
  DeviceAllocator(int device, MemoryBudget* budget) : device_(device), budget_(budget) {}

  // `bytes` (0 gives an empty buffer) on this device, zero-filled by a
  // cudaMemsetAsync on `stream`, the stream that will use the buffer: work
  // enqueued on it afterwards sees the zeros. (A cudaMemset would run on the
  // legacy default stream, which a cudaStreamNonBlocking stream does not wait
  // for: the zeros could land after, and over, the first real writes.)
  // Errors: kResourceExhausted from the budget ("needed X MiB for <what>
  // ..."), or from cudaMalloc when the card itself is full (other processes),
  // saying so.
  Result<DeviceBuffer> allocate(size_t bytes, std::string_view what, cudaStream_t stream);

  int device() const { return device_; }
  MemoryBudget& budget() const { return *budget_; }

 private:
  int device_;
  MemoryBudget* budget_;
};

}  // namespace swept::cuda
