// Row-major SGEMM on column-major cuBLAS (blas.h).
#include "trainer/cuda/blas.h"

#include "trainer/cuda/check.h"
#include "trainer/cuda/cuda_libraries.h"

namespace swept::cuda {

Status gemm_row_major(cublasHandle_t handle, bool transpose_a, bool transpose_b, int m, int n,
                      int k, float alpha, const float* a, int lda, const float* b, int ldb,
                      float beta, float* c, int ldc) {
  const cublasOperation_t op_a = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  // Cᵀ (n×m, column-major, ld ldc) = op(B)ᵀ (n×k) · op(A)ᵀ (k×m).
  cublasCheck(cublas_api().cublasSgemm(handle, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
  return Status::Ok();
}

}  // namespace swept::cuda
