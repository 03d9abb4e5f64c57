// The float 2×2 max pooling (the models' only window), written with SSE2
// intrinsics; other windows, rows narrower than four windows, and non-x86
// builds run the templates of kernels.h.
//
// Why by hand: the templates read and write every other float of a row (the
// two columns of a window), and GCC compiles those stride-2 accesses either
// to scalar code with one store per input float or, at AVX-512, to gathers
// and masked stores. Measured on the 2-core Sapphire Rapids VM of
// 2026-11-26, one thread, a CNN step at batch 128: pool1 backward 9.9 ms and
// pool2 backward 4.3 ms, a sixth of the whole step, for what is a pass over
// 16 MB. Here every load and store is a whole 4-float vector: the window's
// two columns are split with a shuffle (forward) or rebuilt with an unpack
// (backward), so the loops run at memory speed. SSE2 is baseline x86-64, so
// one version serves every instruction-set level.
//
// Same results as the templates, bit for bit (a test checks it on ties,
// signed zeros and NaN): std::max(a, b) is `a < b ? b : a`, which is
// _mm_max_ps(b, a) (it returns its second operand unless the first is
// greater, NaN included), and the backward pass routes each gradient to the
// first position in row-major order whose input equals the window's maximum,
// the last position when none does. The fused ReLU backward
// (Backend::maxpool2d_relu_backward) is a select on `x > 0`, as
// activation_backward does it.
#include "trainer/cpu/kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define SWEPT_POOL_SSE2 1
#endif

namespace swept::trainer::cpu {

#if defined(SWEPT_POOL_SSE2)
namespace {

// Lanes 1 and 3 set: the right-hand column of each window in a vector of an
// input row (two windows of two floats).
inline __m128 right_lanes() { return _mm_castsi128_ps(_mm_set_epi32(-1, 0, -1, 0)); }

// Each lane of v copied to the lane on its right within its window's pair
// (lane 0 → 1, lane 2 → 3); the even lanes get their own value.
inline __m128 left_to_right(__m128 v) { return _mm_shuffle_ps(v, v, _MM_SHUFFLE(2, 2, 0, 0)); }

// One output row of the forward pass: y[ox] = max over the window at column
// 2·ox of rows r0 and r1, for ox in [0, wo).
void pool_row_forward(const float* r0, const float* r1, int wo, float* y) {
  // Blocks of four windows (wo >= 4: the callers send narrower rows to the
  // templates); a last partial block is done as the four last windows,
  // overlapping the block before (the same values written twice).
  for (int next = 0; next < wo;) {
    const int ox = std::min(next, wo - 4);
    next = ox + 4;
    const __m128 a0 = _mm_loadu_ps(r0 + 2 * ox), a1 = _mm_loadu_ps(r0 + 2 * ox + 4);
    const __m128 c0 = _mm_loadu_ps(r1 + 2 * ox), c1 = _mm_loadu_ps(r1 + 2 * ox + 4);
    // Left and right columns of four windows, each in window order.
    const __m128 a_left = _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 a_right = _mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1));
    const __m128 c_left = _mm_shuffle_ps(c0, c1, _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 c_right = _mm_shuffle_ps(c0, c1, _MM_SHUFFLE(3, 1, 3, 1));
    // std::max(std::max(a, b), std::max(c, d)), operand order kept.
    const __m128 top = _mm_max_ps(a_right, a_left), bottom = _mm_max_ps(c_right, c_left);
    _mm_storeu_ps(y + ox, _mm_max_ps(bottom, top));
  }
}

// Two windows of the backward pass: m and g hold each window's maximum and
// gradient twice ([m0 m0 m1 m1]); a and c are the windows' top and bottom
// rows. Writes the windows' gradients into da and dc; with relu_input, only
// where the input is above zero (`x > 0 ? dx : 0`, false for NaN).
template <bool relu_input>
inline void pool_pair_backward(__m128 m, __m128 g, __m128 a, __m128 c, float* da, float* dc) {
  const __m128 right = right_lanes();
  const __m128 eq_a = _mm_cmpeq_ps(a, m);
  // Top row: a left column that matches; a right column that matches where
  // its left neighbour did not.
  const __m128 hit_a = _mm_andnot_ps(_mm_and_ps(left_to_right(eq_a), right), eq_a);
  // Either column of the top row matched: the bottom row gets nothing.
  const __m128 top_taken = _mm_or_ps(eq_a, _mm_shuffle_ps(eq_a, eq_a, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m128 eq_c = _mm_cmpeq_ps(c, m);
  // Bottom row: a left column that matches; the right column whenever its
  // left neighbour did not match (the last position takes the gradient when
  // no position equals the maximum, as in the template).
  const __m128 not_left_c = _mm_andnot_ps(left_to_right(eq_c), right);
  __m128 hit_c = _mm_andnot_ps(top_taken, _mm_or_ps(_mm_andnot_ps(right, eq_c), not_left_c));
  __m128 keep_a = hit_a;
  if constexpr (relu_input) {
    keep_a = _mm_and_ps(keep_a, _mm_cmpgt_ps(a, _mm_setzero_ps()));
    hit_c = _mm_and_ps(hit_c, _mm_cmpgt_ps(c, _mm_setzero_ps()));
  }
  _mm_storeu_ps(da, _mm_and_ps(keep_a, g));
  _mm_storeu_ps(dc, _mm_and_ps(hit_c, g));
}

// One output row of the backward pass (see pool_row_forward; wo >= 4).
template <bool relu_input>
void pool_row_backward(const float* r0, const float* r1, const float* y, const float* dy, int wo, float* d0,
                       float* d1) {
  for (int next = 0; next < wo;) {  // blocks of four windows, the last one overlapping as in pool_row_forward
    const int ox = std::min(next, wo - 4);
    next = ox + 4;
    const __m128 m = _mm_loadu_ps(y + ox), g = _mm_loadu_ps(dy + ox);
    const int i = 2 * ox;
    pool_pair_backward<relu_input>(_mm_unpacklo_ps(m, m), _mm_unpacklo_ps(g, g), _mm_loadu_ps(r0 + i),
                                   _mm_loadu_ps(r1 + i), d0 + i, d1 + i);
    pool_pair_backward<relu_input>(_mm_unpackhi_ps(m, m), _mm_unpackhi_ps(g, g), _mm_loadu_ps(r0 + i + 4),
                                   _mm_loadu_ps(r1 + i + 4), d0 + i + 4, d1 + i + 4);
  }
}

}  // namespace
#endif

void maxpool_forward(int planes, int height, int width, int window, const float* x, float* y) {
#if defined(SWEPT_POOL_SSE2)
  if (window == 2 && width >= 8) {  // at least one block of four windows a row
    const int ho = height / 2, wo = width / 2;
    for (int p = 0; p < planes; ++p) {
      const float* in = x + static_cast<size_t>(p) * height * width;
      float* out = y + static_cast<size_t>(p) * ho * wo;
      for (int oy = 0; oy < ho; ++oy) {
        const float* r0 = in + static_cast<size_t>(2 * oy) * width;
        pool_row_forward(r0, r0 + width, wo, out + static_cast<size_t>(oy) * wo);
      }
    }
    return;
  }
#endif
  maxpool_forward<float>(planes, height, width, window, x, y);
}

void maxpool_backward(int planes, int height, int width, int window, const float* x, const float* y,
                      const float* dy, float* dx, bool relu_input) {
#if defined(SWEPT_POOL_SSE2)
  if (window == 2 && width >= 8) {  // at least one block of four windows a row
    const auto row = relu_input ? pool_row_backward<true> : pool_row_backward<false>;
    const int ho = height / 2, wo = width / 2;
    for (int p = 0; p < planes; ++p) {
      const size_t in_plane = static_cast<size_t>(p) * height * width, out_plane = static_cast<size_t>(p) * ho * wo;
      for (int oy = 0; oy < ho; ++oy) {
        const size_t r0 = in_plane + static_cast<size_t>(2 * oy) * width, o = out_plane + static_cast<size_t>(oy) * wo;
        row(x + r0, x + r0 + width, y + o, dy + o, wo, dx + r0, dx + r0 + width);
      }
    }
    return;
  }
#endif
  maxpool_backward<float>(planes, height, width, window, x, y, dy, dx, relu_input);
}

}  // namespace swept::trainer::cpu
