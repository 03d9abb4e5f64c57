// CudaBackend (cuda_backend.h) and the factory functions trainer/backend.h
// declares: make_cuda_backend and cuda_device_count.
#include "trainer/cuda/cuda_backend.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "common/log.h"
#include "trainer/cuda/blas.h"
#include "trainer/cuda/check.h"
#include "trainer/cuda/cuda_libraries.h"
#include "trainer/cuda/kernels.h"

namespace swept::cuda {
namespace {

using trainer::Activation;

// The process's per-device contexts, shared by the backends on each device and
// dropped when the last of them goes (weak_ptr), so a later run in the same
// process (tests) may choose another fraction.
std::mutex g_contexts_mu;
std::map<int, std::weak_ptr<DeviceContext>> g_contexts;

Result<std::shared_ptr<DeviceContext>> context_for(const DeviceInfo& info,
                                                   std::optional<double> fraction) {
  std::lock_guard<std::mutex> lock(g_contexts_mu);
  if (auto existing = g_contexts[info.index].lock()) {
    if (existing->budget.fraction() != fraction) {
      return Status::InvalidArgument("every replica on " + info.label() +
                                     " must use the same gpu_memory_fraction");
    }
    return existing;
  }
  auto ctx = std::make_shared<DeviceContext>(info, fraction);
  g_contexts[info.index] = ctx;
  return ctx;
}

// cuBLAS's recommended workspace: 32 MiB on Hopper and later, 4 MiB before.
size_t cublas_workspace_bytes(const DeviceInfo& info) {
  return info.sm_major >= 9 ? 32 * kMiB : 4 * kMiB;
}

constexpr size_t kMaxConvWorkspace = 256 * kMiB;

}  // namespace

Result<std::unique_ptr<CudaBackend>> CudaBackend::Create(const trainer::CudaDeviceOptions& options) {
  if (!(options.memory_fraction >= 0.0 && options.memory_fraction <= 1.0)) {
    return Status::InvalidArgument("gpu_memory_fraction must be in (0, 1], or 0 for no cap");
  }
  auto devices = visible_devices();
  if (!devices.ok()) return devices.status();
  if (options.device < 0 || options.device >= static_cast<int>(devices->size())) {
    return Status::NotFound("cuda:" + std::to_string(options.device) + " does not exist: " +
                            std::to_string(devices->size()) + " GPU(s) visible (cuda:0 to cuda:" +
                            std::to_string(devices->size() - 1) + ")");
  }
  const DeviceInfo& info = (*devices)[options.device];
  SWEPT_RETURN_IF_ERROR(load_cuda_libraries());  // cuBLAS and cuDNN, on first use
  std::optional<double> fraction;
  if (options.memory_fraction > 0.0) fraction = options.memory_fraction;
  auto ctx = context_for(info, fraction);
  if (!ctx.ok()) return ctx.status();

  std::unique_ptr<CudaBackend> b(new CudaBackend(std::move(*ctx)));
  SWEPT_RETURN_IF_ERROR(b->activate());
  cudaCheck(cudaStreamCreateWithFlags(&b->stream_, cudaStreamNonBlocking));
  cublasStatus_t cublas_err = cublas_api().cublasCreate(&b->cublas_);
  if (cublas_err != CUBLAS_STATUS_SUCCESS) {
    b->cublas_ = nullptr;
    return Status::Unavailable(
        cublas_status(cublas_err, "cublas_api().cublasCreate(&cublas_)", __FILE__, __LINE__).message() +
        ": cuBLAS could not start on " + info.label());
  }
  cudnnStatus_t cudnn_err = cudnn_api().cudnnCreate(&b->cudnn_);
  if (cudnn_err != CUDNN_STATUS_SUCCESS) {
    b->cudnn_ = nullptr;
    return Status::Unavailable(
        cudnn_status(cudnn_err, "cudnn_api().cudnnCreate(&cudnn_)", __FILE__, __LINE__).message() +
        ": cuDNN 9 could not start on " + info.label() +
        " (are all libcudnn*.so.9 sub-libraries on LD_LIBRARY_PATH?)");
  }
  cublasCheck(cublas_api().cublasSetStream(b->cublas_, b->stream_));
  cudnnCheck(cudnn_api().cudnnSetStream(b->cudnn_, b->stream_));
  // cuBLAS gets its workspace from the budget; without one it would allocate
  // behind our back, and could not run inside a captured graph.
  auto ws = b->ctx_->allocator.allocate(cublas_workspace_bytes(info), "the cuBLAS workspace", b->stream_);
  if (!ws.ok()) return ws.status();
  b->cublas_workspace_ = std::move(*ws);
  cublasCheck(cublas_api().cublasSetWorkspace(b->cublas_, b->cublas_workspace_.data(), b->cublas_workspace_.bytes()));
  // Partial sums of the bias gradients: 64 splits of up to 4096 channels (1 MiB).
  auto scratch = b->ctx_->allocator.allocate(size_t(kBiasGradMaxSplits) * 4096 * sizeof(float),
                                             "the bias-gradient scratch", b->stream_);
  if (!scratch.ok()) return scratch.status();
  b->bias_scratch_ = std::move(*scratch);
  void* pinned = nullptr;
  cudaCheck(cudaMallocHost(&pinned, kSlotBytes * kSlots));
  b->pinned_ = static_cast<char*>(pinned);
  for (auto& e : b->slot_done_) cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const char* graphs = std::getenv("SWEPT_CUDA_GRAPHS");
  if (graphs && std::strcmp(graphs, "0") == 0) b->graphs_allowed_ = false;
  // TF32 (tensor cores, 10-bit mantissa) only when asked: results then match
  // the CPU backend to about 5e-3 instead of 1e-4 (cuda_backend_test.cpp).
  const char* tf32 = std::getenv("SWEPT_CUDA_TF32");
  b->tf32_ = tf32 && std::strcmp(tf32, "1") == 0;
  if (b->tf32_) cublasCheck(cublas_api().cublasSetMathMode(b->cublas_, CUBLAS_TF32_TENSOR_OP_MATH));
  return b;
}

CudaBackend::~CudaBackend() {
  cudaCheckLog(cudaSetDevice(ctx_->info.index));
  if (stream_) cudaCheckLog(cudaStreamSynchronize(stream_));
  for (auto& [key, g] : graphs_) {
    if (g.exec) cudaCheckLog(cudaGraphExecDestroy(g.exec));
  }
  for (auto& e : slot_done_) {
    if (e) cudaCheckLog(cudaEventDestroy(e));
  }
  if (pinned_) cudaCheckLog(cudaFreeHost(pinned_));
  conv_plans_.clear();
  pool_plans_.clear();
  if (cudnn_) cudnnCheckLog(cudnn_api().cudnnDestroy(cudnn_));
  if (cublas_) cublasCheckLog(cublas_api().cublasDestroy(cublas_));
  cublas_workspace_.reset();
  cudnn_workspace_.reset();
  if (stream_) cudaCheckLog(cudaStreamDestroy(stream_));
}

std::string CudaBackend::name() const {
  return "cuda:" + std::to_string(ctx_->info.index) + " " + ctx_->info.name;
}

Status CudaBackend::activate() const {
  cudaCheck(cudaSetDevice(ctx_->info.index));
  return Status::Ok();
}

namespace {
// Keeps its device's context (and so the budget it returns its bytes to)
// alive, whatever the order in which the trainer drops buffers and backends.
class CudaBuffer final : public trainer::Buffer {
 public:
  CudaBuffer(DeviceBuffer memory, size_t bytes, std::shared_ptr<DeviceContext> ctx)
      : Buffer(memory.data(), bytes), ctx_(std::move(ctx)), memory_(std::move(memory)) {}

 private:
  std::shared_ptr<DeviceContext> ctx_;  // declared first: destroyed after memory_
  DeviceBuffer memory_;
};
}  // namespace

Result<std::unique_ptr<trainer::Buffer>> CudaBackend::allocate(size_t bytes) {
  if (capturing_) {
    return Status::Internal("allocate() while a CUDA graph is being captured: allocate before the step");
  }
  SWEPT_RETURN_IF_ERROR(activate());
  auto mem = ctx_->allocator.allocate(bytes, "a buffer of " + format_mib(bytes), stream_);
  if (!mem.ok()) return mem.status();
  return std::unique_ptr<trainer::Buffer>(new CudaBuffer(std::move(*mem), bytes, ctx_));
}

Status CudaBackend::copy_small_from_host(void* dst, const void* src, size_t bytes) {
  const int slot = next_slot_;
  next_slot_ = (next_slot_ + 1) % kSlots;
  cudaCheck(cudaEventSynchronize(slot_done_[slot]));  // its previous copy has been read
  char* staging = pinned_ + slot * kSlotBytes;
  std::memcpy(staging, src, bytes);
  cudaCheck(cudaMemcpyAsync(dst, staging, bytes, cudaMemcpyHostToDevice, stream_));
  cudaCheck(cudaEventRecord(slot_done_[slot], stream_));
  return Status::Ok();
}

Status CudaBackend::copy_from_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  SWEPT_RETURN_IF_ERROR(activate());
  if (capturing_) {
    return Status::FailedPrecondition("copy_from_host inside a captured step");
  }
  if (bytes <= kSlotBytes) return copy_small_from_host(dst, src, bytes);
  // Large copies (data set, initial weights) happen once: copy and wait, so
  // `src` is reusable on return whatever the host memory kind.
  cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  cudaCheck(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

Status CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  SWEPT_RETURN_IF_ERROR(activate());
  if (capturing_) return Status::FailedPrecondition("copy_to_host inside a captured step");
  cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  cudaCheck(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

Status CudaBackend::fill(float* x, size_t n, float value) {
  SWEPT_RETURN_IF_ERROR(activate());
  return launch_fill(x, n, value, stream_);
}

Status CudaBackend::synchronize() {
  SWEPT_RETURN_IF_ERROR(activate());
  if (capturing_) return Status::FailedPrecondition("synchronize inside a captured step");
  cudaCheck(cudaStreamSynchronize(stream_));
  cudaCheck(cudaGetLastError());
  return Status::Ok();
}

Status CudaBackend::gather_batch(const uint8_t* images, const int32_t* labels, size_t sample_size,
                                 const int32_t* order, const trainer::StepScalars* scalars,
                                 int64_t offset, int count, float* x, int32_t* y) {
  SWEPT_RETURN_IF_ERROR(activate());
  return launch_gather_batch(images, labels, sample_size, order, scalars, offset, count, x, y, stream_);
}

// y[batch][out] = x[batch][in] · w[out][in]ᵀ, then bias and activation fused.
Status CudaBackend::dense_forward(int batch, int in, int out, const float* x, const float* w,
                                  const float* b, Activation act, float* y) {
  SWEPT_RETURN_IF_ERROR(activate());
  SWEPT_RETURN_IF_ERROR(gemm_row_major(cublas_, false, true, batch, out, in, 1.f, x, in, w, in, 0.f, y, out));
  return launch_bias_activation_forward(y, b, batch, out, 1, act, stream_);
}

Status CudaBackend::dense_backward(int batch, int in, int out, const float* x, const float* w,
                                   const float* y, float* dy, Activation act, float* dx, float* dw,
                                   float* db) {
  SWEPT_RETURN_IF_ERROR(activate());
  // dy := dy·act'(y) and db = column sums, in one pass.
  SWEPT_RETURN_IF_ERROR(launch_activation_backward_bias_grad(dy, y, db, batch, out, 1, act,
                                                             bias_scratch_.as<float>(),
                                                             bias_scratch_.bytes() / sizeof(float), stream_));
  // dw[out][in] = dyᵀ · x
  SWEPT_RETURN_IF_ERROR(gemm_row_major(cublas_, true, false, out, in, batch, 1.f, dy, out, x, in, 0.f, dw, in));
  // dx[batch][in] = dy · w
  if (dx) SWEPT_RETURN_IF_ERROR(gemm_row_major(cublas_, false, false, batch, in, out, 1.f, dy, out, w, in, 0.f, dx, in));
  return Status::Ok();
}

Status CudaBackend::ensure_workspace(size_t bytes) {
  if (bytes <= cudnn_workspace_.bytes()) return Status::Ok();
  if (capturing_) return Status::Internal("a cuDNN workspace grew while a CUDA graph was captured");
  // cudaFree synchronizes the device, so no queued convolution still uses the old one.
  cudnn_workspace_.reset();
  auto ws = ctx_->allocator.allocate(bytes, "the cuDNN convolution workspace", stream_);
  if (!ws.ok()) return ws.status();
  cudnn_workspace_ = std::move(*ws);
  // Captured graphs hold the old workspace's address: drop them, so each key
  // is captured again (with the new one) on its next call.
  for (auto& [key, g] : graphs_) {
    if (g.exec) cudaCheck(cudaGraphExecDestroy(g.exec));
    g.exec = nullptr;
  }
  return Status::Ok();
}

// What a convolution pass may take as workspace: what the budget has left
// (the current workspace would be replaced), at most kMaxConvWorkspace.
size_t CudaBackend::conv_workspace_limit() const {
  const MemoryBudget& budget = ctx_->budget;
  const size_t room = budget.cap_bytes() - budget.in_use_bytes() + cudnn_workspace_.bytes();
  return room < kMaxConvWorkspace ? room : kMaxConvWorkspace;
}

namespace {
std::array<int, 9> conv_key(const trainer::Conv2dShape& s) {
  return {s.batch, s.in_channels, s.height, s.width, s.out_channels, s.kernel_h, s.kernel_w, s.pad_h, s.pad_w};
}
}  // namespace

const ConvPlan* CudaBackend::find_conv_plan(const trainer::Conv2dShape& s) const {
  auto it = conv_plans_.find(conv_key(s));
  return it == conv_plans_.end() ? nullptr : it->second.get();
}

Result<ConvPlan*> CudaBackend::conv_plan(const trainer::Conv2dShape& s) {
  const std::array<int, 9> key = conv_key(s);
  auto it = conv_plans_.find(key);
  if (it != conv_plans_.end()) return it->second.get();
  if (capturing_) return Status::Internal("a new convolution shape appeared while a CUDA graph was captured");
  auto plan = ConvPlan::Create(cudnn_, s, conv_workspace_limit(), tf32_);
  if (!plan.ok()) return plan.status();
  SWEPT_RETURN_IF_ERROR(ensure_workspace((*plan)->workspace_bytes()));
  ConvPlan* p = plan->get();
  conv_plans_.emplace(key, std::move(*plan));
  return p;
}

Result<const PoolPlan*> CudaBackend::pool_plan(const trainer::Pool2dShape& s) {
  std::array<int, 5> key{s.batch, s.channels, s.height, s.width, s.window};
  auto it = pool_plans_.find(key);
  if (it != pool_plans_.end()) return it->second.get();
  auto plan = PoolPlan::Create(s);
  if (!plan.ok()) return plan.status();
  const PoolPlan* p = plan->get();
  pool_plans_.emplace(key, std::move(*plan));
  return p;
}

Status CudaBackend::conv2d_forward(const trainer::Conv2dShape& s, const float* x, const float* w,
                                   const float* b, Activation act, float* y) {
  SWEPT_RETURN_IF_ERROR(activate());
  auto plan = conv_plan(s);
  if (!plan.ok()) return plan.status();
  SWEPT_RETURN_IF_ERROR((*plan)->forward(cudnn_, x, w, y, cudnn_workspace_.data(), cudnn_workspace_.bytes()));
  return launch_bias_activation_forward(y, b, s.batch, s.out_channels, s.out_height() * s.out_width(),
                                        act, stream_);
}

Status CudaBackend::conv2d_backward(const trainer::Conv2dShape& s, const float* x, const float* w,
                                    const float* y, float* dy, Activation act, float* dx, float* dw,
                                    float* db) {
  SWEPT_RETURN_IF_ERROR(activate());
  auto plan = conv_plan(s);
  if (!plan.ok()) return plan.status();
  SWEPT_RETURN_IF_ERROR(launch_activation_backward_bias_grad(
      dy, y, db, s.batch, s.out_channels, s.out_height() * s.out_width(), act,
      bias_scratch_.as<float>(), bias_scratch_.bytes() / sizeof(float), stream_));
  SWEPT_RETURN_IF_ERROR((*plan)->backward_filter(cudnn_, x, dy, dw, cudnn_workspace_.data(),
                                                 cudnn_workspace_.bytes()));
  if (dx) {
    // Planned on the first backward with an input gradient (never for the
    // first layer, whose input gradient nobody needs).
    if (!(*plan)->has_backward_data()) {
      if (capturing_)
        return Status::Internal("a convolution's backward-data pass was first needed while a CUDA graph was captured");
      SWEPT_RETURN_IF_ERROR((*plan)->plan_backward_data(cudnn_, conv_workspace_limit()));
      SWEPT_RETURN_IF_ERROR(ensure_workspace((*plan)->workspace_bytes()));
    }
    SWEPT_RETURN_IF_ERROR((*plan)->backward_data(cudnn_, w, dy, dx, cudnn_workspace_.data(),
                                                 cudnn_workspace_.bytes()));
  }
  return Status::Ok();
}

Status CudaBackend::maxpool2d_forward(const trainer::Pool2dShape& s, const float* x, float* y) {
  SWEPT_RETURN_IF_ERROR(activate());
  auto plan = pool_plan(s);
  if (!plan.ok()) return plan.status();
  return (*plan)->forward(cudnn_, x, y);
}

Status CudaBackend::maxpool2d_backward(const trainer::Pool2dShape& s, const float* x, const float* y,
                                       const float* dy, float* dx) {
  SWEPT_RETURN_IF_ERROR(activate());
  auto plan = pool_plan(s);
  if (!plan.ok()) return plan.status();
  return (*plan)->backward(cudnn_, x, y, dy, dx);
}

Status CudaBackend::dropout_forward(size_t n, float p, int64_t first_element,
                                    const trainer::StepScalars* scalars, const float* x, float* mask,
                                    float* y) {
  SWEPT_RETURN_IF_ERROR(activate());
  return launch_dropout_forward(n, p, first_element, scalars, x, mask, y, stream_);
}

Status CudaBackend::dropout_backward(size_t n, const float* mask, const float* dy, float* dx) {
  SWEPT_RETURN_IF_ERROR(activate());
  return launch_dropout_backward(n, mask, dy, dx, stream_);
}

Status CudaBackend::softmax_cross_entropy(int batch, int classes, const float* logits,
                                          const int32_t* labels, float grad_scale, float* dlogits,
                                          float* stats) {
  SWEPT_RETURN_IF_ERROR(activate());
  return launch_softmax_cross_entropy(batch, classes, logits, labels, grad_scale, dlogits, stats, stream_);
}

Status CudaBackend::optimizer_update(const trainer::OptimizerConfig& config, float weight_decay,
                                     size_t n, float* param, const float* grad, float* state1,
                                     float* state2, const trainer::StepScalars* scalars) {
  SWEPT_RETURN_IF_ERROR(activate());
  return launch_optimizer_update(config, weight_decay, n, param, grad, state1, state2, scalars, stream_);
}

// Call 1 of a key runs eagerly (plans, workspaces and cuBLAS state get made);
// call 2 captures the step into a graph and launches it; later calls replay.
// A step that cannot be captured (it synchronizes, copies from the host,
// allocates) is run eagerly from then on, with one warning.
Status CudaBackend::run_step(uint64_t key, const std::function<Status()>& record) {
  SWEPT_RETURN_IF_ERROR(activate());
  if (!graphs_allowed_) return record();
  Graph& g = graphs_[key];
  if (g.exec) {
    cudaCheck(cudaGraphLaunch(g.exec, stream_));
    ++graph_replays_;
    return Status::Ok();
  }
  if (g.uncapturable || ++g.calls == 1) return record();

  cudaCheck(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  Status recorded = record();
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  cudaGraphExec_t exec = nullptr;
  cudaError_t inst = (recorded.ok() && end == cudaSuccess)
                         ? cudaGraphInstantiate(&exec, graph, 0)
                         : cudaErrorStreamCaptureInvalidated;
  if (graph) cudaCheckLog(cudaGraphDestroy(graph));
  if (!recorded.ok() || end != cudaSuccess || inst != cudaSuccess) {
    (void)cudaGetLastError();  // capture errors are not sticky; clear the last error
    g.uncapturable = true;
    ++graph_fallbacks_;
    std::string why = !recorded.ok() ? recorded.ToString()
                                     : cudaGetErrorString(end != cudaSuccess ? end : inst);
    log::warn("CUDA graph capture of training step kind " + std::to_string(key) + " on " + name() +
              " failed (" + why + "); this step runs without a CUDA graph from now on (slower, same results)");
    return record();
  }
  g.exec = exec;
  ++graphs_captured_;
  cudaCheck(cudaGraphLaunch(g.exec, stream_));
  ++graph_replays_;
  return Status::Ok();
}

}  // namespace swept::cuda

namespace swept::trainer {

Result<int> cuda_device_count() {
  auto devices = cuda::visible_devices();
  if (!devices.ok()) return devices.status();
  return static_cast<int>(devices->size());
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaDeviceOptions& options) {
  auto b = cuda::CudaBackend::Create(options);
  if (!b.ok()) return b.status();
  return std::unique_ptr<Backend>(std::move(*b));
}

}  // namespace swept::trainer
