// CpuOps<T>: the CPU backend's layer operations, multi-threaded, templated on
// the scalar type. The backend (cpu_backend.cpp) runs CpuOps<float>; the
// gradient checks (ops_test.cpp) run CpuOps<double> — the same code path,
// partitioning and all — against finite differences.
//
// Each operation is cut into at most `threads` independent tasks on the
// ThreadPool; each task calls OpenBLAS single-threaded or the loops of
// kernels.h. Partial sums are kept per task and added in task order, so the
// result depends on the thread count only, never on scheduling.
// Convolutions are im2col + GEMM, per sample or over small chunks of samples
// side by side (see Geometry::kColumnsPerGemm).
//
// Semantics of every operation: trainer/backend.h. Thread safety: one caller
// at a time (the scratch memory is per object).
#pragma once

#include <algorithm>
#include <vector>

#include "trainer/backend.h"
#include "trainer/cpu/kernels.h"
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
  explicit CpuOps(int threads) : threads_(std::max(1, threads)), pool_(threads_) {}

  int threads() const { return threads_; }
  ThreadPool& pool() { return pool_; }

  void dense_forward(int batch, int in, int out, const T* x, const T* w, const T* b, Activation act, T* y) {
    const int tasks = tasks_for(batch);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(batch, tasks, t);
      if (r.end == r.begin) return;
      T* y_rows = y + static_cast<size_t>(r.begin) * out;
      gemm(false, true, r.end - r.begin, out, in, T(1), x + static_cast<size_t>(r.begin) * in, in, w, in, T(0),
           y_rows, out);
      bias_activation_rows(r.end - r.begin, out, b, act, y_rows);
    });
  }

  void dense_backward(int batch, int in, int out, const T* x, const T* w, const T* y, T* dy, Activation act, T* dx,
                      T* dw, T* db) {
    // Pass 1, by output columns: dy *= act'(y); rows of dw; entries of db.
    const int col_tasks = tasks_for(out);
    pool_.parallel_for(col_tasks, [&](int t) {
      const Range c = split_range(out, col_tasks, t);
      if (c.end == c.begin) return;
      activation_backward_columns(batch, out, c.begin, c.end, act, y, dy);
      gemm(true, false, c.end - c.begin, in, batch, T(1), dy + c.begin, out, x, in, T(0),
           dw + static_cast<size_t>(c.begin) * in, in);
      column_sums(batch, out, c.begin, c.end, dy, db + c.begin);
    });
    if (dx == nullptr) return;
    // Pass 2, by batch rows: dx = dy · w.
    const int row_tasks = tasks_for(batch);
    pool_.parallel_for(row_tasks, [&](int t) {
      const Range r = split_range(batch, row_tasks, t);
      if (r.end == r.begin) return;
      gemm(false, false, r.end - r.begin, in, out, T(1), dy + static_cast<size_t>(r.begin) * out, out, w, in, T(0),
           dx + static_cast<size_t>(r.begin) * in, in);
    });
  }

  void conv2d_forward(const Conv2dShape& s, const T* x, const T* w, const T* b, Activation act, T* y) {
    const Geometry g(s);
    const int tasks = tasks_for(s.batch);
    ensure_scratch(tasks, g.col_size(), g.out_chunk_size(), 0);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(s.batch, tasks, t);
      T* col = scratch_[t].col.data();
      T* out = scratch_[t].out.data();
      for (int n0 = r.begin; n0 < r.end; n0 += g.chunk) {
        const int nb = std::min(g.chunk, r.end - n0);
        const size_t ld = static_cast<size_t>(nb) * g.spatial;
        for (int j = 0; j < nb; ++j) im2col(s, x + (n0 + j) * g.in_size, col + j * g.spatial, ld);
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

  void conv2d_backward(const Conv2dShape& s, const T* x, const T* w, const T* y, const T* dy, Activation act, T* dx,
                       T* dw, T* db) {
    const Geometry g(s);
    const size_t w_size = static_cast<size_t>(s.out_channels) * g.k;
    const size_t grad_size = w_size + s.out_channels;
    const int tasks = tasks_for(s.batch);
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
        // Gather dy·act'(y) of the chunk into [C][nb·S]; sum it for db.
        for (int j = 0; j < nb; ++j) {
          const size_t base = (n0 + j) * g.out_size;
          for (int c = 0; c < s.out_channels; ++c) {
            T* dst = dyc + c * ld + j * g.spatial;
            std::copy_n(dy + base + static_cast<size_t>(c) * g.spatial, g.spatial, dst);
            activation_backward(static_cast<size_t>(g.spatial), act, y + base + static_cast<size_t>(c) * g.spatial, dst);
            T sum = 0;
            for (int i = 0; i < g.spatial; ++i) sum += dst[i];
            db_part[c] += sum;
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

  void maxpool2d_backward(const Pool2dShape& s, const T* x, const T* y, const T* dy, T* dx) {
    const int planes = s.batch * s.channels;
    const size_t in_plane = static_cast<size_t>(s.height) * s.width;
    const size_t out_plane = in_plane / (s.window * s.window);
    const int tasks = tasks_for(planes);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(planes, tasks, t);
      maxpool_backward(r.end - r.begin, s.height, s.width, s.window, x + r.begin * in_plane, y + r.begin * out_plane,
                       dy + r.begin * out_plane, dx + r.begin * in_plane);
    });
  }

  void optimizer_update(const OptimizerConfig& config, T weight_decay, T lr, T correction1, T correction2, size_t n,
                        T* param, const T* grad, T* state1, T* state2) {
    // Memory-bound: split only large tensors.
    const int tasks = n >= (size_t{1} << 16) ? threads_ : 1;
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split_range(static_cast<int>(n), tasks, t);
      const size_t off = static_cast<size_t>(r.begin);
      cpu::optimizer_update<T>(config, weight_decay, lr, correction1, correction2, static_cast<size_t>(r.end - r.begin),
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

  int tasks_for(int items) const { return std::max(1, std::min(threads_, items)); }

  void ensure_scratch(int tasks, size_t col, size_t out, size_t grad) {
    if (scratch_.size() < static_cast<size_t>(tasks)) scratch_.resize(tasks);
    for (int t = 0; t < tasks; ++t) {
      if (scratch_[t].col.size() < col) scratch_[t].col.resize(col);
      if (scratch_[t].out.size() < out) scratch_[t].out.resize(out);
      if (scratch_[t].grad.size() < grad) scratch_[t].grad.resize(grad);
    }
  }

  int threads_;
  ThreadPool pool_;
  std::vector<Scratch> scratch_;
};

}  // namespace swept::trainer::cpu
