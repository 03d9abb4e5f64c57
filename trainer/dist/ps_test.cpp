// swept-train with parameter servers, as real processes on loopback
// (dist/ps_*.h): synchronous PS without backups follows the all-reduce step
// by step (validation loss at every step within 1e-5 relative; SGD on one
// server, Adam sharded over two); asynchronous PS with one worker prints
// the very lines of one process; asynchronous PS with three workers learns
// the data set; --max_staleness bounds the staleness; one backup worker lets a step go on without a stopped
// worker; a worker killed mid-run ends the attempt (every process exits 1,
// saying why); bad flags and a bad TF_CONFIG exit 2 with a clear line.
// Ports are picked at run time.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "common/testing/loopback.h"
#include "trainer/dist/cluster.h"
#include "trainer/test_child.h"
#include "trainer/test_util.h"

using namespace swept::trainer;
using swept::testing::free_port;
using swept::trainer::testing::Child;

namespace {

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The processes of one parameter-server run on loopback: servers first.
struct PsRun {
  std::vector<std::unique_ptr<Child>> servers, workers;

  PsRun(const std::vector<std::string>& args, int workers_count, int servers_count) {
    nlohmann::json cluster = {{"worker", nlohmann::json::array()}, {"ps", nlohmann::json::array()}};
    for (int w = 0; w < workers_count; ++w) cluster["worker"].push_back("127.0.0.1:" + std::to_string(1000 + w));
    for (int s = 0; s < servers_count; ++s) cluster["ps"].push_back("127.0.0.1:" + std::to_string(free_port()));
    auto env = [&](const char* type, int index) {
      const nlohmann::json tf = {{"cluster", cluster}, {"task", {{"type", type}, {"index", index}}}};
      return std::map<std::string, std::string>{{"TF_CONFIG", tf.dump()}, {"SWEPT_RENDEZVOUS_TIMEOUT", "60"}};
    };
    const std::vector<std::string> all = with(args, {"--strategy=ps", "--threads=1"});
    for (int s = 0; s < servers_count; ++s) servers.push_back(std::make_unique<Child>(all, env("ps", s)));
    for (int w = 0; w < workers_count; ++w) workers.push_back(std::make_unique<Child>(all, env("worker", w)));
  }

  // Every process exits 0; worker 0's lines.
  std::vector<std::string> finish() {
    for (auto& w : workers) {
      const int rc = w->wait_exit(120);
      INFO("worker: " << w->err());
      REQUIRE(rc == 0);
    }
    for (auto& s : servers) {
      const int rc = s->wait_exit(60);
      INFO("server: " << s->err());
      REQUIRE(rc == 0);
    }
    for (size_t w = 1; w < workers.size(); ++w) CHECK(workers[w]->lines().empty());  // worker 0 alone prints
    for (auto& s : servers) CHECK(s->lines().empty());
    return workers[0]->lines();
  }
};

std::vector<nlohmann::json> lines_with(const std::vector<std::string>& lines, const char* key) {
  std::vector<nlohmann::json> out;
  for (const std::string& l : lines) {
    nlohmann::json j = nlohmann::json::parse(l);
    if (j.contains(key)) out.push_back(j);
  }
  return out;
}

void check_close(const nlohmann::json& a, const nlohmann::json& b, const char* key, double rel) {
  const double x = a[key].get<double>(), y = b[key].get<double>();
  INFO(key << ": " << a.dump() << " vs " << b.dump());
  CHECK(std::abs(x - y) <= rel * std::max(1e-12, std::abs(x)));
}

// Synchronous PS (K = 0) against one process with the same replicas as
// workers: the validation loss after every step, and the test at the end.
void check_sync_matches_allreduce(const std::vector<std::string>& args, int workers, int servers) {
  Child single(with(args, {"--replicas=" + std::to_string(workers), "--threads=2"}));
  REQUIRE(single.wait_exit(120) == 0);
  PsRun run(with(args, {"--ps_mode=sync"}), workers, servers);
  const std::vector<std::string> ps = run.finish();
  const auto expected = lines_with(single.lines(), "val_loss"), got = lines_with(ps, "val_loss");
  REQUIRE(expected.size() == got.size());
  REQUIRE(expected.size() >= 8);
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(expected[i]["step"] == got[i]["step"]);
    check_close(expected[i], got[i], "val_loss", 1e-5);
  }
  const auto a = lines_with(single.lines(), "test_loss"), b = lines_with(ps, "test_loss");
  REQUIRE(a.size() == 1);
  REQUIRE(b.size() == 1);
  check_close(a[0], b[0], "test_loss", 1e-5);
  CHECK(b[0]["gradients_dropped"] == 0);
  CHECK(b[0]["staleness_max"] == 0);
}

}  // namespace

TEST_CASE("trainer ps: sync PS without backup workers follows the all-reduce step by step") {
  TempDir data("ps-sync");
  write_mnist_like(data.path(), 1100, 300, 2);
  const std::vector<std::string> common = {"--data=" + data.path(), "--model=mlp", "--hidden=24", "--batch_size=20",
                                           "--max_steps=10", "--log_every=1", "--eval_every=1", "--seed=3"};
  SUBCASE("sgd, one server, dropout") {
    check_sync_matches_allreduce(with(common, {"--optimizer=sgd", "--lr=0.3", "--dropout=0.2"}), 2, 1);
  }
  SUBCASE("adam, the parameters sharded over two servers, weight decay") {
    check_sync_matches_allreduce(with(common, {"--optimizer=adam", "--lr=0.003", "--weight_decay=0.01"}), 2, 2);
  }
}

TEST_CASE("trainer ps: async PS with one worker prints the lines of one process") {
  TempDir data("ps-async1");
  write_mnist_like(data.path(), 1100, 300, 2);
  const std::vector<std::string> args = {"--data=" + data.path(), "--model=mlp", "--hidden=24", "--batch_size=20",
                                         "--epochs=1", "--log_every=5", "--eval_every=10", "--seed=5",
                                         "--optimizer=momentum", "--dropout=0.1"};
  Child single(with(args, {"--threads=1"}));
  REQUIRE(single.wait_exit(120) == 0);
  PsRun run(with(args, {"--ps_mode=async"}), 1, 1);
  const std::vector<std::string> ps = run.finish();
  REQUIRE(single.lines().size() == ps.size());
  REQUIRE(ps.size() > 10);
  for (size_t i = 0; i < ps.size(); ++i) {
    const nlohmann::json a = nlohmann::json::parse(single.lines()[i]), b = nlohmann::json::parse(ps[i]);
    INFO("line " << i << ": " << a.dump() << " vs " << b.dump());
    for (const auto& [key, value] : a.items()) {
      REQUIRE(b.contains(key));
      if (key == "samples_per_sec" || key == "train_seconds") continue;
      if (value.is_number_float()) check_close(a, b, key.c_str(), 1e-6);
      else CHECK(value == b[key]);
    }
    if (a.contains("loss")) CHECK(b["staleness_max"] == 0);  // one worker is never behind
  }
}

TEST_CASE("trainer ps: async PS with three workers learns the data set") {
  TempDir data("ps-async3");
  write_mnist_like(data.path(), 3000, 600, 7);
  PsRun run({"--data=" + data.path(), "--model=mlp", "--hidden=32", "--batch_size=30", "--epochs=2",
             "--log_every=20", "--seed=1", "--ps_mode=async", "--max_staleness=4"},
            3, 2);
  const auto final_line = lines_with(run.finish(), "test_accuracy");
  REQUIRE(final_line.size() == 1);
  INFO(final_line[0].dump());
  CHECK(final_line[0]["test_accuracy"].get<double>() >= 0.97);
  CHECK(final_line[0].contains("staleness_mean"));
  CHECK(final_line[0]["gradients_dropped"] == 0);  // async drops nothing
}

TEST_CASE("trainer ps: --max_staleness bounds how far behind an applied gradient is") {
  // Two workers, S = 1: a worker waits while it has pushed more than once
  // more than the other, so a gradient is at most 2S + 1 = 3 versions old
  // when applied. Worker 1 is stopped until worker 0 is connected: without
  // the bound, worker 0 would run far ahead alone and worker 1's first
  // gradient would be many versions old.
  TempDir data("ps-ssp");
  write_mnist_like(data.path(), 1100, 300, 2);
  PsRun run({"--data=" + data.path(), "--model=mlp", "--hidden=16", "--batch_size=20", "--epochs=3",
             "--log_every=5", "--ps_mode=async", "--max_staleness=1"},
            2, 1);
  run.workers[1]->signal(SIGSTOP);
  const auto deadline = swept::trainer::testing::Clock::now() + std::chrono::seconds(60);
  while (run.workers[0]->err().find("worker 0 of 2 with 1 parameter server") == std::string::npos &&
         swept::trainer::testing::Clock::now() < deadline)
    run.workers[0]->wait_for_line([](const std::string&) { return false; }, 0.05);
  run.workers[1]->signal(SIGCONT);
  const auto final_line = lines_with(run.finish(), "test_accuracy");
  REQUIRE(final_line.size() == 1);
  INFO(final_line[0].dump());
  CHECK(final_line[0]["staleness_max"].get<int64_t>() <= 3);
}

TEST_CASE("trainer ps: one backup worker lets every step go on without a stopped worker") {
  TempDir data("ps-backup");
  write_mnist_like(data.path(), 1100, 300, 2);
  PsRun run({"--data=" + data.path(), "--model=mlp", "--hidden=16", "--batch_size=30", "--max_steps=15",
             "--log_every=1", "--eval_every=5", "--ps_mode=sync", "--backup_workers=1"},
            3, 1);
  run.workers[2]->signal(SIGSTOP);
  // Workers 0 and 1 make every step alone; worker 0 then waits for worker 2
  // to say it is done, so the last validation line comes before it resumes.
  REQUIRE(run.workers[0]->wait_for_line([](const std::string& l) {
    return l.find("\"step\":15,\"val_loss\"") != std::string::npos;
  }));
  run.workers[2]->signal(SIGCONT);
  const auto final_line = lines_with(run.finish(), "test_accuracy");
  REQUIRE(final_line.size() == 1);
  CHECK(final_line[0]["staleness_max"] == 0);
}

TEST_CASE("trainer ps: a worker killed in async mode ends the attempt: every process exits 1, saying why") {
  TempDir data("ps-killed");
  write_mnist_like(data.path(), 1100, 300, 2);
  PsRun run({"--data=" + data.path(), "--model=mlp", "--hidden=8", "--batch_size=10", "--epochs=1000",
             "--log_every=1", "--ps_mode=async"},
            2, 1);
  // Async lines may skip steps (the progress is the updates applied / 2).
  REQUIRE(run.workers[0]->wait_for_line(
      [](const std::string& l) { return nlohmann::json::parse(l)["step"].get<int64_t>() >= 3; }));
  run.workers[1]->signal(SIGKILL);
  CHECK(run.servers[0]->wait_exit(60) == 1);
  CHECK(run.servers[0]->err().find("a worker was lost") != std::string::npos);
  CHECK(run.workers[0]->wait_exit(60) == 1);
  CHECK(run.workers[0]->err().find("worker 0: parameter server 0: a worker was lost") != std::string::npos);
}

TEST_CASE("trainer ps: a killed parameter server ends the workers at once, naming it") {
  TempDir data("ps-server-killed");
  write_mnist_like(data.path(), 1100, 300, 2);
  PsRun run({"--data=" + data.path(), "--model=mlp", "--hidden=8", "--batch_size=10", "--epochs=1000",
             "--log_every=1", "--ps_mode=sync"},
            2, 1);
  REQUIRE(run.workers[0]->wait_for_line([](const std::string& l) { return l.find("\"step\":3,") != std::string::npos; }));
  run.servers[0]->signal(SIGKILL);
  for (auto& w : run.workers) {
    CHECK(w->wait_exit(30) == 1);  // well within SWEPT_RENDEZVOUS_TIMEOUT=60
    CHECK(w->err().find("parameter server 0 at tcp://127.0.0.1:") != std::string::npos);
    CHECK(w->err().find("ended or is unreachable") != std::string::npos);
  }
}

TEST_CASE("trainer ps: SIGTERM ends a worker waiting for a stopped peer's gradient at once (exit 130)") {
  TempDir data("ps-term");
  write_mnist_like(data.path(), 1100, 300, 2);
  PsRun run({"--data=" + data.path(), "--model=mlp", "--hidden=8", "--batch_size=10", "--epochs=1000",
             "--log_every=1", "--ps_mode=sync"},
            2, 1);
  // Worker 1 never pushes: worker 0 computes step 0, pushes, and its pull
  // for version 1 waits. Its log says when it is connected (the pipes are
  // read until then, with a deadline).
  run.workers[1]->signal(SIGSTOP);
  const auto deadline = swept::trainer::testing::Clock::now() + std::chrono::seconds(60);
  while (run.workers[0]->err().find("worker 0 of 2 with 1 parameter server") == std::string::npos &&
         swept::trainer::testing::Clock::now() < deadline)
    run.workers[0]->wait_for_line([](const std::string&) { return false; }, 0.05);
  REQUIRE(run.workers[0]->err().find("worker 0 of 2 with 1 parameter server") != std::string::npos);
  run.workers[0]->signal(SIGTERM);
  CHECK(run.workers[0]->wait_exit(30) == 130);  // not after SWEPT_RENDEZVOUS_TIMEOUT (60 s), exit 1
  CHECK(run.workers[0]->err().find("stopped by signal") != std::string::npos);
  run.workers[1]->signal(SIGCONT);
  CHECK(run.servers[0]->wait_exit(30) == 1);  // worker 0 was lost: the attempt ends
}

TEST_CASE("trainer ps: bad flags and a bad TF_CONFIG exit 2 with a clear line") {
  const std::string tf2 =
      R"({"cluster": {"worker": ["a:1", "b:1"], "ps": ["c:2"]}, "task": {"type": "worker", "index": 0}})";
  struct Case {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"--strategy=ps", "--ps_mode=sync", "--backup_workers=2"}, {{"TF_CONFIG", tf2}},
       "--backup_workers=2 must be below the 2 workers"},
      {{"--strategy=ps"}, {}, "--strategy=ps needs parameter servers, and TF_CONFIG"},
      {{"--strategy=ps"}, {{"TF_CONFIG", R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})"}},
       "cluster.ps lists no processes: --strategy=ps needs at least one parameter server"},
      {{"--strategy=ps"}, {{"TF_CONFIG", "{nope"}}, "TF_CONFIG is not valid JSON"},
      {{"--strategy=ps"}, {{"TF_CONFIG", R"({"cluster": {"worker": ["a:1"], "ps": ["c:99999"]}})"}, {"SWEPT_ROLE", "ps"},
       {"SWEPT_ROLE_INDEX", "0"}}, "the port must be a number in [1, 65535]"},
      {{"--strategy=ps"}, {{"TF_CONFIG", tf2}, {"SWEPT_ROLE", "ps"}, {"SWEPT_ROLE_INDEX", "0"}},
       "TF_CONFIG's task (worker 0) and SWEPT_ROLE/SWEPT_ROLE_INDEX disagree"},
      {{"--strategy=ps"}, {{"TF_CONFIG", R"({"cluster": {"worker": ["a:1"], "ps": ["c:2"]}, "task": {"type": "ps", "index": 1}})"}},
       "this process is ps 1, but TF_CONFIG's cluster.ps lists 1"},
      {{"--strategy=ps"}, {{"TF_CONFIG", R"({"cluster": {"chief": ["a:1"], "worker": ["a:1"], "ps": ["c:2"]}})"}},
       "cluster.chief is not a role of swept-train (worker, ps): list the chief as worker 0"},
      {{"--strategy=ps", "--batch_size=25"}, {{"TF_CONFIG", tf2}}, "--batch_size=25 is not divisible by the 2 workers"},
      {{"--strategy=ps", "--max_staleness=2", "--ps_mode=sync"}, {}, "--max_staleness needs --ps_mode=async"},
      {{"--strategy=ps", "--backup_workers=1"}, {}, "--backup_workers needs --ps_mode=sync"},
      {{"--ps_mode=sync"}, {}, "--ps_mode needs --strategy=ps"},
      {{"--strategy=gossip"}, {}, "--strategy=gossip: expected allreduce or ps"},
      {{"--strategy=ps", "--replicas=2"}, {}, "--strategy=ps runs one replica per worker process"},
  };
  for (const Case& c : cases) {
    Child child(c.args, c.env);
    INFO(c.message);
    CHECK(child.wait_exit(30) == 2);
    INFO(child.err());
    CHECK(child.err().find(c.message) != std::string::npos);
  }
}

TEST_CASE("trainer ps: SWEPT_ROLE alone gives the task TF_CONFIG leaves out") {
  auto env = [](std::map<std::string, std::string> m) {
    return [m](const std::string& k) -> std::optional<std::string> {
      auto it = m.find(k);
      return it == m.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
  };
  const std::string tf = R"({"cluster": {"worker": ["h0:2222", "h1:2222"], "ps": ["h2:2223", "[::1]:2224"]}})";
  swept::Result<Cluster> c = cluster_from_env(env({{"TF_CONFIG", tf}, {"SWEPT_ROLE", "ps"}, {"SWEPT_ROLE_INDEX", "1"}}));
  REQUIRE(c.ok());
  CHECK(c->role == Role::kServer);
  CHECK(c->index == 1);
  CHECK(c->workers.size() == 2);
  CHECK(c->servers[1].host == "::1");
  CHECK(c->servers[1].port == 2224);
  CHECK(!cluster_from_env(env({{"TF_CONFIG", tf}})).ok());  // nothing says which process
  CHECK(!cluster_from_env(env({{"TF_CONFIG", tf}, {"SWEPT_ROLE", "worker"}})).ok());  // half set
}
