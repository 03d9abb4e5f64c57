// Row-major matrix products on cuBLAS (which is column-major).
//
// A row-major M×N matrix with leading dimension ld is, to cuBLAS, its N×M
// transpose, so C = op(A)·op(B) is computed as Cᵀ = op(B)ᵀ·op(A)ᵀ by swapping
// the operands: no copies, no transposes in memory. FP32 throughout; cuBLAS's
// default math mode never uses TF32 unless asked, so results match the CPU
// backend to FP32 rounding.
#pragma once

#include <cublas_v2.h>

#include "common/status.h"

namespace swept::cuda {

// C[m×n] = alpha·op(A)·op(B) + beta·C, all row-major; op(A) is m×k, op(B) k×n.
// lda/ldb/ldc are the row-major leading dimensions (row lengths as stored).
// Enqueued on the handle's stream. Errors: the cuBLAS status (file, line, call).
Status gemm_row_major(cublasHandle_t handle, bool transpose_a, bool transpose_b, int m, int n,
                      int k, float alpha, const float* a, int lda, const float* b, int ldb,
                      float beta, float* c, int ldc);

}  // namespace swept::cuda
