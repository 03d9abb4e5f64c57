// CUDA C++ for the host compiler: what kernels.cu needs to compile as plain
// C++ in the emulated build (-DSWEPT_CUDA=EMULATED), in place of
// <cuda_runtime.h>. The kernels' own text is unchanged: __global__ and
// __device__ functions become host functions, threadIdx/blockIdx/blockDim/
// gridDim are the running emulated thread's (thread-local, kept per fiber
// across __syncthreads), __shared__ variables are one per block (a block runs
// on one thread at a time: thread_local statics), and SWEPT_LAUNCH enqueues
// the grid on the stream (emu.h), where capture records it like any work.
#pragma once

// First, so that its own use of these names is compiled before they are
// redefined below (it is also what check.h's library headers include).
#include <cuda_runtime.h>

#include <cmath>
#include <functional>
#include <tuple>

#include "trainer/cuda/emu/emu.h"

#undef __global__
#undef __device__
#undef __forceinline__
#undef __shared__
#undef __grid_constant__
#define __grid_constant__
#define __global__
#define __device__
#define __forceinline__ inline
#if defined(SWEPT_CUDA_EMU_THREADS)
#define __shared__ static  // OS-thread engine: one block at a time (grid.cpp)
#else
#define __shared__ static thread_local
#endif

namespace swept::cuda::emu {

inline thread_local uint3 t_thread_idx, t_block_idx;
inline thread_local dim3 t_block_dim, t_grid_dim;

// Enqueues kernel(args...) over grid × block on `stream`. The arguments are
// copied now, as a CUDA launch copies them.
template <typename... Params>
struct Launch {
  void (*kernel)(Params...);
  dim3 grid, block;
  cudaStream_t stream;
  template <typename... Args>
  void operator()(Args&&... args) const {
    const unsigned threads = block.x * block.y * block.z;
    if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
        grid.z > 65535 || block.z > 64) {
      set_last_error(cudaErrorInvalidConfiguration);
      return;
    }
    auto k = kernel;
    const dim3 g = grid, b = block;
    std::tuple<Params...> copied(std::forward<Args>(args)...);
    enqueue(stream, [k, g, b, copied] {
      run_grid(g, b, [&](uint3 block_index, uint3 thread_index) {
        t_block_idx = block_index;
        t_thread_idx = thread_index;
        t_block_dim = b;
        t_grid_dim = g;
        std::apply(k, copied);
      });
    });
  }
};

template <typename... Params>
Launch<Params...> launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t, cudaStream_t stream) {
  return Launch<Params...>{kernel, grid, block, stream};
}

}  // namespace swept::cuda::emu

#define threadIdx (::swept::cuda::emu::t_thread_idx)
#define blockIdx (::swept::cuda::emu::t_block_idx)
#define blockDim (::swept::cuda::emu::t_block_dim)
#define gridDim (::swept::cuda::emu::t_grid_dim)

// A fiber may be resumed after other fibers of its block ran on this thread:
// its indices are restored after the barrier.
inline void __syncthreads() {
  const uint3 t = threadIdx, b = blockIdx;
  ::swept::cuda::emu::block_barrier();
  threadIdx = t;
  blockIdx = b;
}

#define SWEPT_LAUNCH(kernel, grid, block, shared_bytes, stream) \
  ::swept::cuda::emu::launch(kernel, grid, block, shared_bytes, stream)
