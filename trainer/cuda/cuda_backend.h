// CudaBackend: trainer::Backend on one GPU (cuBLAS, cuDNN v9, own kernels).
//
// One CudaBackend per replica. Each has its own stream, cuBLAS and cuDNN
// handles and workspaces; all Backends on one device share that device's
// MemoryBudget (gpu_memory_fraction), so every allocation of the process on it
// is capped together. Operations are enqueued on the stream and never wait on
// the host, except copy_to_host() and synchronize().
// run_step() captures a step as a CUDA graph on its second call with a key
// (the first runs eagerly, so cuDNN plans and workspaces exist before
// capture) and replays it afterwards. Graphs are off when SWEPT_CUDA_GRAPHS=0
// or when the backend shares its GPU with other replicas (the same-GPU
// all-reduce waits on a host barrier, which a graph cannot replay); replicas
// on separate GPUs capture their NCCL collectives with the step. A capture
// that fails runs that step eagerly from then on, with a warning naming the
// cause, and counts in graph_fallbacks().
// Precision: FP32 throughout (cuBLAS default math, cuDNN FMA math), matching
// the CPU backend to 1e-4 relative. SWEPT_CUDA_TF32=1 lets cuBLAS and cuDNN
// use TF32 tensor cores (faster convolutions and products, about 5e-3).
// Thread safety: one thread at a time per backend (trainer::Backend's rule);
// each call first makes the backend's device current on the calling thread.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <array>
#include <map>
#include <memory>
#include <string>

#include "trainer/backend.h"
#include "trainer/cuda/device.h"
#include "trainer/cuda/device_allocator.h"
#include "trainer/cuda/dnn.h"

namespace swept::cuda {

// What a device's backends share: its description and memory budget.
struct DeviceContext {
  DeviceContext(DeviceInfo info, std::optional<double> fraction)
      : info(std::move(info)), budget(this->info.label(), this->info.total_bytes, fraction),
        allocator(this->info.index, &budget) {}
  DeviceInfo info;
  MemoryBudget budget;
  DeviceAllocator allocator;
};

class CudaBackend final : public trainer::Backend {
 public:
  // Use make_cuda_backend (trainer/backend.h).
  static Result<std::unique_ptr<CudaBackend>> Create(const trainer::CudaDeviceOptions& options);
  ~CudaBackend() override;

  std::string name() const override;
  Result<std::unique_ptr<trainer::Buffer>> allocate(size_t bytes) override;
  Status copy_from_host(void* dst, const void* src, size_t bytes) override;
  Status copy_to_host(void* dst, const void* src, size_t bytes) override;
  Status fill(float* x, size_t n, float value) override;
  Status synchronize() override;
  Status gather_batch(const uint8_t* images, const int32_t* labels, size_t sample_size,
                      const int32_t* order, const trainer::StepScalars* scalars, int64_t offset,
                      int count, float* x, int32_t* y) override;
  Status dense_forward(int batch, int in, int out, const float* x, const float* w, const float* b,
                       trainer::Activation act, float* y) override;
  Status dense_backward(int batch, int in, int out, const float* x, const float* w, const float* y,
                        float* dy, trainer::Activation act, float* dx, float* dw,
                        float* db) override;
  Status conv2d_forward(const trainer::Conv2dShape& shape, const float* x, const float* w,
                        const float* b, trainer::Activation act, float* y) override;
  Status conv2d_backward(const trainer::Conv2dShape& shape, const float* x, const float* w,
                         const float* y, float* dy, trainer::Activation act, float* dx,
                         float* dw, float* db) override;
  Status maxpool2d_forward(const trainer::Pool2dShape& shape, const float* x, float* y) override;
  Status maxpool2d_backward(const trainer::Pool2dShape& shape, const float* x, const float* y,
                            const float* dy, float* dx) override;
  Status dropout_forward(size_t n, float p, int64_t first_element,
                         const trainer::StepScalars* scalars, const float* x, float* mask,
                         float* y) override;
  Status dropout_backward(size_t n, const float* mask, const float* dy, float* dx) override;
  Status softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                               float grad_scale, float* dlogits, float* stats) override;
  Status optimizer_update(const trainer::OptimizerConfig& config, float weight_decay, size_t n,
                          float* param, const float* grad, float* state1, float* state2,
                          const trainer::StepScalars* scalars) override;
  Status run_step(uint64_t key, const std::function<Status()>& record) override;

  // For the all-reduce: the device ordinal and the stream operations run on.
  int device() const { return ctx_->info.index; }
  cudaStream_t stream() const { return stream_; }
  // Off for members of a same-GPU all-reduce (their host barrier cannot be
  // replayed by a graph), and in tests that want an eager twin.
  void set_graphs_allowed(bool allowed) { graphs_allowed_ = allowed; }
  // Number of graphs captured, replays made and captures that failed and
  // fell back to eager execution (for tests and logs).
  int graphs_captured() const { return graphs_captured_; }
  int64_t graph_replays() const { return graph_replays_; }
  int graph_fallbacks() const { return graph_fallbacks_; }
  // The plan of a convolution shape already used, or null (for tests).
  const ConvPlan* find_conv_plan(const trainer::Conv2dShape& shape) const;
  bool tf32() const { return tf32_; }
  const MemoryBudget& budget() const { return ctx_->budget; }

 private:
  explicit CudaBackend(std::shared_ptr<DeviceContext> ctx) : ctx_(std::move(ctx)) {}
  Status activate() const;  // cudaSetDevice on the calling thread
  Result<ConvPlan*> conv_plan(const trainer::Conv2dShape& shape);
  Result<const PoolPlan*> pool_plan(const trainer::Pool2dShape& shape);
  Status ensure_workspace(size_t bytes);
  size_t conv_workspace_limit() const;
  Status copy_small_from_host(void* dst, const void* src, size_t bytes);

  struct Graph {
    int calls = 0;
    bool uncapturable = false;
    cudaGraphExec_t exec = nullptr;
  };

  std::shared_ptr<DeviceContext> ctx_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  DeviceBuffer cublas_workspace_;
  DeviceBuffer cudnn_workspace_;
  DeviceBuffer bias_scratch_;  // partial sums of launch_activation_backward_bias_grad
  std::map<std::array<int, 9>, std::unique_ptr<ConvPlan>> conv_plans_;
  std::map<std::array<int, 5>, std::unique_ptr<PoolPlan>> pool_plans_;
  std::map<uint64_t, Graph> graphs_;
  bool graphs_allowed_ = true;
  bool tf32_ = false;  // SWEPT_CUDA_TF32=1
  bool capturing_ = false;
  int graphs_captured_ = 0;
  int graph_fallbacks_ = 0;
  int64_t graph_replays_ = 0;

  // Small host-to-device copies (per-step scalars) go through pinned slots, so
  // they are truly asynchronous yet `src` is reusable at once; a slot is reused
  // only after the copy that last used it has completed (its event).
  static constexpr size_t kSlotBytes = 4096;
  static constexpr int kSlots = 64;
  char* pinned_ = nullptr;
  std::array<cudaEvent_t, kSlots> slot_done_{};
  int next_slot_ = 0;
};

}  // namespace swept::cuda
