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

int64_t Trainer::epoch() const { return step_ / steps_per_epoch_; }

double Trainer::current_lr() const {
  ScheduleConfig s;
  s.kind = config_.schedule;
  s.lr = scaled_lr(config_.lr, config_.scale_lr, config_.batch_size, config_.base_batch);
  s.warmup_steps = config_.warmup_steps;
  s.decay_steps = config_.decay_steps > 0 ? config_.decay_steps : steps_per_epoch_;
  s.decay_rate = config_.decay_rate;
  s.total_steps = total_steps_;
  return learning_rate(s, step_);
}

Result<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& config, const MnistData& data,
                                                 std::vector<std::unique_ptr<Backend>> backends,
                                                 std::unique_ptr<AllReduce> allreduce) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->config_ = config;
  t->split_ = split_validation(data.train.count(), config.val_fraction);
  t->layout_ = param_layout(config.model);
  const int n = static_cast<int>(backends.size());
  if (n < 1 || allreduce == nullptr || allreduce->world_size() != n)
    return Status::Internal("Trainer::create: " + std::to_string(n) + " backends for an all-reduce over " +
                            std::to_string(allreduce ? allreduce->world_size() : 0));
  if (config.batch_size % n != 0)
    return Status::InvalidArgument("--batch_size=" + std::to_string(config.batch_size) +
                                   " is not divisible by the " + std::to_string(n) + " replicas");
  t->shard_ = config.batch_size / n;
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
  s.batch_start = (step_ % steps_per_epoch_) * config_.batch_size;
  SWEPT_RETURN_IF_ERROR(b.copy_from_host(rep.scalars->data(), &s, sizeof s));

  const StepScalars* scalars = static_cast<const StepScalars*>(rep.scalars->data());
  const int64_t first = static_cast<int64_t>(r) * shard_;
  const int n = replicas();
  const auto record = [&]() -> Status {
    SWEPT_RETURN_IF_ERROR(b.gather_batch(rep.train_images->u8(), rep.train_labels->i32(), kImageSize,
                                         rep.order->i32(), scalars, first, shard_, net.input(), net.labels()));
    SWEPT_RETURN_IF_ERROR(net.forward(shard_, true, scalars, first));
    SWEPT_RETURN_IF_ERROR(b.softmax_cross_entropy(shard_, kClasses, net.logits(), net.labels(),
                                                  1.0f / static_cast<float>(shard_), net.logits_grad(),
                                                  rep.stats->f32()));
    std::function<Status(size_t, size_t)> on_grads;
    if (n > 1) {
      on_grads = [&](size_t offset, size_t count) {
        return allreduce_->all_reduce_mean(r, net.grads() + offset, count);
      };
    }
    SWEPT_RETURN_IF_ERROR(net.backward(shard_, on_grads));
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
  window_.samples += config_.batch_size;
  window_.steps += 1;
  return Status::Ok();
}

Result<Window> Trainer::fold_window(bool take) {
  std::vector<float> device_stats(2 * replicas_.size());
  SWEPT_RETURN_IF_ERROR(run_on_replicas([&](int r) -> Status {
    Replica& rep = *replicas_[r];
    SWEPT_RETURN_IF_ERROR(rep.backend->copy_to_host(&device_stats[2 * r], rep.stats->data(), 2 * sizeof(float)));
    return rep.backend->fill(rep.stats->f32(), 2, 0.0f);
  }));
  for (size_t r = 0; r < replicas_.size(); ++r) {
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
  if (s.batch_size != config_.batch_size)
    return mismatch("--batch_size", std::to_string(s.batch_size), std::to_string(config_.batch_size));
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
  const int states = optimizer_states(config_.optimizer.kind);
  if ((states >= 1) != !s.state1.empty() || (states >= 2) != !s.state2.empty() ||
      s.order.size() != split_.train_count || s.step < 0 || s.epoch != s.step / steps_per_epoch_)
    return Status::InvalidArgument("the checkpoint at step " + std::to_string(s.step) +
                                   " is inconsistent with this run's settings");
  step_ = s.step;
  order_ = s.order;
  order_epoch_ = s.epoch;
  ++order_version_;
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

// ---- backends -----------------------------------------------------------------

Result<Backends> make_backends(const TrainConfig& config) {
  Backends out;
  if (config.device == DeviceKind::kCpu) {
    const int replicas = config.replicas > 0 ? config.replicas : 1;
    const int cores = std::max(1u, std::thread::hardware_concurrency());
    const int total = config.threads > 0 ? config.threads : cores;
    CpuBackendOptions options;
    options.threads = std::max(1, total / replicas);
    for (int r = 0; r < replicas; ++r) out.replicas.push_back(make_cpu_backend(options));
    out.allreduce = make_cpu_allreduce(replicas);
    return out;
  }
#if defined(SWEPT_HAVE_CUDA)
  Result<int> count = cuda_device_count();
  if (!count.ok()) return count.status();
  std::vector<int> devices;
  if (config.device_index >= 0) {
    if (config.device_index >= *count)
      return Status::NotFound("--device=cuda:" + std::to_string(config.device_index) + ": only " +
                              std::to_string(*count) + " CUDA device(s) are visible (CUDA_VISIBLE_DEVICES)");
    devices.push_back(config.device_index);
  } else {
    for (int d = 0; d < *count; ++d) devices.push_back(d);
  }
  if (devices.empty()) return Status::Unavailable("--device=cuda: no CUDA device is visible");
  const int replicas = config.replicas > 0 ? config.replicas : static_cast<int>(devices.size());
  std::vector<Backend*> raw;
  for (int r = 0; r < replicas; ++r) {
    CudaDeviceOptions options;
    options.device = devices[r % devices.size()];
    options.memory_fraction = config.gpu_memory_fraction;
    Result<std::unique_ptr<Backend>> b = make_cuda_backend(options);
    if (!b.ok()) return b.status();
    raw.push_back(b->get());
    out.replicas.push_back(std::move(*b));
  }
  if (replicas == 1) {
    out.allreduce = make_cpu_allreduce(1);  // one rank: nothing to reduce
  } else {
    Result<std::unique_ptr<AllReduce>> ar = make_nccl_allreduce(raw);
    if (!ar.ok()) return ar.status();
    out.allreduce = std::move(*ar);
  }
  return out;
#else
  return Status::Unavailable(
      "--device=cuda: this swept-train was built without CUDA (swept-train --version lists its backends); use "
      "--device=cpu, or rebuild where the CUDA toolkit is installed (cmake -DSWEPT_CUDA=ON)");
#endif
}

// ---- the run ------------------------------------------------------------------

namespace {

int exit_code_for(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument: return kExitUsage;
    case StatusCode::kNotFound:
    case StatusCode::kUnavailable: return kExitNoDevice;
    case StatusCode::kResourceExhausted: return kExitOutOfMemory;
    case StatusCode::kMissingDependency: return kExitMissingLibrary;
    case StatusCode::kInternal: return kExitInternal;
    default: return kExitFailure;
  }
}

// Members in the order written (step first), as docs/metrics.md shows them.
using Line = nlohmann::ordered_json;

void emit(std::ostream& out, const Line& line) {
  out << line.dump() << '\n';
  out.flush();
}

class RunClock {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// --resume: restores the newest checkpoint that passes its checks, skipping
// (with a warning) ones that do not; none at all is a fresh start, not an
// error. Returns the training seconds the run had before (0 on a fresh
// start); a checkpoint that reads well but belongs to other settings is an
// error, never skipped.
Result<double> resume_from_newest_checkpoint(const TrainConfig& config, Trainer& trainer) {
  for (const std::string& path : list_checkpoints(config.checkpoint_dir)) {
    Result<CheckpointState> state = read_checkpoint(path);
    if (!state.ok()) {
      log::warn(state.status().message() + "; trying an older checkpoint");
      continue;
    }
    Status restored = trainer.restore(*state);
    if (!restored.ok()) return restored.WithContext(path);
    log::info("resumed from " + path + " at step " + std::to_string(trainer.step()));
    return state->train_seconds;
  }
  log::info("--resume: no valid checkpoint in " + config.checkpoint_dir + ", starting from step 0");
  return 0.0;
}

// One log line that says what this run will do, and on what.
void log_run_start(const TrainConfig& config, const Trainer& trainer, const std::string& device_name) {
  log::info("training " + model_name(config.model.kind) + " on " + device_name + " x" +
            std::to_string(trainer.replicas()) + " replica(s): " + std::to_string(trainer.total_steps()) +
            " steps of " + std::to_string(config.batch_size) + " (" + std::to_string(trainer.steps_per_epoch()) +
            " per epoch), " + std::to_string(trainer.split().train_count) + " training / " +
            std::to_string(trainer.split().val_count) + " validation samples, data from " + config.data_dir);
}

}  // namespace

int run_training(const TrainConfig& config, std::ostream& metrics, const std::atomic<bool>& stop_requested) {
  auto fail = [](const Status& s) {
    log::error(s.message());
    return exit_code_for(s);
  };
  // The kernels first, so that a slow run says why in its first line.
  if (config.device == DeviceKind::kCpu) log::info("CPU kernels: " + cpu::kernel_choice().description());
  // The device next: a missing GPU is reported before 50 MB of data are read.
  Result<Backends> backends = make_backends(config);
  if (!backends.ok()) return fail(backends.status());
  Result<MnistData> data = load_mnist(config.data_dir);
  if (!data.ok()) return fail(data.status());
  const std::string device_name = backends->replicas[0]->name();
  Result<std::unique_ptr<Trainer>> created =
      Trainer::create(config, *data, std::move(backends->replicas), std::move(backends->allreduce));
  if (!created.ok()) return fail(created.status());
  Trainer& trainer = **created;

  double train_seconds_before = 0;
  if (config.resume) {
    Result<double> resumed = resume_from_newest_checkpoint(config, trainer);
    if (!resumed.ok()) return fail(resumed.status());
    train_seconds_before = *resumed;
  }
  log_run_start(config, trainer, device_name);

  const bool checkpoints = !config.checkpoint_dir.empty();
  RunClock run_clock, window_clock;
  double window_pause = 0;  // seconds of validation and checkpoints inside the window, not training
  auto train_seconds = [&] { return train_seconds_before + run_clock.seconds(); };
  auto save = [&]() -> Status {
    Result<CheckpointState> s = trainer.snapshot(train_seconds());
    if (!s.ok()) return s.status();
    SWEPT_RETURN_IF_ERROR(write_checkpoint(config.checkpoint_dir, *s, /*keep=*/2));
    log::debug("checkpoint at step " + std::to_string(trainer.step()));
    return Status::Ok();
  };
  auto diverged = [&](const char* what) {
    log::error(std::string(what) + " is not finite at step " + std::to_string(trainer.step()) +
               ": training diverged; lower --lr");
    emit(metrics, {{"step", trainer.step()}, {"final", true}, {"diverged", true}, {"loss", nullptr}});
    return kExitDiverged;
  };

  while (trainer.step() < trainer.total_steps()) {
    const int64_t epoch = trainer.epoch();
    const double lr = trainer.current_lr();
    Status s = trainer.train_step();
    if (!s.ok()) return fail(s);
    const int64_t step = trainer.step();
    const bool log_now = step % config.log_every == 0 || step == trainer.total_steps();
    const bool checkpoint_now = checkpoints && config.checkpoint_every > 0 && step % config.checkpoint_every == 0;
    if (log_now) {
      Result<Window> w = trainer.fold_window(true);
      if (!w.ok()) return fail(w.status());
      const double loss = w->loss_sum / static_cast<double>(std::max<int64_t>(1, w->samples));
      if (!std::isfinite(loss)) return diverged("the training loss");
      const double elapsed = window_clock.seconds() - window_pause;
      emit(metrics, {{"step", step},
                     {"epoch", epoch},
                     {"loss", loss},
                     {"accuracy", w->correct / static_cast<double>(std::max<int64_t>(1, w->samples))},
                     {"lr", lr},
                     {"samples_per_sec", elapsed > 0 ? static_cast<double>(w->samples) / elapsed : 0.0}});
      window_clock.reset();
      window_pause = 0;
    }
    const bool epoch_end = step % trainer.steps_per_epoch() == 0;
    // Also at the last step, wherever it falls (--max_steps may end a run
    // mid-epoch): every run that completes reports its validation figures.
    const bool eval_now =
        (config.eval_every > 0 ? step % config.eval_every == 0 : epoch_end) || step == trainer.total_steps();
    if (eval_now && trainer.split().val_count > 0) {
      const RunClock pause;
      Result<EvalResult> v = trainer.evaluate_validation();
      if (!v.ok()) return fail(v.status());
      if (!std::isfinite(v->loss)) return diverged("the validation loss");
      emit(metrics, {{"step", step}, {"val_loss", v->loss}, {"val_accuracy", v->accuracy}});
      window_pause += pause.seconds();
    }
    if (checkpoint_now) {
      const RunClock pause;
      Status c = save();
      if (!c.ok()) return fail(c);
      window_pause += pause.seconds();
    }
    if (stop_requested.load()) {
      if (checkpoints) {
        Status c = save();
        if (!c.ok()) return fail(c);
        log::info("stopped by signal at step " + std::to_string(step) + "; checkpoint written to " +
                  config.checkpoint_dir);
      } else {
        log::info("stopped by signal at step " + std::to_string(step) + " (no --checkpoint_dir: nothing saved)");
      }
      return kExitInterrupted;
    }
  }
  const double seconds = train_seconds();
  if (checkpoints && !(config.checkpoint_every > 0 && trainer.step() % config.checkpoint_every == 0)) {
    Status c = save();
    if (!c.ok()) return fail(c);
  }
  Result<EvalResult> test = trainer.evaluate_test();
  if (!test.ok()) return fail(test.status());
  if (!std::isfinite(test->loss)) return diverged("the test loss");
  emit(metrics, {{"step", trainer.step()},
                 {"final", true},
                 {"test_loss", test->loss},
                 {"test_accuracy", test->accuracy},
                 {"train_seconds", seconds}});
  log::info("test accuracy " + std::to_string(test->accuracy) + " after " + std::to_string(seconds) + " s");
  return kExitOk;
}

}  // namespace swept::trainer
