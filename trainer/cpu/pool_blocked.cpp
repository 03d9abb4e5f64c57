// The float 2×2 max pooling of a convolution's channel-blocked output
// (Pool2dShape::blocked_in, onednn_conv.h: per sample [C/16][H][W][16]).
//
// Why: conv2 computes in oneDNN's nChw16c layout. Reordering its output to
// NCHW for the pooling, and the pooling's gradient back to nChw16c for its
// backward, cost about 2.6 ms of a 75 ms one-thread CNN step (oneDNN's
// verbose timings, 2026-11-27), plus a pass for the bias and ReLU and one
// for the bias gradient, which the primitives now do inside. In this layout
// a window's four inputs are four whole vectors of 16 channels, so the
// pooling is vertical: no shuffles. Only its output (and, backward, y and
// dy) is NCHW, a quarter of the size, transposed through a small buffer.
//
// The same values as the NCHW kernels, bit for bit: forward
// max(max(a, b), max(c, d)) with max(p, q) = p < q ? q : p, as std::max;
// backward routes dy to the first of a, b, c, d (row-major) equal to the
// window's maximum, to d when none is (NaN), then applies the fused ReLU
// backward as a select on x > 0. A test compares them with the templates.
//
// Compiled per level like conv_direct.cpp (oneDNN picks 16-channel blocks
// only at AVX-512, but a test may run the loops at a lower level).
#include <cstring>
#include <vector>

#include "trainer/cpu/kernels.h"
#include "trainer/cpu/simd_levels.h"

// The 64-byte vector type never crosses this file's internal helpers.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace swept::trainer::cpu {
namespace {

#define SWEPT_DEFINE_POOL_BLOCKED(level, ATTRIBUTES)                                                                \
  namespace level {                                                                                                 \
  using simd::v16;                                                                                                  \
  using simd::v16i;                                                                                                 \
  using simd::load16;                                                                                               \
  using simd::store16;                                                                                              \
  ATTRIBUTES inline v16 vmax(v16 p, v16 q) { return p < q ? q : p; }                                                \
                                                                                                                    \
  ATTRIBUTES void forward(int n_begin, int n_end, int channels, int height, int width, const float* x, float* y) {  \
    const int ho = height / 2, wo = width / 2, blocks = channels / 16;                                              \
    const size_t in_block = static_cast<size_t>(height) * width * 16, out_plane = static_cast<size_t>(ho) * wo;     \
    thread_local std::vector<float> tmp;                                                                            \
    tmp.resize(out_plane * 16);                                                                                     \
    for (int n = n_begin; n < n_end; ++n) {                                                                         \
      for (int cb = 0; cb < blocks; ++cb) {                                                                         \
        const float* in = x + (static_cast<size_t>(n) * blocks + cb) * in_block;                                    \
        for (int oy = 0; oy < ho; ++oy) {                                                                           \
          const float* r0 = in + static_cast<size_t>(2 * oy) * width * 16;                                          \
          const float* r1 = r0 + static_cast<size_t>(width) * 16;                                                   \
          for (int ox = 0; ox < wo; ++ox) {                                                                         \
            const v16 m = vmax(vmax(load16(r0 + 32 * ox), load16(r0 + 32 * ox + 16)),                                   \
                               vmax(load16(r1 + 32 * ox), load16(r1 + 32 * ox + 16)));                                  \
            store16(tmp.data() + (static_cast<size_t>(oy) * wo + ox) * 16, m);                                        \
          }                                                                                                         \
        }                                                                                                           \
        float* out = y + (static_cast<size_t>(n) * channels + cb * 16) * out_plane;                                 \
        for (int l = 0; l < 16; ++l)                                                                                \
          for (size_t p = 0; p < out_plane; ++p) out[l * out_plane + p] = tmp[p * 16 + l];                          \
      }                                                                                                             \
    }                                                                                                               \
  }                                                                                                                 \
                                                                                                                    \
  ATTRIBUTES void backward(int n_begin, int n_end, int channels, int height, int width, const float* x,            \
                           const float* y, const float* dy, float* dx, bool relu_input) {                           \
    const int ho = height / 2, wo = width / 2, blocks = channels / 16;                                              \
    const size_t in_block = static_cast<size_t>(height) * width * 16, out_plane = static_cast<size_t>(ho) * wo;     \
    thread_local std::vector<float> ty, tg;                                                                         \
    ty.resize(out_plane * 16);                                                                                      \
    tg.resize(out_plane * 16);                                                                                      \
    const v16 zero = v16{};                                                                                         \
    for (int n = n_begin; n < n_end; ++n) {                                                                         \
      for (int cb = 0; cb < blocks; ++cb) {                                                                         \
        const size_t first = (static_cast<size_t>(n) * channels + cb * 16) * out_plane;                             \
        for (int l = 0; l < 16; ++l)                                                                                \
          for (size_t p = 0; p < out_plane; ++p) {                                                                  \
            ty[p * 16 + l] = y[first + l * out_plane + p];                                                          \
            tg[p * 16 + l] = dy[first + l * out_plane + p];                                                         \
          }                                                                                                         \
        const size_t base = (static_cast<size_t>(n) * blocks + cb) * in_block;                                      \
        const float* in = x + base;                                                                                 \
        float* din = dx + base;                                                                                     \
        for (int oy = 0; oy < ho; ++oy) {                                                                           \
          const size_t r0 = static_cast<size_t>(2 * oy) * width * 16, r1 = r0 + static_cast<size_t>(width) * 16;   \
          for (int ox = 0; ox < wo; ++ox) {                                                                         \
            const size_t p = static_cast<size_t>(oy) * wo + ox;                                                     \
            const v16 best = load16(ty.data() + p * 16), g = load16(tg.data() + p * 16);                                \
            const size_t a = r0 + 32 * ox, b = a + 16, c = r1 + 32 * ox, d = c + 16;                                \
            const v16 xa = load16(in + a), xb = load16(in + b), xc = load16(in + c), xd = load16(in + d);                   \
            const v16i at_a = xa == best;                                                                           \
            const v16i at_b = ~at_a & (xb == best);                                                                 \
            const v16i at_c = ~(at_a | at_b) & (xc == best);                                                        \
            const v16i at_d = ~(at_a | at_b | at_c);                                                                \
            v16 da = at_a ? g : zero, db = at_b ? g : zero, dc = at_c ? g : zero, dd = at_d ? g : zero;             \
            if (relu_input) {                                                                                       \
              da = xa > zero ? da : zero;                                                                              \
              db = xb > zero ? db : zero;                                                                              \
              dc = xc > zero ? dc : zero;                                                                              \
              dd = xd > zero ? dd : zero;                                                                              \
            }                                                                                                       \
            store16(din + a, da);                                                                                     \
            store16(din + b, db);                                                                                     \
            store16(din + c, dc);                                                                                     \
            store16(din + d, dd);                                                                                     \
          }                                                                                                         \
        }                                                                                                           \
      }                                                                                                             \
    }                                                                                                               \
  }                                                                                                                 \
  }

SWEPT_DEFINE_POOL_BLOCKED(baseline, )
#if defined(SWEPT_HAVE_LEVELS)
SWEPT_DEFINE_POOL_BLOCKED(v3, __attribute__((target("arch=x86-64-v3"))))
SWEPT_DEFINE_POOL_BLOCKED(v4, __attribute__((target("arch=x86-64-v4"))))
#endif
#undef SWEPT_DEFINE_POOL_BLOCKED

}  // namespace

void maxpool2x2_blocked_forward(int n_begin, int n_end, int channels, int height, int width, const float* x,
                                float* y) {
  SWEPT_DISPATCH(forward, n_begin, n_end, channels, height, width, x, y);
}

void maxpool2x2_blocked_backward(int n_begin, int n_end, int channels, int height, int width, const float* x,
                                 const float* y, const float* dy, float* dx, bool relu_input) {
  SWEPT_DISPATCH(backward, n_begin, n_end, channels, height, width, x, y, dy, dx, relu_input);
}

}  // namespace swept::trainer::cpu
