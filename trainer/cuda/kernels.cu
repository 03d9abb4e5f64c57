// swept-train's own CUDA kernels, then their launchers (kernels.h).
//
// Kernels are plain grid-stride loops: these networks are small, so what
// matters is touching memory once (bias and activation fused, activation
// backward fused with the bias gradient, softmax fused with its gradient) and
// never waiting on the host. Reductions use a fixed order (no atomics) so that
// replicas and reruns are bit-identical.
//
// Launches go through SWEPT_LAUNCH(kernel, grid, block, shared, stream)(args),
// which is kernel<<<grid, block, shared, stream>>>(args) under nvcc and the
// grid emulator of emu/kernel_emu.h when this file is compiled as host C++
// (-DSWEPT_CUDA=EMULATED: the same kernels, tested on every CI run).
#if defined(SWEPT_CUDA_EMULATED)
#include "trainer/cuda/emu/kernel_emu.h"
#else
#include <cuda_runtime.h>
#define SWEPT_LAUNCH(kernel, grid, block, shared_bytes, stream) kernel<<<grid, block, shared_bytes, stream>>>
#endif

#include <cmath>

#include "trainer/counter_rng.h"
#include "trainer/cuda/check.h"
#include "trainer/cuda/kernels.h"

namespace swept::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  return static_cast<int>(b > 65535 * 16 ? 65535 * 16 : b);  // grid-stride beyond this
}

__device__ __forceinline__ float activate(float z, Activation act) {
  if (act == Activation::kRelu) return z > 0.f ? z : 0.f;
  if (act == Activation::kSigmoid) return 1.f / (1.f + expf(-z));
  return z;
}

// act'(z) expressed through the activated output y = act(z).
__device__ __forceinline__ float activation_slope(float y, Activation act) {
  if (act == Activation::kRelu) return y > 0.f ? 1.f : 0.f;
  if (act == Activation::kSigmoid) return y * (1.f - y);
  return 1.f;
}

// Block-wide sum with a fixed tree (deterministic for a given blockDim).
__device__ float block_sum(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  float total = shared[0];
  __syncthreads();
  return total;
}

// ---- kernels -----------------------------------------------------------------

__global__ void fill_kernel(float* x, size_t n, float value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = value;
}

__global__ void bias_activation_forward_kernel(float* y, const float* bias, size_t n, int channels,
                                               int inner, Activation act) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    int c = static_cast<int>((i / inner) % channels);
    y[i] = activate(y[i] + (bias ? bias[c] : 0.f), act);
  }
}

// Blocks [c·splits, (c+1)·splits) share channel c: block `part` takes its
// part-th contiguous chunk of the channel's outer·inner values, so small
// channel counts (conv1 has 32) still fill the GPU. Each block writes one
// partial sum (or db[c] directly when splits == 1).
__global__ void activation_backward_bias_partial_kernel(float* dy, const float* y, float* partial,
                                                        float* db, int outer, int channels, int inner,
                                                        Activation act, int splits) {
  __shared__ float shared[kThreads];
  const int c = blockIdx.x / splits, part = blockIdx.x % splits;
  const size_t per_channel = size_t(outer) * inner;
  const size_t chunk = (per_channel + splits - 1) / splits;
  const size_t begin = part * chunk;
  const size_t end = begin + chunk < per_channel ? begin + chunk : per_channel;
  float sum = 0.f;
  for (size_t k = begin + threadIdx.x; k < end; k += blockDim.x) {
    size_t o = k / inner, j = k % inner;
    size_t i = (o * channels + c) * inner + j;
    float g = dy[i] * activation_slope(y[i], act);
    dy[i] = g;
    sum += g;
  }
  float total = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    if (splits == 1) {
      if (db) db[c] = total;
    } else {
      partial[size_t(c) * splits + part] = total;
    }
  }
}

// db[c] = Σ_part partial[c][part], in part order (deterministic).
__global__ void sum_partials_kernel(const float* partial, float* db, int channels, int splits) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  float sum = 0.f;
  for (int p = 0; p < splits; ++p) sum += partial[size_t(c) * splits + p];
  db[c] = sum;
}

// One block; each thread handles rows threadIdx.x, +blockDim.x, ...
__global__ void softmax_cross_entropy_kernel(int batch, int classes, const float* logits,
                                             const int32_t* labels, float grad_scale, float* dlogits,
                                             float* stats) {
  __shared__ float shared[kThreads];
  float loss_sum = 0.f, correct = 0.f;
  for (int r = threadIdx.x; r < batch; r += blockDim.x) {
    const float* z = logits + size_t(r) * classes;
    int label = labels[r];
    float zmax = z[0];
    int argmax = 0;
    for (int k = 1; k < classes; ++k) {
      if (z[k] > zmax) { zmax = z[k]; argmax = k; }
    }
    float denom = 0.f;
    for (int k = 0; k < classes; ++k) denom += expf(z[k] - zmax);
    float log_denom = logf(denom);
    // A label outside [0, classes) would be a data bug; it counts as loss of z_max.
    float z_label = (label >= 0 && label < classes) ? z[label] : zmax;
    loss_sum += log_denom - (z_label - zmax);
    // A NaN logit makes every comparison false (argmax stays 0): count it as
    // wrong, as the CPU backend does.
    correct += (argmax == label && zmax == zmax) ? 1.f : 0.f;  // zmax != zmax: NaN
    if (dlogits) {
      float* d = dlogits + size_t(r) * classes;
      for (int k = 0; k < classes; ++k) {
        float p = expf(z[k] - zmax) / denom;
        d[k] = (p - (k == label ? 1.f : 0.f)) * grad_scale;
      }
    }
  }
  float total_loss = block_sum(loss_sum, shared);
  float total_correct = block_sum(correct, shared);
  if (threadIdx.x == 0) {
    stats[0] += total_loss;
    stats[1] += total_correct;
  }
}

__global__ void dropout_forward_kernel(size_t n, float p, int64_t first_element,
                                       const StepScalars* scalars, const float* x, float* mask,
                                       float* y) {
  const uint64_t seed = scalars->seed, step = scalars->step;
  const float scale = 1.f / (1.f - p);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    bool keep = trainer::dropout_uniform(seed, step, uint64_t(first_element) + i) >= p;
    float m = keep ? scale : 0.f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void dropout_backward_kernel(size_t n, const float* mask, const float* dy, float* dx) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dx[i] = dy[i] * mask[i];
}

__global__ void sgd_kernel(size_t n, float weight_decay, float* param, const float* grad,
                           const StepScalars* scalars) {
  const float lr = scalars->lr;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float g = grad[i] + weight_decay * param[i];
    param[i] -= lr * g;
  }
}

__global__ void momentum_kernel(size_t n, float weight_decay, float momentum, bool nesterov,
                                float* param, const float* grad, float* velocity,
                                const StepScalars* scalars) {
  const float lr = scalars->lr;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float g = grad[i] + weight_decay * param[i];
    float v = momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] -= lr * (nesterov ? g + momentum * v : v);
  }
}

__global__ void adam_kernel(size_t n, float weight_decay, float beta1, float beta2, float epsilon,
                            float* param, const float* grad, float* m1, float* m2,
                            const StepScalars* scalars) {
  const float lr = scalars->lr, c1 = scalars->adam_correction1, c2 = scalars->adam_correction2;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float g = grad[i] + weight_decay * param[i];
    float m = beta1 * m1[i] + (1.f - beta1) * g;
    float v = beta2 * m2[i] + (1.f - beta2) * g * g;
    m1[i] = m;
    m2[i] = v;
    param[i] -= lr * (m / c1) / (sqrtf(v / c2) + epsilon);
  }
}

__global__ void gather_batch_kernel(const uint8_t* images, const int32_t* labels, size_t sample_size,
                                    const int32_t* order, const StepScalars* scalars, int64_t offset,
                                    int count, float* x, int32_t* y) {
  const int64_t start = scalars->batch_start + offset;
  const size_t n = size_t(count) * sample_size;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    size_t row = i / sample_size, j = i % sample_size;
    int32_t s = order[start + int64_t(row)];
    x[i] = float(images[size_t(s) * sample_size + j]) * (1.0f / 255.0f);  // as the CPU backend: bit-equal
    if (j == 0) y[row] = labels[s];
  }
}

// __grid_constant__: p.buffers[r] is indexed at run time; without it the
// parameter is copied to a 128-byte local stack frame in every thread
// (ptxas_check.sh found it); with it, read in place from parameter space.
__global__ void mean_across_buffers_kernel(__grid_constant__ const RankPointers p, int ranks, size_t begin,
                                           size_t end) {
  for (size_t i = begin + blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < end; i += size_t(gridDim.x) * blockDim.x) {
    float sum = 0.f;
    for (int r = 0; r < ranks; ++r) sum += p.buffers[r][i];
    float mean = sum / float(ranks);
    for (int r = 0; r < ranks; ++r) p.buffers[r][i] = mean;
  }
}

}  // namespace

// ---- launchers -----------------------------------------------------------------

#define SWEPT_LAUNCH_CHECK() cudaCheck(cudaGetLastError())

Status launch_fill(float* x, size_t n, float value, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  SWEPT_LAUNCH(fill_kernel, blocks_for(n), kThreads, 0, stream)(x, n, value);
  SWEPT_LAUNCH_CHECK();
  return Status::Ok();
}

Status launch_bias_activation_forward(float* y, const float* bias, int outer, int channels,
                                      int inner, Activation act, cudaStream_t stream) {
  size_t n = size_t(outer) * channels * inner;
  if (n == 0) return Status::Ok();
  SWEPT_LAUNCH(bias_activation_forward_kernel, blocks_for(n), kThreads, 0, stream)(y, bias, n, channels, inner, act);
  SWEPT_LAUNCH_CHECK();
  return Status::Ok();
}

// Blocks per channel: about 32 values per thread, at most kBiasGradMaxSplits.
static int bias_grad_splits(int outer, int inner) {
  size_t splits = size_t(outer) * inner / 8192;
  if (splits < 1) splits = 1;
  if (splits > size_t(kBiasGradMaxSplits)) splits = kBiasGradMaxSplits;
  return static_cast<int>(splits);
}

Status launch_activation_backward_bias_grad(float* dy, const float* y, float* db, int outer,
                                            int channels, int inner, Activation act,
                                            float* scratch, size_t scratch_floats,
                                            cudaStream_t stream) {
  if (size_t(outer) * channels * inner == 0) return Status::Ok();
  int splits = bias_grad_splits(outer, inner);
  if (!db || size_t(channels) * splits > scratch_floats || !scratch) splits = 1;
  SWEPT_LAUNCH(activation_backward_bias_partial_kernel, channels * splits, kThreads, 0, stream)(
      dy, y, scratch, db, outer, channels, inner, act, splits);
  SWEPT_LAUNCH_CHECK();
  if (splits > 1) {
    SWEPT_LAUNCH(sum_partials_kernel, (channels + kThreads - 1) / kThreads, kThreads, 0, stream)(scratch, db,
                                                                                      channels, splits);
    SWEPT_LAUNCH_CHECK();
  }
  return Status::Ok();
}

Status launch_softmax_cross_entropy(int batch, int classes, const float* logits,
                                    const int32_t* labels, float grad_scale, float* dlogits,
                                    float* stats, cudaStream_t stream) {
  if (batch <= 0 || classes <= 0) return Status::InvalidArgument("softmax_cross_entropy: empty batch");
  SWEPT_LAUNCH(softmax_cross_entropy_kernel, 1, kThreads, 0, stream)(batch, classes, logits, labels, grad_scale,
                                                           dlogits, stats);
  SWEPT_LAUNCH_CHECK();
  return Status::Ok();
}

Status launch_dropout_forward(size_t n, float p, int64_t first_element, const StepScalars* scalars,
                              const float* x, float* mask, float* y, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  if (!(p >= 0.f && p < 1.f)) return Status::InvalidArgument("dropout: p must be in [0, 1)");
  SWEPT_LAUNCH(dropout_forward_kernel, blocks_for(n), kThreads, 0, stream)(n, p, first_element, scalars, x, mask, y);
  SWEPT_LAUNCH_CHECK();
  return Status::Ok();
}

Status launch_dropout_backward(size_t n, const float* mask, const float* dy, float* dx,
                               cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  SWEPT_LAUNCH(dropout_backward_kernel, blocks_for(n), kThreads, 0, stream)(n, mask, dy, dx);
  SWEPT_LAUNCH_CHECK();
  return Status::Ok();
}

Status launch_optimizer_update(const OptimizerConfig& config, float weight_decay, size_t n,
                               float* param, const float* grad, float* state1, float* state2,
                               const StepScalars* scalars, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  const int blocks = blocks_for(n);
  switch (config.kind) {
    case trainer::OptimizerKind::kSgd:
      SWEPT_LAUNCH(sgd_kernel, blocks, kThreads, 0, stream)(n, weight_decay, param, grad, scalars);
      break;
    case trainer::OptimizerKind::kMomentum:
      if (!state1) return Status::InvalidArgument("momentum update needs its velocity buffer");
      SWEPT_LAUNCH(momentum_kernel, blocks, kThreads, 0, stream)(n, weight_decay, config.momentum,
                                                       config.nesterov, param, grad, state1, scalars);
      break;
    case trainer::OptimizerKind::kAdam:
      if (!state1 || !state2) return Status::InvalidArgument("adam update needs its two moment buffers");
      SWEPT_LAUNCH(adam_kernel, blocks, kThreads, 0, stream)(n, weight_decay, config.beta1, config.beta2,
                                                   config.epsilon, param, grad, state1, state2, scalars);
      break;
    default:
      return Status::InvalidArgument("unknown optimizer kind");
  }
  SWEPT_LAUNCH_CHECK();
  return Status::Ok();
}

Status launch_gather_batch(const uint8_t* images, const int32_t* labels, size_t sample_size,
                           const int32_t* order, const StepScalars* scalars, int64_t offset,
                           int count, float* x, int32_t* y, cudaStream_t stream) {
  size_t n = size_t(count) * sample_size;
  if (n == 0) return Status::Ok();
  SWEPT_LAUNCH(gather_batch_kernel, blocks_for(n), kThreads, 0, stream)(images, labels, sample_size, order,
                                                              scalars, offset, count, x, y);
  SWEPT_LAUNCH_CHECK();
  return Status::Ok();
}

Status launch_mean_across_buffers(const RankPointers& buffers, int ranks, size_t begin, size_t end,
                                  cudaStream_t stream) {
  if (end <= begin) return Status::Ok();
  if (ranks < 1 || ranks > kMaxRanksPerDevice) return Status::InvalidArgument("mean_across_buffers: bad rank count");
  SWEPT_LAUNCH(mean_across_buffers_kernel, blocks_for(end - begin), kThreads, 0, stream)(buffers, ranks, begin, end);
  SWEPT_LAUNCH_CHECK();
  return Status::Ok();
}

}  // namespace swept::cuda
