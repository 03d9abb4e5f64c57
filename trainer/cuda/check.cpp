// The Status conversions behind the check macros of check.h.
#include "trainer/cuda/check.h"
#include "trainer/cuda/cuda_libraries.h"

#include <cstring>
#include <string>

#include "common/log.h"
#include "trainer/cuda/nccl_api.h"

namespace swept::cuda {
namespace {

// Paths shown relative to the source tree: "trainer/cuda/x.cpp" not "/work/..".
const char* short_path(const char* file) {
  const char* p = std::strstr(file, "trainer/cuda/");
  return p ? p : file;
}

std::string where(const char* call, const char* file, int line) {
  return std::string(" in ") + call + " at " + short_path(file) + ":" + std::to_string(line);
}

}  // namespace

Status cuda_status(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return Status::Ok();
  std::string msg = "CUDA error " + std::to_string(static_cast<int>(err)) + " (" +
                    cudaGetErrorString(err) + ")" + where(call, file, line);
  if (err == cudaErrorMemoryAllocation) return Status::ResourceExhausted(msg);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
      err == cudaErrorInvalidDevice || err == cudaErrorDevicesUnavailable) {
    return Status::Unavailable(msg);
  }
  return Status::Internal(msg);
}

Status cublas_status(cublasStatus_t err, const char* call, const char* file, int line) {
  if (err == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  std::string msg = "cuBLAS error " + std::to_string(static_cast<int>(err)) + " (" +
                    (cuda_libraries_loaded() ? cublas_api().cublasGetStatusString(err) : "cuBLAS not loaded") + ")" + where(call, file, line);
  if (err == CUBLAS_STATUS_ALLOC_FAILED) return Status::ResourceExhausted(msg);
  if (err == CUBLAS_STATUS_NOT_INITIALIZED) return Status::Unavailable(msg);
  return Status::Internal(msg);
}

Status cudnn_status(cudnnStatus_t err, const char* call, const char* file, int line) {
  if (err == CUDNN_STATUS_SUCCESS) return Status::Ok();
  std::string msg = "cuDNN error " + std::to_string(static_cast<int>(err)) + " (" +
                    (cuda_libraries_loaded() ? cudnn_api().cudnnGetErrorString(err) : "cuDNN not loaded") + ")" + where(call, file, line);
  // cuDNN 9's statuses (cudnn_graph.h): device memory exhausted is the
  // out-of-memory exit; a sub-library (libcudnn_ops, _cnn, _graph, _engines_*)
  // that cannot be loaded, or of another version, is the missing-library exit.
  switch (err) {
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      return Status::ResourceExhausted(msg + "; the GPU is out of memory: lower --batch_size or --gpu_memory_fraction of other trainers");
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED:
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH:
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
      return Status::MissingDependency(msg + "; install every cuDNN 9 library (libcudnn_ops, libcudnn_cnn, "
                                             "libcudnn_graph, libcudnn_engines_*) of one version beside libcudnn.so.9");
    default:
      return Status::Internal(msg);
  }
}

Status nccl_status(ncclResult_t err, const char* call, const char* file, int line) {
  if (err == ncclSuccess) return Status::Ok();
  // NCCL is opened with dlopen (nccl_api.h); its error strings come from there.
  std::string msg = "NCCL error " + std::to_string(static_cast<int>(err)) + " (" +
                    nccl_error_string(err) + ")" + where(call, file, line);
  return Status::Internal(msg);
}

void log_if_error(const Status& s) {
  if (!s.ok()) log::error(s.ToString());
}

}  // namespace swept::cuda
