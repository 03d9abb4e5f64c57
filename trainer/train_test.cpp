// The training loop in-process: synchronous replicas against one replica,
// checkpoints (round trip, corruption, mismatch), and learning on a small
// generated data set.
#include "trainer/train.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "trainer/checkpoint.h"
#include "trainer/test_util.h"

using namespace swept::trainer;

namespace {

MnistData small_data(uint32_t train = 1200, uint32_t test = 200) {
  TempDir dir("data");
  write_mnist_like(dir.path(), train, test, 5);
  auto d = load_mnist(dir.path());
  REQUIRE(d.ok());
  return std::move(*d);
}

TrainConfig base_config(ModelKind model, int batch) {
  TrainConfig c;
  c.model.kind = model;
  c.model.hidden = 32;
  c.model.hidden_activation = Activation::kSigmoid;
  c.optimizer.kind = OptimizerKind::kMomentum;
  c.optimizer.momentum = 0.9f;
  c.lr = model == ModelKind::kMlp ? 0.1 : 0.01;
  c.weight_decay = 1e-4;
  c.batch_size = batch;
  c.epochs = 100;
  c.val_fraction = 0.1;
  c.seed = 3;
  c.threads = 2;
  return c;
}

std::unique_ptr<Trainer> make_trainer(const TrainConfig& c, const MnistData& data, int replicas, int threads_each) {
  std::vector<std::unique_ptr<Backend>> backends;
  for (int r = 0; r < replicas; ++r) backends.push_back(make_cpu_backend(CpuBackendOptions{threads_each}));
  auto t = Trainer::create(c, data, std::move(backends), make_cpu_allreduce(replicas));
  REQUIRE(t.ok());
  return std::move(*t);
}

// Runs `steps` steps, returning the mean loss of each step; checks after
// every step that all replicas hold bit-identical weights.
std::vector<double> trajectory(Trainer& t, int steps) {
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    REQUIRE(t.train_step().ok());
    auto w = t.fold_window(true);
    REQUIRE(w.ok());
    losses.push_back(w->loss_sum / static_cast<double>(w->samples));
    auto p0 = t.params(0);
    REQUIRE(p0.ok());
    for (int r = 1; r < t.replicas(); ++r) {
      auto pr = t.params(r);
      REQUIRE(pr.ok());
      REQUIRE(*pr == *p0);  // identical, not merely close
    }
  }
  return losses;
}

void check_replicas_follow_one(ModelKind model, int batch) {
  const MnistData data = small_data(2400, 100);
  TrainConfig c = base_config(model, batch);
  c.model.dropout = 0.3f;  // masks depend on the global sample index, not the replica
  const int steps = 50;
  auto one = make_trainer(c, data, 1, 1);
  const std::vector<double> reference = trajectory(*one, steps);
  CHECK(reference.back() < reference.front());  // it learns
  for (int n : {2, 4}) {
    auto many = make_trainer(c, data, n, 1);
    const std::vector<double> losses = trajectory(*many, steps);
    double worst = 0;
    for (int s = 0; s < steps; ++s) worst = std::max(worst, std::abs(losses[s] - reference[s]) / reference[s]);
    INFO("replicas " << n << ": worst relative loss difference " << worst);
    CHECK(worst < 1e-5);
  }
}

}  // namespace

TEST_CASE("trainer: replicas (mlp): N = 2 and N = 4 follow N = 1 over 50 steps, weights identical after every step") {
  check_replicas_follow_one(ModelKind::kMlp, 64);
}

TEST_CASE("trainer: replicas (cnn): N = 2 and N = 4 follow N = 1 over 50 steps, weights identical after every step") {
  check_replicas_follow_one(ModelKind::kCnn, 8);
}

TEST_CASE("trainer: checkpoint: round trip, newest first, corruption detected") {
  TempDir dir("ckpt");
  CheckpointState s;
  s.model = "mlp";
  s.optimizer = "adam";
  s.tensors = {{"fc1.weight", {2, 3}}, {"fc1.bias", {2}}};
  s.batch_size = 10;
  s.train_count = 4;
  s.step = 12;
  s.epoch = 1;
  s.window_loss_sum = 1.5;
  s.params = {1, 2, 3, 4, 5, 6, 7, 8};
  s.state1 = std::vector<float>(8, 0.5f);
  s.state2 = std::vector<float>(8, 0.25f);
  s.order = {3, 1, 0, 2};
  REQUIRE(write_checkpoint(dir.path(), s, 2).ok());
  s.step = 24;
  s.params[0] = 42;
  REQUIRE(write_checkpoint(dir.path(), s, 2).ok());
  s.step = 36;
  REQUIRE(write_checkpoint(dir.path(), s, 2).ok());
  auto files = list_checkpoints(dir.path());
  REQUIRE(files.size() == 2);  // keep = 2 pruned step 12
  CHECK(files[0] == checkpoint_path(dir.path(), 36));
  auto back = read_checkpoint(files[1]);
  REQUIRE(back.ok());
  CHECK(back->step == 24);
  CHECK(back->params == s.params);
  CHECK(back->state2 == s.state2);
  CHECK(back->order == s.order);
  CHECK(back->tensors == s.tensors);
  CHECK(back->window_loss_sum == 1.5);

  SUBCASE("a flipped byte fails the checksum") {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
    f.close();
    auto r = read_checkpoint(files[0]);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == swept::StatusCode::kCorruption);
    CHECK(r.status().message().find(files[0]) != std::string::npos);
  }
  SUBCASE("a truncated file") {
    std::filesystem::resize_file(files[0], 50);
    auto r = read_checkpoint(files[0]);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == swept::StatusCode::kCorruption);
  }
  SUBCASE("not a checkpoint at all") {
    write_file(files[0], std::vector<uint8_t>(100, 'x'));
    auto r = read_checkpoint(files[0]);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("magic") != std::string::npos);
  }
}

TEST_CASE("trainer: restore refuses a checkpoint of another model or shape and accepts its own") {
  const MnistData data = small_data(600, 50);
  TrainConfig c = base_config(ModelKind::kMlp, 50);
  auto t = make_trainer(c, data, 1, 1);
  for (int i = 0; i < 3; ++i) REQUIRE(t->train_step().ok());
  auto snap = t->snapshot(1.0);
  REQUIRE(snap.ok());

  auto fresh = make_trainer(c, data, 2, 1);
  REQUIRE(fresh->restore(*snap).ok());
  CHECK(fresh->step() == 3);
  CHECK(*fresh->params(1) == *t->params(0));

  TrainConfig other = c;
  other.model.hidden = 16;
  auto t2 = make_trainer(other, data, 1, 1);
  auto s2 = t2->restore(*snap);
  REQUIRE_FALSE(s2.ok());
  CHECK(s2.code() == swept::StatusCode::kInvalidArgument);
  CHECK(s2.message().find("shapes") != std::string::npos);

  TrainConfig cnn = base_config(ModelKind::kCnn, 50);
  auto t3 = make_trainer(cnn, data, 1, 1);
  auto s3 = t3->restore(*snap);
  REQUIRE_FALSE(s3.ok());
  CHECK(s3.message().find("--model=mlp") != std::string::npos);
}

TEST_CASE("trainer: both models learn the generated data set") {
  const MnistData data = small_data(1200, 300);
  for (ModelKind model : {ModelKind::kMlp, ModelKind::kCnn}) {
    INFO(model_name(model));
    TrainConfig c = base_config(model, 32);
    c.optimizer.kind = OptimizerKind::kAdam;
    c.lr = 2e-3;
    auto t = make_trainer(c, data, 1, 2);
    for (int i = 0; i < 60; ++i) REQUIRE(t->train_step().ok());
    auto test = t->evaluate_test();
    REQUIRE(test.ok());
    CHECK(test->accuracy > 0.9);
  }
}
