// Launchers of swept-train's own CUDA kernels: the operations no library has
// (bias + activation, softmax cross-entropy, dropout, optimizer updates, batch
// gather, fill, same-device gradient averaging). cuBLAS (blas.h) does the matrix
// products and cuDNN (dnn.h) the convolutions and pooling.
//
// Every launcher takes the stream it enqueues on and returns the launch's
// Status (cudaGetLastError); errors inside a kernel surface at the next
// synchronizing call. Pointers are device pointers. Values that change per
// step come from a device-resident StepScalars (trainer/backend.h), so every
// launch's arguments stay constant and a step can be captured as a CUDA graph.
// Each kernel is tested against the CPU backend (cuda_backend_test.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "trainer/backend.h"

namespace swept::cuda {

using trainer::Activation;
using trainer::OptimizerConfig;
using trainer::StepScalars;

// x[i] = value for i < n.
Status launch_fill(float* x, size_t n, float value, cudaStream_t stream);

// y = act(y + bias[c]) in place, y laid out [outer][channels][inner]
// (dense: inner = 1; NCHW conv output: inner = H·W).
Status launch_bias_activation_forward(float* y, const float* bias, int outer, int channels,
                                      int inner, Activation act, cudaStream_t stream);

// Fused backward of bias + activation, one pass over dy: dy := dy·act'(y)
// (act' from the activated output y), and db[c] = Σ over outer, inner of the
// new dy. Channels with many values are split over several blocks whose
// partial sums go to `scratch` (scratch_floats floats of device memory; with
// too little, one block per channel) and are added in a fixed order:
// deterministic, no atomics.
constexpr int kBiasGradMaxSplits = 64;
Status launch_activation_backward_bias_grad(float* dy, const float* y, float* db, int outer,
                                            int channels, int inner, Activation act,
                                            float* scratch, size_t scratch_floats,
                                            cudaStream_t stream);

// Softmax cross-entropy per trainer::Backend::softmax_cross_entropy:
// stats[0] += Σ loss, stats[1] += #(argmax == label); dlogits (if not null)
// = (softmax - onehot)·grad_scale. One block: deterministic sums.
Status launch_softmax_cross_entropy(int batch, int classes, const float* logits,
                                    const int32_t* labels, float grad_scale, float* dlogits,
                                    float* stats, cudaStream_t stream);

// Inverted dropout per trainer::Backend::dropout_forward (mask from
// trainer::dropout_uniform, identical to the CPU backend's).
Status launch_dropout_forward(size_t n, float p, int64_t first_element,
                              const StepScalars* scalars, const float* x, float* mask, float* y,
                              cudaStream_t stream);
// dx[i] = dy[i]·mask[i]; dx may equal dy.
Status launch_dropout_backward(size_t n, const float* mask, const float* dy, float* dx,
                               cudaStream_t stream);

// One optimizer step over n parameters, per trainer::OptimizerConfig (lr and
// Adam's corrections read from scalars).
Status launch_optimizer_update(const OptimizerConfig& config, float weight_decay, size_t n,
                               float* param, const float* grad, float* state1, float* state2,
                               const StepScalars* scalars, cudaStream_t stream);

// Batch gather per trainer::Backend::gather_batch (reads scalars->batch_start).
Status launch_gather_batch(const uint8_t* images, const int32_t* labels, size_t sample_size,
                           const int32_t* order, const StepScalars* scalars, int64_t offset,
                           int count, float* x, int32_t* y, cudaStream_t stream);

// Up to kMaxRanksPerDevice same-device buffers, passed to the kernel by value.
constexpr int kMaxRanksPerDevice = 16;
struct RankPointers {
  float* buffers[kMaxRanksPerDevice];
};

// The mean over `ranks` same-device buffers, elements [begin, end), written
// back into every buffer. Summed in rank order 0..ranks-1 then divided by
// ranks, so the result is bit-identical in every buffer.
Status launch_mean_across_buffers(const RankPointers& buffers, int ranks, size_t begin, size_t end,
                                  cudaStream_t stream);

}  // namespace swept::cuda
