// The two networks swept-train trains, written once over trainer/backend.h:
//   mlp: 784 → H (sigmoid or relu) → [dropout] → 10
//   cnn: conv 5×5×32 'same' + relu → maxpool 2 → conv 5×5×64 'same' + relu →
//        maxpool 2 → dense 1024 + relu → [dropout] → dense 10
// followed by softmax cross-entropy (in the training loop).
//
// All parameters of a network live in ONE flat buffer (and their gradients in
// another of the same layout), described by a ParamLayout: one all-reduce or
// one checkpoint section covers them all, and the layout is the same on every
// backend and replica. Initialisation happens on the host from the seed
// (PyTorch's default: U(±1/sqrt(fan_in)) for weights and biases), so every
// replica and every backend starts from the same bytes.
//
// A Network is one replica's model on one Backend: its parameters,
// gradients, and the activations of a batch of up to max_batch samples.
// Thread safety: one thread at a time, like its Backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/backend.h"

namespace swept::trainer {

enum class ModelKind { kMlp, kCnn };

struct ModelConfig {
  ModelKind kind = ModelKind::kMlp;
  int hidden = 100;                                 // mlp only
  Activation hidden_activation = Activation::kSigmoid;  // mlp only (cnn: relu)
  float dropout = 0.0f;  // drop probability before the last layer, [0, 1)
};

std::string model_name(ModelKind kind);  // "mlp", "cnn"

struct ParamTensor {
  std::string name;          // "fc1.weight", "conv2.bias", ...
  std::vector<int> shape;    // as in backend.h's layouts
  size_t offset = 0;         // in floats, into the flat buffer
  size_t size = 0;           // product of shape
  int fan_in = 0;            // for initialisation
  bool is_weight = false;    // weight decay applies to weights, not biases
};

struct ParamLayout {
  std::vector<ParamTensor> tensors;  // in forward order
  size_t total = 0;                  // floats
};

ParamLayout param_layout(const ModelConfig& config);

// The initial parameters (layout order), deterministic in `seed`.
std::vector<float> initial_params(const ModelConfig& config, uint64_t seed);

class Network {
 public:
  // Allocates parameters, gradients and activations for batches of up to
  // max_batch samples on `backend` (which must outlive the Network).
  // Parameters start zeroed: the caller copies in initial_params() or a
  // checkpoint's. Errors: the backend's allocation errors.
  static Result<std::unique_ptr<Network>> create(const ModelConfig& config, Backend& backend, int max_batch);
  ~Network();

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  int max_batch() const { return max_batch_; }
  Backend& backend() { return backend_; }

  float* params() { return params_->f32(); }
  float* grads() { return grads_->f32(); }
  float* input() { return activations_.front()->f32(); }     // [max_batch][784]
  int32_t* labels() { return labels_->i32(); }               // [max_batch]
  float* logits() { return activations_.back()->f32(); }     // [max_batch][10]
  float* logits_grad() { return deltas_.back()->f32(); }     // [max_batch][10]

  // Forward pass of `batch` samples from input() to logits(). With training,
  // dropout draws its mask from scalars (step, seed) at global element
  // first_sample·features (first_sample: this replica's offset in the global
  // batch); without, dropout is the identity.
  Status forward(int batch, bool training, const StepScalars* scalars, int64_t first_sample);

  // Backward pass from logits_grad() to grads(). After each layer's parameter
  // gradients are written, calls on_grads(offset, count) with their range in
  // the flat layout (in reverse layer order), e.g. to all-reduce them while
  // earlier layers are still being differentiated. on_grads may be empty.
  Status backward(int batch, const std::function<Status(size_t, size_t)>& on_grads);

 private:
  struct Layer;
  Network(const ModelConfig& config, Backend& backend, int max_batch);

  ModelConfig config_;
  Backend& backend_;
  int max_batch_;
  ParamLayout layout_;
  std::vector<Layer> layers_;
  std::unique_ptr<Buffer> params_, grads_, labels_;
  // activations_[i] is layer i's input; activations_[i+1] its output.
  // deltas_[i] holds the gradient with respect to activations_[i].
  std::vector<std::unique_ptr<Buffer>> activations_, deltas_;
  std::unique_ptr<Buffer> dropout_mask_;
};

}  // namespace swept::trainer
