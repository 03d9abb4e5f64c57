// The command line: spellings, --config files, defaults, range checks, the
// environment; and the learning-rate schedules.
#include "trainer/options.h"

#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "trainer/schedule.h"
#include "trainer/test_util.h"

using namespace swept::trainer;

namespace {
EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}
swept::Result<CommandLine> parse(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  return parse_command_line(args, env_of(std::move(env)));
}
}  // namespace

TEST_CASE("trainer: defaults depend on the model") {
  auto mlp = parse({});
  REQUIRE(mlp.ok());
  CHECK(mlp->config.model.kind == ModelKind::kMlp);
  CHECK(mlp->config.model.hidden == 100);
  CHECK(mlp->config.batch_size == 100);
  CHECK(mlp->config.epochs == 5);
  auto cnn = parse({"--model=cnn"});
  REQUIRE(cnn.ok());
  CHECK(cnn->config.optimizer.kind == OptimizerKind::kAdam);
  CHECK(cnn->config.lr == doctest::Approx(2e-3));
  CHECK(cnn->config.batch_size == 128);
  CHECK(cnn->config.epochs == 2);
}

TEST_CASE("trainer: underscore and hyphen spellings, separate values, booleans") {
  auto a = parse({"--batch_size=50", "--weight-decay", "0.01", "--nesterov", "--optimizer=momentum", "--scale-lr=true",
                  "--max-steps=7", "--lr=0.2"});
  REQUIRE(a.ok());
  CHECK(a->config.batch_size == 50);
  CHECK(a->config.weight_decay == doctest::Approx(0.01));
  CHECK(a->config.optimizer.nesterov);
  CHECK(a->config.scale_lr);
  CHECK(a->config.max_steps == 7);
  CHECK(a->config.lr == doctest::Approx(0.2));
  auto b = parse({"--nesterov=False"});
  REQUIRE(b.ok());
  CHECK_FALSE(b->config.optimizer.nesterov);
}

TEST_CASE("trainer: --config file: same names, the command line wins, bad files are errors naming the file") {
  TempDir dir("opts");
  const std::string path = dir.path() + "/c.json";
  write_file(path, std::vector<uint8_t>{});
  auto put = [&](const std::string& text) { write_file(path, std::vector<uint8_t>(text.begin(), text.end())); };
  put(R"({"model": "cnn", "lr": 0.01, "batch-size": 64, "nesterov": true, "hidden": 50})");
  auto a = parse({"--config", path, "--lr=0.5"});
  REQUIRE(a.ok());
  CHECK(a->config.model.kind == ModelKind::kCnn);
  CHECK(a->config.lr == doctest::Approx(0.5));
  CHECK(a->config.batch_size == 64);
  CHECK(a->config.optimizer.nesterov);
  put(R"({"learning_rate": 0.1})");
  auto b = parse({"--config=" + path});
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().message().find(path) != std::string::npos);
  CHECK(b.status().message().find("learning_rate") != std::string::npos);
  put("{not json");
  auto c = parse({"--config=" + path});
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("not valid JSON") != std::string::npos);
  put(R"({"lr": [1]})");
  CHECK_FALSE(parse({"--config=" + path}).ok());
  CHECK_FALSE(parse({"--config=/nonexistent.json"}).ok());
}

TEST_CASE("trainer: bad values are InvalidArgument errors that name the option") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--lr=0"}, "--lr"},
      {{"--lr=-1"}, "--lr"},
      {{"--lr=abc"}, "lr"},
      {{"--batch_size=0"}, "--batch_size"},
      {{"--batch_size=100", "--replicas=3"}, "divisible"},
      {{"--model=rnn"}, "--model"},
      {{"--optimizer=lbfgs"}, "--optimizer"},
      {{"--schedule=poly"}, "--schedule"},
      {{"--dropout=1"}, "--dropout"},
      {{"--momentum=1.5"}, "--momentum"},
      {{"--val_fraction=1"}, "--val_fraction"},
      {{"--device=tpu"}, "--device"},
      {{"--device=cuda:x"}, "--device"},
      {{"--log_every=0"}, "--log_every"},
      {{"--resume"}, "--checkpoint_dir"},
      {{"--no_such_flag=1"}, "no_such_flag"},
      {{"stray"}, "stray"},
      {{"--device=cuda", "--gpu_memory_fraction=1.5"}, "(0, 1]"},
  };
  for (const auto& [args, needle] : cases) {
    INFO(args[0]);
    auto r = parse(args);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == swept::StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(needle) != std::string::npos);
  }
}

TEST_CASE("trainer: data folder: --data, else SWEPT_DATA_DIR, else the per-user folder (XDG)") {
  CHECK(parse({"--data=/a"}, {{"SWEPT_DATA_DIR", "/b"}})->config.data_dir == "/a");
  CHECK(parse({}, {{"SWEPT_DATA_DIR", "/b"}, {"HOME", "/h"}})->config.data_dir == "/b");
  CHECK(parse({}, {{"HOME", "/h"}})->config.data_dir == "/h/.local/share/swept/mnist");
  CHECK(parse({}, {{"HOME", "/h"}, {"XDG_DATA_HOME", "/x"}})->config.data_dir == "/x/swept/mnist");
  // The XDG spec: a relative XDG_DATA_HOME is invalid and ignored.
  CHECK(parse({}, {{"HOME", "/h"}, {"XDG_DATA_HOME", "rel"}})->config.data_dir == "/h/.local/share/swept/mnist");
  // No HOME: the password database's home; never a path of the build machine.
  const std::string fallback = parse({})->config.data_dir;
  CHECK(fallback.ends_with("/.local/share/swept/mnist"));
  CHECK(fallback.find(SWEPT_SOURCE_DIR) == std::string::npos);
  // --help names the rule, not a folder baked in at build time.
  const std::string help = parse({"--help"})->text;
  CHECK(help.find("XDG_DATA_HOME") != std::string::npos);
  CHECK(help.find(SWEPT_SOURCE_DIR) == std::string::npos);
}

// A swept agent gives each trial SWEPT_CHECKPOINT_DIR; --resume alone uses
// it (a PBT sweep's command needs no path), --checkpoint_dir still wins, and
// without --resume nothing is checkpointed unless asked.
TEST_CASE("trainer: checkpoint folder: --checkpoint_dir, else SWEPT_CHECKPOINT_DIR with --resume") {
  const std::map<std::string, std::string> agent = {{"SWEPT_CHECKPOINT_DIR", "/trial/checkpoints"}};
  CHECK(parse({"--resume"}, agent)->config.checkpoint_dir == "/trial/checkpoints");
  CHECK(parse({"--resume", "--checkpoint_dir=/mine"}, agent)->config.checkpoint_dir == "/mine");
  CHECK(parse({}, agent)->config.checkpoint_dir.empty());
  auto none = parse({"--resume"}, {{"SWEPT_CHECKPOINT_DIR", ""}});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("--resume needs --checkpoint_dir (or SWEPT_CHECKPOINT_DIR") != std::string::npos);
}

TEST_CASE("trainer: SWEPT_GPU_MEMORY_FRACTION: ignored on the CPU, validated for CUDA") {
  CHECK(parse({}, {{"SWEPT_GPU_MEMORY_FRACTION", "0.4"}}).ok());
  CHECK(parse({}, {{"SWEPT_GPU_MEMORY_FRACTION", "garbage"}}).ok());
  auto cuda = parse({"--device=cuda:0"}, {{"SWEPT_GPU_MEMORY_FRACTION", "0.4"}});
  REQUIRE(cuda.ok());
  CHECK(cuda->config.gpu_memory_fraction == doctest::Approx(0.4));
  CHECK(cuda->config.device_index == 0);
  auto bad = parse({"--device=cuda"}, {{"SWEPT_GPU_MEMORY_FRACTION", "2"}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("SWEPT_GPU_MEMORY_FRACTION") != std::string::npos);
}

TEST_CASE("trainer: --help lists options with defaults, --version names the backends") {
  auto h = parse({"--help"});
  REQUIRE(h.ok());
  CHECK(h->action == CommandLine::Action::kHelp);
  for (const char* s : {"--batch_size", "--lr", "--replicas", "--checkpoint_dir", "(=100)", "default: 100 mlp"})
    CHECK(h->text.find(s) != std::string::npos);
  auto v = parse({"--version"});
  REQUIRE(v.ok());
  CHECK(v->text.find("cpu") != std::string::npos);
}

TEST_CASE("trainer: learning-rate schedules") {
  ScheduleConfig c;
  c.lr = 1.0;
  c.kind = ScheduleKind::kConstant;
  CHECK(learning_rate(c, 0) == 1.0);
  c.warmup_steps = 4;
  CHECK(learning_rate(c, 0) == doctest::Approx(0.25));
  CHECK(learning_rate(c, 3) == doctest::Approx(1.0));
  c.kind = ScheduleKind::kStep;
  c.decay_steps = 10;
  c.decay_rate = 0.5;
  CHECK(learning_rate(c, 4 + 9) == doctest::Approx(1.0));
  CHECK(learning_rate(c, 4 + 10) == doctest::Approx(0.5));
  CHECK(learning_rate(c, 4 + 25) == doctest::Approx(0.25));
  c.kind = ScheduleKind::kCosine;
  c.total_steps = 104;
  CHECK(learning_rate(c, 4) == doctest::Approx(1.0));
  CHECK(learning_rate(c, 54) == doctest::Approx(0.5));
  CHECK(learning_rate(c, 104) == doctest::Approx(0.0));
  CHECK(scaled_lr(0.1, true, 400, 100) == doctest::Approx(0.4));
  CHECK(scaled_lr(0.1, false, 400, 100) == doctest::Approx(0.1));
}
