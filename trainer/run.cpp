// The whole run (see train.h's make_backends and run_training): the devices
// and, across processes, the group; the data; the Trainer; then the loop of
// steps with metric lines, validation, checkpoints and stopping at fixed step
// boundaries. Across processes every rank runs this same loop and makes the
// same collective calls at the same points; only rank 0 prints metric lines
// and writes checkpoints.
#include <chrono>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/exit_codes.h"
#include "common/log.h"
#include "trainer/cpu/kernel_choice.h"
#include "trainer/dist/process_group.h"
#include "trainer/train.h"

namespace swept::trainer {

// ---- backends -----------------------------------------------------------------

namespace {

// The devices first, the peers second: a rank without its device fails at
// once (exit 4) rather than after everyone has connected.
Status join_world(const World& world, Backends& out) {
  if (!world.distributed()) return Status::Ok();
  Result<std::unique_ptr<ProcessGroup>> group = ProcessGroup::join(world);
  if (!group.ok()) return group.status();
  out.across = std::move(*group);
  return Status::Ok();
}

}  // namespace

Result<Backends> make_backends(const TrainConfig& config, const World& world) {
  Backends out;
  if (config.device == DeviceKind::kCpu) {
    const int replicas = config.replicas > 0 ? config.replicas : 1;
    const int cores = std::max(1u, std::thread::hardware_concurrency());
    const int total = config.threads > 0 ? config.threads : cores;
    CpuBackendOptions options;
    options.threads = std::max(1, total / replicas);
    for (int r = 0; r < replicas; ++r) out.replicas.push_back(make_cpu_backend(options));
    SWEPT_RETURN_IF_ERROR(join_world(world, out));
    out.allreduce = make_cpu_allreduce(replicas, out.across.get());
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
  // Every process of a host sees all of its GPUs (as under torchrun) and
  // takes its own with LOCAL_RANK: one each by default, --replicas each
  // when set. --device=cuda:K pins it to K instead.
  const int per_process = world.distributed() ? std::max(1, static_cast<int>(devices.size()) / world.local_size)
                                              : static_cast<int>(devices.size());
  const int replicas = config.replicas > 0 ? config.replicas : per_process;
  const int first = config.device_index >= 0 ? 0 : world.local_rank * replicas;
  std::vector<Backend*> raw;
  for (int r = 0; r < replicas; ++r) {
    CudaDeviceOptions options;
    options.device = devices[static_cast<size_t>(first + r) % devices.size()];
    options.memory_fraction = config.gpu_memory_fraction;
    Result<std::unique_ptr<Backend>> b = make_cuda_backend(options);
    if (!b.ok()) return b.status();
    raw.push_back(b->get());
    out.replicas.push_back(std::move(*b));
  }
  SWEPT_RETURN_IF_ERROR(join_world(world, out));
  if (replicas == 1 && !out.across) {
    out.allreduce = make_cpu_allreduce(1);  // one rank: nothing to reduce
  } else {
    Result<std::unique_ptr<AllReduce>> ar = make_nccl_allreduce(raw, out.across.get());
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
// (with a warning) ones that do not; no checkpoint file at all is a fresh
// start, not an error. Files that are all damaged (a truncated copy, say)
// are an error: starting from step 0 there would silently throw away the
// training the files stood for. Returns the training seconds the run had
// before (0 on a fresh start); a checkpoint that reads well but belongs to
// other settings is an error, never skipped. Logs the hyperparameters that
// differ from the checkpoint's (population-based training changes them).
Result<double> resume_from_newest_checkpoint(const TrainConfig& config, Trainer& trainer) {
  const std::vector<std::string> files = list_checkpoints(config.checkpoint_dir);
  for (const std::string& path : files) {
    Result<CheckpointState> state = read_checkpoint(path);
    if (!state.ok()) {
      if (path == files.back())
        return Status::InvalidArgument(state.status().message() + "; no checkpoint in " + config.checkpoint_dir +
                                       " passes its checks: replace them with a whole copy, or delete the folder's "
                                       "ckpt-*.swck files to start from step 0");
      log::warn(state.status().message() + "; trying an older checkpoint");
      continue;
    }
    Status restored = trainer.restore(*state);
    if (!restored.ok()) return restored.WithContext(path);
    log::info("resumed from " + path + " at step " + std::to_string(trainer.step()));
    const std::string changes = describe_hyperparameter_changes(state->hyperparameters, trainer.hyperparameters());
    if (state->hyperparameters.empty())
      log::info("the checkpoint records no hyperparameters (an older swept-train wrote it): this run's are in force");
    else if (!changes.empty())
      log::info("hyperparameters changed on resume: " + changes);
    return state->train_seconds;
  }
  log::info("--resume: no checkpoint in " + config.checkpoint_dir + ", starting from step 0");
  return 0.0;
}

// One log line that says what this run will do, and on what.
void log_run_start(const TrainConfig& config, const Trainer& trainer, const std::string& device_name) {
  const std::string processes =
      trainer.processes() > 1 ? " in each of " + std::to_string(trainer.processes()) + " processes" : "";
  log::info("training " + model_name(config.model.kind) + " on " + device_name + " x" +
            std::to_string(trainer.replicas()) + " replica(s)" + processes + ": " + std::to_string(trainer.total_steps()) +
            " steps of " + std::to_string(config.batch_size) + " (" + std::to_string(trainer.steps_per_epoch()) +
            " per epoch), " + std::to_string(trainer.split().train_count) + " training / " +
            std::to_string(trainer.split().val_count) + " validation samples, data from " + config.data_dir);
}

// When the ranks agree on stopping (Trainer::agree_on_stop). One process:
// after every step, as before. Across processes every check is a round trip,
// so rank 0 spaces them to about every 50 ms of the run (all ranks learn the
// next step from the check itself): a stop lands within ~50 ms plus a step.
class StopPacer {
 public:
  explicit StopPacer(int64_t step) : next_(step + 1), checked_at_(step) {}
  Result<bool> check(Trainer& trainer, bool mine) {
    const int64_t step = trainer.step();
    if (step < next_) return false;
    const double per_step = clock_.seconds() / static_cast<double>(std::max<int64_t>(1, step - checked_at_));
    const auto every = static_cast<int64_t>(std::clamp(0.05 / std::max(per_step, 1e-6), 1.0, 10000.0));
    Result<Trainer::StopCheck> agreed = trainer.agree_on_stop(mine, step + every);
    if (!agreed.ok()) return agreed.status();
    next_ = agreed->next_step;
    checked_at_ = step;
    clock_.reset();
    return agreed->stop;
  }

 private:
  int64_t next_, checked_at_;
  RunClock clock_;
};

// SWEPT_PBT_STOP_STEP (population-based training; TrainConfig::stop_step):
// the scheduler stops this segment once it has seen that step's metrics.
// Saving there and waiting for its SIGTERM puts the checkpoint exactly at the
// interval (the step the round ranked), with no steps run past it for
// nothing. Not at the run's last step: a run that ends there ends as usual.
// Returns at once at any other step; else once the stop is requested.
Status pause_at_stop_step(const TrainConfig& config, const Trainer& trainer, const std::atomic<bool>& stop_requested,
                          const std::function<Status()>& save) {
  if (config.stop_step <= 0 || trainer.step() != config.stop_step || trainer.step() >= trainer.total_steps())
    return Status::Ok();
  SWEPT_RETURN_IF_ERROR(save());
  log::info("at step " + std::to_string(trainer.step()) + " (SWEPT_PBT_STOP_STEP): " +
            (config.checkpoint_dir.empty() ? "nothing saved (no checkpoint folder)" : "checkpoint written") +
            "; waiting for the scheduler's SIGTERM");
  while (!stop_requested.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return Status::Ok();
}

struct RunStart {
  std::unique_ptr<Trainer> trainer;
  double train_seconds_before = 0;
};

// Devices, peers, data, the Trainer, and --resume. Across processes rank 0
// alone reads its checkpoints (the others' folders may be on other hosts, or
// stale) and every rank then adopts rank 0's state.
Result<RunStart> start_run(const TrainConfig& config, const World& world) {
  // The kernels first, so that a slow run says why in its first line.
  if (config.device == DeviceKind::kCpu) log::info("CPU kernels: " + cpu::kernel_choice().description());
  // The device next: a missing GPU is reported before 50 MB of data are read.
  Result<Backends> backends = make_backends(config, world);
  if (!backends.ok()) return backends.status();
  Result<MnistData> data = load_mnist(config.data_dir);
  if (!data.ok()) return data.status();
  const std::string device_name = backends->replicas[0]->name();
  Result<std::unique_ptr<Trainer>> created =
      Trainer::create(config, *data, std::move(backends->replicas), std::move(backends->allreduce),
                      std::move(backends->across));
  if (!created.ok()) return created.status();
  RunStart out;
  out.trainer = std::move(*created);
  Trainer& trainer = *out.trainer;
  if (config.resume) {
    if (trainer.process_rank() == 0) {
      Result<double> resumed = resume_from_newest_checkpoint(config, trainer);
      if (!resumed.ok()) return resumed.status();
      out.train_seconds_before = *resumed;
    }
    Result<double> adopted = trainer.adopt_rank0_state(out.train_seconds_before);
    if (!adopted.ok()) return adopted.status();
    out.train_seconds_before = *adopted;
  }
  log_run_start(config, trainer, device_name);
  return out;
}

}  // namespace

int run_training(const TrainConfig& config, const World& world, std::ostream& rank0_metrics,
                 const std::atomic<bool>& stop_requested) {
  auto fail = [](const Status& s) {
    log::error(s.message());
    return exit_code_for(s);
  };
  Result<RunStart> started = start_run(config, world);
  if (!started.ok()) return fail(started.status());
  Trainer& trainer = *started->trainer;
  const double train_seconds_before = started->train_seconds_before;
  // Only rank 0 speaks: the others compute the same lines and print none.
  std::ostream quiet(nullptr);
  std::ostream& metrics = trainer.process_rank() == 0 ? rank0_metrics : quiet;

  // Every rank takes the snapshot (it gathers the loss window: a collective),
  // rank 0 alone writes it.
  const bool checkpoints = !config.checkpoint_dir.empty();
  RunClock run_clock, window_clock;
  double window_pause = 0;  // seconds of validation and checkpoints inside the window, not training
  auto train_seconds = [&] { return train_seconds_before + run_clock.seconds(); };
  StopPacer stop_pacer(trainer.step());
  int64_t saved_at = -1;  // a step is written once (a stop or the end right after a checkpoint)
  auto save = [&]() -> Status {
    if (!checkpoints || saved_at == trainer.step()) return Status::Ok();
    Result<CheckpointState> s = trainer.snapshot(train_seconds());
    if (!s.ok()) return s.status();
    saved_at = trainer.step();
    if (trainer.process_rank() != 0) return Status::Ok();
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
  // One line of validation or test figures; 0, or the exit code to end with.
  auto evaluation = [&](bool test) -> int {
    const RunClock pause;
    Result<EvalResult> e = test ? trainer.evaluate_test() : trainer.evaluate_validation();
    if (!e.ok()) return fail(e.status());
    if (!std::isfinite(e->loss)) return diverged(test ? "the test loss" : "the validation loss");
    emit(metrics, {{"step", trainer.step()}, {test ? "test_loss" : "val_loss", e->loss},
                   {test ? "test_accuracy" : "val_accuracy", e->accuracy}});
    window_pause += pause.seconds();
    return 0;
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
    const bool epoch_end = trainer.epoch() != epoch;
    // Also at the last step, wherever it falls (--max_steps may end a run
    // mid-epoch): every run that completes reports its validation figures.
    const bool eval_now =
        (config.eval_every > 0 ? step % config.eval_every == 0 : epoch_end) || step == trainer.total_steps();
    if (eval_now && trainer.split().val_count > 0)
      if (int rc = evaluation(/*test=*/false); rc != 0) return rc;
    // Test accuracy along the way, for benchmarks that count the steps to a
    // target (bench/pbt_mnist.sh); the last step's comes with the final line.
    if (config.test_every > 0 && step % config.test_every == 0 && step != trainer.total_steps())
      if (int rc = evaluation(/*test=*/true); rc != 0) return rc;
    if (checkpoint_now) {
      const RunClock pause;
      if (Status c = save(); !c.ok()) return fail(c);
      window_pause += pause.seconds();
    }
    if (Status p = pause_at_stop_step(config, trainer, stop_requested, save); !p.ok()) return fail(p);
    Result<bool> stop = stop_pacer.check(trainer, stop_requested.load());
    if (!stop.ok()) return fail(stop.status());
    if (*stop) {
      if (checkpoints) {
        if (Status c = save(); !c.ok()) return fail(c);
        log::info("stopped by signal at step " + std::to_string(step) +
                  (trainer.process_rank() == 0 ? "; checkpoint written to " + config.checkpoint_dir
                                               : "; rank 0 wrote the checkpoint"));
      } else {
        log::info("stopped by signal at step " + std::to_string(step) + " (no --checkpoint_dir: nothing saved)");
      }
      return kExitInterrupted;
    }
  }
  const double seconds = train_seconds();
  if (Status c = save(); !c.ok()) return fail(c);
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
