// The float direct convolution for layers with few input channels (the CNN's
// conv1: 1 channel, 5×5, 28×28): forward with bias and activation, and the
// weight and bias gradients. See conv_direct_supported() for the shapes.
//
// Why not im2col + GEMM: with one input channel a product has K = 25, so
// the GEMM runs far below its peak, and im2col writes 25 floats per output
// pixel first. Measured on the 2-core Sapphire Rapids VM (2026-11-27, one
// CNN step at batch 128, CPU time): conv1's forward 3.3 ms and its weight
// gradient 4.5 ms through im2col and oneDNN's sgemm, a tenth of the step for
// 0.3% of its multiply-adds.
//
// How: every output row is one or two vectors of 16 pixels. The forward pass
// keeps kChannelBlock channels × those vectors in registers and, for each
// tap of the kernel, loads the input row shifted by the tap once and adds
// weight × it to every channel's accumulator. The weight gradient keeps one
// vector accumulator per tap and adds dy's row × the shifted input row,
// across all the samples of a call, and sums the lanes once at the end. The
// input planes are copied once per sample into zero-padded rows, so no tap
// needs a bounds check; pixels past the row's end read zeros (forward) or
// meet zeros in the padded dy rows (gradient) and add nothing.
//
// Written with GCC's vector types and compiled once per instruction-set level
// (as kernels_simd.cpp does): 512-bit registers with AVX-512, two 256-bit
// halves with AVX2, four SSE2 halves at the baseline. Each level fuses
// multiply-adds its own way, so levels may differ in the last bits; within a
// level a run is reproducible (sums in a fixed order per call).
#include <algorithm>
#include <cstring>
#include <vector>

#include "trainer/cpu/kernels.h"
#include "trainer/cpu/simd_levels.h"

// The 64-byte vector type is passed by value between this file's internal
// helpers only (all in an anonymous namespace), so GCC's note that its ABI
// differs without AVX-512 concerns no caller elsewhere.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace swept::trainer::cpu {

bool conv_direct_supported(const Conv2dShape& s) {
  const int k = s.kernel_h;
  return s.kernel_w == k && (k == 3 || k == 5) && s.in_channels >= 1 && s.in_channels <= kConvDirectMaxInChannels &&
         s.out_channels % 4 == 0 && s.out_width() >= 1 && s.out_width() <= 32 && s.out_height() >= 1 &&
         s.pad_h >= 0 && s.pad_w >= 0 && s.pad_h < k && s.pad_w < k;
}

namespace {

#define SWEPT_DEFINE_DIRECT(level, ATTRIBUTES)                                                                      \
  namespace level {                                                                                                 \
  using simd::v16;                                                                                                  \
  using simd::v16i;                                                                                                 \
  constexpr int kChannelBlock = 4;                                                                                  \
                                                                                                                    \
  using simd::load16;                                                                                               \
  using simd::store16;                                                                                              \
  ATTRIBUTES inline v16 splat(float f) { return v16{} + f; }                                                        \
                                                                                                                    \
  /* The input planes of one sample, zero-padded: rows of `stride` floats, */                                      \
  /* the image at column pad_w of row pad_h. Only the image is written: the */                                     \
  /* border stays zero from the first fill. */                                                                      \
  struct Padded {                                                                                                   \
    int rows = 0, stride = 0, planes = 0, height = 0, width = 0, pad_h = 0, pad_w = 0;                              \
    std::vector<float> data;                                                                                        \
    void fit(const Conv2dShape& s, int n_planes) {                                                                  \
      const int r = s.out_height() + s.kernel_h - 1;                                                                \
      const int st = 32 + s.kernel_w - 1 + 16; /* room for a 2-vector load at every tap */                          \
      if (r == rows && st == stride && n_planes == planes && s.height == height && s.width == width &&             \
          s.pad_h == pad_h && s.pad_w == pad_w)                                                                     \
        return; /* same geometry: the zero border is still there */                                                 \
      rows = r, stride = st, planes = n_planes, height = s.height, width = s.width, pad_h = s.pad_h, pad_w = s.pad_w; \
      data.assign(static_cast<size_t>(planes) * rows * stride, 0.0f);                                               \
    }                                                                                                               \
    float* plane(int p) { return data.data() + static_cast<size_t>(p) * rows * stride; }                            \
    void copy_in(const Conv2dShape& s, int p, const float* image) {                                                 \
      float* d = plane(p);                                                                                          \
      for (int y = 0; y < s.height; ++y)                                                                            \
        std::memcpy(d + static_cast<size_t>(y + s.pad_h) * stride + s.pad_w, image + static_cast<size_t>(y) * s.width, \
                    sizeof(float) * s.width);                                                                       \
    }                                                                                                               \
  };                                                                                                                \
                                                                                                                    \
  template <int K, int NV>                                                                                          \
  ATTRIBUTES void forward_rows(const Conv2dShape& s, Padded& in, const float* w, const float* b, Activation act,     \
                               float* y) {                                                                          \
    const int oh = s.out_height(), ow = s.out_width(), cin = s.in_channels;                                         \
    const size_t plane = static_cast<size_t>(oh) * ow;                                                              \
    for (int c0 = 0; c0 < s.out_channels; c0 += kChannelBlock) {                                                    \
      for (int oy = 0; oy < oh; ++oy) {                                                                             \
        v16 acc[kChannelBlock][NV];                                                                                 \
        for (int c = 0; c < kChannelBlock; ++c)                                                                     \
          for (int j = 0; j < NV; ++j) acc[c][j] = splat(b[c0 + c]);                                                \
        for (int ci = 0; ci < cin; ++ci) {                                                                          \
          const float* wc = w + (static_cast<size_t>(c0) * cin + ci) * K * K;                                       \
          const size_t wstep = static_cast<size_t>(cin) * K * K;                                                    \
          for (int ky = 0; ky < K; ++ky) {                                                                          \
            const float* row = in.plane(ci) + static_cast<size_t>(oy + ky) * in.stride;                             \
            _Pragma("GCC unroll 5") for (int kx = 0; kx < K; ++kx) {                                                \
              v16 xv[NV];                                                                                           \
              for (int j = 0; j < NV; ++j) xv[j] = load16(row + kx + 16 * j);                                         \
              for (int c = 0; c < kChannelBlock; ++c) {                                                             \
                const v16 wv = splat(wc[c * wstep + ky * K + kx]);                                                  \
                for (int j = 0; j < NV; ++j) acc[c][j] += wv * xv[j];                                               \
              }                                                                                                     \
            }                                                                                                       \
          }                                                                                                         \
        }                                                                                                           \
        for (int c = 0; c < kChannelBlock; ++c) {                                                                   \
          float* out = y + (static_cast<size_t>(c0 + c) * oh + oy) * ow;                                            \
          /* Whole vectors where what they write past the row lies in this */                                      \
          /* plane's later rows (rewritten when their turn comes); else exact. */                                  \
          const bool whole = static_cast<size_t>(oy) * ow + 16 * NV <= plane;                                       \
          float tmp[16 * NV];                                                                                       \
          for (int j = 0; j < NV; ++j) {                                                                            \
            v16 v = acc[c][j];                                                                                      \
            if (act == Activation::kRelu) v = v < 0 ? v16{} : v; /* std::max(v, 0) */                              \
            store16(whole ? out + 16 * j : tmp + 16 * j, v);                                                          \
          }                                                                                                         \
          if (!whole) std::memcpy(out, tmp, sizeof(float) * ow);                                                    \
          if (act == Activation::kSigmoid)                                                                          \
            for (int x = 0; x < ow; ++x) out[x] = activate(act, out[x]);                                            \
        }                                                                                                           \
      }                                                                                                             \
    }                                                                                                               \
  }                                                                                                                 \
                                                                                                                    \
  template <int K, int NV>                                                                                          \
  ATTRIBUTES void forward(const Conv2dShape& s, int n_begin, int n_end, const float* x, const float* w,              \
                          const float* b, Activation act, float* y) {                                               \
    thread_local Padded in;                                                                                         \
    in.fit(s, s.in_channels);                                                                                       \
    const size_t in_size = static_cast<size_t>(s.in_channels) * s.height * s.width;                                \
    const size_t out_size = static_cast<size_t>(s.out_channels) * s.out_height() * s.out_width();                   \
    for (int n = n_begin; n < n_end; ++n) {                                                                         \
      for (int ci = 0; ci < s.in_channels; ++ci)                                                                    \
        in.copy_in(s, ci, x + n * in_size + static_cast<size_t>(ci) * s.height * s.width);                          \
      forward_rows<K, NV>(s, in, w, b, act, y + n * out_size);                                                      \
    }                                                                                                               \
  }                                                                                                                 \
                                                                                                                    \
  /* acc[(co·cin + ci)·K·K + tap] and bacc[co]: vector partial sums over the */                                    \
  /* samples of the call, folded into dw and db at the end. */                                                      \
  template <int K, int NV>                                                                                          \
  ATTRIBUTES void weight_grad(const Conv2dShape& s, int n_begin, int n_end, const float* x, const float* dy,         \
                              float* dw, float* db) {                                                               \
    thread_local Padded in;                                                                                         \
    /* Plain floats, read and written with unaligned vector moves: a vector */                                      \
    /* of v16 is not sure to be 64-byte aligned (the allocator drops it). */                                        \
    thread_local std::vector<float> acc, bacc;                                                                      \
    const int cin = s.in_channels, oh = s.out_height(), ow = s.out_width(), cout = s.out_channels;                  \
    in.fit(s, cin);                                                                                                 \
    acc.assign(static_cast<size_t>(cout) * cin * K * K * 16, 0.0f);                                                 \
    bacc.assign(static_cast<size_t>(cout) * 16, 0.0f);                                                              \
    const size_t in_size = static_cast<size_t>(cin) * s.height * s.width;                                           \
    const size_t out_plane = static_cast<size_t>(oh) * ow;                                                          \
    float dyrow[16 * NV] = {};                                                                                      \
    const v16i iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};                                       \
    /* Sample by sample, so dy is read in memory order (each sample's */                                            \
    /* planes are contiguous) and the sample's padded input stays in L1; */                                         \
    /* the accumulators go to memory between planes (25 vectors per 1400 */                                         \
    /* multiply-adds at conv1's shape). */                                                                          \
    for (int n = n_begin; n < n_end; ++n) {                                                                         \
      for (int ci = 0; ci < cin; ++ci)                                                                              \
        in.copy_in(s, ci, x + n * in_size + static_cast<size_t>(ci) * s.height * s.width);                          \
      for (int co = 0; co < cout; ++co) {                                                                           \
        const float* d = dy + (static_cast<size_t>(n) * cout + co) * out_plane;                                     \
        v16 bsum = load16(bacc.data() + 16 * co);                                                                     \
        for (int ci = 0; ci < cin; ++ci) {                                                                          \
          float* stored = acc.data() + (static_cast<size_t>(co) * cin + ci) * K * K * 16;                           \
          v16 a[K * K];                                                                                             \
          for (int t = 0; t < K * K; ++t) a[t] = load16(stored + 16 * t);                                             \
          const float* plane = in.plane(ci);                                                                        \
          for (int oy = 0; oy < oh; ++oy) {                                                                         \
            /* dy's row, lanes past ow zero: whole vectors (masked) where */                                        \
            /* they read inside the plane, else a copy into zeroed lanes. */                                        \
            const float* drow = d + static_cast<size_t>(oy) * ow;                                                   \
            /* The next plane's dy, a row ahead per row (measured: the loads */                                      \
            /* of dy stalled the loop; the hardware's prefetch lags). */                                              \
            if (co + 1 < cout) {                                                                                    \
              __builtin_prefetch(drow + out_plane);                                                                 \
              __builtin_prefetch(drow + out_plane + 16);                                                            \
            }                                                                                                       \
            const bool whole = static_cast<size_t>(oy) * ow + 16 * NV <= out_plane;                                 \
            if (!whole) std::memcpy(dyrow, drow, sizeof(float) * ow); /* lanes past ow stay 0 */                    \
            v16 dv[NV];                                                                                             \
            for (int j = 0; j < NV; ++j) {                                                                          \
              dv[j] = whole ? load16(drow + 16 * j) : load16(dyrow + 16 * j);                                           \
              if (whole) dv[j] = iota + 16 * j < ow ? dv[j] : v16{};                                                \
              if (ci == 0) bsum += dv[j];                                                                           \
            }                                                                                                       \
            _Pragma("GCC unroll 5") for (int ky = 0; ky < K; ++ky) { /* a[] stays in registers */                   \
              const float* row = plane + static_cast<size_t>(oy + ky) * in.stride;                                  \
              _Pragma("GCC unroll 5") for (int kx = 0; kx < K; ++kx) {                                              \
                for (int j = 0; j < NV; ++j) a[ky * K + kx] += dv[j] * load16(row + kx + 16 * j);                     \
              }                                                                                                     \
            }                                                                                                       \
          }                                                                                                         \
          for (int t = 0; t < K * K; ++t) store16(stored + 16 * t, a[t]);                                             \
        }                                                                                                           \
        store16(bacc.data() + 16 * co, bsum);                                                                         \
      }                                                                                                             \
    }                                                                                                               \
    auto lanes = [](const float* f) {                                                                               \
      float sum = 0;                                                                                                \
      for (int i = 0; i < 16; ++i) sum += f[i];                                                                     \
      return sum;                                                                                                   \
    };                                                                                                              \
    for (size_t i = 0; i < acc.size() / 16; ++i) dw[i] += lanes(acc.data() + 16 * i);                               \
    for (int co = 0; co < cout; ++co) db[co] += lanes(bacc.data() + 16 * co);                                       \
  }                                                                                                                 \
                                                                                                                    \
  ATTRIBUTES void conv_forward(const Conv2dShape& s, int n_begin, int n_end, const float* x, const float* w,        \
                               const float* b, Activation act, float* y) {                                          \
    const bool wide = s.out_width() > 16;                                                                           \
    if (s.kernel_h == 5)                                                                                            \
      return wide ? forward<5, 2>(s, n_begin, n_end, x, w, b, act, y) : forward<5, 1>(s, n_begin, n_end, x, w, b, act, y); \
    return wide ? forward<3, 2>(s, n_begin, n_end, x, w, b, act, y) : forward<3, 1>(s, n_begin, n_end, x, w, b, act, y); \
  }                                                                                                                 \
  ATTRIBUTES void conv_weight_grad(const Conv2dShape& s, int n_begin, int n_end, const float* x, const float* dy,    \
                                   float* dw, float* db) {                                                          \
    const bool wide = s.out_width() > 16;                                                                           \
    if (s.kernel_h == 5)                                                                                            \
      return wide ? weight_grad<5, 2>(s, n_begin, n_end, x, dy, dw, db) : weight_grad<5, 1>(s, n_begin, n_end, x, dy, dw, db); \
    return wide ? weight_grad<3, 2>(s, n_begin, n_end, x, dy, dw, db) : weight_grad<3, 1>(s, n_begin, n_end, x, dy, dw, db); \
  }                                                                                                                 \
  }

SWEPT_DEFINE_DIRECT(baseline, )
#if defined(SWEPT_HAVE_LEVELS)
SWEPT_DEFINE_DIRECT(v3, __attribute__((target("arch=x86-64-v3"))))
SWEPT_DEFINE_DIRECT(v4, __attribute__((target("arch=x86-64-v4"))))
#endif
#undef SWEPT_DEFINE_DIRECT

}  // namespace

void conv_direct_forward(const Conv2dShape& s, int n_begin, int n_end, const float* x, const float* w,
                         const float* b, Activation act, float* y) {
  SWEPT_DISPATCH(conv_forward, s, n_begin, n_end, x, w, b, act, y);
}

void conv_direct_weight_grad(const Conv2dShape& s, int n_begin, int n_end, const float* x, const float* dy,
                             float* dw, float* db) {
  SWEPT_DISPATCH(conv_weight_grad, s, n_begin, n_end, x, dy, dw, db);
}

}  // namespace swept::trainer::cpu
