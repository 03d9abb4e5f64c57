// The worker's loop of a parameter-server run (see ps_run.h). Which batch a
// step computes:
//   sync   the step is the servers' version v: worker w computes shard w of
//          global batch v, as all-reduce replica w would, and its next pull
//          waits for version v + 1;
//   async  server 0 hands out units of work u = 0 .. N·T - 1 (T: the run's
//          steps), shard u mod N of global batch u div N, one per pull, so a
//          fast worker takes more of them than a slow one and the run still
//          reads every sample once per epoch; it ends when they are all
//          handed out (and pushed).
// Worker 0 reports at the run's progress: the servers' version (sync) or the
// units applied divided by N (async), as the step of its lines; the loss and
// accuracy are those of its own batches.
#include "trainer/dist/ps_run.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/exit_codes.h"
#include "common/log.h"
#include "trainer/cpu/kernel_choice.h"
#include "trainer/dist/cluster.h"
#include "trainer/dist/ps_client.h"
#include "trainer/dist/ps_server.h"
#include "trainer/dist/world.h"
#include "trainer/train.h"

namespace swept::trainer {
namespace {

using Line = nlohmann::ordered_json;
using SteadyClock = std::chrono::steady_clock;

void emit(std::ostream& out, const Line& line) {
  out << line.dump() << '\n';
  out.flush();
}

int exit_code_for(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument: return kExitUsage;
    case StatusCode::kResourceExhausted: return kExitOutOfMemory;
    case StatusCode::kInternal: return kExitInternal;
    default: return kExitFailure;
  }
}

// Worker 0's metric lines at the run's progress (the step of each line).
class Reporter {
 public:
  Reporter(const TrainConfig& config, Trainer& trainer, std::ostream& out)
      : config_(config), trainer_(trainer), out_(out) {}

  // Called with the progress after each pull; emits the loss line and the
  // validation line of every boundary passed (or the last step reached).
  // Returns kExitOk, or kExitDiverged after the diverged line.
  Result<int> at(int64_t progress, const PullResult& r, const std::vector<float>& params) {
    const int64_t total = trainer_.total_steps();
    progress = std::min(progress, total);
    if (progress <= logged_) return kExitOk;
    const bool last = progress == total;
    if (last || progress / config_.log_every > logged_ / config_.log_every) {
      Result<Window> w = trainer_.fold_window(true);
      if (!w.ok()) return w.status();
      const double loss = w->loss_sum / static_cast<double>(std::max<int64_t>(1, w->samples));
      if (!std::isfinite(loss)) return diverged(progress);
      const double seconds = std::chrono::duration<double>(SteadyClock::now() - window_start_).count() - pause_;
      const double samples = static_cast<double>((progress - logged_) * config_.batch_size);
      Line line = {{"step", progress},
                   {"epoch", (progress - 1) / trainer_.steps_per_epoch()},
                   {"loss", loss},
                   {"accuracy", w->correct / static_cast<double>(std::max<int64_t>(1, w->samples))},
                   {"lr", trainer_.lr_at(progress - 1)},
                   {"samples_per_sec", seconds > 0 ? samples / seconds : 0.0}};
      add_staleness(line, r.stats);
      emit(out_, line);
      window_start_ = SteadyClock::now();
      pause_ = 0;
      logged_ = progress;
    }
    const int64_t every = config_.eval_every > 0 ? config_.eval_every : trainer_.steps_per_epoch();
    if ((last || progress / every > evaluated_ / every) && trainer_.split().val_count > 0 && progress > evaluated_) {
      const auto start = SteadyClock::now();
      SWEPT_RETURN_IF_ERROR(trainer_.set_params(params));
      Result<EvalResult> v = trainer_.evaluate_validation();
      if (!v.ok()) return v.status();
      if (!std::isfinite(v->loss)) return diverged(progress);
      emit(out_, {{"step", progress}, {"val_loss", v->loss}, {"val_accuracy", v->accuracy}});
      evaluated_ = progress;
      pause_ += std::chrono::duration<double>(SteadyClock::now() - start).count();
    }
    return kExitOk;
  }

  static void add_staleness(Line& line, const PsReply& s) {
    line["staleness_mean"] = s.staleness_count > 0 ? s.staleness_sum / static_cast<double>(s.staleness_count) : 0.0;
    line["staleness_max"] = s.staleness_max;
    line["gradients_dropped"] = s.dropped;
  }

  Result<int> diverged(int64_t step) {
    log::error("the loss is not finite at step " + std::to_string(step) + ": training diverged; lower --lr");
    emit(out_, {{"step", step}, {"final", true}, {"diverged", true}, {"loss", nullptr}});
    return kExitDiverged;
  }

 private:
  const TrainConfig& config_;
  Trainer& trainer_;
  std::ostream& out_;
  int64_t logged_ = 0, evaluated_ = 0;
  SteadyClock::time_point window_start_ = SteadyClock::now();
  double pause_ = 0;
};

struct WorkerSetup {
  std::unique_ptr<Trainer> trainer;
  std::unique_ptr<PsClient> client;
};

Result<WorkerSetup> set_up_worker(const TrainConfig& config, const Cluster& cluster, std::chrono::milliseconds timeout,
                                  const std::atomic<bool>& stop_requested) {
  log::info("CPU kernels: " + cpu::kernel_choice().description());
  CpuBackendOptions options;
  options.threads = config.threads > 0 ? config.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(make_cpu_backend(options));
  Result<MnistData> data = load_mnist(config.data_dir);
  if (!data.ok()) return data.status();
  const int workers = static_cast<int>(cluster.workers.size());
  Result<std::unique_ptr<Trainer>> trainer =
      Trainer::create(config, *data, std::move(backends), make_cpu_allreduce(1), nullptr, workers);
  if (!trainer.ok()) return trainer.status();
  WorkerSetup out;
  out.trainer = std::move(*trainer);
  Result<std::unique_ptr<PsClient>> client =
      PsClient::connect(cluster, param_layout(config.model).total, timeout, &stop_requested);
  if (!client.ok()) return client.status();
  out.client = std::move(*client);
  log::info("worker " + std::to_string(cluster.index) + " of " + std::to_string(workers) + " with " +
            std::to_string(cluster.servers.size()) + " parameter server(s), " +
            (config.ps_mode == PsMode::kSync ? "sync" : "async") + ": " +
            std::to_string(out.trainer->total_steps()) + " steps of " + std::to_string(config.batch_size) + " (" +
            std::to_string(config.batch_size / workers) + " per worker)");
  return out;
}

int run_worker(const TrainConfig& config, const Cluster& cluster, std::chrono::milliseconds timeout,
               std::ostream& metrics, const std::atomic<bool>& stop_requested) {
  auto fail = [](const Status& s) {
    log::error(s.message());
    return exit_code_for(s);
  };
  const auto started = SteadyClock::now();
  Result<WorkerSetup> setup = set_up_worker(config, cluster, timeout, stop_requested);
  if (!setup.ok()) return fail(setup.status());
  Trainer& trainer = *setup->trainer;
  PsClient& client = *setup->client;
  const bool sync = config.ps_mode == PsMode::kSync, worker0 = cluster.index == 0;
  const int64_t workers = static_cast<int64_t>(cluster.workers.size()), total = trainer.total_steps();
  std::vector<float> params(param_layout(config.model).total), grad;
  Reporter reporter(config, trainer, metrics);
  Result<PullResult> r = client.step(nullptr, 0, 0, !sync, workers * total, params);
  auto stopped = [](int64_t step) {
    log::info("stopped by signal at step " + std::to_string(step) + " (--strategy=ps: nothing saved)");
    return kExitInterrupted;
  };
  for (;;) {
    if (!r.ok()) return fail(r.status());
    if (r->stopped) return stopped(trainer.step());
    if (worker0) {
      Result<int> rc = reporter.at(sync ? r->min_version : r->version0 / workers, *r, params);
      if (!rc.ok()) return fail(rc.status());
      if (*rc != kExitOk) return *rc;
    }
    const int64_t step = sync ? r->min_version : r->unit / workers;
    const int shard = sync ? cluster.index : static_cast<int>(r->unit % workers);
    if (sync ? step >= total : r->unit < 0) break;
    if (stop_requested.load()) return stopped(step);
    Status s = trainer.ps_gradient(step, shard, params, grad);
    if (!s.ok()) return fail(s);
    // Async applies N pushes per global batch: each at lr / N, so that they
    // move the parameters as far as one synchronous step would.
    const double lr = trainer.lr_at(step) / static_cast<double>(sync ? 1 : workers);
    r = client.step(grad.data(), lr, sync ? step + 1 : 0, !sync, workers * total, params);
  }
  Result<PullResult> end = client.done(worker0, &params);
  if (!end.ok()) return fail(end.status());
  if (end->stopped) return stopped(total);
  if (!worker0) return kExitOk;
  Result<int> rc = reporter.at(total, *end, params);
  if (!rc.ok()) return fail(rc.status());
  if (*rc != kExitOk) return *rc;
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
  Status s = trainer.set_params(params);
  if (!s.ok()) return fail(s);
  Result<EvalResult> test = trainer.evaluate_test();
  if (!test.ok()) return fail(test.status());
  Line final_line = {{"step", total}, {"final", true}, {"test_loss", test->loss}, {"test_accuracy", test->accuracy},
                     {"train_seconds", seconds}};
  Reporter::add_staleness(final_line, end->stats);
  emit(metrics, final_line);
  log::info("test accuracy " + std::to_string(test->accuracy) + " after " + std::to_string(seconds) + " s");
  s = client.stop();
  if (!s.ok()) log::warn("the parameter servers did not confirm the stop: " + s.message());
  return kExitOk;
}

}  // namespace

int run_parameter_server_strategy(const TrainConfig& config, const EnvLookup& env, std::ostream& metrics,
                                  const std::atomic<bool>& stop_requested) {
  Result<Cluster> cluster = cluster_from_env(env);
  Status s = cluster.ok() ? check_ps_config(config, *cluster) : cluster.status();
  if (!s.ok()) {
    log::error(s.message());
    return kExitUsage;
  }
  // The wait for the servers (and their answers) is the rendezvous timeout
  // of the all-reduce runs: one knob for "how long may a peer be silent".
  Result<World> world = world_from_env([&](const std::string& name) -> std::optional<std::string> {
    return name == "SWEPT_RENDEZVOUS_TIMEOUT" ? env(name) : std::nullopt;
  });
  if (!world.ok()) {
    log::error(world.status().message());
    return kExitUsage;
  }
  if (cluster->role == Role::kServer) return serve_parameters(config, *cluster, stop_requested);
  return run_worker(config, *cluster, world->timeout, metrics, stop_requested);
}

}  // namespace swept::trainer
