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

// Population-based training resumes a member from a checkpoint with other
// hyperparameters. The momentum update is v' = mu·v + g, p' = p - lr·v', with
// g = grad + wd·p on weights: from one step after the restore, g is
// recovered from the new velocity with the new mu, and must match the
// gradient a resume with the checkpoint's own settings computes (the same
// weights, batch and dropout masks), plus the change of weight decay times p.
TEST_CASE("trainer: restore with a new lr, momentum and weight decay keeps weights, velocity and step, and uses the new values") {
  const MnistData data = small_data(600, 50);
  TrainConfig c = base_config(ModelKind::kMlp, 50);
  c.model.dropout = 0.2f;
  auto t = make_trainer(c, data, 1, 1);
  for (int i = 0; i < 5; ++i) REQUIRE(t->train_step().ok());
  auto snap = t->snapshot(1.0);
  REQUIRE(snap.ok());

  auto one_step_after_restore = [&](const TrainConfig& config) {
    auto r = make_trainer(config, data, 1, 1);
    REQUIRE(r->restore(*snap).ok());
    CHECK(r->step() == 5);
    CHECK(r->current_lr() == doctest::Approx(config.lr));  // constant schedule
    REQUIRE(r->train_step().ok());
    CHECK(r->step() == 6);
    auto after = r->snapshot(2.0);
    REQUIRE(after.ok());
    return std::move(*after);
  };
  const CheckpointState same = one_step_after_restore(c);
  TrainConfig changed = c;
  changed.lr = 0.3;  // from 0.1
  changed.optimizer.momentum = 0.5f;
  changed.weight_decay = 1e-2;
  const CheckpointState moved = one_step_after_restore(changed);

  const ParamLayout layout = param_layout(c.model);
  double worst_p = 0, worst_g = 0, moved_norm = 0;
  for (const ParamTensor& p : layout.tensors) {
    for (size_t i = p.offset; i < p.offset + p.size; ++i) {
      const double v0 = snap->state1[i], p0 = snap->params[i];
      // The new lr moved the weights by lr·v'.
      worst_p = std::max(worst_p, std::abs(moved.params[i] - (p0 - changed.lr * moved.state1[i])));
      const double g_moved = moved.state1[i] - 0.5 * v0;
      const double g_same = same.state1[i] - static_cast<double>(c.optimizer.momentum) * v0;
      const double wd_delta = p.is_weight ? (changed.weight_decay - c.weight_decay) * p0 : 0.0;
      worst_g = std::max(worst_g, std::abs(g_moved - (g_same + wd_delta)));
      moved_norm = std::max(moved_norm, static_cast<double>(std::abs(moved.params[i] - same.params[i])));
    }
  }
  CHECK(worst_p < 1e-6);
  CHECK(worst_g < 1e-5);
  CHECK(moved_norm > 1e-4);  // the two resumes really differ
  // The resumed checkpoint records the values in force.
  CHECK(describe_hyperparameter_changes(snap->hyperparameters, moved.hyperparameters) ==
        "lr 0.1 -> 0.3, momentum 0.9 -> 0.5, weight_decay 0.0001 -> 0.01");
  CHECK(describe_hyperparameter_changes(snap->hyperparameters, same.hyperparameters).empty());
}

// The data position is kept in samples: 540 training samples, batch 50 (10
// steps an epoch, the last 40 samples skipped), 4 steps = 200 samples in;
// at batch 100 the epoch continues at 200 and ends after 3 steps (500), and
// --epochs=2 then needs 5 more steps of 100.
TEST_CASE("trainer: restore with another batch size continues the epoch where it stopped") {
  const MnistData data = small_data(600, 50);
  TrainConfig c = base_config(ModelKind::kMlp, 50);
  c.epochs = 2;
  auto t = make_trainer(c, data, 1, 1);
  REQUIRE(t->total_steps() == 20);
  for (int i = 0; i < 4; ++i) REQUIRE(t->train_step().ok());
  auto snap = t->snapshot(1.0);
  REQUIRE(snap.ok());
  CHECK(snap->epoch_position == 200);

  TrainConfig big = c;
  big.batch_size = 100;
  auto r = make_trainer(big, data, 2, 1);  // 2 replicas of 50 each
  REQUIRE(r->restore(*snap).ok());
  CHECK(r->step() == 4);
  CHECK(r->epoch() == 0);
  CHECK(r->epoch_position() == 200);
  CHECK(r->total_steps() == 4 + 3 + 5);
  for (int i = 0; i < 3; ++i) REQUIRE(r->train_step().ok());
  CHECK(r->epoch() == 1);
  CHECK(r->epoch_position() == 0);
  auto later = r->snapshot(2.0);
  REQUIRE(later.ok());
  // The next epoch's order, not the checkpoint's.
  CHECK(later->order == epoch_order(540, c.seed, 1));
  CHECK(later->order != snap->order);

  SUBCASE("a batch larger than the rest of the epoch starts the next epoch") {
    for (int i = 0; i < 5; ++i) REQUIRE(t->train_step().ok());  // 9 steps: 450 of 540
    auto late = t->snapshot(1.0);
    REQUIRE(late.ok());
    auto r2 = make_trainer(big, data, 1, 1);
    REQUIRE(r2->restore(*late).ok());
    CHECK(r2->epoch() == 1);
    CHECK(r2->epoch_position() == 0);
    CHECK(r2->total_steps() == 9 + 5);
  }
  SUBCASE("a checkpoint without epoch_position (older files) takes it from the step") {
    CheckpointState old = *snap;
    old.epoch_position = -1;
    old.hyperparameters.clear();
    auto r3 = make_trainer(big, data, 1, 1);
    REQUIRE(r3->restore(old).ok());
    CHECK(r3->epoch_position() == 200);
  }
}

TEST_CASE("trainer: checkpoint: epoch position and hyperparameters round trip, and changes are named") {
  TempDir dir("ckpt-hyper");
  CheckpointState s;
  s.model = "mlp";
  s.optimizer = "sgd";
  s.tensors = {{"fc1.bias", {2}}};
  s.batch_size = 2;
  s.train_count = 4;
  s.step = 3;
  s.epoch = 1;
  s.epoch_position = 2;
  s.hyperparameters = {{"lr", "0.002"}, {"nesterov", "false"}, {"batch_size", "2"}};
  s.params = {1, 2};
  s.order = {0, 1, 2, 3};
  REQUIRE(write_checkpoint(dir.path(), s, 2).ok());
  auto back = read_checkpoint(checkpoint_path(dir.path(), 3));
  REQUIRE(back.ok());
  CHECK(back->epoch_position == 2);
  CHECK(describe_hyperparameter_changes(back->hyperparameters, s.hyperparameters).empty());
  CHECK(describe_hyperparameter_changes(back->hyperparameters, {{"lr", "0.004"}, {"batch_size", "2"}, {"dropout", "0.5"}}) ==
        "lr 0.002 -> 0.004, dropout ? -> 0.5");
}
