// swept-train as a real process: an end-to-end run on a generated IDX data
// set, exit codes for bad input / missing CUDA / divergence, SIGTERM, and
// resume after SIGKILL giving the same metrics and weights as a run that was
// never stopped. The kill point is found by reading the child's metric lines
// (its stdout pipe is shrunk to one page, so it cannot run far ahead of the
// reader); waits have deadlines, never sleeps.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics_line.h"
#include "common/testing/eventually.h"
#include "trainer/checkpoint.h"
#include "trainer/cpu/kernel_choice.h"
#include "trainer/test_child.h"
#include "trainer/test_util.h"

using namespace swept::trainer;
using swept::trainer::testing::Child;
using swept::trainer::testing::Clock;

namespace {

int64_t step_of(const std::string& line) {
  auto rec = swept::parse_metrics_line(line);
  return rec && rec->step ? *rec->step : -1;
}

// The line without its timing member, for comparing runs.
nlohmann::json without_timing(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line);
  j.erase("samples_per_sec");
  j.erase("train_seconds");
  return j;
}

std::vector<std::string> resume_args(const std::string& data, const std::string& dir, const std::string& model) {
  std::vector<std::string> args = {"--data=" + data, "--model=" + model, "--optimizer=adam", "--lr=0.003",
                                   "--dropout=0.2", "--batch_size=20", "--epochs=3", "--log_every=1",
                                   "--eval_every=25", "--checkpoint_every=7", "--checkpoint_dir=" + dir,
                                   "--threads=2", "--seed=9"};
  if (model == "mlp") args.push_back("--hidden=24");
  return args;
}

}  // namespace

TEST_CASE("trainer: end to end: a short run on a generated data set writes valid metric lines and learns") {
  TempDir data("e2e");
  write_mnist_like(data.path(), 1100, 300, 2);
  Child c({"--data=" + data.path(), "--epochs=2", "--batch_size=50", "--log_every=5", "--threads=2",
           "--activation=relu", "--optimizer=adam", "--lr=0.003"});
  CHECK(c.wait_exit() == 0);
  INFO(c.err());
  REQUIRE(c.lines().size() > 3);
  bool saw_loss = false, saw_val = false;
  for (const std::string& line : c.lines()) {
    auto rec = swept::parse_metrics_line(line);
    REQUIRE_MESSAGE(rec.has_value(), line);
    for (const auto& [name, value] : rec->values) {
      saw_loss |= name == "loss";
      saw_val |= name == "val_accuracy";
    }
  }
  CHECK(saw_loss);
  CHECK(saw_val);
  auto final_line = nlohmann::json::parse(c.lines().back());
  CHECK(final_line["final"] == true);
  CHECK(final_line["test_accuracy"].get<double>() > 0.9);
  CHECK(final_line.contains("train_seconds"));
  CHECK(c.err().find("INFO") != std::string::npos);  // logs on stderr, not stdout

  SUBCASE("the cnn too, with SWEPT_DATA_DIR instead of --data") {
    Child cnn({"--model=cnn", "--max_steps=6", "--batch_size=16", "--log_every=3", "--threads=2"},
              {{"SWEPT_DATA_DIR", data.path()}, {"SWEPT_GPU_MEMORY_FRACTION", "0.3"}});
    CHECK(cnn.wait_exit() == 0);
    REQUIRE(!cnn.lines().empty());
    CHECK(nlohmann::json::parse(cnn.lines().back())["final"] == true);
  }
}

TEST_CASE("trainer: --device=cuda without CUDA (or with no such GPU) exits 4 with a clear message") {
  Child version({"--version"});
  REQUIRE(version.wait_exit() == 0);
  REQUIRE(!version.lines().empty());
  const bool built_without_cuda = version.lines()[0].find("built without CUDA") != std::string::npos;
  TempDir data("cuda");
  write_mnist_like(data.path(), 200, 20, 2);
  // A build with CUDA cannot have device 99 on any machine this runs on.
  Child c({"--data=" + data.path(), built_without_cuda ? "--device=cuda" : "--device=cuda:99"});
  CHECK(c.wait_exit() == 4);
  if (built_without_cuda) CHECK(c.err().find("built without CUDA") != std::string::npos);
  CHECK(c.err().find("--device") != std::string::npos);
  CHECK(c.lines().empty());
}

TEST_CASE("trainer: bad flags and bad data exit 2 with a message") {
  TempDir data("bad");
  write_mnist_like(data.path(), 200, 20, 2);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--lr=-1"}, "--lr"},
      {{"--no_such_option"}, "no_such_option"},
      {{"--batch_size=10", "--replicas=3"}, "divisible"},
      {{"--batch_size=500"}, "larger than"},
      {{"--data=" + data.path()}, "more than once"},
  };
  for (const auto& [extra, needle] : cases) {
    std::vector<std::string> args = {"--data=" + data.path()};
    args.insert(args.end(), extra.begin(), extra.end());
    Child c(args);
    INFO(extra[0]);
    CHECK(c.wait_exit() == 2);
    CHECK(c.err().find(needle) != std::string::npos);
  }
  Child missing({"--data=/nonexistent/mnist"});
  CHECK(missing.wait_exit() == 2);
  CHECK(missing.err().find("/nonexistent/mnist/train-images-idx3-ubyte") != std::string::npos);
  // A truncated image file.
  std::filesystem::resize_file(data.path() + "/" + kTestImages, 1000);
  Child c({"--data=" + data.path()});
  CHECK(c.wait_exit() == 2);
  CHECK(c.err().find("truncated") != std::string::npos);
  CHECK(c.err().find(kTestImages) != std::string::npos);
}

TEST_CASE("trainer: a diverging run ends with a \"diverged\" line and exit 3") {
  TempDir data("div");
  write_mnist_like(data.path(), 400, 20, 2);
  Child c({"--data=" + data.path(), "--activation=relu", "--lr=1e12", "--batch_size=20", "--log_every=2"});
  CHECK(c.wait_exit() == 3);
  REQUIRE(!c.lines().empty());
  auto rec = swept::parse_metrics_line(c.lines().back());
  REQUIRE(rec.has_value());
  CHECK(rec->final);
  CHECK(rec->diverged);
  CHECK(c.err().find("diverged") != std::string::npos);
}

namespace {

void check_resume_after_sigkill(const std::string& model) {
  TempDir data("resume");
  write_mnist_like(data.path(), 1000, 100, 4);  // 900 training samples: 45 steps per epoch, 135 in all
  TempDir straight_dir("straight"), killed_dir("killed");

  Child straight(resume_args(data.path(), straight_dir.path(), model));
  REQUIRE(straight.wait_exit() == 0);

  {
    Child victim(resume_args(data.path(), killed_dir.path(), model));
    auto seen = victim.wait_for_line([](const std::string& l) { return step_of(l) >= 60; });
    REQUIRE(seen.has_value());
    victim.signal(SIGKILL);
    CHECK(victim.wait_exit() == 128 + SIGKILL);
    REQUIRE(nlohmann::json::parse(victim.lines().back())["step"].get<int64_t>() < 135);  // it had not finished
  }
  std::vector<std::string> args = resume_args(data.path(), killed_dir.path(), model);
  args.push_back("--resume");
  Child resumed(args);
  REQUIRE(resumed.wait_exit() == 0);
  INFO(resumed.err());
  CHECK(resumed.err().find("resumed from") != std::string::npos);
  REQUIRE(!resumed.lines().empty());

  // Every line the resumed run printed equals the uninterrupted run's line
  // of the same step and kind (timing aside).
  std::map<std::pair<int64_t, std::string>, nlohmann::json> reference;
  for (const std::string& l : straight.lines()) {
    auto j = without_timing(l);
    const std::string kind = j.contains("final") ? "final" : j.contains("val_loss") ? "val" : "train";
    reference[{j["step"].get<int64_t>(), kind}] = j;
  }
  const int64_t first_resumed_step = step_of(resumed.lines().front());
  CHECK(first_resumed_step > 1);
  for (const std::string& l : resumed.lines()) {
    auto j = without_timing(l);
    const std::string kind = j.contains("final") ? "final" : j.contains("val_loss") ? "val" : "train";
    auto it = reference.find({j["step"].get<int64_t>(), kind});
    REQUIRE(it != reference.end());
    CHECK(it->second == j);
  }
  // And the final weights and optimizer state, bit for bit.
  auto a = read_checkpoint(list_checkpoints(straight_dir.path()).front());
  auto b = read_checkpoint(list_checkpoints(killed_dir.path()).front());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->step == 135);
  CHECK(b->step == 135);
  CHECK(a->params == b->params);
  CHECK(a->state1 == b->state1);
  CHECK(a->state2 == b->state2);
}

}  // namespace

TEST_CASE("trainer: resume after SIGKILL ends with the same metrics and weights as a run never stopped") {
  check_resume_after_sigkill("mlp");
}

// The CNN's kernels (direct conv1, oneDNN's channel-blocked conv2, the
// pooling of its blocked output) are as reproducible as the MLP's.
TEST_CASE("trainer: resume after SIGKILL of the CNN ends with the same metrics and weights as a run never stopped") {
  check_resume_after_sigkill("cnn");
}

TEST_CASE("trainer: SIGTERM writes a checkpoint and exits 130, and a corrupt newest checkpoint is skipped on resume") {
  TempDir data("term");
  write_mnist_like(data.path(), 1000, 100, 4);
  TempDir dir("term-ckpt");
  std::vector<std::string> args = resume_args(data.path(), dir.path(), "mlp");
  // Only SIGTERM and the end write one; and long enough (20,000 steps) that
  // the signal lands before the end on a loaded machine too (with 150 steps
  // the run sometimes ended first).
  for (std::string& a : args) {
    if (a.rfind("--checkpoint_every=", 0) == 0) a = "--checkpoint_every=1000000";
    if (a.rfind("--epochs=", 0) == 0) a = "--epochs=400";
  }
  Child c(args);
  auto seen = c.wait_for_line([](const std::string& l) { return step_of(l) >= 20; });
  REQUIRE(seen.has_value());
  c.signal(SIGTERM);
  CHECK(c.wait_exit(30) == 130);
  CHECK(c.err().find("stopped by signal") != std::string::npos);
  auto files = list_checkpoints(dir.path());
  REQUIRE(files.size() == 1);
  auto state = read_checkpoint(files[0]);
  REQUIRE(state.ok());
  CHECK(state->step >= 20);

  // A corrupt "newer" checkpoint beside it is skipped with a warning.
  write_file(checkpoint_path(dir.path(), state->step + 5), std::vector<uint8_t>(64, 1));
  args.push_back("--resume");
  Child resumed(args);
  CHECK(resumed.wait_exit() == 0);
  CHECK(resumed.err().find("trying an older checkpoint") != std::string::npos);
  CHECK(resumed.err().find("resumed from " + files[0]) != std::string::npos);
}

TEST_CASE("trainer: resuming with another model is a clear error (exit 2), not a crash") {
  TempDir data("mismatch");
  write_mnist_like(data.path(), 400, 20, 4);
  TempDir dir("mismatch-ckpt");
  Child first({"--data=" + data.path(), "--max_steps=5", "--batch_size=20", "--checkpoint_dir=" + dir.path()});
  REQUIRE(first.wait_exit() == 0);
  Child second({"--data=" + data.path(), "--max_steps=10", "--batch_size=20", "--hidden=50",
                "--checkpoint_dir=" + dir.path(), "--resume"});
  CHECK(second.wait_exit() == 2);
  CHECK(second.err().find("other shapes") != std::string::npos);
}

// The fault of issue 13: OpenBLAS names the CPU by its model, and on a VM that
// presents a generic "Intel(R) Xeon(R) Processor" it runs its SSE3 Prescott
// kernels. OPENBLAS_CORETYPE=Prescott makes OpenBLAS do exactly that on any
// CPU (set here for the child only, to simulate the fault); swept-train must
// still run the kernels the CPU's features allow, and compute the same bits
// as without the fault (its float path does not go through OpenBLAS).
TEST_CASE("trainer: with OpenBLAS on its generic Prescott core, swept-train still runs the fast kernels") {
  const swept::trainer::cpu::KernelChoice& here = swept::trainer::cpu::kernel_choice();
  const char* expected_loops = swept::trainer::cpu::cpu_supports(swept::trainer::cpu::SimdLevel::kAvx512) ? "loops x86-64-v4"
                               : swept::trainer::cpu::cpu_supports(swept::trainer::cpu::SimdLevel::kAvx2) ? "loops x86-64-v3"
                                                                                                          : "loops x86-64 ";
  INFO("this CPU: " << here.description());
  TempDir data("prescott");
  write_mnist_like(data.path(), 600, 100, 4);
  const std::vector<std::string> args = {"--data=" + data.path(), "--model=cnn", "--max_steps=8", "--batch_size=16",
                                         "--log_every=2", "--threads=2"};
  Child fault(args, {{"OPENBLAS_CORETYPE", "Prescott"}});
  REQUIRE(fault.wait_exit() == 0);
  Child normal(args);
  REQUIRE(normal.wait_exit() == 0);
  for (const Child* c : {&fault, &normal}) {
    // The first log line names the kernels in use, and they are the fast ones.
    const std::string first = c->err().substr(0, c->err().find('\n'));
    INFO(first);
    CHECK(first.find("CPU kernels: oneDNN") != std::string::npos);
    CHECK(first.find(expected_loops) != std::string::npos);
    if (here.cap.empty()) CHECK(first.find(here.gemm) != std::string::npos);
  }
  REQUIRE(fault.lines().size() == normal.lines().size());
  for (size_t i = 0; i < fault.lines().size(); ++i) CHECK(without_timing(fault.lines()[i]) == without_timing(normal.lines()[i]));
}

// `swept run examples/grid-basic.json` once ended with "no completed trial
// reported val_loss": runs cut short by --max_steps never reached an epoch's
// end. The last step now always evaluates the validation split.
TEST_CASE("trainer: a run ended by --max_steps mid-epoch reports val_loss at its last step") {
  TempDir data("maxsteps");
  write_mnist_like(data.path(), 1200, 100, 5);
  // 1100 training samples / 50 = 22 steps per epoch; stop at 7, then at 30.
  for (int max_steps : {7, 30}) {
    Child c({"--data=" + data.path(), "--max_steps=" + std::to_string(max_steps), "--batch_size=50",
             "--val_fraction=0.08", "--log_every=5", "--threads=1"});
    REQUIRE(c.wait_exit() == 0);
    CAPTURE(max_steps);
    int evaluations_at_end = 0;
    for (const std::string& line : c.lines()) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j.contains("val_loss") && j["step"] == max_steps) ++evaluations_at_end;
    }
    CHECK(evaluations_at_end == 1);
    CHECK(nlohmann::json::parse(c.lines().back())["final"] == true);
  }
}

// What a population-based training member does: a segment ends (here at
// --max_steps), the next starts from the checkpoint in SWEPT_CHECKPOINT_DIR
// (only --resume on the command line) with other hyperparameters. 1000
// samples, 1/12 held out: 916 to train, 20 a batch = 45 steps an epoch.
TEST_CASE("trainer: --resume from SWEPT_CHECKPOINT_DIR with a new lr and batch size continues the series and logs the change") {
  TempDir data("pbt");
  write_mnist_like(data.path(), 1000, 100, 4);
  TempDir dir("pbt-ckpt");
  const std::map<std::string, std::string> env = {{"SWEPT_CHECKPOINT_DIR", dir.path()}};
  auto args = [&](const std::string& lr, const std::string& batch, const std::string& max_steps) {
    return std::vector<std::string>{"--data=" + data.path(), "--optimizer=momentum", "--schedule=constant",
                                    "--lr=" + lr, "--batch_size=" + batch, "--max_steps=" + max_steps,
                                    "--log_every=5", "--threads=1", "--resume"};
  };
  Child first(args("0.05", "20", "10"), env);
  REQUIRE(first.wait_exit() == 0);
  INFO(first.err());
  REQUIRE(list_checkpoints(dir.path()).size() == 1);  // --resume alone made the folder the checkpoint folder
  CHECK(first.err().find("no checkpoint in " + dir.path() + ", starting from step 0") != std::string::npos);

  Child second(args("0.1", "40", "20"), env);
  REQUIRE(second.wait_exit() == 0);
  INFO(second.err());
  CHECK(second.err().find("resumed from " + checkpoint_path(dir.path(), 10) + " at step 10") != std::string::npos);
  CHECK(second.err().find("hyperparameters changed on resume: lr 0.05 -> 0.1, batch_size 20 -> 40, max_steps 10 -> 20") !=
        std::string::npos);
  // The series goes on from step 10, at the new learning rate.
  std::vector<int64_t> loss_steps;
  for (const std::string& line : second.lines()) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.contains("loss") || j.contains("final")) continue;
    loss_steps.push_back(j["step"].get<int64_t>());
    CHECK(j["lr"].get<double>() == doctest::Approx(0.1));
    CHECK(j["epoch"] == 0);
  }
  CHECK(loss_steps == std::vector<int64_t>{15, 20});
  auto last = read_checkpoint(list_checkpoints(dir.path()).front());
  REQUIRE(last.ok());
  CHECK(last->step == 20);
  CHECK(last->epoch_position == 10 * 20 + 10 * 40);

  SUBCASE("another architecture still refuses, naming it") {
    std::vector<std::string> wider = args("0.1", "40", "30");
    wider.push_back("--hidden=50");
    Child third(wider, env);
    CHECK(third.wait_exit() == 2);
    CHECK(third.err().find("other shapes") != std::string::npos);
  }
  SUBCASE("without SWEPT_CHECKPOINT_DIR, --resume alone is a usage error") {
    Child third(args("0.1", "40", "30"));
    CHECK(third.wait_exit() == 2);
    CHECK(third.err().find("--resume needs --checkpoint_dir (or SWEPT_CHECKPOINT_DIR") != std::string::npos);
  }
}

// A checkpoint copied into a member's folder that arrived cut short must not
// be taken for "no checkpoint": that would silently restart from step 0.
TEST_CASE("trainer: --resume with only a truncated checkpoint exits 2 naming the file, not a fresh start") {
  TempDir data("trunc");
  write_mnist_like(data.path(), 400, 20, 4);
  TempDir dir("trunc-ckpt");
  const std::vector<std::string> args = {"--data=" + data.path(), "--max_steps=5", "--batch_size=20", "--threads=1",
                                         "--checkpoint_dir=" + dir.path(), "--resume"};
  Child first(args);
  REQUIRE(first.wait_exit() == 0);
  const std::string file = checkpoint_path(dir.path(), 5);
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  Child second(args);
  CHECK(second.wait_exit() == 2);
  INFO(second.err());
  CHECK(second.err().find("checkpoint " + file + ": checksum mismatch") != std::string::npos);
  CHECK(second.err().find("no checkpoint in " + dir.path() + " passes its checks") != std::string::npos);
  CHECK(second.lines().empty());
}

// bench/pbt_mnist.sh counts the steps until a member first reaches a test
// accuracy, so the test set is evaluated along the way on request.
TEST_CASE("trainer: --test_every reports test accuracy at its steps, and the final line at the last") {
  TempDir data("testevery");
  write_mnist_like(data.path(), 400, 60, 4);
  Child c({"--data=" + data.path(), "--max_steps=12", "--batch_size=20", "--test_every=5", "--threads=1"});
  REQUIRE(c.wait_exit() == 0);
  std::vector<int64_t> test_steps;
  for (const std::string& line : c.lines()) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("test_accuracy")) test_steps.push_back(j["step"].get<int64_t>());
  }
  CHECK(test_steps == std::vector<int64_t>{5, 10, 12});
  CHECK(nlohmann::json::parse(c.lines().back())["final"] == true);
}

// A PBT segment's end (SWEPT_PBT_STOP_STEP, set by the scheduler): at that
// step the trainer reports, saves and waits for SIGTERM, so the checkpoint the
// next segment (or another member) continues from is exactly the step the
// round ranked, and no step runs past it.
TEST_CASE("trainer: at SWEPT_PBT_STOP_STEP it saves, waits for SIGTERM and exits 130 with the checkpoint at that step") {
  TempDir data("stopstep");
  write_mnist_like(data.path(), 400, 20, 4);
  TempDir dir("stopstep-ckpt");
  Child c({"--data=" + data.path(), "--max_steps=1000", "--batch_size=20", "--log_every=1", "--eval_every=7",
           "--threads=1", "--resume"},
          {{"SWEPT_CHECKPOINT_DIR", dir.path()}, {"SWEPT_PBT_STOP_STEP", "7"}});
  REQUIRE(c.wait_for_line([](const std::string& l) { return l.find("val_accuracy") != std::string::npos; }));
  // Saved while it waits, before any signal.
  REQUIRE(swept::testing::eventually([&] { return !list_checkpoints(dir.path()).empty(); }));
  c.signal(SIGTERM);
  CHECK(c.wait_exit(30) == 130);
  INFO(c.err());
  CHECK(c.err().find("at step 7 (SWEPT_PBT_STOP_STEP): checkpoint written") != std::string::npos);
  const auto files = list_checkpoints(dir.path());
  REQUIRE(files.size() == 1);
  CHECK(files[0] == checkpoint_path(dir.path(), 7));
  for (const std::string& line : c.lines()) CHECK(step_of(line) <= 7);

  SUBCASE("a value that is not a step is exit 2 naming the variable") {
    Child bad({"--data=" + data.path(), "--max_steps=5", "--batch_size=20"}, {{"SWEPT_PBT_STOP_STEP", "soon"}});
    CHECK(bad.wait_exit() == 2);
    CHECK(bad.err().find("SWEPT_PBT_STOP_STEP=soon") != std::string::npos);
  }
}
