// The training loop (see train.h). Reads top to bottom as: set up replicas,
// then per step { per-step scalars → gather → forward → loss → backward
// (+ all-reduce) → update }, with metrics, validation and checkpoints at
// fixed step boundaries so that a resumed run folds its numbers at the same
// points as an uninterrupted one and prints the same values.
#include "common/mutex.h"
#include "trainer/train.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/exit_codes.h"
#include "common/log.h"
#include "trainer/cpu/kernel_choice.h"

namespace swept::trainer {
namespace {

std::string optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kMomentum: return "momentum";
    case OptimizerKind::kAdam: return "adam";
  }
  return "?";
}

int optimizer_states(OptimizerKind k) {
  return k == OptimizerKind::kAdam ? 2 : k == OptimizerKind::kMomentum ? 1 : 0;
}

Result<std::unique_ptr<Buffer>> upload(Backend& b, const void* data, size_t bytes) {
  Result<std::unique_ptr<Buffer>> buf = b.allocate(std::max<size_t>(bytes, 4));
  if (!buf.ok()) return buf.status();
  if (data != nullptr && bytes > 0) SWEPT_RETURN_IF_ERROR(b.copy_from_host((*buf)->data(), data, bytes));
  return buf;
}

}  // namespace

// Runs fn(r) for every replica r on replica r's own thread (replica 0 on the
// caller's), so that a backend always sees the same thread.
class Trainer::ReplicaThreads {
 public:
  ReplicaThreads(int replicas, AllReduce* allreduce) : allreduce_(allreduce), results_(replicas) {
    for (int r = 1; r < replicas; ++r) threads_.emplace_back([this, r] { loop(r); });
  }
  ~ReplicaThreads() {
    {
      MutexLock lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  Status run(const std::function<Status(int)>& fn) {
    if (threads_.empty()) return fn(0);
    {
      MutexLock lock(mutex_);
      job_ = &fn;
      pending_ = static_cast<int>(threads_.size());
      ++generation_;
    }
    wake_.notify_all();
    results_[0] = fn(0);
    if (!results_[0].ok()) allreduce_->abort(results_[0]);
    MutexLock lock(mutex_);
    while (pending_ != 0) done_.wait(lock);
    job_ = nullptr;
    for (const Status& s : results_)
      if (!s.ok()) return s;
    return Status::Ok();
  }

 private:
  void loop(int r) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<Status(int)>* job;
      {
        MutexLock lock(mutex_);
        while (!stopping_ && generation_ == seen) wake_.wait(lock);
        if (stopping_) return;
        seen = generation_;
        job = job_;
      }
      Status s = (*job)(r);
      if (!s.ok()) allreduce_->abort(s);
      {
        MutexLock lock(mutex_);
        results_[r] = std::move(s);
        --pending_;
      }
      done_.notify_one();
    }
  }

  AllReduce* allreduce_;
  std::vector<std::thread> threads_;
  std::vector<Status> results_;
  Mutex mutex_;
  std::condition_variable_any wake_, done_;
  const std::function<Status(int)>* job_ SWEPT_GUARDED_BY(mutex_) = nullptr;
  int pending_ SWEPT_GUARDED_BY(mutex_) = 0;
  uint64_t generation_ SWEPT_GUARDED_BY(mutex_) = 0;
  bool stopping_ SWEPT_GUARDED_BY(mutex_) = false;
};

struct Trainer::Replica {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Network> net;
  std::unique_ptr<Buffer> train_images, train_labels, order, val_order, scalars, stats;
  std::unique_ptr<Buffer> state1, state2;
  // Replica 0 only: evaluation data and its scalars/stats.
  std::unique_ptr<Buffer> test_images, test_labels, test_order, eval_scalars, eval_stats;
  uint64_t order_version = 0;
};

Trainer::~Trainer() {
  threads_.reset();  // threads first: they reference replicas
}

int64_t Trainer::epoch() const { return epoch_; }

int64_t Trainer::steps_to_epochs_end() const {
  if (epoch_ >= config_.epochs) return 0;
  const int64_t left_in_epoch = (static_cast<int64_t>(split_.train_count) - epoch_position_) / config_.batch_size;
  return left_in_epoch + (config_.epochs - epoch_ - 1) * steps_per_epoch_;
}

// Moves the data position past one step of batch_size samples: an epoch ends
// when fewer than a batch of its order is left (those few are skipped, as
// steps_per_epoch = train_count / batch_size always did).
void Trainer::advance_epoch_position() {
  epoch_position_ += config_.batch_size;
  if (epoch_position_ + config_.batch_size > static_cast<int64_t>(split_.train_count)) {
    ++epoch_;
    epoch_position_ = 0;
  }
}

std::vector<std::pair<std::string, std::string>> Trainer::hyperparameters() const {
  // Floats as the shortest text that reads back as the same float (0.9, not
  // 0.8999999761581421): these are for people to read in the resume line.
  auto f = [](float v) {
    char text[32];
    for (int digits = 1; digits <= 9; ++digits) {
      std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(v));
      if (std::strtof(text, nullptr) == v) break;
    }
    return std::string(text);
  };
  auto d = [](double v) { return nlohmann::json(v).dump(); };
  const OptimizerConfig& o = config_.optimizer;
  return {{"lr", d(config_.lr)},
          {"momentum", f(o.momentum)},
          {"nesterov", o.nesterov ? "true" : "false"},
          {"beta1", f(o.beta1)},
          {"beta2", f(o.beta2)},
          {"epsilon", f(o.epsilon)},
          {"weight_decay", d(config_.weight_decay)},
          {"dropout", f(config_.model.dropout)},
          {"batch_size", std::to_string(config_.batch_size)},
          {"warmup_steps", std::to_string(config_.warmup_steps)},
          {"decay_steps", std::to_string(config_.decay_steps)},
          {"decay_rate", d(config_.decay_rate)},
          {"epochs", std::to_string(config_.epochs)},
          {"max_steps", std::to_string(config_.max_steps)}};
}

double Trainer::current_lr() const { return lr_at(step_); }

double Trainer::lr_at(int64_t step) const {
  ScheduleConfig s;
  s.kind = config_.schedule;
  s.lr = scaled_lr(config_.lr, config_.scale_lr, config_.batch_size, config_.base_batch);
  s.warmup_steps = config_.warmup_steps;
  s.decay_steps = config_.decay_steps > 0 ? config_.decay_steps : steps_per_epoch_;
  s.decay_rate = config_.decay_rate;
  s.total_steps = total_steps_;
  return learning_rate(s, step);
}

Result<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& config, const MnistData& data,
                                                 std::vector<std::unique_ptr<Backend>> backends,
                                                 std::unique_ptr<AllReduce> allreduce,
                                                 std::unique_ptr<CrossProcess> across, int ps_workers) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->config_ = config;
  t->split_ = split_validation(data.train.count(), config.val_fraction);
  t->layout_ = param_layout(config.model);
  const int n = static_cast<int>(backends.size());
  if (n < 1 || allreduce == nullptr || allreduce->world_size() != n)
    return Status::Internal("Trainer::create: " + std::to_string(n) + " backends for an all-reduce over " +
                            std::to_string(allreduce ? allreduce->world_size() : 0));
  t->across_ = std::move(across);
  if (ps_workers > 0 && (n != 1 || t->across_))
    return Status::Internal("Trainer::create: a parameter-server worker has one replica and no all-reduce peers");
  const int all = ps_workers > 0 ? ps_workers : n * t->processes();
  t->first_replica_ = t->process_rank() * n;
  if (config.batch_size % all != 0)
    return Status::InvalidArgument(
        "--batch_size=" + std::to_string(config.batch_size) + " is not divisible by the " + std::to_string(all) +
        " replicas" +
        (ps_workers > 0 ? std::string(" (one per worker)") : t->processes() > 1 ? " (" + std::to_string(n) + " in each of WORLD_SIZE=" + std::to_string(t->processes()) +
                                  " processes)"
                            : std::string()) +
        ": each replica takes an equal share of the global batch");
  t->shard_ = config.batch_size / all;
  t->steps_per_epoch_ = static_cast<int64_t>(t->split_.train_count) / config.batch_size;
  if (t->steps_per_epoch_ < 1)
    return Status::InvalidArgument("--batch_size=" + std::to_string(config.batch_size) + " is larger than the " +
                                   std::to_string(t->split_.train_count) +
                                   " training samples left after the validation split: lower it");
  t->total_steps_ = config.max_steps > 0 ? config.max_steps : t->steps_per_epoch_ * config.epochs;
  t->test_count_ = static_cast<int64_t>(data.test.count());
  t->allreduce_ = std::move(allreduce);

  const std::vector<float> init = initial_params(config.model, config.seed);
  std::vector<int32_t> val_order(t->split_.val_count), test_order(data.test.count());
  for (size_t i = 0; i < val_order.size(); ++i) val_order[i] = static_cast<int32_t>(t->split_.train_count + i);
  for (size_t i = 0; i < test_order.size(); ++i) test_order[i] = static_cast<int32_t>(i);
  const int states = optimizer_states(config.optimizer.kind);

  for (int r = 0; r < n; ++r) {
    auto rep = std::make_unique<Replica>();
    rep->backend = std::move(backends[r]);
    Backend& b = *rep->backend;
    Result<std::unique_ptr<Network>> net = Network::create(config.model, b, t->shard_);
    if (!net.ok()) return net.status();
    rep->net = std::move(*net);
    SWEPT_RETURN_IF_ERROR(b.copy_from_host(rep->net->params(), init.data(), init.size() * sizeof(float)));
    auto put = [&](std::unique_ptr<Buffer>& dst, const void* src, size_t bytes) -> Status {
      Result<std::unique_ptr<Buffer>> buf = upload(b, src, bytes);
      if (!buf.ok()) return buf.status();
      dst = std::move(*buf);
      return Status::Ok();
    };
    SWEPT_RETURN_IF_ERROR(put(rep->train_images, data.train.images.data(), data.train.images.size()));
    SWEPT_RETURN_IF_ERROR(put(rep->train_labels, data.train.labels.data(), data.train.labels.size() * 4));
    SWEPT_RETURN_IF_ERROR(put(rep->order, nullptr, t->split_.train_count * 4));
    SWEPT_RETURN_IF_ERROR(put(rep->scalars, nullptr, sizeof(StepScalars)));
    SWEPT_RETURN_IF_ERROR(put(rep->stats, nullptr, 2 * sizeof(float)));
    if (states >= 1) SWEPT_RETURN_IF_ERROR(put(rep->state1, nullptr, init.size() * sizeof(float)));
    if (states >= 2) SWEPT_RETURN_IF_ERROR(put(rep->state2, nullptr, init.size() * sizeof(float)));
    if (r == 0) {
      SWEPT_RETURN_IF_ERROR(put(rep->val_order, val_order.data(), val_order.size() * 4));
      SWEPT_RETURN_IF_ERROR(put(rep->test_images, data.test.images.data(), data.test.images.size()));
      SWEPT_RETURN_IF_ERROR(put(rep->test_labels, data.test.labels.data(), data.test.labels.size() * 4));
      SWEPT_RETURN_IF_ERROR(put(rep->test_order, test_order.data(), test_order.size() * 4));
      SWEPT_RETURN_IF_ERROR(put(rep->eval_scalars, nullptr, sizeof(StepScalars)));
      SWEPT_RETURN_IF_ERROR(put(rep->eval_stats, nullptr, 2 * sizeof(float)));
    }
    SWEPT_RETURN_IF_ERROR(b.synchronize());
    t->replicas_.push_back(std::move(rep));
  }
  t->threads_ = std::make_unique<ReplicaThreads>(n, t->allreduce_.get());
  return t;
}

Status Trainer::run_on_replicas(const std::function<Status(int)>& fn) { return threads_->run(fn); }

Status Trainer::upload_order(Replica& rep) {
  if (rep.order_version == order_version_) return Status::Ok();
  SWEPT_RETURN_IF_ERROR(rep.backend->copy_from_host(rep.order->data(), order_.data(), order_.size() * 4));
  rep.order_version = order_version_;
  return Status::Ok();
}

Status Trainer::replica_step(int r) {
  Replica& rep = *replicas_[r];
  Backend& b = *rep.backend;
  Network& net = *rep.net;
  SWEPT_RETURN_IF_ERROR(upload_order(rep));
  StepScalars s;
  s.lr = static_cast<float>(current_lr());
  const double t = static_cast<double>(step_ + 1);
  s.adam_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.optimizer.beta1), t));
  s.adam_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(config_.optimizer.beta2), t));
  s.step = static_cast<uint64_t>(step_);
  s.seed = config_.seed;
  s.batch_start = epoch_position_;
  SWEPT_RETURN_IF_ERROR(b.copy_from_host(rep.scalars->data(), &s, sizeof s));

  const StepScalars* scalars = static_cast<const StepScalars*>(rep.scalars->data());
  const int64_t first = static_cast<int64_t>(first_replica_ + r) * shard_;
  const bool reduce = replicas() > 1 || processes() > 1;
  const auto record = [&]() -> Status {
    SWEPT_RETURN_IF_ERROR(b.gather_batch(rep.train_images->u8(), rep.train_labels->i32(), kImageSize,
                                         rep.order->i32(), scalars, first, shard_, net.input(), net.labels()));
    SWEPT_RETURN_IF_ERROR(net.forward(shard_, true, scalars, first));
    SWEPT_RETURN_IF_ERROR(b.softmax_cross_entropy(shard_, kClasses, net.logits(), net.labels(),
                                                  1.0f / static_cast<float>(shard_), net.logits_grad(),
                                                  rep.stats->f32()));
    // Per layer as its gradients appear, except for CPU replicas of several
    // processes: there each call is a round trip over the network (about
    // 1 ms between two processes on this 2-core machine under load, against
    // 0.5 ms for a whole MLP step), and nothing overlaps a CPU call anyway
    // (it blocks the replica's thread), so one call per step for the whole
    // gradient costs one round trip instead of one per layer.
    const bool per_layer = reduce && !(processes() > 1 && config_.device == DeviceKind::kCpu);
    std::function<Status(size_t, size_t)> on_grads;
    if (per_layer) {
      on_grads = [&](size_t offset, size_t count) {
        return allreduce_->all_reduce_mean(r, net.grads() + offset, count);
      };
    }
    SWEPT_RETURN_IF_ERROR(net.backward(shard_, on_grads));
    if (reduce && !per_layer) SWEPT_RETURN_IF_ERROR(allreduce_->all_reduce_mean(r, net.grads(), layout_.total));
    float* s1 = rep.state1 ? rep.state1->f32() : nullptr;
    float* s2 = rep.state2 ? rep.state2->f32() : nullptr;
    for (const ParamTensor& p : layout_.tensors) {
      SWEPT_RETURN_IF_ERROR(b.optimizer_update(
          config_.optimizer, p.is_weight ? static_cast<float>(config_.weight_decay) : 0.0f, p.size,
          net.params() + p.offset, net.grads() + p.offset, s1 ? s1 + p.offset : nullptr,
          s2 ? s2 + p.offset : nullptr, scalars));
    }
    return Status::Ok();
  };
  return b.run_step(/*key=*/1, record);
}

Status Trainer::train_step() {
  const int64_t e = epoch();
  if (order_epoch_ != e) {
    order_ = epoch_order(split_.train_count, config_.seed, e);
    order_epoch_ = e;
    ++order_version_;
  }
  SWEPT_RETURN_IF_ERROR(run_on_replicas([this](int r) { return replica_step(r); }));
  ++step_;
  advance_epoch_position();
  window_.samples += config_.batch_size;
  window_.steps += 1;
  return Status::Ok();
}

Status Trainer::ps_gradient(int64_t step, int shard, const std::vector<float>& params, std::vector<float>& grad) {
  if (replicas_.size() != 1 || across_ || params.size() != layout_.total)
    return Status::Internal("Trainer::ps_gradient: not a parameter-server worker's trainer");
  step_ = step;
  const int64_t e = epoch();
  if (order_epoch_ != e) {
    order_ = epoch_order(split_.train_count, config_.seed, e);
    order_epoch_ = e;
    ++order_version_;
  }
  Replica& rep = *replicas_[0];
  Backend& b = *rep.backend;
  Network& net = *rep.net;
  SWEPT_RETURN_IF_ERROR(upload_order(rep));
  SWEPT_RETURN_IF_ERROR(b.copy_from_host(net.params(), params.data(), params.size() * sizeof(float)));
  StepScalars s;  // replica_step's, less the update's fields
  s.step = static_cast<uint64_t>(step);
  s.seed = config_.seed;
  s.batch_start = (step % steps_per_epoch_) * config_.batch_size;
  SWEPT_RETURN_IF_ERROR(b.copy_from_host(rep.scalars->data(), &s, sizeof s));
  const StepScalars* scalars = static_cast<const StepScalars*>(rep.scalars->data());
  const int64_t first = static_cast<int64_t>(shard) * shard_;
  SWEPT_RETURN_IF_ERROR(b.gather_batch(rep.train_images->u8(), rep.train_labels->i32(), kImageSize, rep.order->i32(),
                                       scalars, first, shard_, net.input(), net.labels()));
  SWEPT_RETURN_IF_ERROR(net.forward(shard_, true, scalars, first));
  SWEPT_RETURN_IF_ERROR(b.softmax_cross_entropy(shard_, kClasses, net.logits(), net.labels(),
                                                1.0f / static_cast<float>(shard_), net.logits_grad(),
                                                rep.stats->f32()));
  SWEPT_RETURN_IF_ERROR(net.backward(shard_, {}));
  grad.resize(layout_.total);
  SWEPT_RETURN_IF_ERROR(b.copy_to_host(grad.data(), net.grads(), grad.size() * sizeof(float)));
  window_.samples += shard_;  // this worker's own batches only
  window_.steps += 1;
  return Status::Ok();
}

Status Trainer::set_params(const std::vector<float>& params) {
  if (params.size() != layout_.total) return Status::Internal("Trainer::set_params: wrong size");
  return run_on_replicas([&](int r) {
    return replicas_[r]->backend->copy_from_host(replicas_[r]->net->params(), params.data(),
                                                 params.size() * sizeof(float));
  });
}

Result<Window> Trainer::fold_window(bool take) {
  std::vector<float> device_stats(2 * replicas_.size());
  SWEPT_RETURN_IF_ERROR(run_on_replicas([&](int r) -> Status {
    Replica& rep = *replicas_[r];
    SWEPT_RETURN_IF_ERROR(rep.backend->copy_to_host(&device_stats[2 * r], rep.stats->data(), 2 * sizeof(float)));
    return rep.backend->fill(rep.stats->f32(), 2, 0.0f);
  }));
  if (across_) {
    // Every process's replicas, in global replica order: the sums below then
    // add the same numbers in the same order as one process holding them all.
    std::vector<float> all(device_stats.size() * static_cast<size_t>(across_->size()));
    SWEPT_RETURN_IF_ERROR(across_->all_gather(device_stats.data(), device_stats.size(), all.data()));
    device_stats = std::move(all);
  }
  for (size_t r = 0; r < device_stats.size() / 2; ++r) {
    window_.loss_sum += device_stats[2 * r];
    window_.correct += device_stats[2 * r + 1];
  }
  Window w = window_;
  if (take) window_ = Window{};
  return w;
}

Result<EvalResult> Trainer::evaluate(const Buffer& images, const Buffer& labels, const Buffer& order, int64_t count) {
  Replica& rep = *replicas_[0];
  Backend& b = *rep.backend;
  Network& net = *rep.net;
  EvalResult out;
  if (count == 0) return out;
  SWEPT_RETURN_IF_ERROR(b.fill(rep.eval_stats->f32(), 2, 0.0f));
  StepScalars s;
  s.seed = config_.seed;
  SWEPT_RETURN_IF_ERROR(b.copy_from_host(rep.eval_scalars->data(), &s, sizeof s));
  const StepScalars* scalars = static_cast<const StepScalars*>(rep.eval_scalars->data());
  for (int64_t begin = 0; begin < count; begin += shard_) {
    const int batch = static_cast<int>(std::min<int64_t>(shard_, count - begin));
    SWEPT_RETURN_IF_ERROR(b.gather_batch(images.u8(), labels.i32(), kImageSize, order.i32(), scalars, begin, batch,
                                         net.input(), net.labels()));
    SWEPT_RETURN_IF_ERROR(net.forward(batch, false, scalars, 0));
    SWEPT_RETURN_IF_ERROR(b.softmax_cross_entropy(batch, kClasses, net.logits(), net.labels(), 0.0f, nullptr,
                                                  rep.eval_stats->f32()));
  }
  float stats[2];
  SWEPT_RETURN_IF_ERROR(b.copy_to_host(stats, rep.eval_stats->data(), sizeof stats));
  out.loss = stats[0] / static_cast<double>(count);
  out.accuracy = stats[1] / static_cast<double>(count);
  return out;
}

Result<EvalResult> Trainer::evaluate_validation() {
  Replica& rep = *replicas_[0];
  return evaluate(*rep.train_images, *rep.train_labels, *rep.val_order, static_cast<int64_t>(split_.val_count));
}

Result<EvalResult> Trainer::evaluate_test() {
  Replica& rep = *replicas_[0];
  return evaluate(*rep.test_images, *rep.test_labels, *rep.test_order, test_count_);
}

Result<std::vector<float>> Trainer::params(int replica) {
  Replica& rep = *replicas_.at(replica);
  std::vector<float> out(layout_.total);
  SWEPT_RETURN_IF_ERROR(rep.backend->copy_to_host(out.data(), rep.net->params(), out.size() * sizeof(float)));
  return out;
}

Result<CheckpointState> Trainer::snapshot(double train_seconds) {
  Result<Window> w = fold_window(false);
  if (!w.ok()) return w.status();
  CheckpointState s;
  s.model = model_name(config_.model.kind);
  s.optimizer = optimizer_name(config_.optimizer.kind);
  for (const ParamTensor& p : layout_.tensors) s.tensors.emplace_back(p.name, p.shape);
  s.batch_size = config_.batch_size;
  s.train_count = split_.train_count;
  s.seed = config_.seed;
  s.step = step_;
  s.epoch = epoch();
  s.epoch_position = epoch_position_;
  s.hyperparameters = hyperparameters();
  s.window_loss_sum = w->loss_sum;
  s.window_correct = w->correct;
  s.window_samples = w->samples;
  s.window_steps = w->steps;
  s.train_seconds = train_seconds;
  Replica& rep = *replicas_[0];
  Backend& b = *rep.backend;
  s.params.resize(layout_.total);
  SWEPT_RETURN_IF_ERROR(b.copy_to_host(s.params.data(), rep.net->params(), layout_.total * sizeof(float)));
  if (rep.state1) {
    s.state1.resize(layout_.total);
    SWEPT_RETURN_IF_ERROR(b.copy_to_host(s.state1.data(), rep.state1->data(), layout_.total * sizeof(float)));
  }
  if (rep.state2) {
    s.state2.resize(layout_.total);
    SWEPT_RETURN_IF_ERROR(b.copy_to_host(s.state2.data(), rep.state2->data(), layout_.total * sizeof(float)));
  }
  if (order_epoch_ != epoch()) {
    order_ = epoch_order(split_.train_count, config_.seed, epoch());
    order_epoch_ = epoch();
    ++order_version_;
  }
  s.order = order_;
  return s;
}

Status Trainer::restore(const CheckpointState& s) {
  auto mismatch = [&](const std::string& what, const std::string& theirs, const std::string& ours) {
    return Status::InvalidArgument("the checkpoint at step " + std::to_string(s.step) + " was written with " + what +
                                   "=" + theirs + ", this run has " + what + "=" + ours +
                                   ": resume with the same settings, or use another --checkpoint_dir");
  };
  if (s.model != model_name(config_.model.kind)) return mismatch("--model", s.model, model_name(config_.model.kind));
  if (s.optimizer != optimizer_name(config_.optimizer.kind))
    return mismatch("--optimizer", s.optimizer, optimizer_name(config_.optimizer.kind));
  // The batch size may change (population-based training perturbs it):
  // the data position is kept in samples, not steps.
  if (s.train_count != split_.train_count)
    return mismatch("training samples (--data, --val_fraction)", std::to_string(s.train_count),
                    std::to_string(split_.train_count));
  if (s.seed != config_.seed) return mismatch("--seed", std::to_string(s.seed), std::to_string(config_.seed));
  bool shapes_match = s.tensors.size() == layout_.tensors.size();
  for (size_t i = 0; shapes_match && i < s.tensors.size(); ++i)
    shapes_match = s.tensors[i].first == layout_.tensors[i].name && s.tensors[i].second == layout_.tensors[i].shape;
  if (!shapes_match || s.params.size() != layout_.total)
    return Status::InvalidArgument("the checkpoint at step " + std::to_string(s.step) +
                                   " holds parameters of other shapes (another --hidden?): resume with the same "
                                   "settings, or use another --checkpoint_dir");
  // Files from before epoch_position was recorded never changed batch
  // size, so their position follows from the step.
  int64_t position = s.epoch_position;
  const int64_t ckpt_steps_per_epoch = s.batch_size > 0 ? static_cast<int64_t>(s.train_count) / s.batch_size : 0;
  if (position < 0 && ckpt_steps_per_epoch > 0 && s.epoch == s.step / ckpt_steps_per_epoch)
    position = (s.step - s.epoch * ckpt_steps_per_epoch) * s.batch_size;
  const int states = optimizer_states(config_.optimizer.kind);
  if ((states >= 1) != !s.state1.empty() || (states >= 2) != !s.state2.empty() ||
      s.order.size() != split_.train_count || s.step < 0 || s.epoch < 0 || position < 0 ||
      position > static_cast<int64_t>(split_.train_count))
    return Status::InvalidArgument("the checkpoint at step " + std::to_string(s.step) +
                                   " is inconsistent with this run's settings");
  step_ = s.step;
  order_ = s.order;
  order_epoch_ = s.epoch;
  ++order_version_;
  epoch_ = s.epoch;
  epoch_position_ = position;
  // A larger batch than the rest of the epoch holds: that epoch is done
  // (train_step draws the next one's order).
  if (epoch_position_ + config_.batch_size > static_cast<int64_t>(split_.train_count)) {
    ++epoch_;
    epoch_position_ = 0;
  }
  // --epochs counts passes over the data, whatever batch sizes made them.
  total_steps_ = config_.max_steps > 0 ? config_.max_steps : step_ + steps_to_epochs_end();
  window_.loss_sum = s.window_loss_sum;
  window_.correct = s.window_correct;
  window_.samples = s.window_samples;
  window_.steps = s.window_steps;
  return run_on_replicas([&](int r) -> Status {
    Replica& rep = *replicas_[r];
    Backend& b = *rep.backend;
    SWEPT_RETURN_IF_ERROR(b.copy_from_host(rep.net->params(), s.params.data(), s.params.size() * sizeof(float)));
    if (rep.state1)
      SWEPT_RETURN_IF_ERROR(b.copy_from_host(rep.state1->data(), s.state1.data(), s.state1.size() * sizeof(float)));
    if (rep.state2)
      SWEPT_RETURN_IF_ERROR(b.copy_from_host(rep.state2->data(), s.state2.data(), s.state2.size() * sizeof(float)));
    SWEPT_RETURN_IF_ERROR(b.fill(rep.stats->f32(), 2, 0.0f));
    return b.synchronize();
  });
}

// ---- across processes -----------------------------------------------------------

Result<Trainer::StopCheck> Trainer::agree_on_stop(bool mine, int64_t next_check_step) {
  if (!across_) return StopCheck{mine, step_ + 1};
  // Rank 0 alone contributes the distance to the next check; the others add
  // 0. Capped at 2^20 steps, which a float carries exactly.
  const int64_t ahead = std::clamp<int64_t>(next_check_step - step_, 1, int64_t{1} << 20);
  float values[2] = {mine ? 1.0f : 0.0f, across_->rank() == 0 ? static_cast<float>(ahead) : 0.0f};
  SWEPT_RETURN_IF_ERROR(across_->sum(values, 2));
  return StopCheck{values[0] > 0.0f, step_ + std::max<int64_t>(1, static_cast<int64_t>(values[1]))};
}

namespace {

// The state adopt_rank0_state() sends: raw bytes of scalars and arrays, in a
// fixed order both ends know (the same binary on every process).
template <typename T>
void put_raw(std::vector<char>& out, const T* data, size_t count) {
  const uint64_t n = count;
  const char* p = reinterpret_cast<const char*>(&n);
  out.insert(out.end(), p, p + sizeof n);
  p = reinterpret_cast<const char*>(data);
  out.insert(out.end(), p, p + count * sizeof(T));
}

template <typename T>
bool take_raw(const std::vector<char>& in, size_t& at, std::vector<T>& out) {
  uint64_t n = 0;
  if (in.size() - at < sizeof n) return false;
  std::memcpy(&n, in.data() + at, sizeof n);
  at += sizeof n;
  if ((in.size() - at) / sizeof(T) < n) return false;
  out.resize(n);
  if (n > 0) std::memcpy(out.data(), in.data() + at, n * sizeof(T));
  at += n * sizeof(T);
  return true;
}

}  // namespace

Result<double> Trainer::adopt_rank0_state(double train_seconds) {
  if (!across_) return train_seconds;
  Result<CheckpointState> mine = snapshot(train_seconds);  // collective (fold_window): every rank calls it
  if (!mine.ok()) return mine.status();
  std::vector<char> bytes;
  if (across_->rank() == 0) {
    const std::vector<double> scalars = {static_cast<double>(mine->step), static_cast<double>(mine->epoch),
                                         mine->window_loss_sum, mine->window_correct,
                                         static_cast<double>(mine->window_samples),
                                         static_cast<double>(mine->window_steps), mine->train_seconds,
                                         static_cast<double>(mine->epoch_position)};
    put_raw(bytes, scalars.data(), scalars.size());
    put_raw(bytes, mine->params.data(), mine->params.size());
    put_raw(bytes, mine->state1.data(), mine->state1.size());
    put_raw(bytes, mine->state2.data(), mine->state2.size());
    put_raw(bytes, mine->order.data(), mine->order.size());
  }
  SWEPT_RETURN_IF_ERROR(across_->broadcast(bytes));
  if (across_->rank() == 0) return train_seconds;
  CheckpointState s = *mine;
  std::vector<double> scalars;
  size_t at = 0;
  if (!take_raw(bytes, at, scalars) || scalars.size() != 8 || !take_raw(bytes, at, s.params) ||
      !take_raw(bytes, at, s.state1) || !take_raw(bytes, at, s.state2) || !take_raw(bytes, at, s.order))
    return Status::Internal("rank 0's training state arrived truncated (" + std::to_string(bytes.size()) + " bytes)");
  s.step = static_cast<int64_t>(scalars[0]);
  s.epoch = static_cast<int64_t>(scalars[1]);
  s.window_loss_sum = scalars[2];
  s.window_correct = scalars[3];
  s.window_samples = static_cast<int64_t>(scalars[4]);
  s.window_steps = static_cast<int64_t>(scalars[5]);
  s.epoch_position = static_cast<int64_t>(scalars[7]);
  SWEPT_RETURN_IF_ERROR(restore(s));
  return scalars[6];
}

}  // namespace swept::trainer
