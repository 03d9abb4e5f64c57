// cuDNN v9 convolution and pooling plans (dnn.h).
#include "trainer/cuda/dnn.h"

#include <string>
#include <vector>

#include "trainer/cuda/check.h"
#include "trainer/cuda/cuda_libraries.h"
#include "trainer/cuda/memory_budget.h"

namespace swept::cuda {
namespace {

// The first (fastest by cuDNN's heuristic) entry that succeeded, is
// deterministic, runs in plain FP32 (CUDNN_FMA_MATH only; with TF32 allowed,
// any math type) and fits the limit: its algorithm and math type.
template <typename Perf, typename Algo>
Status choose(const std::vector<Perf>& perfs, int returned, size_t limit, bool allow_tf32,
              const char* pass, Algo* algo, cudnnMathType_t* math) {
  size_t smallest = SIZE_MAX;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perfs[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.determinism != CUDNN_DETERMINISTIC) continue;
    if (!allow_tf32 && p.mathType != CUDNN_FMA_MATH) continue;
    if (p.memory < smallest) smallest = p.memory;
    if (p.memory > limit) continue;
    *algo = p.algo;
    *math = p.mathType;
    return Status::Ok();
  }
  if (smallest == SIZE_MAX) {
    return Status::Internal(std::string("cuDNN offers no deterministic ") +
                            (allow_tf32 ? "FP32/TF32" : "FP32 (FMA math)") + " algorithm for the " +
                            pass + " pass of this convolution");
  }
  return Status::ResourceExhausted(std::string("GPU memory budget exceeded: the convolution's ") +
                                   pass + " pass needs a workspace of at least " +
                                   format_mib(smallest) + ", only " + format_mib(limit) +
                                   " left; raise --gpu_memory_fraction or lower --batch_size");
}

}  // namespace

Result<std::unique_ptr<ConvPlan>> ConvPlan::Create(cudnnHandle_t handle,
                                                   const trainer::Conv2dShape& s,
                                                   size_t workspace_limit, bool allow_tf32) {
  if (s.batch <= 0 || s.in_channels <= 0 || s.out_channels <= 0 || s.out_height() <= 0 ||
      s.out_width() <= 0) {
    return Status::InvalidArgument("conv2d: empty or negative shape");
  }
  std::unique_ptr<ConvPlan> plan(new ConvPlan());
  cudnnCheck(cudnn_api().cudnnCreateTensorDescriptor(&plan->x_desc_));
  cudnnCheck(cudnn_api().cudnnCreateTensorDescriptor(&plan->y_desc_));
  cudnnCheck(cudnn_api().cudnnCreateFilterDescriptor(&plan->w_desc_));
  cudnnCheck(cudnn_api().cudnnCreateConvolutionDescriptor(&plan->conv_desc_));
  cudnnCheck(cudnn_api().cudnnSetTensor4dDescriptor(plan->x_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.batch,
                                        s.in_channels, s.height, s.width));
  cudnnCheck(cudnn_api().cudnnSetFilter4dDescriptor(plan->w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                        s.out_channels, s.in_channels, s.kernel_h, s.kernel_w));
  // Cross-correlation (no kernel flip), as the CPU backend and every DL framework.
  cudnnCheck(cudnn_api().cudnnSetConvolution2dDescriptor(plan->conv_desc_, s.pad_h, s.pad_w, 1, 1, 1, 1,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  plan->allow_tf32_ = allow_tf32;
  // The heuristics' query math type: FMA forbids tensor cores (and so TF32);
  // TENSOR_OP permits them. Each pass then sets its chosen entry's own.
  cudnnCheck(cudnn_api().cudnnSetConvolutionMathType(
      plan->conv_desc_, allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int n = 0, c = 0, h = 0, w = 0;
  cudnnCheck(cudnn_api().cudnnGetConvolution2dForwardOutputDim(plan->conv_desc_, plan->x_desc_, plan->w_desc_,
                                                   &n, &c, &h, &w));
  if (n != s.batch || c != s.out_channels || h != s.out_height() || w != s.out_width()) {
    return Status::Internal("cuDNN's convolution output shape differs from Conv2dShape's");
  }
  cudnnCheck(cudnn_api().cudnnSetTensor4dDescriptor(plan->y_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));

  int max_count = 0, returned = 0;
  cudnnCheck(cudnn_api().cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(max_count);
  cudnnCheck(cudnn_api().cudnnGetConvolutionForwardAlgorithm_v7(handle, plan->x_desc_, plan->w_desc_,
                                                    plan->conv_desc_, plan->y_desc_, max_count,
                                                    &returned, fwd.data()));
  SWEPT_RETURN_IF_ERROR(
      choose(fwd, returned, workspace_limit, allow_tf32, "forward", &plan->fwd_algo_, &plan->fwd_math_));
  cudnnCheck(cudnn_api().cudnnSetConvolutionMathType(plan->conv_desc_, plan->fwd_math_));
  cudnnCheck(cudnn_api().cudnnGetConvolutionForwardWorkspaceSize(handle, plan->x_desc_, plan->w_desc_,
                                                     plan->conv_desc_, plan->y_desc_,
                                                     plan->fwd_algo_, &plan->fwd_ws_));

  cudnnCheck(cudnn_api().cudnnSetConvolutionMathType(
      plan->conv_desc_, allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));  // the query's again
  cudnnCheck(cudnn_api().cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwd_filter(max_count);
  cudnnCheck(cudnn_api().cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan->x_desc_, plan->y_desc_,
                                                           plan->conv_desc_, plan->w_desc_, max_count,
                                                           &returned, bwd_filter.data()));
  SWEPT_RETURN_IF_ERROR(choose(bwd_filter, returned, workspace_limit, allow_tf32, "backward-filter",
                               &plan->bwd_filter_algo_, &plan->bwd_filter_math_));
  cudnnCheck(cudnn_api().cudnnSetConvolutionMathType(plan->conv_desc_, plan->bwd_filter_math_));
  cudnnCheck(cudnn_api().cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan->x_desc_, plan->y_desc_,
                                                            plan->conv_desc_, plan->w_desc_,
                                                            plan->bwd_filter_algo_,
                                                            &plan->bwd_filter_ws_));
  return plan;
}

Status ConvPlan::plan_backward_data(cudnnHandle_t handle, size_t workspace_limit) {
  if (has_bwd_data_) return Status::Ok();
  cudnnCheck(cudnn_api().cudnnSetConvolutionMathType(conv_desc_,
                                                     allow_tf32_ ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  int max_count = 0, returned = 0;
  cudnnCheck(cudnn_api().cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd_data(max_count);
  cudnnCheck(cudnn_api().cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w_desc_, y_desc_, conv_desc_,
                                                                     x_desc_, max_count, &returned,
                                                                     bwd_data.data()));
  SWEPT_RETURN_IF_ERROR(choose(bwd_data, returned, workspace_limit, allow_tf32_, "backward-data",
                               &bwd_data_algo_, &bwd_data_math_));
  cudnnCheck(cudnn_api().cudnnSetConvolutionMathType(conv_desc_, bwd_data_math_));
  cudnnCheck(cudnn_api().cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w_desc_, y_desc_, conv_desc_,
                                                                      x_desc_, bwd_data_algo_, &bwd_data_ws_));
  has_bwd_data_ = true;
  return Status::Ok();
}

ConvPlan::~ConvPlan() {
  if (x_desc_) cudnnCheckLog(cudnn_api().cudnnDestroyTensorDescriptor(x_desc_));
  if (y_desc_) cudnnCheckLog(cudnn_api().cudnnDestroyTensorDescriptor(y_desc_));
  if (w_desc_) cudnnCheckLog(cudnn_api().cudnnDestroyFilterDescriptor(w_desc_));
  if (conv_desc_) cudnnCheckLog(cudnn_api().cudnnDestroyConvolutionDescriptor(conv_desc_));
}

size_t ConvPlan::workspace_bytes() const {
  size_t m = fwd_ws_;
  if (bwd_data_ws_ > m) m = bwd_data_ws_;
  if (bwd_filter_ws_ > m) m = bwd_filter_ws_;
  return m;
}

Status ConvPlan::forward(cudnnHandle_t handle, const float* x, const float* w, float* y,
                         void* workspace, size_t workspace_size) const {
  const float one = 1.f, zero = 0.f;
  cudnnCheck(cudnn_api().cudnnSetConvolutionMathType(conv_desc_, fwd_math_));
  cudnnCheck(cudnn_api().cudnnConvolutionForward(handle, &one, x_desc_, x, w_desc_, w, conv_desc_, fwd_algo_,
                                     workspace, workspace_size, &zero, y_desc_, y));
  return Status::Ok();
}

Status ConvPlan::backward_data(cudnnHandle_t handle, const float* w, const float* dy, float* dx,
                               void* workspace, size_t workspace_size) const {
  if (!has_bwd_data_) return Status::Internal("ConvPlan::backward_data before plan_backward_data");
  const float one = 1.f, zero = 0.f;
  cudnnCheck(cudnn_api().cudnnSetConvolutionMathType(conv_desc_, bwd_data_math_));
  cudnnCheck(cudnn_api().cudnnConvolutionBackwardData(handle, &one, w_desc_, w, y_desc_, dy, conv_desc_,
                                          bwd_data_algo_, workspace, workspace_size, &zero,
                                          x_desc_, dx));
  return Status::Ok();
}

Status ConvPlan::backward_filter(cudnnHandle_t handle, const float* x, const float* dy, float* dw,
                                 void* workspace, size_t workspace_size) const {
  const float one = 1.f, zero = 0.f;
  cudnnCheck(cudnn_api().cudnnSetConvolutionMathType(conv_desc_, bwd_filter_math_));
  cudnnCheck(cudnn_api().cudnnConvolutionBackwardFilter(handle, &one, x_desc_, x, y_desc_, dy, conv_desc_,
                                            bwd_filter_algo_, workspace, workspace_size, &zero,
                                            w_desc_, dw));
  return Status::Ok();
}

Result<std::unique_ptr<PoolPlan>> PoolPlan::Create(const trainer::Pool2dShape& s) {
  if (s.window <= 0 || s.height % s.window != 0 || s.width % s.window != 0 || s.batch <= 0 ||
      s.channels <= 0) {
    return Status::InvalidArgument("maxpool2d: height and width must be positive multiples of the window");
  }
  std::unique_ptr<PoolPlan> plan(new PoolPlan());
  cudnnCheck(cudnn_api().cudnnCreateTensorDescriptor(&plan->x_desc_));
  cudnnCheck(cudnn_api().cudnnCreateTensorDescriptor(&plan->y_desc_));
  cudnnCheck(cudnn_api().cudnnCreatePoolingDescriptor(&plan->pool_desc_));
  cudnnCheck(cudnn_api().cudnnSetTensor4dDescriptor(plan->x_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.batch,
                                        s.channels, s.height, s.width));
  cudnnCheck(cudnn_api().cudnnSetTensor4dDescriptor(plan->y_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.batch,
                                        s.channels, s.height / s.window, s.width / s.window));
  // Deterministic max: one position per window receives the gradient.
  cudnnCheck(cudnn_api().cudnnSetPooling2dDescriptor(plan->pool_desc_, CUDNN_POOLING_MAX_DETERMINISTIC,
                                         CUDNN_NOT_PROPAGATE_NAN, s.window, s.window, 0, 0,
                                         s.window, s.window));
  return plan;
}

PoolPlan::~PoolPlan() {
  if (x_desc_) cudnnCheckLog(cudnn_api().cudnnDestroyTensorDescriptor(x_desc_));
  if (y_desc_) cudnnCheckLog(cudnn_api().cudnnDestroyTensorDescriptor(y_desc_));
  if (pool_desc_) cudnnCheckLog(cudnn_api().cudnnDestroyPoolingDescriptor(pool_desc_));
}

Status PoolPlan::forward(cudnnHandle_t handle, const float* x, float* y) const {
  const float one = 1.f, zero = 0.f;
  cudnnCheck(cudnn_api().cudnnPoolingForward(handle, pool_desc_, &one, x_desc_, x, &zero, y_desc_, y));
  return Status::Ok();
}

Status PoolPlan::backward(cudnnHandle_t handle, const float* x, const float* y, const float* dy,
                          float* dx) const {
  const float one = 1.f, zero = 0.f;
  cudnnCheck(cudnn_api().cudnnPoolingBackward(handle, pool_desc_, &one, y_desc_, y, y_desc_, dy, x_desc_, x,
                                  &zero, x_desc_, dx));
  return Status::Ok();
}

}  // namespace swept::cuda
