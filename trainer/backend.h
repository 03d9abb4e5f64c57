// Backend: the one compute interface of swept-train. The CPU backend
// (trainer/cpu/, OpenBLAS) and the CUDA backend (trainer/cuda/, cuBLAS +
// cuDNN) both implement it, so models, optimizers and the training loop are
// written once (trainer/model.h, trainer/train.h) on top of it.
//
// Shape of the interface (after llm.c: a handful of named operations):
//   - Memory: a Backend allocates Buffers in its own memory (host memory for
//     the CPU, device memory for CUDA). Operations take raw pointers INTO such
//     buffers ("device pointers"), so a flat parameter buffer can be sliced
//     per layer and all-reduced in one call. Passing a pointer that is not in
//     this backend's memory is a bug of the caller.
//   - Operations are enqueued in order on the backend's one stream and may run
//     asynchronously; only copy_to_host() and synchronize() wait. Errors of an
//     asynchronous operation may surface at a later call; every call returns a
//     Status, and a failed Status makes the backend unusable (the trainer then
//     stops the run with the message).
//   - Values that change from one training step to the next (learning rate,
//     Adam's bias corrections, the step counter that seeds dropout, where the
//     batch starts in the epoch's order) are NOT arguments: operations read
//     them from a StepScalars struct in backend memory, written by the loop
//     once per step. Every other argument is constant across the steps of a
//     run, so a backend may capture the step once and replay it (CUDA graphs,
//     see run_step()).
//   - Layouts: row-major; images NCHW; dense weights [out][in] (y = x·Wᵀ + b);
//     conv weights [out_ch][in_ch][kh][kw]; biases [out]. These are also the
//     checkpoint's layouts, so checkpoints move between backends.
//   - Parameter gradients are OVERWRITTEN by the backward operations (never
//     accumulated), so no zeroing pass is needed between steps.
//
// Thread safety: a Backend and its Buffers are used by one thread at a time
// (its replica's thread). Different Backends may be used concurrently. The
// trainer creates every Backend on the main thread and then drives replica r
// from thread r (replica 0 from the main thread), always the same thread per
// replica; a CUDA backend should still make its device current on entry.
// Exceptions never leave a Backend: every failure is a Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace swept::trainer {

// A block of a backend's memory, owned by the unique_ptr that allocate()
// returns; freed by its destructor (which never fails). Contents start zeroed.
class Buffer {
 public:
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  float* f32() const { return static_cast<float*>(data_); }
  int32_t* i32() const { return static_cast<int32_t*>(data_); }
  uint8_t* u8() const { return static_cast<uint8_t*>(data_); }

 protected:
  Buffer(void* data, size_t bytes) : data_(data), bytes_(bytes) {}

 private:
  void* data_;
  size_t bytes_;
};

// Per-step values, in backend memory (one struct per replica, written by the
// training loop with copy_from_host before each step). Plain data with a
// fixed layout shared by host and device code.
struct StepScalars {
  float lr = 0;                // learning rate of this step, schedule applied
  float adam_correction1 = 1;  // 1 - beta1^t  (t = step + 1)
  float adam_correction2 = 1;  // 1 - beta2^t
  float reserved = 0;
  uint64_t step = 0;           // global step index, 0-based: the dropout counter
  uint64_t seed = 0;           // the run's --seed: the dropout key
  int64_t batch_start = 0;     // index in the order array of this batch's first sample
};
static_assert(sizeof(StepScalars) == 40, "StepScalars is shared with device code");

enum class Activation : int32_t { kNone = 0, kRelu = 1, kSigmoid = 2 };

// A stride-1 2-D convolution with zero padding, NCHW. Output spatial size is
// (height + 2·pad_h - kernel_h + 1) × (width + 2·pad_w - kernel_w + 1).
// blocked_out: y (and, backward, y and dy) are in the backend's channel-
// blocked layout instead of NCHW; only where Backend::blocked_conv_output
// said yes, for a convolution whose output only a pooling reads.
struct Conv2dShape {
  int batch = 0, in_channels = 0, height = 0, width = 0;
  int out_channels = 0, kernel_h = 0, kernel_w = 0, pad_h = 0, pad_w = 0;
  bool blocked_out = false;
  int out_height() const { return height + 2 * pad_h - kernel_h + 1; }
  int out_width() const { return width + 2 * pad_w - kernel_w + 1; }
};

// Max pooling over window×window with stride `window`, NCHW; height and
// width must be multiples of window. Output is (height/window, width/window).
// blocked_in: x (and, backward, dx) are in the channel-blocked layout of the
// convolution before it (Conv2dShape::blocked_out); y and dy stay NCHW.
struct Pool2dShape {
  int batch = 0, channels = 0, height = 0, width = 0, window = 2;
  bool blocked_in = false;
};

enum class OptimizerKind : int32_t { kSgd = 0, kMomentum = 1, kAdam = 2 };

// Constant hyperparameters of the update rule (the per-step learning rate and
// Adam's corrections come from StepScalars). With g = grad + weight_decay·p:
//   sgd:       p -= lr·g
//   momentum:  v = momentum·v + g;  p -= lr·(nesterov ? g + momentum·v : v)
//              (state1 = v)
//   adam:      m = b1·m + (1-b1)·g;  v = b2·v + (1-b2)·g²;
//              p -= lr · (m / c1) / (sqrt(v / c2) + eps)
//              (state1 = m, state2 = v, c1/c2 = adam_correction1/2)
// These are PyTorch's SGD/Adam formulas (coupled L2 weight decay).
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  float momentum = 0.9f;
  bool nesterov = false;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu (2 threads)", "cuda:0 NVIDIA H100 80GB HBM3": for logs and errors.
  virtual std::string name() const = 0;

  // ---- memory -----------------------------------------------------------
  // Allocates `bytes` zeroed bytes. Errors: kResourceExhausted when the
  // memory (or the GPU memory budget) is short, naming how much was asked.
  virtual Result<std::unique_ptr<Buffer>> allocate(size_t bytes) = 0;
  // Copies `bytes` from host memory `src` to `dst`. Returns once `src` may be
  // reused (the copy itself may still be in flight in stream order).
  virtual Status copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  // Copies `bytes` from backend memory `src` to host memory `dst`, after all
  // earlier operations; returns when `dst` holds the data.
  virtual Status copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // Sets n floats at `x` to `value`.
  virtual Status fill(float* x, size_t n, float value) = 0;
  // Waits for every enqueued operation; reports any error they met.
  virtual Status synchronize() = 0;

  // ---- data ---------------------------------------------------------------
  // Builds an input batch from a data set held in backend memory:
  // for i in [0, count): s = order[scalars->batch_start + offset + i];
  //   x[i][j] = images[s·sample_size + j] / 255;  y[i] = labels[s].
  // `images` are the IDX bytes (uint8), `labels` int32.
  virtual Status gather_batch(const uint8_t* images, const int32_t* labels,
                              size_t sample_size, const int32_t* order,
                              const StepScalars* scalars, int64_t offset,
                              int count, float* x, int32_t* y) = 0;

  // ---- layers -------------------------------------------------------------
  // y[batch][out] = act(x[batch][in] · w[out][in]ᵀ + b[out]).
  virtual Status dense_forward(int batch, int in, int out, const float* x,
                               const float* w, const float* b, Activation act,
                               float* y) = 0;
  // Backward of dense_forward. `y` is its (activated) output; `dy` the
  // gradient w.r.t. y, which this call MAY OVERWRITE (with dy·act'(y)).
  // Writes dw[out][in], db[out] and, unless dx is null, dx[batch][in].
  virtual Status dense_backward(int batch, int in, int out, const float* x,
                                const float* w, const float* y, float* dy,
                                Activation act, float* dx, float* dw,
                                float* db) = 0;

  // y = act(conv(x, w) + b), shapes per Conv2dShape.
  virtual Status conv2d_forward(const Conv2dShape& shape, const float* x,
                                const float* w, const float* b, Activation act,
                                float* y) = 0;
  // Backward of conv2d_forward; same conventions as dense_backward (dy may be
  // overwritten; dx may be null for the first layer).
  virtual Status conv2d_backward(const Conv2dShape& shape, const float* x,
                                 const float* w, const float* y, float* dy,
                                 Activation act, float* dx, float* dw,
                                 float* db) = 0;

  virtual Status maxpool2d_forward(const Pool2dShape& shape, const float* x,
                                   float* y) = 0;
  // dx gets dy routed to the position of each window's maximum (the first
  // one in row-major order on ties; other positions 0). x and y are the
  // forward's input and output.
  virtual Status maxpool2d_backward(const Pool2dShape& shape, const float* x,
                                    const float* y, const float* dy,
                                    float* dx) = 0;
  // Optional fusion, for a pooling whose input x is a ReLU's output:
  // maxpool2d_backward, then dx[i] = x[i] > 0 ? dx[i] : 0 (the ReLU's
  // backward, with x as its output), so that the layer before can run its
  // backward with Activation::kNone and skip a pass over its output. The
  // same bits as the two steps apart. A backend that does not fuse returns
  // false from fuses_pool_relu_backward and is never asked.
  virtual bool fuses_pool_relu_backward() const { return false; }
  virtual Status maxpool2d_relu_backward(const Pool2dShape& shape, const float* x,
                                         const float* y, const float* dy, float* dx) {
    (void)shape, (void)x, (void)y, (void)dy, (void)dx;
    return Status::Internal("maxpool2d_relu_backward: this backend does not fuse it");
  }

  // Optional: whether this convolution (shape.batch ignored) with this
  // activation may write its output in the backend's channel-blocked layout
  // for a 2×2 pooling after it (Conv2dShape::blocked_out with
  // Pool2dShape::blocked_in): the layout the backend computes in, so that no
  // reorder to NCHW and back is needed. Only the two calls see that tensor.
  virtual bool blocked_conv_output(const Conv2dShape& shape, Activation act) {
    (void)shape, (void)act;
    return false;
  }

  // Inverted dropout on n = batch·features values, keep probability 1 - p:
  //   keep(i) = dropout_uniform(scalars->seed, scalars->step, first_element + i) >= p
  //   mask[i] = keep ? 1/(1-p) : 0;  y[i] = x[i]·mask[i]
  // (dropout_uniform in trainer/counter_rng.h: the same mask on every backend;
  // first_element = the replica's offset in the global batch × features, so
  // the mask does not depend on the number of replicas.)
  virtual Status dropout_forward(size_t n, float p, int64_t first_element,
                                 const StepScalars* scalars, const float* x,
                                 float* mask, float* y) = 0;
  // dx[i] = dy[i]·mask[i]. dx may equal dy.
  virtual Status dropout_backward(size_t n, const float* mask, const float* dy,
                                  float* dx) = 0;

  // Softmax cross-entropy over logits[batch][classes] with int32 labels.
  // Adds Σ loss to stats[0] and the count of argmax == label to stats[1]
  // (stats: 2 floats of backend memory, accumulated across calls). Unless
  // dlogits is null, writes dlogits = (softmax - onehot) · grad_scale.
  virtual Status softmax_cross_entropy(int batch, int classes,
                                       const float* logits,
                                       const int32_t* labels, float grad_scale,
                                       float* dlogits, float* stats) = 0;

  // ---- optimizer ----------------------------------------------------------
  // One update of n parameters per OptimizerConfig. state1/state2 hold n
  // floats each when the rule needs them (may be null otherwise).
  virtual Status optimizer_update(const OptimizerConfig& config,
                                  float weight_decay, size_t n, float* param,
                                  const float* grad, float* state1,
                                  float* state2,
                                  const StepScalars* scalars) = 0;

  // ---- step capture -------------------------------------------------------
  // Runs `record`, which enqueues one training step's operations on this
  // backend (all with arguments constant across steps). A backend may capture
  // the operations of a given `key` and replay them on later calls instead of
  // calling `record` again (CUDA graphs); the default just calls it.
  virtual Status run_step(uint64_t key, const std::function<Status()>& record) {
    (void)key;
    return record();
  }
};

// ---- the CPU backend (trainer/cpu/) -------------------------------------------
struct CpuBackendOptions {
  // Threads of this backend's own pool; each operation is split into that
  // many tasks, each calling OpenBLAS single-threaded (the factory sets
  // OpenBLAS's process-wide thread count to 1). With R replicas, give each
  // backend about --threads / R.
  int threads = 1;
  // The fast float convolutions: several input channels through oneDNN's
  // own primitives, few input channels through the direct kernel
  // (cpu/conv_direct.cpp). false keeps every convolution on im2col + sgemm,
  // whose arithmetic the CUDA emulation mirrors: its tests compare against that.
  bool onednn_convolutions = true;
};
std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options);

// ---- the CUDA backend (trainer/cuda/, built only with CUDA) --------------------
// trainer/cuda/CMakeLists.txt defines SWEPT_HAVE_CUDA=1 on swept_trainer and
// links the implementation; a build without CUDA never references these.
struct CudaDeviceOptions {
  int device = 0;  // ordinal among the visible devices (CUDA_VISIBLE_DEVICES)
  // Cap on all of this process's allocations on `device`, as a fraction of
  // its total memory, shared by every Backend on that device; 0: no cap
  // (allocate only what is needed). Validated by the caller to be in [0, 1].
  double memory_fraction = 0.0;
};

#if defined(SWEPT_HAVE_CUDA)
// Number of visible CUDA devices. Errors: kUnavailable (no driver, no device)
// with a message saying so; the trainer maps it to exit code 4.
Result<int> cuda_device_count();
// What the CUDA backend is built on, for --version: the CUDA runtime and the
// NVIDIA driver it needs ("CUDA 13.0 runtime linked statically, needs NVIDIA
// driver 580 or newer"), or "CUDA (emulated) ..." in an emulated build.
std::string cuda_build_description();
// A backend on one device. Errors: kNotFound (device index out of range) or
// kUnavailable (no driver or GPU): exit 4; kMissingDependency (cuBLAS, cuDNN
// or one of its sub-libraries missing): exit 8; kResourceExhausted (budget
// too small): exit 5.
Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaDeviceOptions& options);
#endif

}  // namespace swept::trainer
