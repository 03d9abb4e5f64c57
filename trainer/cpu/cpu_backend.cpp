// The CPU backend: trainer/backend.h over host memory. Each operation is cut
// into as many independent tasks as the backend has threads and run on its
// ThreadPool; every task calls OpenBLAS single-threaded (OpenBLAS's own
// threads stay at 1, so replicas and tasks never fight over its thread
// server) or the loops of kernels.h. Partial sums (conv weight gradients) are
// kept per task and added in task order, so results depend only on the thread
// count, never on scheduling: runs are reproducible.
// Operations are synchronous: each returns when its result is in memory.
#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "trainer/backend.h"
#include "trainer/cpu/kernels.h"
#include "trainer/cpu/thread_pool.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace swept::trainer {
namespace {

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(void* data, size_t bytes) : Buffer(data, bytes) {}
  ~CpuBuffer() override { std::free(data()); }
};

// [begin, end) of part `task` when n items are cut into `tasks` near-equal parts.
struct Range {
  int begin, end;
};
Range split(int n, int tasks, int task) {
  const int base = n / tasks, extra = n % tasks;
  const int begin = task * base + std::min(task, extra);
  return {begin, begin + base + (task < extra ? 1 : 0)};
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : threads_(std::max(1, threads)), pool_(threads_) {}

  std::string name() const override {
    return "cpu (" + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
  }

  Result<std::unique_ptr<Buffer>> allocate(size_t bytes) override {
    const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr)
      return Status::ResourceExhausted("cpu backend: cannot allocate " + std::to_string(bytes) +
                                       " bytes of host memory");
    std::memset(p, 0, rounded);
    return std::unique_ptr<Buffer>(new CpuBuffer(p, bytes));
  }

  Status copy_from_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::Ok();
  }
  Status copy_to_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::Ok();
  }
  Status fill(float* x, size_t n, float value) override {
    std::fill(x, x + n, value);
    return Status::Ok();
  }
  Status synchronize() override { return Status::Ok(); }

  Status gather_batch(const uint8_t* images, const int32_t* labels, size_t sample_size,
                      const int32_t* order, const StepScalars* scalars, int64_t offset, int count,
                      float* x, int32_t* y) override {
    const int32_t* rows = order + scalars->batch_start + offset;
    const int tasks = tasks_for(count);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split(count, tasks, t);
      for (int i = r.begin; i < r.end; ++i) {
        const uint8_t* src = images + static_cast<size_t>(rows[i]) * sample_size;
        float* dst = x + static_cast<size_t>(i) * sample_size;
        for (size_t j = 0; j < sample_size; ++j) dst[j] = static_cast<float>(src[j]) * (1.0f / 255.0f);
        y[i] = labels[rows[i]];
      }
    });
    return Status::Ok();
  }

  Status dense_forward(int batch, int in, int out, const float* x, const float* w, const float* b,
                       Activation act, float* y) override {
    const int tasks = tasks_for(batch);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split(batch, tasks, t);
      if (r.end == r.begin) return;
      float* y_rows = y + static_cast<size_t>(r.begin) * out;
      cpu::gemm(false, true, r.end - r.begin, out, in, 1.0f, x + static_cast<size_t>(r.begin) * in, in,
                w, in, 0.0f, y_rows, out);
      cpu::bias_activation_rows(r.end - r.begin, out, b, act, y_rows);
    });
    return Status::Ok();
  }

  Status dense_backward(int batch, int in, int out, const float* x, const float* w, const float* y,
                        float* dy, Activation act, float* dx, float* dw, float* db) override {
    // Pass 1, by output columns: dy *= act'(y); dw rows and db entries.
    const int col_tasks = tasks_for(out);
    pool_.parallel_for(col_tasks, [&](int t) {
      const Range c = split(out, col_tasks, t);
      if (c.end == c.begin) return;
      cpu::activation_backward_columns(batch, out, c.begin, c.end, act, y, dy);
      cpu::gemm(true, false, c.end - c.begin, in, batch, 1.0f, dy + c.begin, out, x, in, 0.0f,
                dw + static_cast<size_t>(c.begin) * in, in);
      cpu::column_sums(batch, out, c.begin, c.end, dy, db + c.begin);
    });
    if (dx == nullptr) return Status::Ok();
    // Pass 2, by batch rows: dx = dy · w.
    const int row_tasks = tasks_for(batch);
    pool_.parallel_for(row_tasks, [&](int t) {
      const Range r = split(batch, row_tasks, t);
      if (r.end == r.begin) return;
      cpu::gemm(false, false, r.end - r.begin, in, out, 1.0f, dy + static_cast<size_t>(r.begin) * out,
                out, w, in, 0.0f, dx + static_cast<size_t>(r.begin) * in, in);
    });
    return Status::Ok();
  }

  Status conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* b,
                        Activation act, float* y) override {
    const int spatial = s.out_height() * s.out_width();
    const int k = s.in_channels * s.kernel_h * s.kernel_w;
    const size_t in_size = static_cast<size_t>(s.in_channels) * s.height * s.width;
    const size_t out_size = static_cast<size_t>(s.out_channels) * spatial;
    const int tasks = tasks_for(s.batch);
    ensure_scratch(tasks, static_cast<size_t>(k) * spatial, 0);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split(s.batch, tasks, t);
      float* col = scratch_[t].col.data();
      for (int n = r.begin; n < r.end; ++n) {
        float* y_n = y + n * out_size;
        cpu::im2col(s, x + n * in_size, col);
        cpu::gemm(false, false, s.out_channels, spatial, k, 1.0f, w, k, col, spatial, 0.0f, y_n, spatial);
        cpu::bias_activation_channels(s.out_channels, spatial, b, act, y_n);
      }
    });
    return Status::Ok();
  }

  Status conv2d_backward(const Conv2dShape& s, const float* x, const float* w, const float* y,
                         float* dy, Activation act, float* dx, float* dw, float* db) override {
    const int spatial = s.out_height() * s.out_width();
    const int k = s.in_channels * s.kernel_h * s.kernel_w;
    const size_t in_size = static_cast<size_t>(s.in_channels) * s.height * s.width;
    const size_t out_size = static_cast<size_t>(s.out_channels) * spatial;
    const size_t w_size = static_cast<size_t>(s.out_channels) * k;
    const int tasks = tasks_for(s.batch);
    ensure_scratch(tasks, static_cast<size_t>(k) * spatial, w_size + s.out_channels);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split(s.batch, tasks, t);
      float* col = scratch_[t].col.data();
      float* dw_part = scratch_[t].grad.data();
      float* db_part = dw_part + w_size;
      std::fill(dw_part, dw_part + w_size + s.out_channels, 0.0f);
      for (int n = r.begin; n < r.end; ++n) {
        float* dy_n = dy + n * out_size;
        cpu::activation_backward(out_size, act, y + n * out_size, dy_n);
        for (int c = 0; c < s.out_channels; ++c) {
          const float* plane = dy_n + static_cast<size_t>(c) * spatial;
          float sum = 0;
          for (int i = 0; i < spatial; ++i) sum += plane[i];
          db_part[c] += sum;
        }
        cpu::im2col(s, x + n * in_size, col);
        cpu::gemm(false, true, s.out_channels, k, spatial, 1.0f, dy_n, spatial, col, spatial, 1.0f, dw_part, k);
        if (dx != nullptr) {
          cpu::gemm(true, false, k, spatial, s.out_channels, 1.0f, w, k, dy_n, spatial, 0.0f, col, spatial);
          cpu::col2im(s, col, dx + n * in_size);
        }
      }
    });
    // Sum the per-task partials in task order, split over the weights.
    const size_t total = w_size + s.out_channels;
    const int sum_tasks = tasks_for(static_cast<int>(std::min<size_t>(total, 1 << 20)));
    pool_.parallel_for(sum_tasks, [&](int t) {
      const Range r = split(static_cast<int>(total), sum_tasks, t);
      for (int i = r.begin; i < r.end; ++i) {
        float sum = 0;
        for (int p = 0; p < tasks; ++p) sum += scratch_[p].grad[i];
        if (static_cast<size_t>(i) < w_size) dw[i] = sum; else db[i - w_size] = sum;
      }
    });
    return Status::Ok();
  }

  Status maxpool2d_forward(const Pool2dShape& s, const float* x, float* y) override {
    const int planes = s.batch * s.channels;
    const size_t in_plane = static_cast<size_t>(s.height) * s.width;
    const size_t out_plane = in_plane / (s.window * s.window);
    const int tasks = tasks_for(planes);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split(planes, tasks, t);
      cpu::maxpool_forward(r.end - r.begin, s.height, s.width, s.window, x + r.begin * in_plane,
                           y + r.begin * out_plane);
    });
    return Status::Ok();
  }

  Status maxpool2d_backward(const Pool2dShape& s, const float* x, const float* y, const float* dy,
                            float* dx) override {
    const int planes = s.batch * s.channels;
    const size_t in_plane = static_cast<size_t>(s.height) * s.width;
    const size_t out_plane = in_plane / (s.window * s.window);
    const int tasks = tasks_for(planes);
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split(planes, tasks, t);
      cpu::maxpool_backward(r.end - r.begin, s.height, s.width, s.window, x + r.begin * in_plane,
                            y + r.begin * out_plane, dy + r.begin * out_plane, dx + r.begin * in_plane);
    });
    return Status::Ok();
  }

  Status dropout_forward(size_t n, float p, int64_t first_element, const StepScalars* scalars,
                         const float* x, float* mask, float* y) override {
    cpu::dropout_forward<float>(n, p, scalars->seed, scalars->step, first_element, x, mask, y);
    return Status::Ok();
  }
  Status dropout_backward(size_t n, const float* mask, const float* dy, float* dx) override {
    for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
    return Status::Ok();
  }

  Status softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                               float grad_scale, float* dlogits, float* stats) override {
    double loss = 0, correct = 0;
    cpu::softmax_cross_entropy<float>(batch, classes, logits, labels, grad_scale, dlogits, &loss, &correct);
    stats[0] += static_cast<float>(loss);
    stats[1] += static_cast<float>(correct);
    return Status::Ok();
  }

  Status optimizer_update(const OptimizerConfig& config, float weight_decay, size_t n, float* param,
                          const float* grad, float* state1, float* state2,
                          const StepScalars* scalars) override {
    if (config.kind != OptimizerKind::kSgd && state1 == nullptr)
      return Status::Internal("optimizer_update: state1 is null for a rule that needs it");
    if (config.kind == OptimizerKind::kAdam && state2 == nullptr)
      return Status::Internal("optimizer_update: state2 is null for adam");
    // Memory-bound: worth splitting only when large.
    const int tasks = n >= (1u << 16) ? threads_ : 1;
    pool_.parallel_for(tasks, [&](int t) {
      const Range r = split(static_cast<int>(n), tasks, t);
      const size_t off = static_cast<size_t>(r.begin);
      cpu::optimizer_update<float>(config, weight_decay, scalars->lr, scalars->adam_correction1,
                                   scalars->adam_correction2, static_cast<size_t>(r.end - r.begin),
                                   param + off, grad + off, state1 ? state1 + off : nullptr,
                                   state2 ? state2 + off : nullptr);
    });
    return Status::Ok();
  }

 private:
  struct Scratch {
    std::vector<float> col;   // im2col of one sample
    std::vector<float> grad;  // this task's conv weight and bias gradient partials
  };

  int tasks_for(int items) const { return std::max(1, std::min(threads_, items)); }

  void ensure_scratch(int tasks, size_t col_floats, size_t grad_floats) {
    if (scratch_.size() < static_cast<size_t>(tasks)) scratch_.resize(tasks);
    for (int t = 0; t < tasks; ++t) {
      if (scratch_[t].col.size() < col_floats) scratch_[t].col.resize(col_floats);
      if (scratch_[t].grad.size() < grad_floats) scratch_[t].grad.resize(grad_floats);
    }
  }

  int threads_;
  cpu::ThreadPool pool_;
  std::vector<Scratch> scratch_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  openblas_set_num_threads(1);
  return std::make_unique<CpuBackend>(options.threads);
}

}  // namespace swept::trainer
