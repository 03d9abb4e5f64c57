// cuDNN v9 convolution and max pooling, behind two small plans.
//
// A ConvPlan holds the tensor, filter and convolution descriptors of one
// Conv2dShape and the algorithms chosen for its forward, backward-filter and
// (only when asked for: the first layer's input gradient is never needed)
// backward-data passes. Algorithms come from cuDNN's heuristics
// (cudnnGetConvolution*Algorithm_v7), which return (algorithm, math type)
// pairs; the plan keeps the fastest pair that is deterministic (no atomics:
// replicas and reruns stay bit-identical), plain FP32 (only CUDNN_FMA_MATH
// entries: CUDNN_DEFAULT_MATH permits TF32 on A100 and later, so results
// would no longer match the CPU backend to 1e-4) unless `allow_tf32` (then
// tensor-core TF32 pairs too, to about 5e-3), and whose workspace fits
// `workspace_limit`. The chosen pair's math type is set on the convolution
// descriptor before that pass's workspace query and before each call, so
// every pass runs with the math type its algorithm was chosen for. Workspace
// memory is the caller's (DeviceAllocator, so it counts against the budget).
//
// This is cuDNN's legacy convolution API, deprecated in cuDNN 9 but kept
// behind this file; trainer/cuda/README.md says what moving to the cuDNN
// graph API would take.
// PoolPlan does the same for max pooling (window = stride, no padding).
// This file is the only one that includes cudnn.h besides check.h.
// Thread safety: a plan is used with one handle (one backend) at a time.
#pragma once

#include <cudnn.h>

#include <memory>

#include "common/status.h"
#include "trainer/backend.h"

namespace swept::cuda {

class ConvPlan {
 public:
  // Errors: kInvalidArgument (shape), kResourceExhausted (no deterministic FP32
  // algorithm fits workspace_limit, naming the pass and the smallest need).
  static Result<std::unique_ptr<ConvPlan>> Create(cudnnHandle_t handle,
                                                  const trainer::Conv2dShape& shape,
                                                  size_t workspace_limit, bool allow_tf32);
  ~ConvPlan();
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;

  // Chooses the backward-data algorithm (once; a no-op afterwards). Errors
  // as Create's.
  Status plan_backward_data(cudnnHandle_t handle, size_t workspace_limit);
  bool has_backward_data() const { return has_bwd_data_; }

  // The most workspace any planned pass needs.
  size_t workspace_bytes() const;
  // The math types the passes were chosen with (for tests).
  cudnnMathType_t forward_math() const { return fwd_math_; }
  cudnnMathType_t backward_filter_math() const { return bwd_filter_math_; }

  // y = conv(x, w) (no bias).
  Status forward(cudnnHandle_t handle, const float* x, const float* w, float* y, void* workspace,
                 size_t workspace_size) const;
  // dx = conv_transpose(dy, w); needs plan_backward_data first.
  Status backward_data(cudnnHandle_t handle, const float* w, const float* dy, float* dx,
                       void* workspace, size_t workspace_size) const;
  // dw = correlation of x and dy (overwritten, not accumulated).
  Status backward_filter(cudnnHandle_t handle, const float* x, const float* dy, float* dw,
                         void* workspace, size_t workspace_size) const;

 private:
  ConvPlan() = default;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  cudnnMathType_t fwd_math_ = CUDNN_FMA_MATH, bwd_data_math_ = CUDNN_FMA_MATH,
                  bwd_filter_math_ = CUDNN_FMA_MATH;
  size_t fwd_ws_ = 0, bwd_data_ws_ = 0, bwd_filter_ws_ = 0;
  bool allow_tf32_ = false;
  bool has_bwd_data_ = false;
};

class PoolPlan {
 public:
  static Result<std::unique_ptr<PoolPlan>> Create(const trainer::Pool2dShape& shape);
  ~PoolPlan();
  PoolPlan(const PoolPlan&) = delete;
  PoolPlan& operator=(const PoolPlan&) = delete;

  Status forward(cudnnHandle_t handle, const float* x, float* y) const;
  // dx from dy, routed to each window's maximum of x.
  Status backward(cudnnHandle_t handle, const float* x, const float* y, const float* dy,
                  float* dx) const;

 private:
  PoolPlan() = default;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnPoolingDescriptor_t pool_desc_ = nullptr;
};

}  // namespace swept::cuda
