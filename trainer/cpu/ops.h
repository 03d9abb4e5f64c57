// CpuOps<T>: the CPU backend's layer operations, multi-threaded, templated on
// the scalar type. The backend (cpu_backend.cpp) runs CpuOps<float>; the
// gradient checks (ops_test.cpp) run CpuOps<double> — the same code path,
// partitioning and all — against finite differences.
//
// Each operation is cut into at most `threads` independent tasks on the
// ThreadPool; each task calls the GEMM single-threaded or the loops of
// kernels.h. Partial sums are kept per task and added in task order, so the
// result depends on the thread count only, never on scheduling.
// Convolutions are im2col + GEMM, per sample or over small chunks of samples
// side by side (see Geometry::kColumnsPerGemm), except where a faster float
// path exists: the direct kernel for few input channels (conv_direct.cpp)
// and oneDNN's primitives for several (onednn_conv.h). For the double
// products (OpenBLAS), small dense layers are cut into chunks of products
// small enough for OpenBLAS's unpacked kernels (kSmallGemmRows,
// kSmallGemmColumns), which the threads claim dynamically; the float GEMM is
// oneDNN's (kernel_choice.h), which runs them faster whole or in one part per
// thread (kSmallGemmChunks).
//
// Semantics of every operation: trainer/backend.h. Thread safety: one caller
// at a time (the scratch memory is per object).
#pragma once

#include <algorithm>
#include <type_traits>
#include <vector>

#include "trainer/backend.h"
#include "trainer/cpu/channels_last.h"
#include "trainer/cpu/kernels.h"
#include "trainer/cpu/onednn_conv.h"
#include "trainer/cpu/thread_pool.h"

namespace swept::trainer::cpu {

// [begin, end) of part `task` when n items are cut into `tasks` near-equal parts.
struct Range {
  int begin, end;
};
inline Range split_range(int n, int tasks, int task) {
  const int base = n / tasks, extra = n % tasks;
  const int begin = task * base + std::min(task, extra);
  return {begin, begin + base + (task < extra ? 1 : 0)};
}

template <typename T>
class CpuOps {
 public:
  explicit CpuOps(int threads, bool onednn_convolutions = true)
      : threads_(std::max(1, threads)), onednn_convolutions_(onednn_convolutions), pool_(threads_) {}

  int threads() const { return threads_; }
  ThreadPool& pool() { return pool_; }

  // Products are split over output columns (measured on OpenBLAS 0.3.21 for
  // the CNN's 128×3136→1024 layer: column halves run at ~95% of one core's
  // peak, row halves at ~80% forward and ~55% for dx).
  void dense_forward(int batch, int in, int out, const T* x, const T* w, const T* b, Activation act, T* y) {
    const double flops = 2.0 * batch * in * out;
    if (kSmallGemmChunks && static_cast<double>(kSmallGemmRows) * out * in <= kSmallGemmMaxProduct &&
        gemm_tasks(batch, flops) > 1) {
      // Small layers (the MLP's 784→100): chunks of kSmallGemmRows samples,
      // each a product small enough for OpenBLAS's unpacked small-matrix
      // kernel, claimed dynamically by the threads. Measured for 100×100×784
      // on one core: 195 µs in chunks of 8 rows against 225 µs in two
      // column halves (what two threads would otherwise each run).
      const int chunks = (batch + kSmallGemmRows - 1) / kSmallGemmRows;
      pool_.parallel_for(chunks, [&](int i) {
        const int r0 = i * kSmallGemmRows, rows = std::min(batch, r0 + kSmallGemmRows) - r0;
        T* y_rows = y + static_cast<size_t>(r0) * out;
        gemm(false, true, rows, out, in, T(1), x + static_cast<size_t>(r0) * in, in, w, in, T(0), y_rows, out);
        bias_activation_rows(rows, out, b, act, y_rows);
      });
      return;
    }
    const int tasks = gemm_tasks(out, flops);
    if (tasks > 1 && static_cast<size_t>(batch) * out <= kSplitInnerMaxOutputs && in >= 2 * tasks) {
      // A small output over a long inner dimension (the MLP's 100×100 from
      // 784 inputs): each task multiplies a slice of the inputs, so no
      // operand is packed twice, and the partial products are added in task
      // order. One core (2026-11-27): 93 µs for the two halves of the inner
      // dimension against 120-125 µs for halves of the rows or columns (and
      // 92-106 µs whole).
      ensure_scratch(tasks, 0, static_cast<size_t>(batch) * out, 0);
      pool_.parallel_for(tasks, [&](int t) {
        const Range k = split_range(in, tasks, t);
        gemm(false, true, batch, out, k.end - k.begin, T(1), x + k.begin, in, w + k.begin, in, T(0),
             t == 0 ? y : scratch_[t].out.data(), out);
      });
      const int row_tasks = tasks_for(batch);
      pool_.parallel_for(row_tasks, [&](int t) {
        const Range r = split_range(batch, row_tasks, t);
        const size_t first = static_cast<size_t>(r.begin) * out, n = static_cast<size_t>(r.end - r.begin) * out;
        for (int p = 1; p < tasks; ++p) {
          const T* part = scratch_[p].out.data() + first;
          T* dst = y + first;
          for (size_t i = 0; i < n; ++i) dst[i] += part[i];
        }
        bias_activation_rows(r.end - r.begin, out, b, act, y + first);
      });
      return;
    }
    pool_.parallel_for(tasks, [&](int t) {
      const Range c = split_range(out, tasks, t);
      if (c.end == c.begin) return;
      gemm(false, true, batch, c.end - c.begin, in, T(1), x, in, w + static_cast<size_t>(c.begin) * in, in, T(0),
           y + c.begin, out);
      bias_activation_columns(batch, out, c.begin, c.end, b, act, y);
    });
  }

  void dense_backward(int batch, int in, int out, const T* x, const T* w, const T* y, T* dy, Activation act, T* dx,
                      T* dw, T* db) {
    const double flops = 2.0 * batch * in * out;
    if (kSmallGemmChunks && static_cast<double>(batch) * out * kSmallGemmColumns <= kSmallGemmMaxProduct) {
      // Small layers (the MLP's): dy·act'(y) and db first, then dw and dx
      // together over chunks of kSmallGemmColumns input columns. Each chunk's
      // dw product (out × 64 × batch) is small enough for OpenBLAS's
      // unpacked small-matrix kernel: measured for the MLP's 100×784×100 dw,
      // 123 µs in chunks of 64 against 150 µs whole and 170 µs in two halves.
      const int out_tasks = gemm_tasks(out, static_cast<double>(batch) * out * kElementwiseFlopsWeight);
      pool_.parallel_for(out_tasks, [&](int t) {
        const Range c = split_range(out, out_tasks, t);
        if (c.end == c.begin) return;
        activation_backward_columns(batch, out, c.begin, c.end, act, y, dy);
        column_sums(batch, out, c.begin, c.end, dy, db + c.begin);
      });
      const int chunks = (in + kSmallGemmColumns - 1) / kSmallGemmColumns;
      const auto chunk = [&](int i) {
        const int c0 = i * kSmallGemmColumns, c1 = std::min(in, c0 + kSmallGemmColumns);
        gemm(true, false, out, c1 - c0, batch, T(1), dy, out, x + c0, in, T(0), dw + c0, in);
        if (dx != nullptr) gemm(false, false, batch, c1 - c0, out, T(1), dy, out, w + c0, in, T(0), dx + c0, in);
      };
      if (gemm_tasks(chunks, flops) == 1) {  // too small to be worth a second thread
        for (int i = 0; i < chunks; ++i) chunk(i);
      } else {
        pool_.parallel_for(chunks, chunk);  // chunks claimed dynamically: they balance
      }
      return;
    }
    // Pass 1, by output columns: dy *= act'(y); rows of dw; entries of db.
    const int out_tasks = gemm_tasks(out, flops);
    pool_.parallel_for(out_tasks, [&](int t) {
      const Range c = split_range(out, out_tasks, t);
      if (c.end == c.begin) return;
      activation_backward_columns(batch, out, c.begin, c.end, act, y, dy);
      gemm(true, false, c.end - c.begin, in, batch, T(1), dy + c.begin, out, x, in, T(0),
           dw + static_cast<size_t>(c.begin) * in, in);
      column_sums(batch, out, c.begin, c.end, dy, db + c.begin);
    });
    if (dx == nullptr) return;
    // Pass 2, by input columns: dx = dy · w.
    const int in_tasks = gemm_tasks(in, flops);
    pool_.parallel_for(in_tasks, [&](int t) {
      const Range c = split_range(in, in_tasks, t);
      if (c.end == c.begin) return;
      gemm(false, false, batch, c.end - c.begin, out, T(1), dy, out, w + c.begin, in, T(0), dx + c.begin, in);
    });
  }

  void conv2d_forward(const Conv2dShape& s, const T* x, const T* w, const T* b, Activation act, T* y) {
    if (s.in_channels >= kChannelsLastMin) return conv2d_forward_channels_last(s, x, w, b, act, y);
    if constexpr (std::is_same_v<T, float>) {
      if (onednn_convolutions_ && conv_direct_supported(s)) {  // few input channels: no im2col (conv_direct.cpp)
        const int tasks = sample_tasks(s.batch);
        pool_.parallel_for(tasks, [&](int t) {
          const Range r = split_range(s.batch, tasks, t);
          conv_direct_forward(s, r.begin, r.end, x, w, b, act, y);
        });
        return;
      }
    }
    const Geometry g(s);
    const int tasks = sample_tasks(s.batch);
    ensure_scratch(tasks, g.col_size(), g.out_chunk_size(), 0);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(s.batch, tasks, t);
      T* col = scratch_[t].col.data();
      T* out = scratch_[t].out.data();
      for (int n0 = r.begin; n0 < r.end; n0 += g.chunk) {
        const int nb = std::min(g.chunk, r.end - n0);
        const size_t ld = static_cast<size_t>(nb) * g.spatial;
        for (int j = 0; j < nb; ++j) im2col(s, x + (n0 + j) * g.in_size, col + j * g.spatial, ld);
        if (nb == 1) {  // [C][S] of one sample is its NCHW output: no scatter
          T* y_n = y + n0 * g.out_size;
          gemm(false, false, s.out_channels, g.spatial, g.k, T(1), w, g.k, col, g.spatial, T(0), y_n, g.spatial);
          bias_activation_channels(s.out_channels, g.spatial, b, act, y_n);
          continue;
        }
        gemm(false, false, s.out_channels, static_cast<int>(ld), g.k, T(1), w, g.k, col, static_cast<int>(ld), T(0),
             out, static_cast<int>(ld));
        // Scatter [C][nb·S] back to NCHW, adding the bias and activating.
        for (int j = 0; j < nb; ++j) {
          T* y_n = y + (n0 + j) * g.out_size;
          for (int c = 0; c < s.out_channels; ++c)
            std::copy_n(out + c * ld + j * g.spatial, g.spatial, y_n + static_cast<size_t>(c) * g.spatial);
          bias_activation_channels(s.out_channels, g.spatial, b, act, y_n);
        }
      }
    });
  }

  void conv2d_backward(const Conv2dShape& s, const T* x, const T* w, const T* y, T* dy, Activation act, T* dx,
                       T* dw, T* db) {
    if (s.in_channels >= kChannelsLastMin) return conv2d_backward_channels_last(s, x, w, y, dy, act, dx, dw, db);
    const Geometry g(s);
    const size_t w_size = static_cast<size_t>(s.out_channels) * g.k;
    const size_t grad_size = w_size + s.out_channels;
    const int tasks = sample_tasks(s.batch);
    if constexpr (std::is_same_v<T, float>) {
      // The first layer (no input gradient) with few input channels: the
      // direct weight gradient (conv_direct.cpp), per-task partials as below.
      if (onednn_convolutions_ && dx == nullptr && conv_direct_supported(s)) {
        ensure_scratch(tasks, 0, 0, grad_size);
        pool_.parallel_for(tasks, [&](int t) {
          const Range r = split_range(s.batch, tasks, t);
          T* dw_part = scratch_[t].grad.data();
          std::fill(dw_part, dw_part + grad_size, T(0));
          activation_backward(static_cast<size_t>(r.end - r.begin) * g.out_size, act, y + r.begin * g.out_size,
                              dy + r.begin * g.out_size);
          conv_direct_weight_grad(s, r.begin, r.end, x, dy, dw_part, dw_part + w_size);
        });
        sum_task_partials(tasks, w_size, grad_size, dw, db);
        return;
      }
    }
    ensure_scratch(tasks, g.col_size(), g.out_chunk_size(), grad_size);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(s.batch, tasks, t);
      T* col = scratch_[t].col.data();
      T* dyc = scratch_[t].out.data();
      T* dw_part = scratch_[t].grad.data();
      T* db_part = dw_part + w_size;
      std::fill(dw_part, dw_part + grad_size, T(0));
      for (int n0 = r.begin; n0 < r.end; n0 += g.chunk) {
        const int nb = std::min(g.chunk, r.end - n0);
        const size_t ld = static_cast<size_t>(nb) * g.spatial;
        if (nb == 1) {  // one sample: dy·act'(y) in place (dy may be overwritten), no gather
          T* dy_n = dy + n0 * g.out_size;
          activation_backward(g.out_size, act, y + n0 * g.out_size, dy_n);
          for (int c = 0; c < s.out_channels; ++c)
            db_part[c] += sum_vectorizable(dy_n + static_cast<size_t>(c) * g.spatial, g.spatial);
          im2col(s, x + n0 * g.in_size, col, g.spatial);
          gemm(false, true, s.out_channels, g.k, g.spatial, T(1), dy_n, g.spatial, col, g.spatial, T(1), dw_part, g.k);
          if (dx != nullptr) {
            gemm(true, false, g.k, g.spatial, s.out_channels, T(1), w, g.k, dy_n, g.spatial, T(0), col, g.spatial);
            col2im(s, col, g.spatial, dx + n0 * g.in_size);
          }
          continue;
        }
        // Gather dy·act'(y) of the chunk into [C][nb·S]; sum it for db.
        for (int j = 0; j < nb; ++j) {
          const size_t base = (n0 + j) * g.out_size;
          for (int c = 0; c < s.out_channels; ++c) {
            T* dst = dyc + c * ld + j * g.spatial;
            std::copy_n(dy + base + static_cast<size_t>(c) * g.spatial, g.spatial, dst);
            activation_backward(static_cast<size_t>(g.spatial), act, y + base + static_cast<size_t>(c) * g.spatial, dst);
            db_part[c] += sum_vectorizable(dst, g.spatial);
          }
          im2col(s, x + (n0 + j) * g.in_size, col + j * g.spatial, ld);
        }
        gemm(false, true, s.out_channels, g.k, static_cast<int>(ld), T(1), dyc, static_cast<int>(ld), col,
             static_cast<int>(ld), T(1), dw_part, g.k);
        if (dx != nullptr) {
          gemm(true, false, g.k, static_cast<int>(ld), s.out_channels, T(1), w, g.k, dyc, static_cast<int>(ld), T(0),
               col, static_cast<int>(ld));
          for (int j = 0; j < nb; ++j) col2im(s, col + j * g.spatial, ld, dx + (n0 + j) * g.in_size);
        }
      }
    });
    // Add the per-task partials in task order, split over the weights.
    sum_task_partials(tasks, w_size, grad_size, dw, db);
  }

  void maxpool2d_forward(const Pool2dShape& s, const T* x, T* y) {
    const int planes = s.batch * s.channels;
    const size_t in_plane = static_cast<size_t>(s.height) * s.width;
    const size_t out_plane = in_plane / (s.window * s.window);
    const int tasks = tasks_for(planes);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(planes, tasks, t);
      maxpool_forward(r.end - r.begin, s.height, s.width, s.window, x + r.begin * in_plane, y + r.begin * out_plane);
    });
  }

  // relu_input: also apply the backward of the ReLU whose output x is
  // (Backend::maxpool2d_relu_backward), in the same pass.
  void maxpool2d_backward(const Pool2dShape& s, const T* x, const T* y, const T* dy, T* dx, bool relu_input = false) {
    const int planes = s.batch * s.channels;
    const size_t in_plane = static_cast<size_t>(s.height) * s.width;
    const size_t out_plane = in_plane / (s.window * s.window);
    const int tasks = tasks_for(planes);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(planes, tasks, t);
      maxpool_backward(r.end - r.begin, s.height, s.width, s.window, x + r.begin * in_plane, y + r.begin * out_plane,
                       dy + r.begin * out_plane, dx + r.begin * in_plane, relu_input);
    });
  }

  // ---- channel-blocked convolution output (float only; backend.h) ---------
  // Whether conv2d_*_blocked can run this convolution (batch ignored): the
  // oneDNN path would run it, and oneDNN's JIT kernels take nChw16c.
  bool blocked_conv_output(const Conv2dShape& s, Activation act) const {
    if constexpr (std::is_same_v<T, float>)
      return onednn_convolutions_ && s.in_channels >= kChannelsLastMin && onednn_conv_blocked_available(s, act);
    return false;
  }

  // y (blocked) = act(conv(x) + b). False when oneDNN failed for a sub-batch
  // (the caller reports it: there is no NCHW path for a blocked output).
  bool conv2d_forward_blocked(const Conv2dShape& s, const T* x, const T* w, const T* b, Activation act, T* y) {
    if constexpr (std::is_same_v<T, float>) return s.blocked_out && conv2d_forward_onednn(s, x, w, b, act, y);
    return false;
  }

  // Backward with y and dy blocked; dw, db from per-task partials in task order.
  bool conv2d_backward_blocked(const Conv2dShape& s, const T* x, const T* w, const T* y, T* dy, Activation act,
                               T* dx, T* dw, T* db) {
    if constexpr (std::is_same_v<T, float>) return s.blocked_out && run_onednn_backward(s, x, w, y, dy, act, dx, dw, db);
    return false;
  }

  // The 2×2 pooling of a blocked tensor (kernels.h), split over samples.
  void maxpool2d_forward_blocked(const Pool2dShape& s, const T* x, T* y) {
    if constexpr (std::is_same_v<T, float>) {
      const int tasks = tasks_for(s.batch);
      pool_.parallel_for(tasks, [&](int t) {
        const Range r = split_range(s.batch, tasks, t);
        maxpool2x2_blocked_forward(r.begin, r.end, s.channels, s.height, s.width, x, y);
      });
    }
  }
  void maxpool2d_backward_blocked(const Pool2dShape& s, const T* x, const T* y, const T* dy, T* dx,
                                  bool relu_input) {
    if constexpr (std::is_same_v<T, float>) {
      const int tasks = tasks_for(s.batch);
      pool_.parallel_for(tasks, [&](int t) {
        const Range r = split_range(s.batch, tasks, t);
        maxpool2x2_blocked_backward(r.begin, r.end, s.channels, s.height, s.width, x, y, dy, dx, relu_input);
      });
    }
  }

  void optimizer_update(const OptimizerConfig& config, T weight_decay, T lr, T correction1, T correction2, size_t n,
                        T* param, const T* grad, T* state1, T* state2) {
    // Split only tensors of 32 K values and more (the MLP's 78,400 weights):
    // with two threads the MLP ran 505 K -> 532 K samples/s (paired runs,
    // 2026-11-27; the update had been 13 % of the caller's time while the
    // other thread waited). Smaller ones are not worth a wake-up.
    const int tasks = n >= (size_t{1} << 15) ? threads_ : 1;
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(static_cast<int>(n), tasks, t);
      const size_t off = static_cast<size_t>(r.begin);
      cpu::optimizer_update(config, weight_decay, lr, correction1, correction2, static_cast<size_t>(r.end - r.begin),
                               param + off, grad + off, state1 ? state1 + off : nullptr,
                               state2 ? state2 + off : nullptr);
    });
  }

 private:
  // Sizes of one convolution, and how many samples share one GEMM.
  struct Geometry {
    explicit Geometry(const Conv2dShape& s)
        : spatial(s.out_height() * s.out_width()),
          k(s.in_channels * s.kernel_h * s.kernel_w),
          in_size(static_cast<size_t>(s.in_channels) * s.height * s.width),
          out_size(static_cast<size_t>(s.out_channels) * spatial),
          out_channels(s.out_channels),
          chunk(std::max(1, std::min(s.batch, kColumnsPerGemm / std::max(1, spatial)))) {}
    size_t col_size() const { return static_cast<size_t>(k) * chunk * spatial; }
    size_t out_chunk_size() const { return static_cast<size_t>(out_channels) * chunk * spatial; }
    // Samples are batched into one GEMM only while the im2col block stays
    // small: measured on OpenBLAS 0.3.21 (AVX-512), a 64×196×800 product per
    // sample runs at ~90% of peak while 64×1568×800 over 8 samples drops to
    // ~65%, its 5 MB column block no longer fitting in L2.
    static constexpr int kColumnsPerGemm = 256;
    int spatial, k;
    size_t in_size, out_size;
    int out_channels, chunk;
  };

  struct Scratch {
    std::vector<T> col;   // im2col of a chunk (also its dcol)
    std::vector<T> out;   // [C][chunk·S]: forward output, backward dy
    std::vector<T> grad;  // this task's weight and bias gradient partials
  };

  // ---- channels-last convolution -------------------------------------------
  // With several input channels, im2col runs over a channels-last copy of
  // each sample (the layouts: channels_last.h), whose rows are contiguous.
  static constexpr int kChannelsLastMin = 4;

  void conv2d_forward_channels_last(const Conv2dShape& s, const T* x, const T* w, const T* b, Activation act, T* y) {
    if constexpr (std::is_same_v<T, float>) {
      if (onednn_convolutions_ && conv2d_forward_onednn(s, x, w, b, act, y)) return;
    }
    const PaddedGeometry g(s);
    const size_t w_size = static_cast<size_t>(s.out_channels) * g.k;
    if (reordered_.size() < w_size) reordered_.resize(w_size);
    reorder_weights(s, w, reordered_.data());
    const int tasks = sample_tasks(s.batch);
    const size_t padded_size = static_cast<size_t>(g.hp) * g.wp * s.in_channels;
    ensure_scratch(tasks, static_cast<size_t>(g.spatial) * g.k + padded_size, 0, 0);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(s.batch, tasks, t);
      T* col = scratch_[t].col.data();
      T* padded = col + static_cast<size_t>(g.spatial) * g.k;
      for (int n = r.begin; n < r.end; ++n) {
        unfold_channels_last(s, g, x + n * g.in_size, padded, col);
        // y_n[out][S] = wr[out][K] · colT[S][K]ᵀ: written straight in NCHW,
        // no [S][out] block to transpose afterwards.
        T* y_n = y + n * g.out_size;
        gemm(false, true, s.out_channels, g.spatial, g.k, T(1), reordered_.data(), g.k, col, g.k, T(0), y_n,
             g.spatial);
        bias_activation_channels(s.out_channels, g.spatial, b, act, y_n);
      }
    });
  }

  void conv2d_backward_channels_last(const Conv2dShape& s, const T* x, const T* w, const T* y, T* dy,
                                     Activation act, T* dx, T* dw, T* db, bool onednn = true) {
    if constexpr (std::is_same_v<T, float>) {
      if (onednn && onednn_convolutions_ && conv2d_backward_onednn(s, x, w, y, dy, act, dx, dw, db)) return;
    }
    const PaddedGeometry g(s);
    const size_t w_size = static_cast<size_t>(s.out_channels) * g.k;
    const size_t grad_size = w_size + s.out_channels;
    if (reordered_.size() < 2 * w_size) reordered_.resize(2 * w_size);
    T* wr = reordered_.data();
    T* dwr = wr + w_size;
    reorder_weights(s, w, wr);
    const int tasks = sample_tasks(s.batch);
    const size_t padded_size = static_cast<size_t>(g.hp) * g.wp * s.in_channels;
    const size_t col_size = static_cast<size_t>(g.spatial) * g.k;
    ensure_scratch(tasks, col_size + padded_size, 0, grad_size);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(s.batch, tasks, t);
      T* col = scratch_[t].col.data();
      // dcol reuses col once the dw product has read it: one 627 KB block
      // per thread instead of two (5×5×32 → 64) keeps the working set in L2.
      T* dcol = col;
      T* padded = col + col_size;
      T* dw_part = scratch_[t].grad.data();
      T* db_part = dw_part + w_size;
      std::fill(dw_part, dw_part + grad_size, T(0));
      for (int n = r.begin; n < r.end; ++n) {
        T* dyc = dy + n * g.out_size;  // [out][S]: dy·act'(y) in place (dy may be overwritten)
        activation_backward(g.out_size, act, y + n * g.out_size, dyc);
        for (int o = 0; o < s.out_channels; ++o)
          db_part[o] += sum_vectorizable(dyc + static_cast<size_t>(o) * g.spatial, g.spatial);
        unfold_channels_last(s, g, x + n * g.in_size, padded, col);
        gemm(false, false, s.out_channels, g.k, g.spatial, T(1), dyc, g.spatial, col, g.k, T(1), dw_part, g.k);
        if (dx != nullptr) {
          gemm(true, false, g.spatial, g.k, s.out_channels, T(1), dyc, g.spatial, wr, g.k, T(0), dcol, g.k);
          fold_channels_last(s, g, dcol, padded, dx + n * g.in_size);
        }
      }
    });
    // Add the per-task partials in task order, then restore the weight layout.
    sum_task_partials(tasks, w_size, grad_size, dwr, db);
    unorder_weights(s, dwr, dw);
  }

  // ---- oneDNN convolution primitives (float only; onednn_conv.h) ----------
  // The batch is cut into the same sample tasks as the GEMM path; each task
  // runs oneDNN on its samples on its own thread. Bias, activation and the
  // bias gradient are this file's loops on the NCHW tensors; the per-task
  // weight gradients are added in task order. Returns false (nothing written
  // that the fallback does not overwrite) when oneDNN has no implementation.
  static Conv2dShape sub_batch(const Conv2dShape& s, const Range& r) {
    Conv2dShape sub = s;
    sub.batch = r.end - r.begin;
    return sub;
  }

  // At most kOnednnSamples samples per call, also on one thread: measured
  // for conv2 (5×5, 32→64, 14×14) on one core, 128 samples in one call took
  // 13 + 29-30 ms (forward + backward), in calls of 16 11.5 + 24.5 ms.
  static constexpr int kOnednnSamples = 16;
  int onednn_tasks(int batch) const {
    return std::max(sample_tasks(batch), (batch + kOnednnSamples - 1) / kOnednnSamples);
  }

  // The forward of a oneDNN convolution in sample tasks: y NCHW with this
  // file's bias and activation, or nChw16c (s.blocked_out) with both inside
  // the primitive. False when oneDNN failed for a task.
  bool conv2d_forward_onednn(const Conv2dShape& s, const T* x, const T* w, const T* b, Activation act, T* y) {
    const PaddedGeometry g(s);
    const int tasks = onednn_tasks(s.batch);
    std::vector<char> ok(tasks, 1);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(s.batch, tasks, t);
      if (r.end == r.begin) return;
      const Conv2dShape sub = sub_batch(s, r);
      const T* x_r = x + r.begin * g.in_size;
      T* y_r = y + r.begin * g.out_size;
      if (s.blocked_out) {
        if (!onednn_conv_forward_blocked(sub, x_r, w, b, act, y_r)) ok[t] = 0;
        return;
      }
      if (!onednn_conv_forward(sub, x_r, w, y_r)) {
        ok[t] = 0;
        return;
      }
      for (int n = 0; n < sub.batch; ++n) bias_activation_channels(s.out_channels, g.spatial, b, act, y_r + n * g.out_size);
    });
    return std::find(ok.begin(), ok.end(), 0) == ok.end();
  }

  bool conv2d_backward_onednn(const Conv2dShape& s, const T* x, const T* w, const T* y, T* dy, Activation act, T* dx,
                              T* dw, T* db) {
    if (!run_onednn_backward(s, x, w, y, dy, act, dx, dw, db)) {
      // dy already holds dy·act'(y): the GEMM path must not apply it again.
      conv2d_backward_channels_last(s, x, w, y, dy, Activation::kNone, dx, dw, db, /*onednn=*/false);
    }
    return true;
  }

  // The backward of a oneDNN convolution in sample tasks, dy (NCHW, or
  // nChw16c when s.blocked_out) first multiplied by act'(y) in every task
  // whatever oneDNN then does, so that a fallback sees dy·act'(y) for all;
  // the per-task weight and bias gradients added in task order. False when
  // oneDNN failed for a task (dw and db then unwritten).
  bool run_onednn_backward(const Conv2dShape& s, const T* x, const T* w, const T* y, T* dy, Activation act, T* dx,
                           T* dw, T* db) {
    const PaddedGeometry g(s);
    const size_t w_size = static_cast<size_t>(s.out_channels) * g.k;
    const size_t grad_size = w_size + s.out_channels;
    const int tasks = onednn_tasks(s.batch);
    ensure_scratch(tasks, 0, 0, grad_size);
    std::vector<char> ok(tasks, 1);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(s.batch, tasks, t);
      T* dw_part = scratch_[t].grad.data();
      T* db_part = dw_part + w_size;
      std::fill(dw_part, dw_part + grad_size, T(0));
      if (r.end == r.begin) return;
      // This task's samples while they stay in cache for the bias sums and
      // oneDNN's reorder (elementwise: the layout does not matter).
      const Conv2dShape sub = sub_batch(s, r);
      T* dy_r = dy + r.begin * g.out_size;
      T* dx_r = dx == nullptr ? nullptr : dx + r.begin * g.in_size;
      activation_backward(static_cast<size_t>(r.end - r.begin) * g.out_size, act, y + r.begin * g.out_size, dy_r);
      if (s.blocked_out) {  // the primitive sums the bias gradient itself
        if (!onednn_conv_backward_blocked(sub, act, x + r.begin * g.in_size, w, dy_r, dx_r, dw_part, db_part))
          ok[t] = 0;
        return;
      }
      for (int n = 0; n < r.end - r.begin; ++n)
        for (int o = 0; o < s.out_channels; ++o)
          db_part[o] += sum_vectorizable(dy_r + n * g.out_size + static_cast<size_t>(o) * g.spatial, g.spatial);
      if (!onednn_conv_backward(sub, x + r.begin * g.in_size, w, dy_r, dx_r, dw_part)) ok[t] = 0;
    });
    if (std::find(ok.begin(), ok.end(), 0) != ok.end()) return false;
    sum_task_partials(tasks, w_size, grad_size, dw, db);
    return true;
  }

  // Adds the per-task weight and bias gradient partials (scratch_[p].grad:
  // w_size weights, then the biases) in task order, split over the weights,
  // so the sums do not depend on which thread ran which task.
  void sum_task_partials(int tasks, size_t w_size, size_t grad_size, T* dw, T* db) {
    const int sum_tasks = tasks_for(static_cast<int>(grad_size));
    pool_.parallel_for(sum_tasks, [&](int t) {
      const Range r = split_range(static_cast<int>(grad_size), sum_tasks, t);
      for (int i = r.begin; i < r.end; ++i) {
        T sum = 0;
        for (int p = 0; p < tasks; ++p) sum += scratch_[p].grad[i];
        if (static_cast<size_t>(i) < w_size) dw[i] = sum;
        else db[i - w_size] = sum;
      }
    });
  }

  int tasks_for(int items) const { return std::max(1, std::min(threads_, items)); }
  // Per-sample work (convolutions) is cut finer than one task per thread, so
  // that when the machine is shared and one thread is descheduled, the others
  // take over its remaining samples instead of waiting for it.
  int sample_tasks(int batch) const {
    return threads_ == 1 ? 1 : std::max(1, std::min(batch, threads_ * kTasksPerThread));
  }
  static constexpr int kTasksPerThread = 4;
  // A product is split only into parts of at least ~4 MFLOP (~40 µs on one
  // core): below that, waking another thread costs more than it saves, and on
  // a shared machine a descheduled helper thread stalls the whole step.
  // Larger products get one part per thread. They were cut into up to four
  // parts per thread, so that a thread could take over parts another had
  // not started when a second process took a core; but oneDNN's sgemm runs
  // the CNN's fc1 products 10-20 % slower in quarters than in halves (one
  // core, 2026-11-27: dw 6.1-7.2 ms in eighths against 5.6-6.3 in halves,
  // dx 5.4-6.6 against 5.0-5.4), and the pool's stall detector now covers a
  // descheduled thread (it runs the jobs alone for a while).
  int gemm_tasks(int items, double flops) const {
    const int by_work = static_cast<int>(flops / kMinFlopsPerTask);
    return std::max(1, std::min({threads_, items, by_work}));
  }
  static constexpr double kMinFlopsPerTask = 4e6;
  // An elementwise pass over n values is weighted as n · this many flops
  // when deciding whether to split it (it runs ~50x below GEMM speed).
  static constexpr double kElementwiseFlopsWeight = 50;
  // OpenBLAS 0.3.21 (SKYLAKEX) multiplies without packing when
  // M·N·K <= 100³; the dense layers cut small layers into products that fit.
  static constexpr int kSmallGemmColumns = 64;
  // Only for OpenBLAS (the double products of the gradient checks). oneDNN's
  // sgemm (float) runs small products no faster in pieces: one core, the
  // MLP's 100×100×784 forward took 182 µs in chunks of 8 rows against 101 µs
  // whole and 122-125 µs in two halves; its dw 102 µs in chunks of 64
  // columns against 92 µs in two halves (2026-11-27, generic-Xeon VM).
  static constexpr bool kSmallGemmChunks = !std::is_same_v<T, float>;
  // Outputs up to this many values (64 KB of floats) are split over the
  // inner dimension instead (dense_forward), their partials staying in cache.
  static constexpr size_t kSplitInnerMaxOutputs = size_t{1} << 14;
  static constexpr int kSmallGemmRows = 8;
  static constexpr double kSmallGemmMaxProduct = 1e6;

  void ensure_scratch(int tasks, size_t col, size_t out, size_t grad) {
    if (scratch_.size() < static_cast<size_t>(tasks)) scratch_.resize(tasks);
    for (int t = 0; t < tasks; ++t) {
      if (scratch_[t].col.size() < col) scratch_[t].col.resize(col);
      if (scratch_[t].out.size() < out) scratch_[t].out.resize(out);
      if (scratch_[t].grad.size() < grad) scratch_[t].grad.resize(grad);
    }
  }

  int threads_;
  bool onednn_convolutions_;  // see CpuBackendOptions::onednn_convolutions
  ThreadPool pool_;
  std::vector<Scratch> scratch_;
  std::vector<T> reordered_;  // conv weights (and their gradient) in (ky, kx, c) order
};

}  // namespace swept::trainer::cpu
