// The CUDA emulation's internal interface (-DSWEPT_CUDA=EMULATED): what the
// stand-ins for cuBLAS, cuDNN and NCCL (cublas_emu.cpp, cudnn_emu.cpp,
// nccl_emu.cpp) and the kernel launcher (kernel_emu.h) need from the CUDA
// runtime stand-in (runtime.cpp, libswept_cudart_emu.so). See
// trainer/cuda/README.md for what is emulated and how it differs from a GPU.
//
// The model, in short:
//  - device memory is host memory (cudaMalloc = aligned host allocation,
//    counted per emulated device against its stated total);
//  - a stream is an ordered queue. Work enqueued on a created stream runs at
//    once, in order, on the enqueuing thread (so one stream's work never
//    overlaps its host thread's next call). Work on the legacy default stream
//    (stream 0) is held in its own queue and runs only at the next
//    synchronizing call (cudaStreamSynchronize of ANY stream, after that
//    stream's work; cudaDeviceSynchronize, cudaEventSynchronize, cudaFree):
//    on a GPU, a cudaStreamNonBlocking stream does not wait for stream 0, and
//    this makes that race visible instead of lucky;
//  - while a stream is being captured, its work is recorded into the graph
//    instead of run; cudaGraphLaunch runs the recorded work, in order.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace swept::cuda::emu {

using Work = std::function<void()>;

// Enqueues `work` on `stream` per the model above (recorded when capturing).
// Returns the error a GPU would give (an invalid or captured-and-invalidated
// stream, a legacy-stream use that would join a capture); sets the last error.
cudaError_t enqueue(cudaStream_t stream, Work work);

// The grid engine of kernel_emu.h: calls body(block, thread) once for every
// thread of every block. Threads of one block run as fibers on the calling
// thread (or, when built with SWEPT_CUDA_EMU_THREADS, as OS threads: the
// ThreadSanitizer build), and block_barrier() is __syncthreads.
void run_grid(dim3 grid, dim3 block, const std::function<void(uint3, uint3)>& body);
void block_barrier();

// Sets the calling thread's last CUDA error (cudaGetLastError's) and returns it.
cudaError_t set_last_error(cudaError_t err);

// The current device of the calling thread (cudaSetDevice's).
int current_device();

// Bytes the emulated device holds in cudaMalloc allocations (tests compare
// this with the memory budget).
size_t device_bytes_in_use(int device);

}  // namespace swept::cuda::emu
