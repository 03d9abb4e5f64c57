// web_gen: fills a swept database (store/schema.sql) with a large,
// realistic history for the dashboard's latency benchmark (bench/web_latency).
//
//   web_gen --db PATH [--trials 100000] [--metric-rows 10000000] [--sweeps 10]
//           [--long-trials 20] [--long-steps 10000] [--seed 1]
//
// Half of the trials belong to sweep 1 (the worst case for per-sweep queries),
// the rest are spread over the other sweeps. Trials have nested parameters
// (lr log-uniform, batch_size, hidden, optimizer, model.dropout), states in
// realistic proportions, two metrics (loss, accuracy) whose series follow a
// noisy decay, trial_latest and metric_value kept consistent with metrics, a
// log tail, attempts, and agents with GPUs holding the running trials. A few
// "long" trials get `--long-steps` steps to exercise downsampling. The metric
// rows add up to --metric-rows (to within one trial's worth).
//
// Rows go in with prepared statements in large transactions, in primary-key
// order, with synchronous=OFF (it is a scratch file): minutes on 2 cores.
// Refuses to overwrite an existing file. Exit 0 ok, 2 bad flags, 1 I/O error.
#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "common/states.h"
#include "store/state_checks.h"

namespace {

using swept::AgentState;
using swept::SweepState;
using swept::TrialState;

// A state's name as the database spells it (common/states.h).
template <typename State>
std::string sql_name(State s) {
  return std::string(swept::name(s));
}

#define GEN_SQLITE_CHECK(db, call)                                                               \
  do {                                                                                           \
    int _rc = (call);                                                                            \
    if (_rc != SQLITE_OK && _rc != SQLITE_DONE && _rc != SQLITE_ROW) {                           \
      std::fprintf(stderr, "web_gen: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,      \
                   sqlite3_errmsg(db));                                                          \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

struct Flags {
  std::string db;
  long trials = 100000;
  long metric_rows = 10000000;
  long sweeps = 10;
  long long_trials = 20;
  long long_steps = 10000;
  unsigned seed = 1;
};

int usage(const std::string& why) {
  std::cerr << "web_gen: " << why
            << "\nusage: web_gen --db PATH [--trials N] [--metric-rows N] [--sweeps N] [--long-trials N] "
               "[--long-steps N] [--seed N]\n";
  return 2;
}

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) { GEN_SQLITE_CHECK(db_, sqlite3_prepare_v2(db_, sql, -1, &s_, nullptr)); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt& i(int k, long long v) { sqlite3_bind_int64(s_, k, v); return *this; }
  Stmt& d(int k, double v) { sqlite3_bind_double(s_, k, v); return *this; }
  Stmt& t(int k, const std::string& v) { sqlite3_bind_text(s_, k, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); return *this; }
  Stmt& n(int k) { sqlite3_bind_null(s_, k); return *this; }
  void run() {
    GEN_SQLITE_CHECK(db_, sqlite3_step(s_));
    sqlite3_reset(s_);
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

void exec(sqlite3* db, const std::string& sql) { GEN_SQLITE_CHECK(db, sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr)); }

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  for (int a = 1; a < argc; ++a) {
    std::string k = argv[a];
    if (a + 1 >= argc) return usage("missing value after " + k);
    std::string v = argv[++a];
    try {
      if (k == "--db") f.db = v;
      else if (k == "--trials") f.trials = std::stol(v);
      else if (k == "--metric-rows") f.metric_rows = std::stol(v);
      else if (k == "--sweeps") f.sweeps = std::stol(v);
      else if (k == "--long-trials") f.long_trials = std::stol(v);
      else if (k == "--long-steps") f.long_steps = std::stol(v);
      else if (k == "--seed") f.seed = static_cast<unsigned>(std::stoul(v));
      else return usage("unknown flag " + k);
    } catch (const std::exception&) {
      return usage("bad number for " + k + ": " + v);
    }
  }
  if (f.db.empty()) return usage("--db is required");
  if (f.trials < f.sweeps || f.sweeps < 1 || f.metric_rows < 0) return usage("need trials >= sweeps >= 1");
  struct stat st {};
  if (::stat(f.db.c_str(), &st) == 0) return usage(f.db + " exists; web_gen only creates new files");

  auto t0 = std::chrono::steady_clock::now();
  sqlite3* db = nullptr;
  GEN_SQLITE_CHECK(db, sqlite3_open(f.db.c_str(), &db));
  exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; PRAGMA cache_size=-262144;");
  exec(db, swept::store::schema_sql());  // store/schema.sql, its state CHECKs filled

  std::mt19937_64 rng(f.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> noise(0, 1);
  const double now = 1.7e9;
  const int kAgents = 16, kGpusPerAgent = 8;

  exec(db, "BEGIN");
  Stmt sweep(db, "INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at) "
                 "VALUES (?, ?, ?, 'loss', 'minimize', ?, ?, ?, ?, ?)");
  std::vector<long> sweep_size(f.sweeps);
  sweep_size[0] = f.sweeps == 1 ? f.trials : f.trials / 2;
  for (long s = 1; s < f.sweeps; ++s) sweep_size[s] = (f.trials - sweep_size[0]) / (f.sweeps - 1);
  sweep_size[0] += f.trials - [&] { long sum = 0; for (long x : sweep_size) sum += x; return sum; }();
  for (long s = 0; s < f.sweeps; ++s) {
    sweep.i(1, s + 1).t(2, "bench sweep " + std::to_string(s + 1)).t(3, s % 2 ? "grid" : "random")
        .t(4, "method: random\nmetric: {name: loss, goal: minimize}\n").t(5, sql_name(s == 0 ? SweepState::kRunning : SweepState::kCompleted))
        .i(6, sweep_size[s]).i(7, sweep_size[s]).d(8, now + s);
    sweep.run();
  }
  Stmt agent(db, "INSERT INTO agents VALUES (?, ?, ?, 8, ?, ?)");
  Stmt gpu(db, "INSERT INTO agent_gpus VALUES (?, ?, ?, 'NVIDIA H100 80GB HBM3', 85899345920)");
  for (int a = 0; a < kAgents; ++a) {
    std::string name = "node-" + std::to_string(a);
    agent.t(1, name).t(2, name + ".cluster").t(3, sql_name(AgentState::kAlive)).d(4, now).d(5, now + 3600);
    agent.run();
    for (int g = 0; g < kGpusPerAgent; ++g) {
      gpu.t(1, name).i(2, g).t(3, "GPU-" + std::to_string(a) + "-" + std::to_string(g));
      gpu.run();
    }
  }

  // States: 80% completed, 8% failed, 10% queued; running: one per GPU slot
  // in sweep 1 (at most kAgents * kGpusPerAgent * 2, with half-GPU shares).
  const long running_target = kAgents * kGpusPerAgent * 2;
  long with_metrics = 0;
  std::vector<TrialState> states(f.trials);
  {
    long id = 0, running = 0;
    for (long s = 0; s < f.sweeps; ++s) {
      for (long k = 0; k < sweep_size[s]; ++k, ++id) {
        double u = unit(rng);
        TrialState state = u < 0.80   ? TrialState::kCompleted
                           : u < 0.88 ? TrialState::kFailed
                           : u < 0.90 ? TrialState::kStopped
                                      : TrialState::kQueued;
        if (s == 0 && state == TrialState::kQueued && running < running_target) state = TrialState::kRunning, ++running;
        if (s != 0 && state == TrialState::kQueued) state = TrialState::kCompleted;  // older sweeps are finished
        states[id] = state;
        if (state != TrialState::kQueued) ++with_metrics;
      }
    }
  }
  const long long_trials = std::min(f.long_trials, with_metrics);
  long long budget = f.metric_rows - 2LL * long_trials * f.long_steps;
  const long long others = std::max<long>(1, with_metrics - long_trials);
  const long steps_per_trial = static_cast<long>(std::max<long long>(1, (budget / 2 + others - 1) / others));

  Stmt trial(db, "INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, agent, gpus, gpu_fraction, env, "
                 "exit_code, reason, metric_value, created_at, started_at, ended_at) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  Stmt attempt(db, "INSERT INTO attempts VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?)");
  Stmt metric(db, "INSERT INTO metrics VALUES (?, ?, ?, ?)");
  Stmt latest(db, "INSERT INTO trial_latest VALUES (?, ?, ?, ?)");
  Stmt logs(db, "INSERT INTO trial_logs VALUES (?, ?)");
  const char* optimizers[] = {"adam", "sgd", "adamw"};
  const int batch_sizes[] = {32, 64, 128, 256};
  long long rows = 0;
  long id = 0, long_given = 0, gpu_slot = 0;
  for (long s = 0; s < f.sweeps; ++s) {
    for (long k = 0; k < sweep_size[s]; ++k, ++id) {
      const long trial_id = id + 1;
      const TrialState state = states[id];
      const bool completed = state == TrialState::kCompleted;
      double lr = std::pow(10.0, -5 + 4 * unit(rng));
      int batch = batch_sizes[rng() % 4];
      int hidden = 32 + static_cast<int>(rng() % 480);
      const char* opt = optimizers[rng() % 3];
      double dropout = std::round(unit(rng) * 50) / 100;
      char params[256];
      std::snprintf(params, sizeof params,
                    "{\"lr\":%.6g,\"batch_size\":%d,\"hidden\":%d,\"optimizer\":\"%s\",\"model\":{\"dropout\":%.2f}}", lr,
                    batch, hidden, opt, dropout);
      // The "true" quality of this configuration: best near lr = 1e-3, adam.
      double quality = std::fabs(std::log10(lr) + 3) * 0.3 + (opt[0] == 's' ? 0.15 : 0) + dropout * 0.2 + 64.0 / hidden * 0.1;
      bool has_metrics = state != TrialState::kQueued;
      long steps = 0;
      if (has_metrics) steps = long_given < long_trials ? (++long_given, f.long_steps) : steps_per_trial;
      std::string agent_name, gpus;
      double fraction = 0;
      if (state != TrialState::kQueued) {
        long slot = state == TrialState::kRunning ? gpu_slot++ : static_cast<long>(rng() % (kAgents * kGpusPerAgent * 2));
        agent_name = "node-" + std::to_string((slot / 2 / kGpusPerAgent) % kAgents);
        gpus = "[" + std::to_string((slot / 2) % kGpusPerAgent) + "]";
        fraction = 0.5;
      }
      double loss = 0, acc = 0;
      for (int name = 0; name < 2 && has_metrics; ++name) {  // "accuracy" < "loss": primary-key order
        for (long step = 0; step < steps; ++step) {
          double progress = static_cast<double>(step + 1) / static_cast<double>(steps);
          double l = quality + 2.3 * std::exp(-5 * progress) + 0.01 * noise(rng);
          double v = name == 0 ? 1 - l / 3 : l;
          metric.i(1, trial_id).t(2, name == 0 ? "accuracy" : "loss").i(3, step).d(4, v);
          metric.run();
          ++rows;
          if (name == 0) acc = v; else loss = v;
        }
        latest.i(1, trial_id).t(2, name == 0 ? "accuracy" : "loss").i(3, steps - 1).d(4, name == 0 ? acc : loss);
        latest.run();
      }
      trial.i(1, trial_id).i(2, s + 1).i(3, k).t(4, params)
          .t(5, "[\"swept-train\",\"--lr\",\"" + std::to_string(lr) + "\"]").t(6, sql_name(state)).i(7, has_metrics ? 1 : 0);
      if (has_metrics) trial.t(8, agent_name).t(9, gpus).d(10, fraction); else trial.n(8).n(9).n(10);
      trial.t(11, "{\"SWEPT_TRIAL_ID\":\"" + std::to_string(trial_id) + "\",\"CUDA_VISIBLE_DEVICES\":\"0\"}");
      bool ended = state != TrialState::kQueued && state != TrialState::kRunning;
      if (ended) trial.i(12, completed ? 0 : 1).t(13, completed ? "exit code 0" : "exit code 1");
      else trial.n(12).n(13);
      if (has_metrics) trial.d(14, loss); else trial.n(14);
      trial.d(15, now).d(16, now + 1);
      if (ended) trial.d(17, now + 100); else trial.n(17);
      trial.run();
      if (has_metrics) {
        attempt.i(1, trial_id).t(2, agent_name).t(3, gpus).d(4, fraction).t(5, sql_name(state));
        if (ended) attempt.i(6, completed ? 0 : 1).t(7, "exit code"); else attempt.n(6).n(7);
        attempt.d(8, now + 1);
        if (ended) attempt.d(9, now + 100); else attempt.n(9);
        attempt.run();
        logs.i(1, trial_id).t(2, "epoch 1/3 loss " + std::to_string(loss) + "\nsaved checkpoint\n");
        logs.run();
      }
      if (trial_id % 5000 == 0) {  // big transactions, not one giant one
        exec(db, "COMMIT");
        exec(db, "BEGIN");
      }
    }
  }
  exec(db, "COMMIT");
  exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  sqlite3_close(db);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("web_gen: %s: %ld sweeps, %ld trials, %lld metric rows (%ld long trials of %ld steps), %.1f s\n",
              f.db.c_str(), f.sweeps, f.trials, rows, long_trials, f.long_steps, secs);
  return 0;
}
