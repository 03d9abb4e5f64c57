// The cuBLAS stand-in of the emulated build (libswept_cublas_emu.so, which
// cuda_libraries.cpp opens in place of libcublas.so.13): the handful of
// functions swept uses, with cuBLAS's argument checks (cuBLAS documentation,
// cublas<t>gemm: m, n, k >= 0; lda >= max(1, rows of op(A) as stored), ldb
// and ldc likewise; else CUBLAS_STATUS_INVALID_VALUE), SGEMM computed by
// OpenBLAS's column-major cblas_sgemm, enqueued on the handle's stream.
// Like cuBLAS, a handle without a user workspace (cublasSetWorkspace) takes
// a default workspace of its own from device memory on its first product:
// memory the trainer's budget would not count.
#include <cblas.h>
#include <cublas_v2.h>

#include <algorithm>

#include "trainer/cuda/emu/emu.h"

namespace {
struct Handle {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* default_pool = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};
Handle* as_handle(cublasHandle_t h) { return reinterpret_cast<Handle*>(h); }
constexpr size_t kDefaultPoolBytes = 4 << 20;  // cuBLAS's default for pre-Hopper
}  // namespace

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = reinterpret_cast<cublasHandle_t>(new Handle());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  Handle* h = as_handle(handle);
  if (h->default_pool) cudaFree(h->default_pool);
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  as_handle(handle)->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  // cuBLAS requires 256-byte alignment of a user workspace.
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
  as_handle(handle)->workspace = workspace;
  as_handle(handle)->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  as_handle(handle)->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    default: return "cuBLAS emulation error";
  }
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                           int n, int k, const float* alpha, const float* a, int lda, const float* b, int ldb,
                           const float* beta, float* c, int ldc) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  Handle* h = as_handle(handle);
  if (!h->workspace && !h->default_pool) {
    if (cudaMalloc(&h->default_pool, kDefaultPoolBytes) != cudaSuccess) return CUBLAS_STATUS_ALLOC_FAILED;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const float al = *alpha, be = *beta;  // host pointer mode: read at the call
  cudaError_t err = swept::cuda::emu::enqueue(h->stream, [=] {
    cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, al, a,
                lda, b, ldb, be, c, ldc);
  });
  return err == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
