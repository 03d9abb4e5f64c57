// One check macro per CUDA library: cudaCheck, cublasCheck, cudnnCheck, ncclCheck.
//
// Each evaluates a library call once; on failure it returns, from the enclosing
// function (which must return swept::Status or swept::Result<T>), a Status that
// names the library, its error string, the call as written, and file:line, e.g.
//   "CUDA error 2 (out of memory) in cudaMalloc(&p, bytes) at trainer/cuda/x.cpp:42".
// Out-of-memory errors map to StatusCode::kResourceExhausted (exit 5), a missing
// driver or device to kUnavailable (exit 4), a cuDNN sub-library that cannot be
// loaded to kMissingDependency (exit 8), everything else to kInternal (exit 70). Nothing here
// aborts or exits: the caller decides (swept-train maps Status to exit codes).
// The *_status functions are usable directly where an early return is wrong
// (destructors log instead).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "common/status.h"

namespace swept::cuda {

Status cuda_status(cudaError_t err, const char* call, const char* file, int line);
Status cublas_status(cublasStatus_t err, const char* call, const char* file, int line);
Status cudnn_status(cudnnStatus_t err, const char* call, const char* file, int line);
Status nccl_status(ncclResult_t err, const char* call, const char* file, int line);

// Logs a failed call to stderr (for destructors, which cannot return a Status).
void log_if_error(const Status& s);

}  // namespace swept::cuda

#define SWEPT_CUDA_CHECK_IMPL_(fn, expr)                                     \
  do {                                                                       \
    ::swept::Status _swept_cs = ::swept::cuda::fn((expr), #expr, __FILE__, __LINE__); \
    if (!_swept_cs.ok()) return _swept_cs;                                   \
  } while (0)

#define cudaCheck(expr) SWEPT_CUDA_CHECK_IMPL_(cuda_status, expr)
#define cublasCheck(expr) SWEPT_CUDA_CHECK_IMPL_(cublas_status, expr)
#define cudnnCheck(expr) SWEPT_CUDA_CHECK_IMPL_(cudnn_status, expr)
#define ncclCheck(expr) SWEPT_CUDA_CHECK_IMPL_(nccl_status, expr)
// For destructors and other places that cannot return: log and go on.
#define cudaCheckLog(expr) \
  ::swept::cuda::log_if_error(::swept::cuda::cuda_status((expr), #expr, __FILE__, __LINE__))
#define cublasCheckLog(expr) \
  ::swept::cuda::log_if_error(::swept::cuda::cublas_status((expr), #expr, __FILE__, __LINE__))
#define cudnnCheckLog(expr) \
  ::swept::cuda::log_if_error(::swept::cuda::cudnn_status((expr), #expr, __FILE__, __LINE__))
#define ncclCheckLog(expr) \
  ::swept::cuda::log_if_error(::swept::cuda::nccl_status((expr), #expr, __FILE__, __LINE__))
