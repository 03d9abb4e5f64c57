// The float kernels of kernels.h compiled once per instruction-set level
// (see the comment above their declarations there), and the entry points
// that run the level kernel_choice.h chose: the level oneDNN's GEMM runs at,
// so one choice (the CPU's features, capped by ONEDNN_MAX_CPU_ISA) covers a
// whole step, and a test can force each level.
// Invariant: nothing here but calls of the templates, so every level computes
// the same formulas as the baseline. Not the same bits: the x86-64-v3/v4
// versions fuse multiply-adds (FMA) and sum in their own vector width, so two
// levels may differ in the last bits (the float-vs-double tests bound that).
// Within one level a run is reproducible.
// Not here: the 2×2 max pooling, whose stride-2 accesses GCC turns into
// gathers and masked stores under AVX-512 (pool1 backward took 4x longer).
#include "trainer/cpu/kernels.h"
#include "trainer/cpu/simd_levels.h"

namespace swept::trainer::cpu {
namespace {

// Each level's versions, the templates flattened (inlined) into a function
// compiled for that instruction set so their loops vectorize with it.
#define SWEPT_DEFINE_LOOPS(level, ATTRIBUTES)                                                                       \
  namespace level {                                                                                                 \
  ATTRIBUTES void bias_activation_rows(int rows, int cols, const float* bias, Activation act, float* y) {           \
    cpu::bias_activation_rows<float>(rows, cols, bias, act, y);                                                     \
  }                                                                                                                 \
  ATTRIBUTES void bias_activation_channels(int channels, int spatial, const float* bias, Activation act, float* y) { \
    cpu::bias_activation_channels<float>(channels, spatial, bias, act, y);                                          \
  }                                                                                                                 \
  ATTRIBUTES void activation_backward(size_t n, Activation act, const float* y, float* dy) {                        \
    cpu::activation_backward<float>(n, act, y, dy);                                                                 \
  }                                                                                                                 \
  ATTRIBUTES void bias_activation_columns(int rows, int cols, int c0, int c1, const float* bias, Activation act,     \
                                          float* y) {                                                               \
    cpu::bias_activation_columns<float>(rows, cols, c0, c1, bias, act, y);                                          \
  }                                                                                                                 \
  ATTRIBUTES void activation_backward_columns(int rows, int cols, int c0, int c1, Activation act, const float* y,   \
                                              float* dy) {                                                          \
    cpu::activation_backward_columns<float>(rows, cols, c0, c1, act, y, dy);                                        \
  }                                                                                                                 \
  ATTRIBUTES void optimizer_update(const OptimizerConfig& cfg, float weight_decay, float lr, float correction1,     \
                                   float correction2, size_t n, float* param, const float* grad, float* state1,    \
                                   float* state2) {                                                                 \
    cpu::optimizer_update<float>(cfg, weight_decay, lr, correction1, correction2, n, param, grad, state1, state2);  \
  }                                                                                                                 \
  ATTRIBUTES void unit_floats_from_bytes(const uint8_t* __restrict src, size_t n, float* __restrict dst) {          \
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);                           \
  }                                                                                                                 \
  }

SWEPT_DEFINE_LOOPS(baseline, __attribute__((flatten)))
#if defined(SWEPT_HAVE_LEVELS)
SWEPT_DEFINE_LOOPS(v3, __attribute__((target("arch=x86-64-v3"), flatten)))
SWEPT_DEFINE_LOOPS(v4, __attribute__((target("arch=x86-64-v4"), flatten)))
#endif
#undef SWEPT_DEFINE_LOOPS

}  // namespace


void bias_activation_rows(int rows, int cols, const float* bias, Activation act, float* y) {
  SWEPT_DISPATCH(bias_activation_rows, rows, cols, bias, act, y);
}

void bias_activation_channels(int channels, int spatial, const float* bias, Activation act, float* y) {
  SWEPT_DISPATCH(bias_activation_channels, channels, spatial, bias, act, y);
}

void activation_backward(size_t n, Activation act, const float* y, float* dy) {
  SWEPT_DISPATCH(activation_backward, n, act, y, dy);
}

void bias_activation_columns(int rows, int cols, int c0, int c1, const float* bias, Activation act, float* y) {
  SWEPT_DISPATCH(bias_activation_columns, rows, cols, c0, c1, bias, act, y);
}

void activation_backward_columns(int rows, int cols, int c0, int c1, Activation act, const float* y, float* dy) {
  SWEPT_DISPATCH(activation_backward_columns, rows, cols, c0, c1, act, y, dy);
}

void optimizer_update(const OptimizerConfig& cfg, float weight_decay, float lr, float correction1, float correction2,
                      size_t n, float* param, const float* grad, float* state1, float* state2) {
  SWEPT_DISPATCH(optimizer_update, cfg, weight_decay, lr, correction1, correction2, n, param, grad, state1, state2);
}

void unit_floats_from_bytes(const uint8_t* src, size_t n, float* dst) {
  SWEPT_DISPATCH(unit_floats_from_bytes, src, n, dst);
}

}  // namespace swept::trainer::cpu
