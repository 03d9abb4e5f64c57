// The float kernels of kernels.h compiled once per instruction set (see the
// comment above their declarations there). Each entry point is a clone set
// (target_clones) whose body is the kernels.h template, flattened into it so
// the template's loops are vectorized with the clone's instruction set.
// Invariant: nothing here but calls of the templates, so every clone computes
// the same formulas as the baseline. Not the same bits: the x86-64-v3/v4
// clones fuse multiply-adds (FMA) and sum in their own vector width, so two
// hosts with different instruction sets may differ in the last bits (the
// float-vs-double tests bound that). On one host a run is reproducible.
// Not cloned: the 2×2 max pooling, whose stride-2 accesses GCC turns into
// gathers and masked stores under AVX-512 (pool1 backward took 4x longer).
#include "trainer/cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SWEPT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#else
#define SWEPT_SIMD_CLONES
#endif

namespace swept::trainer::cpu {

SWEPT_SIMD_CLONES
void bias_activation_rows(int rows, int cols, const float* bias, Activation act, float* y) {
  bias_activation_rows<float>(rows, cols, bias, act, y);
}

SWEPT_SIMD_CLONES
void bias_activation_channels(int channels, int spatial, const float* bias, Activation act, float* y) {
  bias_activation_channels<float>(channels, spatial, bias, act, y);
}

SWEPT_SIMD_CLONES
void activation_backward(size_t n, Activation act, const float* y, float* dy) {
  activation_backward<float>(n, act, y, dy);
}

SWEPT_SIMD_CLONES
void optimizer_update(const OptimizerConfig& cfg, float weight_decay, float lr, float correction1, float correction2,
                      size_t n, float* param, const float* grad, float* state1, float* state2) {
  optimizer_update<float>(cfg, weight_decay, lr, correction1, correction2, n, param, grad, state1, state2);
}

SWEPT_SIMD_CLONES
void unit_floats_from_bytes(const uint8_t* __restrict src, size_t n, float* __restrict dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
}

}  // namespace swept::trainer::cpu
