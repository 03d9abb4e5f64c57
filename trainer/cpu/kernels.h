// The CPU backend's arithmetic, as single-threaded functions over ranges,
// templated on the scalar type: float is what the backend runs; double is
// what the gradient checks run (trainer/cpu/ops_test.cpp), so the layer
// math is checked against finite differences without float noise.
// Matrix products go to oneDNN (float) and OpenBLAS (double); everything else
// is plain loops over contiguous memory that the compiler vectorizes.
// Layouts are those of trainer/backend.h (row-major, NCHW).
// Thread safety: pure functions of their arguments; callers give disjoint
// outputs to concurrent calls.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "trainer/backend.h"
#include "trainer/counter_rng.h"
#include "trainer/cpu/kernel_choice.h"

namespace swept::trainer::cpu {

// C[M][N] = alpha · op(A)[M][K] · op(B)[K][N] + beta · C, row-major: float
// through the kernels chosen by the CPU's features (kernel_choice.h: oneDNN),
// double (the gradient checks' reference) through OpenBLAS.
inline void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a,
                 int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// e^x, written so that loops over it vectorize: libm's expf is a call per
// element (about a tenth of an MLP step went to it in the sigmoid). Float:
// Cody-Waite reduction x = n·ln2 + r, |r| <= ln2/2, Cephes' degree-6
// polynomial for e^r (about 1 ulp on the reduced range), 2^n built in the
// exponent bits. Inputs are clamped to [-87.3, 88.3], so the result is a
// normal float or NaN for NaN input, never inf. Double (the gradient
// checks) keeps std::exp.
inline float exp_vectorizable(float x) {
  x = x < -87.3f ? -87.3f : x;  // (a select, not std::max: GCC vectorizes it)
  x = x > 88.3f ? 88.3f : x;    // NaN passes through both
  // n = round(x / ln2) by the 1.5·2^23 trick (no SSE4.1 rounding needed).
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  // 2^n: n in [-126, 127] after the clamp, a biased exponent in [1, 254].
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
inline double exp_vectorizable(double x) { return std::exp(x); }

template <typename T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + exp_vectorizable(-x));
}

template <typename T>
inline T activate(Activation act, T x) {
  switch (act) {
    case Activation::kRelu: return x > T(0) ? x : T(0);
    case Activation::kSigmoid: return sigmoid(x);
    case Activation::kNone: break;
  }
  return x;
}

// y[r][c] = act(y[r][c] + bias[c]) for r < rows.
template <typename T>
void bias_activation_rows(int rows, int cols, const T* bias, Activation act, T* y) {
  for (int r = 0; r < rows; ++r) {
    T* row = y + static_cast<size_t>(r) * cols;
    switch (act) {
      case Activation::kNone:
        for (int c = 0; c < cols; ++c) row[c] += bias[c];
        break;
      case Activation::kRelu:
        for (int c = 0; c < cols; ++c) row[c] = std::max(row[c] + bias[c], T(0));
        break;
      case Activation::kSigmoid:
        for (int c = 0; c < cols; ++c) row[c] = sigmoid(row[c] + bias[c]);
        break;
    }
  }
}

// Same as bias_activation_rows over columns [c0, c1) of a rows × cols matrix.
template <typename T>
void bias_activation_columns(int rows, int cols, int c0, int c1, const T* bias, Activation act, T* y) {
  for (int r = 0; r < rows; ++r)
    bias_activation_rows(1, c1 - c0, bias + c0, act, y + static_cast<size_t>(r) * cols + c0);
}

// y[c][s] = act(y[c][s] + bias[c]) over one NCHW sample (channels × spatial).
template <typename T>
void bias_activation_channels(int channels, int spatial, const T* bias, Activation act, T* y) {
  for (int c = 0; c < channels; ++c) {
    T* plane = y + static_cast<size_t>(c) * spatial;
    const T b = bias[c];
    switch (act) {
      case Activation::kNone:
        for (int s = 0; s < spatial; ++s) plane[s] += b;
        break;
      case Activation::kRelu:
        for (int s = 0; s < spatial; ++s) plane[s] = std::max(plane[s] + b, T(0));
        break;
      case Activation::kSigmoid:
        for (int s = 0; s < spatial; ++s) plane[s] = sigmoid(plane[s] + b);
        break;
    }
  }
}

// dy[i] *= act'(x_i), written with the activation's output y[i].
template <typename T>
void activation_backward(size_t n, Activation act, const T* y, T* dy) {
  switch (act) {
    case Activation::kNone: return;
    case Activation::kRelu:
      for (size_t i = 0; i < n; ++i) dy[i] = y[i] > T(0) ? dy[i] : T(0);
      return;
    case Activation::kSigmoid:
      for (size_t i = 0; i < n; ++i) dy[i] *= y[i] * (T(1) - y[i]);
      return;
  }
}

// Same as activation_backward, over columns [c0, c1) of a rows × cols matrix.
template <typename T>
void activation_backward_columns(int rows, int cols, int c0, int c1, Activation act, const T* y, T* dy) {
  if (act == Activation::kNone) return;
  for (int r = 0; r < rows; ++r) {
    size_t off = static_cast<size_t>(r) * cols + c0;
    activation_backward(static_cast<size_t>(c1 - c0), act, y + off, dy + off);
  }
}

// Σ v[0..n): eight interleaved partial sums, added in a fixed order at the
// end, so the loop vectorizes (a single running sum cannot be reordered
// without -ffast-math) and the result is still the same on every run.
template <typename T>
T sum_vectorizable(const T* v, int n) {
  constexpr int kLanes = 8;
  T lanes[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += v[i + l];
  T sum = 0;
  for (; i < n; ++i) sum += v[i];
  for (int l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

// sums[c - c0] = Σ_r m[r][c] for c in [c0, c1).
template <typename T>
void column_sums(int rows, int cols, int c0, int c1, const T* m, T* sums) {
  std::fill(sums, sums + (c1 - c0), T(0));
  for (int r = 0; r < rows; ++r) {
    const T* row = m + static_cast<size_t>(r) * cols;
    for (int c = c0; c < c1; ++c) sums[c - c0] += row[c];
  }
}

// Unfolds one sample x[C][H][W] into col[C·kh·kw][Ho·Wo] (zero padding), so
// that the convolution is the product w[out][C·kh·kw] · col. Rows of col are
// `ld` floats apart (ld >= Ho·Wo), so several samples can sit side by side.
template <typename T>
void im2col(const Conv2dShape& s, const T* x, T* col, size_t ld) {
  const int ho = s.out_height(), wo = s.out_width();
  for (int c = 0; c < s.in_channels; ++c) {
    const T* plane = x + static_cast<size_t>(c) * s.height * s.width;
    for (int ky = 0; ky < s.kernel_h; ++ky) {
      for (int kx = 0; kx < s.kernel_w; ++kx) {
        T* out = col + (static_cast<size_t>(c * s.kernel_h + ky) * s.kernel_w + kx) * ld;
        for (int oy = 0; oy < ho; ++oy) {
          const int iy = oy + ky - s.pad_h;
          T* out_row = out + static_cast<size_t>(oy) * wo;
          if (iy < 0 || iy >= s.height) {
            std::fill(out_row, out_row + wo, T(0));
            continue;
          }
          const T* in_row = plane + static_cast<size_t>(iy) * s.width;
          // Output columns whose input column ix = ox + kx - pad is inside.
          const int lo = std::max(0, s.pad_w - kx);
          const int hi = std::min(wo, s.width + s.pad_w - kx);
          for (int ox = 0; ox < lo; ++ox) out_row[ox] = T(0);
          for (int ox = lo; ox < hi; ++ox) out_row[ox] = in_row[ox + kx - s.pad_w];
          for (int ox = std::max(hi, lo); ox < wo; ++ox) out_row[ox] = T(0);
        }
      }
    }
  }
}

// The adjoint of im2col: dx[C][H][W] = Σ of col entries that read each input.
template <typename T>
void col2im(const Conv2dShape& s, const T* col, size_t ld, T* dx) {
  const int ho = s.out_height(), wo = s.out_width();
  std::fill(dx, dx + static_cast<size_t>(s.in_channels) * s.height * s.width, T(0));
  for (int c = 0; c < s.in_channels; ++c) {
    T* plane = dx + static_cast<size_t>(c) * s.height * s.width;
    for (int ky = 0; ky < s.kernel_h; ++ky) {
      for (int kx = 0; kx < s.kernel_w; ++kx) {
        const T* in = col + (static_cast<size_t>(c * s.kernel_h + ky) * s.kernel_w + kx) * ld;
        for (int oy = 0; oy < ho; ++oy) {
          const int iy = oy + ky - s.pad_h;
          if (iy < 0 || iy >= s.height) continue;
          const T* in_row = in + static_cast<size_t>(oy) * wo;
          T* out_row = plane + static_cast<size_t>(iy) * s.width;
          const int lo = std::max(0, s.pad_w - kx);
          const int hi = std::min(wo, s.width + s.pad_w - kx);
          for (int ox = lo; ox < hi; ++ox) out_row[ox + kx - s.pad_w] += in_row[ox];
        }
      }
    }
  }
}

// Max pooling of `planes` planes of height × width (window × window, stride
// window).
template <typename T>
void maxpool_forward(int planes, int height, int width, int window, const T* x, T* y) {
  const int ho = height / window, wo = width / window;
  if (window == 2) {  // the models' case: two rows at a time, no inner window loops
    for (int p = 0; p < planes; ++p) {
      const T* in = x + static_cast<size_t>(p) * height * width;
      T* out = y + static_cast<size_t>(p) * ho * wo;
      for (int oy = 0; oy < ho; ++oy) {
        const T* r0 = in + static_cast<size_t>(2 * oy) * width;
        const T* r1 = r0 + width;
        T* o = out + static_cast<size_t>(oy) * wo;
        for (int ox = 0; ox < wo; ++ox)
          o[ox] = std::max(std::max(r0[2 * ox], r0[2 * ox + 1]), std::max(r1[2 * ox], r1[2 * ox + 1]));
      }
    }
    return;
  }
  for (int p = 0; p < planes; ++p) {
    const T* in = x + static_cast<size_t>(p) * height * width;
    T* out = y + static_cast<size_t>(p) * ho * wo;
    for (int oy = 0; oy < ho; ++oy) {
      for (int ox = 0; ox < wo; ++ox) {
        T best = in[static_cast<size_t>(oy * window) * width + ox * window];
        for (int dy = 0; dy < window; ++dy) {
          const T* row = in + static_cast<size_t>(oy * window + dy) * width + ox * window;
          for (int dx = 0; dx < window; ++dx) best = std::max(best, row[dx]);
        }
        out[oy * wo + ox] = best;
      }
    }
  }
}

// Routes each dy to the first position (row-major) in its window where x
// equals the window's maximum y; every other dx is 0. With relu_input, then
// applies the backward of the ReLU whose output x is: dx = x > 0 ? dx : 0.
template <typename T>
void maxpool_backward(int planes, int height, int width, int window, const T* x, const T* y,
                      const T* dy, T* dx, bool relu_input = false) {
  if (relu_input) {
    maxpool_backward(planes, height, width, window, x, y, dy, dx, false);
    const size_t n = static_cast<size_t>(planes) * height * width;
    for (size_t i = 0; i < n; ++i) dx[i] = x[i] > T(0) ? dx[i] : T(0);
    return;
  }
  const int ho = height / window, wo = width / window;
  if (window == 2) {  // every dx written once, no clearing pass
    for (int p = 0; p < planes; ++p) {
      const T* in = x + static_cast<size_t>(p) * height * width;
      T* din = dx + static_cast<size_t>(p) * height * width;
      const T* out = y + static_cast<size_t>(p) * ho * wo;
      const T* dout = dy + static_cast<size_t>(p) * ho * wo;
      for (int oy = 0; oy < ho; ++oy) {
        const size_t r0 = static_cast<size_t>(2 * oy) * width, r1 = r0 + width;
        for (int ox = 0; ox < wo; ++ox) {
          const T best = out[oy * wo + ox], g = dout[oy * wo + ox];
          const size_t a = r0 + 2 * ox, b = a + 1, c = r1 + 2 * ox, d = c + 1;
          // Bitwise & and |, not && and ||: no branches, so the loop
          // vectorizes (it once took 8% of a CNN step as scalar code).
          const bool at_a = in[a] == best;
          const bool at_b = !at_a & (in[b] == best);
          const bool at_c = !(at_a | at_b) & (in[c] == best);
          const bool at_d = !(at_a | at_b | at_c);
          din[a] = at_a ? g : T(0);
          din[b] = at_b ? g : T(0);
          din[c] = at_c ? g : T(0);
          din[d] = at_d ? g : T(0);
        }
      }
    }
    return;
  }
  for (int p = 0; p < planes; ++p) {
    const T* in = x + static_cast<size_t>(p) * height * width;
    T* din = dx + static_cast<size_t>(p) * height * width;
    const T* out = y + static_cast<size_t>(p) * ho * wo;
    const T* dout = dy + static_cast<size_t>(p) * ho * wo;
    std::fill(din, din + static_cast<size_t>(height) * width, T(0));
    for (int oy = 0; oy < ho; ++oy) {
      for (int ox = 0; ox < wo; ++ox) {
        const T best = out[oy * wo + ox];
        bool routed = false;
        for (int dy_ = 0; dy_ < window && !routed; ++dy_) {
          const size_t base = static_cast<size_t>(oy * window + dy_) * width + ox * window;
          for (int dx_ = 0; dx_ < window; ++dx_) {
            if (in[base + dx_] == best) {
              din[base + dx_] = dout[oy * wo + ox];
              routed = true;
              break;
            }
          }
        }
      }
    }
  }
}

// Softmax cross-entropy of rows [0, batch): adds Σ loss to *loss_sum and the
// number of rows whose argmax is the label to *correct. Unless dlogits is
// null, writes (softmax - onehot) · grad_scale. Labels outside [0, classes)
// are a caller bug (the data reader checks them).
template <typename T>
void softmax_cross_entropy(int batch, int classes, const T* logits, const int32_t* labels,
                           T grad_scale, T* dlogits, double* loss_sum, double* correct) {
  for (int r = 0; r < batch; ++r) {
    const T* z = logits + static_cast<size_t>(r) * classes;
    int argmax = 0;
    for (int c = 1; c < classes; ++c)
      if (z[c] > z[argmax]) argmax = c;
    const T zmax = z[argmax];
    const int label = labels[r];
    const T z_label = z[label];  // read first: dlogits may alias logits
    // e^(z - max), kept in dlogits (when there is one) for the gradient.
    T* e = dlogits != nullptr ? dlogits + static_cast<size_t>(r) * classes : nullptr;
    T denom = 0;
    if (e != nullptr) {
      for (int c = 0; c < classes; ++c) e[c] = exp_vectorizable(z[c] - zmax);
      for (int c = 0; c < classes; ++c) denom += e[c];
    } else {
      for (int c = 0; c < classes; ++c) denom += exp_vectorizable(z[c] - zmax);
    }
    const T log_denom = std::log(denom);
    *loss_sum += static_cast<double>(log_denom - (z_label - zmax));
    // A NaN logit makes every comparison false: count it as wrong.
    if (argmax == label && !std::isnan(zmax)) *correct += 1;
    if (dlogits != nullptr) {
      const T scale = grad_scale / denom;
      for (int c = 0; c < classes; ++c) e[c] *= scale;
      e[label] -= grad_scale;
    }
  }
}

// Inverted dropout over elements [0, n) whose global index starts at
// first_element (see Backend::dropout_forward).
template <typename T>
void dropout_forward(size_t n, T p, uint64_t seed, uint64_t step, int64_t first_element, const T* x,
                     T* mask, T* y) {
  const T keep_scale = T(1) / (T(1) - p);
  for (size_t i = 0; i < n; ++i) {
    const float u = dropout_uniform(seed, step, static_cast<uint64_t>(first_element) + i);
    mask[i] = u >= static_cast<float>(p) ? keep_scale : T(0);
    y[i] = x[i] * mask[i];
  }
}

// One optimizer update of elements [0, n) (formulas in backend.h).
template <typename T>
void optimizer_update(const OptimizerConfig& cfg, T weight_decay, T lr, T correction1, T correction2,
                      size_t n, T* param, const T* grad, T* state1, T* state2) {
  switch (cfg.kind) {
    case OptimizerKind::kSgd:
      for (size_t i = 0; i < n; ++i) param[i] -= lr * (grad[i] + weight_decay * param[i]);
      return;
    case OptimizerKind::kMomentum: {
      const T mu = cfg.momentum;
      if (cfg.nesterov) {
        for (size_t i = 0; i < n; ++i) {
          const T g = grad[i] + weight_decay * param[i];
          state1[i] = mu * state1[i] + g;
          param[i] -= lr * (g + mu * state1[i]);
        }
      } else {
        for (size_t i = 0; i < n; ++i) {
          const T g = grad[i] + weight_decay * param[i];
          state1[i] = mu * state1[i] + g;
          param[i] -= lr * state1[i];
        }
      }
      return;
    }
    case OptimizerKind::kAdam: {
      const T b1 = cfg.beta1, b2 = cfg.beta2, eps = cfg.epsilon;
      const T step_size = lr / correction1;
      const T inv_c2 = T(1) / correction2;
      for (size_t i = 0; i < n; ++i) {
        const T g = grad[i] + weight_decay * param[i];
        state1[i] = b1 * state1[i] + (T(1) - b1) * g;
        state2[i] = b2 * state2[i] + (T(1) - b2) * g * g;
        param[i] -= step_size * state1[i] / (std::sqrt(state2[i] * inv_c2) + eps);
      }
      return;
    }
  }
}

}  // namespace swept::trainer::cpu

namespace swept::trainer::cpu {

// ---- float entry points compiled for several instruction sets -----------------
// The build targets baseline x86-64 (SSE2: 4 floats per instruction), which
// leaves the elementwise passes of a step compute-bound (the MLP's SGD update
// ran at ~1 element per cycle). These overloads run the templates above,
// inlined into versions built for AVX-512, AVX2+FMA and the baseline; each
// call runs the level kernel_choice.h chose (the level oneDNN's GEMM runs
// at), so the binary stays portable. Overload resolution prefers them
// over the templates for float; the double gradient checks use the templates.
// Defined in kernels_simd.cpp.
void bias_activation_rows(int rows, int cols, const float* bias, Activation act, float* y);
void bias_activation_channels(int channels, int spatial, const float* bias, Activation act, float* y);
void activation_backward(size_t n, Activation act, const float* y, float* dy);
// The dense layers' column ranges (the MLP's sigmoid: 5% of a one-thread step
// as the baseline template).
void bias_activation_columns(int rows, int cols, int c0, int c1, const float* bias, Activation act, float* y);
void activation_backward_columns(int rows, int cols, int c0, int c1, Activation act, const float* y, float* dy);
void optimizer_update(const OptimizerConfig& cfg, float weight_decay, float lr, float correction1, float correction2,
                      size_t n, float* param, const float* grad, float* state1, float* state2);
// dst[i] = src[i] / 255 for i < n (image bytes to [0, 1]).
void unit_floats_from_bytes(const uint8_t* src, size_t n, float* dst);

// The float max pooling: 2×2 windows with SSE2 on x86 (pool_simd.cpp: why,
// and why the results are the templates' bit for bit); other windows, and
// other architectures, run the templates.
void maxpool_forward(int planes, int height, int width, int window, const float* x, float* y);
void maxpool_backward(int planes, int height, int width, int window, const float* x, const float* y,
                      const float* dy, float* dx, bool relu_input = false);

// The 2×2 max pooling of samples [n_begin, n_end) of a channel-blocked
// tensor (Pool2dShape::blocked_in: per sample [channels/16][height][width][16],
// channels a multiple of 16): y and dy NCHW, dx blocked (pool_blocked.cpp).
// The NCHW kernels' values bit for bit.
void maxpool2x2_blocked_forward(int n_begin, int n_end, int channels, int height, int width, const float* x,
                                float* y);
void maxpool2x2_blocked_backward(int n_begin, int n_end, int channels, int height, int width, const float* x,
                                 const float* y, const float* dy, float* dx, bool relu_input);

// The float direct convolution for few input channels (conv_direct.cpp: why
// and how), per instruction-set level like the loops above. Supported: square
// 3×3 or 5×5 kernels, 1 to kConvDirectMaxInChannels input channels, output
// channels a multiple of 4, output rows of at most 32 pixels.
// conv_direct_forward writes y = act(conv(x) + b) for samples [n_begin, n_end)
// (x, y: the whole batch's NCHW tensors). conv_direct_weight_grad ADDS the
// weight and bias gradients of samples [n_begin, n_end) to dw and db, from dy
// with the activation's backward already applied.
constexpr int kConvDirectMaxInChannels = 3;  // from 4 on, ops.h runs the channels-last GEMM
bool conv_direct_supported(const Conv2dShape& s);
void conv_direct_forward(const Conv2dShape& s, int n_begin, int n_end, const float* x, const float* w,
                         const float* b, Activation act, float* y);
void conv_direct_weight_grad(const Conv2dShape& s, int n_begin, int n_end, const float* x, const float* dy,
                             float* dw, float* db);

}  // namespace swept::trainer::cpu
