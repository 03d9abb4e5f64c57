// The networks as lists of layers over backend operations (see model.h).
// Each layer knows its per-sample input and output sizes; buffers are sized
// for max_batch; the forward pass walks the list, the backward pass walks it
// back, handing each parameterised layer's gradient range to on_grads.
#include "trainer/model.h"

#include <cmath>
#include <random>

#include "trainer/counter_rng.h"
#include "trainer/data.h"

namespace swept::trainer {

std::string model_name(ModelKind kind) { return kind == ModelKind::kMlp ? "mlp" : "cnn"; }

namespace {

enum class LayerKind { kDense, kConv, kPool, kDropout };

struct LayerSpec {
  LayerKind kind;
  std::string name;
  // Dense: in, out. Conv: in channels, out channels, side (square images). Pool: channels, side.
  int a = 0, b = 0, side = 0;
  Activation act = Activation::kNone;
};

std::vector<LayerSpec> layer_specs(const ModelConfig& c) {
  if (c.kind == ModelKind::kMlp) {
    std::vector<LayerSpec> s = {{LayerKind::kDense, "fc1", kImageSize, c.hidden, 0, c.hidden_activation}};
    if (c.dropout > 0) s.push_back({LayerKind::kDropout, "dropout", c.hidden, 0, 0, Activation::kNone});
    s.push_back({LayerKind::kDense, "fc2", c.hidden, kClasses, 0, Activation::kNone});
    return s;
  }
  std::vector<LayerSpec> s = {
      {LayerKind::kConv, "conv1", 1, 32, 28, Activation::kRelu},
      {LayerKind::kPool, "pool1", 32, 0, 28, Activation::kNone},
      {LayerKind::kConv, "conv2", 32, 64, 14, Activation::kRelu},
      {LayerKind::kPool, "pool2", 64, 0, 14, Activation::kNone},
      {LayerKind::kDense, "fc1", 7 * 7 * 64, 1024, 0, Activation::kRelu},
  };
  if (c.dropout > 0) s.push_back({LayerKind::kDropout, "dropout", 1024, 0, 0, Activation::kNone});
  s.push_back({LayerKind::kDense, "fc2", 1024, kClasses, 0, Activation::kNone});
  return s;
}

constexpr int kKernel = 5, kPad = 2, kPool = 2;

}  // namespace

struct Network::Layer {
  LayerSpec spec;
  size_t in_size = 0, out_size = 0;  // floats per sample
  int weight = -1, bias = -1;        // indices into layout tensors
  // A convolution whose output only the pooling after it reads, in the
  // backend's channel-blocked layout (Backend::blocked_conv_output); set on
  // both layers.
  bool blocked = false;

  Conv2dShape conv(int batch) const {
    Conv2dShape s;
    s.batch = batch;
    s.in_channels = spec.a;
    s.height = s.width = spec.side;
    s.out_channels = spec.b;
    s.kernel_h = s.kernel_w = kKernel;
    s.pad_h = s.pad_w = kPad;
    s.blocked_out = blocked;
    return s;
  }
  Pool2dShape pool(int batch) const {
    Pool2dShape s;
    s.batch = batch;
    s.channels = spec.a;
    s.height = s.width = spec.side;
    s.window = kPool;
    s.blocked_in = blocked;
    return s;
  }
};

ParamLayout param_layout(const ModelConfig& config) {
  ParamLayout layout;
  auto add = [&](const std::string& name, std::vector<int> shape, int fan_in, bool is_weight) {
    ParamTensor t;
    t.name = name;
    t.shape = std::move(shape);
    t.size = 1;
    for (int d : t.shape) t.size *= static_cast<size_t>(d);
    t.offset = layout.total;
    t.fan_in = fan_in;
    t.is_weight = is_weight;
    layout.total += t.size;
    layout.tensors.push_back(std::move(t));
  };
  for (const LayerSpec& s : layer_specs(config)) {
    if (s.kind == LayerKind::kDense) {
      add(s.name + ".weight", {s.b, s.a}, s.a, true);
      add(s.name + ".bias", {s.b}, s.a, false);
    } else if (s.kind == LayerKind::kConv) {
      add(s.name + ".weight", {s.b, s.a, kKernel, kKernel}, s.a * kKernel * kKernel, true);
      add(s.name + ".bias", {s.b}, s.a * kKernel * kKernel, false);
    }
  }
  return layout;
}

std::vector<float> initial_params(const ModelConfig& config, uint64_t seed) {
  const ParamLayout layout = param_layout(config);
  std::vector<float> params(layout.total);
  std::mt19937_64 gen(mix64(seed ^ 0x1417));
  for (const ParamTensor& t : layout.tensors) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(t.fan_in));
    for (size_t i = 0; i < t.size; ++i) {
      // 53 random bits → [0, 1), portable (no std:: distribution).
      const double u = static_cast<double>(gen() >> 11) * (1.0 / 9007199254740992.0);
      params[t.offset + i] = static_cast<float>((2 * u - 1) * bound);
    }
  }
  return params;
}

Network::Network(const ModelConfig& config, Backend& backend, int max_batch)
    : config_(config), backend_(backend), max_batch_(max_batch), layout_(param_layout(config)) {}

Network::~Network() = default;

Result<std::unique_ptr<Network>> Network::create(const ModelConfig& config, Backend& backend, int max_batch) {
  std::unique_ptr<Network> net(new Network(config, backend, max_batch));
  size_t tensor = 0;
  size_t size = kImageSize;
  for (const LayerSpec& s : layer_specs(config)) {
    Layer layer;
    layer.spec = s;
    layer.in_size = size;
    switch (s.kind) {
      case LayerKind::kDense:
        layer.out_size = static_cast<size_t>(s.b);
        break;
      case LayerKind::kConv:
        layer.out_size = static_cast<size_t>(s.b) * s.side * s.side;
        break;
      case LayerKind::kPool:
        layer.out_size = static_cast<size_t>(s.a) * (s.side / kPool) * (s.side / kPool);
        break;
      case LayerKind::kDropout:
        layer.out_size = size;
        break;
    }
    if (s.kind == LayerKind::kDense || s.kind == LayerKind::kConv) {
      layer.weight = static_cast<int>(tensor++);
      layer.bias = static_cast<int>(tensor++);
    }
    size = layer.out_size;
    net->layers_.push_back(layer);
  }
  // Each convolution followed by a pooling (2×2, kPool): in the layout the
  // backend computes in, when it offers that (no reorder to NCHW and back).
  for (size_t i = 0; i + 1 < net->layers_.size(); ++i) {
    Layer& conv = net->layers_[i];
    Layer& pool = net->layers_[i + 1];
    if (conv.spec.kind != LayerKind::kConv || pool.spec.kind != LayerKind::kPool) continue;
    conv.blocked = pool.blocked = backend.blocked_conv_output(conv.conv(max_batch), conv.spec.act);
  }
  auto alloc = [&](size_t bytes, std::unique_ptr<Buffer>& out) -> Status {
    Result<std::unique_ptr<Buffer>> b = backend.allocate(bytes);
    if (!b.ok()) return b.status();
    out = std::move(*b);
    return Status::Ok();
  };
  const size_t batch = static_cast<size_t>(max_batch);
  SWEPT_RETURN_IF_ERROR(alloc(net->layout_.total * sizeof(float), net->params_));
  SWEPT_RETURN_IF_ERROR(alloc(net->layout_.total * sizeof(float), net->grads_));
  SWEPT_RETURN_IF_ERROR(alloc(batch * sizeof(int32_t), net->labels_));
  net->activations_.resize(net->layers_.size() + 1);
  net->deltas_.resize(net->layers_.size() + 1);
  for (size_t i = 0; i <= net->layers_.size(); ++i) {
    const size_t per_sample = i < net->layers_.size() ? net->layers_[i].in_size : net->layers_.back().out_size;
    SWEPT_RETURN_IF_ERROR(alloc(batch * per_sample * sizeof(float), net->activations_[i]));
    // No layer needs the gradient with respect to the images.
    if (i > 0) SWEPT_RETURN_IF_ERROR(alloc(batch * per_sample * sizeof(float), net->deltas_[i]));
  }
  for (const Layer& l : net->layers_)
    if (l.spec.kind == LayerKind::kDropout)
      SWEPT_RETURN_IF_ERROR(alloc(batch * l.out_size * sizeof(float), net->dropout_mask_));
  return net;
}

Status Network::forward(int batch, bool training, const StepScalars* scalars, int64_t first_sample) {
  if (batch < 1 || batch > max_batch_)
    return Status::Internal("forward: batch " + std::to_string(batch) + " outside [1, " +
                            std::to_string(max_batch_) + "]");
  const float* p = params();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    const float* x = activations_[i]->f32();
    float* y = activations_[i + 1]->f32();
    switch (l.spec.kind) {
      case LayerKind::kDense: {
        const ParamTensor& w = layout_.tensors[l.weight];
        const ParamTensor& b = layout_.tensors[l.bias];
        SWEPT_RETURN_IF_ERROR(backend_.dense_forward(batch, l.spec.a, l.spec.b, x, p + w.offset, p + b.offset,
                                                     l.spec.act, y));
        break;
      }
      case LayerKind::kConv: {
        const ParamTensor& w = layout_.tensors[l.weight];
        const ParamTensor& b = layout_.tensors[l.bias];
        SWEPT_RETURN_IF_ERROR(backend_.conv2d_forward(l.conv(batch), x, p + w.offset, p + b.offset, l.spec.act, y));
        break;
      }
      case LayerKind::kPool:
        SWEPT_RETURN_IF_ERROR(backend_.maxpool2d_forward(l.pool(batch), x, y));
        break;
      case LayerKind::kDropout: {
        const float drop = training ? config_.dropout : 0.0f;
        SWEPT_RETURN_IF_ERROR(backend_.dropout_forward(static_cast<size_t>(batch) * l.in_size, drop,
                                                       first_sample * static_cast<int64_t>(l.in_size), scalars, x,
                                                       dropout_mask_->f32(), y));
        break;
      }
    }
  }
  return Status::Ok();
}

Status Network::backward(int batch, const std::function<Status(size_t, size_t)>& on_grads) {
  const float* p = params();
  float* g = grads();
  // Set when the layer after this one (a pooling) has already applied this
  // layer's ReLU backward to dy (Backend::maxpool2d_relu_backward).
  bool dy_has_act = false;
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& l = layers_[i];
    const float* x = activations_[i]->f32();
    const float* y = activations_[i + 1]->f32();
    float* dy = deltas_[i + 1]->f32();
    float* dx = i == 0 ? nullptr : deltas_[i]->f32();
    const Activation act = dy_has_act ? Activation::kNone : l.spec.act;
    dy_has_act = false;
    switch (l.spec.kind) {
      case LayerKind::kDense:
      case LayerKind::kConv: {
        const ParamTensor& w = layout_.tensors[l.weight];
        const ParamTensor& b = layout_.tensors[l.bias];
        if (l.spec.kind == LayerKind::kDense)
          SWEPT_RETURN_IF_ERROR(backend_.dense_backward(batch, l.spec.a, l.spec.b, x, p + w.offset, y, dy, act, dx,
                                                        g + w.offset, g + b.offset));
        else
          SWEPT_RETURN_IF_ERROR(backend_.conv2d_backward(l.conv(batch), x, p + w.offset, y, dy, act, dx,
                                                         g + w.offset, g + b.offset));
        // Weight and bias are adjacent in the layout.
        if (on_grads) SWEPT_RETURN_IF_ERROR(on_grads(w.offset, w.size + b.size));
        break;
      }
      case LayerKind::kPool:
        if (dx == nullptr) break;
        // A pooling of a ReLU layer's output: the backend may apply that
        // ReLU's backward in the same pass (it reads x anyway), and the layer
        // then skips it: one pass less over the largest activations.
        if (i > 0 && layers_[i - 1].spec.act == Activation::kRelu && backend_.fuses_pool_relu_backward()) {
          SWEPT_RETURN_IF_ERROR(backend_.maxpool2d_relu_backward(l.pool(batch), x, y, dy, dx));
          dy_has_act = true;
        } else {
          SWEPT_RETURN_IF_ERROR(backend_.maxpool2d_backward(l.pool(batch), x, y, dy, dx));
        }
        break;
      case LayerKind::kDropout:
        if (dx != nullptr)
          SWEPT_RETURN_IF_ERROR(
              backend_.dropout_backward(static_cast<size_t>(batch) * l.in_size, dropout_mask_->f32(), dy, dx));
        break;
    }
  }
  return Status::Ok();
}

}  // namespace swept::trainer
