// DeviceAllocator and DeviceBuffer (device_allocator.h).
#include "trainer/cuda/device_allocator.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "trainer/cuda/check.h"

namespace swept::cuda {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
    std::swap(device_, other.device_);
    std::swap(budget_, other.budget_);
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (ptr_) {
    int previous = 0;
    cudaCheckLog(cudaGetDevice(&previous));
    cudaCheckLog(cudaSetDevice(device_));
    cudaCheckLog(cudaFree(ptr_));
    cudaCheckLog(cudaSetDevice(previous));
    if (budget_) budget_->release(bytes_);
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

Result<DeviceBuffer> DeviceAllocator::allocate(size_t bytes, std::string_view what,
                                              cudaStream_t stream) {
  DeviceBuffer buf;
  if (bytes == 0) return buf;
  // Round to 256 bytes, cudaMalloc's alignment, so the budget counts what is taken.
  const size_t rounded = (bytes + 255) / 256 * 256;
  SWEPT_RETURN_IF_ERROR(budget_->reserve(rounded, what));
  cudaCheck(cudaSetDevice(device_));
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, rounded);
  if (err != cudaSuccess) {
    budget_->release(rounded);
    (void)cudaGetLastError();  // clear the sticky-free error state
    if (err == cudaErrorMemoryAllocation) {
      size_t free_bytes = 0, total_bytes = 0;
      (void)cudaMemGetInfo(&free_bytes, &total_bytes);
      return Status::ResourceExhausted(
          "the GPU itself is out of memory: needed " + format_mib(rounded) + " for " +
          std::string(what) + ", " + format_mib(free_bytes) + " free of " +
          format_mib(total_bytes) + " (other processes hold the rest); lower --batch_size or "
          "give this trainer a GPU of its own");
    }
    return cuda_status(err, "cudaMalloc(&p, rounded)", __FILE__, __LINE__);
  }
  buf.ptr_ = p;  // owned from here on: freed and released on any error below
  buf.bytes_ = rounded;
  buf.device_ = device_;
  buf.budget_ = budget_;
  cudaCheck(cudaMemsetAsync(p, 0, rounded, stream));
  return buf;
}

}  // namespace swept::cuda
