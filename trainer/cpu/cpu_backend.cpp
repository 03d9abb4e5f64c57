// The CPU backend: trainer/backend.h over host memory, delegating the layer
// arithmetic to CpuOps<float> (ops.h: threads, OpenBLAS, reproducible
// partitioning). OpenBLAS's own threads stay at 1, so replicas and tasks
// never fight over its thread server.
// Operations are synchronous: each returns when its result is in memory.
#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "trainer/backend.h"
#include "trainer/cpu/kernels.h"
#include "trainer/cpu/ops.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace swept::trainer {
namespace {

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(void* data, size_t bytes) : Buffer(data, bytes) {}
  ~CpuBuffer() override { std::free(data()); }
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, bool onednn_convolutions) : ops_(threads, onednn_convolutions) {}

  std::string name() const override {
    return "cpu (" + std::to_string(ops_.threads()) + (ops_.threads() == 1 ? " thread)" : " threads)");
  }

  Result<std::unique_ptr<Buffer>> allocate(size_t bytes) override {
    // Buffers of 2 MB and more (the data set, the CNN's activations, fc1's
    // weights and optimizer state) on transparent huge pages where the
    // kernel offers them on request (the "madvise" setting, Debian's
    // default): gather_batch reads 100-128 images at random places in the
    // 47 MB training set each step, a TLB miss per image on 4 KB pages
    // (measured below in trainer/README.md). Advice only: without it, the
    // same memory on small pages.
    const size_t align = bytes >= kHugePage ? kHugePage : 64;
    const size_t rounded = std::max<size_t>(64, (bytes + align - 1) / align * align);
    void* p = std::aligned_alloc(align, rounded);
    if (p == nullptr)
      return Status::ResourceExhausted("cpu backend: cannot allocate " + std::to_string(bytes) +
                                       " bytes of host memory");
    if (align == kHugePage) ::madvise(p, rounded, MADV_HUGEPAGE);
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

  Status gather_batch(const uint8_t* images, const int32_t* labels, size_t sample_size, const int32_t* order,
                      const StepScalars* scalars, int64_t offset, int count, float* x, int32_t* y) override {
    const int32_t* rows = order + scalars->batch_start + offset;
    // The samples sit at random places in a 47 MB array, so this is bound by
    // memory latency, not arithmetic: split it even for small batches (the
    // pool's workers spin between jobs, so a split costs ~1 µs), and fetch a
    // few samples ahead.
    const int tasks = std::max(1, std::min(ops_.threads(), static_cast<int>(count * sample_size / 4096)));
    ops_.pool().parallel_for(tasks, [&](int t) {
      const cpu::Range r = cpu::split_range(count, tasks, t);
      for (int i = r.begin; i < r.end; ++i) {
        if (i + kPrefetchSamples < r.end) {
          const uint8_t* ahead = images + static_cast<size_t>(rows[i + kPrefetchSamples]) * sample_size;
          for (size_t j = 0; j < sample_size; j += 64) __builtin_prefetch(ahead + j);
        }
        cpu::unit_floats_from_bytes(images + static_cast<size_t>(rows[i]) * sample_size, sample_size,
                                    x + static_cast<size_t>(i) * sample_size);
        y[i] = labels[rows[i]];
      }
    });
    return Status::Ok();
  }

  Status dense_forward(int batch, int in, int out, const float* x, const float* w, const float* b, Activation act,
                       float* y) override {
    ops_.dense_forward(batch, in, out, x, w, b, act, y);
    return Status::Ok();
  }
  Status dense_backward(int batch, int in, int out, const float* x, const float* w, const float* y, float* dy,
                        Activation act, float* dx, float* dw, float* db) override {
    ops_.dense_backward(batch, in, out, x, w, y, dy, act, dx, dw, db);
    return Status::Ok();
  }
  Status conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* b, Activation act,
                        float* y) override {
    if (s.blocked_out) {
      if (!ops_.conv2d_forward_blocked(s, x, w, b, act, y)) return blocked_failure("conv2d_forward", s);
      return Status::Ok();
    }
    ops_.conv2d_forward(s, x, w, b, act, y);
    return Status::Ok();
  }
  Status conv2d_backward(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy,
                         Activation act, float* dx, float* dw, float* db) override {
    if (s.blocked_out) {
      if (!ops_.conv2d_backward_blocked(s, x, w, y, dy, act, dx, dw, db)) return blocked_failure("conv2d_backward", s);
      return Status::Ok();
    }
    ops_.conv2d_backward(s, x, w, y, dy, act, dx, dw, db);
    return Status::Ok();
  }
  bool blocked_conv_output(const Conv2dShape& s, Activation act) override { return ops_.blocked_conv_output(s, act); }
  Status maxpool2d_forward(const Pool2dShape& s, const float* x, float* y) override {
    if (s.blocked_in) {
      SWEPT_RETURN_IF_ERROR(check_blocked_pool(s));
      ops_.maxpool2d_forward_blocked(s, x, y);
      return Status::Ok();
    }
    ops_.maxpool2d_forward(s, x, y);
    return Status::Ok();
  }
  Status maxpool2d_backward(const Pool2dShape& s, const float* x, const float* y, const float* dy,
                            float* dx) override {
    return pool_backward(s, x, y, dy, dx, false);
  }
  bool fuses_pool_relu_backward() const override { return true; }
  Status maxpool2d_relu_backward(const Pool2dShape& s, const float* x, const float* y, const float* dy,
                                 float* dx) override {
    return pool_backward(s, x, y, dy, dx, true);
  }

  Status dropout_forward(size_t n, float p, int64_t first_element, const StepScalars* scalars, const float* x,
                         float* mask, float* y) override {
    cpu::dropout_forward<float>(n, p, scalars->seed, scalars->step, first_element, x, mask, y);
    return Status::Ok();
  }
  Status dropout_backward(size_t n, const float* mask, const float* dy, float* dx) override {
    for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
    return Status::Ok();
  }

  Status softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels, float grad_scale,
                               float* dlogits, float* stats) override {
    double loss = 0, correct = 0;
    cpu::softmax_cross_entropy<float>(batch, classes, logits, labels, grad_scale, dlogits, &loss, &correct);
    stats[0] += static_cast<float>(loss);
    stats[1] += static_cast<float>(correct);
    return Status::Ok();
  }

  Status optimizer_update(const OptimizerConfig& config, float weight_decay, size_t n, float* param,
                          const float* grad, float* state1, float* state2, const StepScalars* scalars) override {
    if (config.kind != OptimizerKind::kSgd && state1 == nullptr)
      return Status::Internal("optimizer_update: state1 is null for a rule that needs it");
    if (config.kind == OptimizerKind::kAdam && state2 == nullptr)
      return Status::Internal("optimizer_update: state2 is null for adam");
    ops_.optimizer_update(config, weight_decay, scalars->lr, scalars->adam_correction1, scalars->adam_correction2, n,
                          param, grad, state1, state2);
    return Status::Ok();
  }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  Status pool_backward(const Pool2dShape& s, const float* x, const float* y, const float* dy, float* dx, bool relu) {
    if (s.blocked_in) {
      SWEPT_RETURN_IF_ERROR(check_blocked_pool(s));
      ops_.maxpool2d_backward_blocked(s, x, y, dy, dx, relu);
      return Status::Ok();
    }
    ops_.maxpool2d_backward(s, x, y, dy, dx, relu);
    return Status::Ok();
  }
  static Status check_blocked_pool(const Pool2dShape& s) {
    if (s.window == 2 && s.channels % cpu::kOnednnChannelBlock == 0 && s.height % 2 == 0 && s.width % 2 == 0)
      return Status::Ok();
    return Status::Internal("maxpool2d: a channel-blocked input needs a 2x2 window, channels a multiple of 16 and even "
                            "sides (got window " + std::to_string(s.window) + ", " + std::to_string(s.channels) +
                            " channels, " + std::to_string(s.height) + "x" + std::to_string(s.width) + ")");
  }
  static Status blocked_failure(const char* op, const Conv2dShape& s) {
    return Status::Internal(std::string(op) + ": oneDNN could not run the channel-blocked convolution (" +
                            std::to_string(s.in_channels) + "->" + std::to_string(s.out_channels) + " channels, batch " +
                            std::to_string(s.batch) + "); this is a bug in swept-train, please report it");
  }
  static constexpr int kPrefetchSamples = 4;
  cpu::CpuOps<float> ops_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  openblas_set_num_threads(1);
  return std::make_unique<CpuBackend>(options.threads, options.onednn_convolutions);
}

}  // namespace swept::trainer
