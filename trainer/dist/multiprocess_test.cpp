// swept-train across real processes on loopback (trainer/dist/): 2
// processes x 1 replica give, step by step, the losses of 1 process with
// --replicas=2 (same global batch and seed) within 1e-6 relative, for the
// MLP and the CNN; only rank 0 prints; a SIGTERM to one rank stops both at
// the same step (the run is long: stop checks are ~50 ms apart); --resume
// continues every rank from rank 0's checkpoint; a rank whose peers are
// missing or unreachable fails with a clear message (exit 1) within
// SWEPT_RENDEZVOUS_TIMEOUT; a bad
// WORLD_SIZE/RANK pair, or a GLOO_SOCKET_IFNAME naming no interface, is
// refused (exit 2). Ports are picked at run time.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "common/testing/loopback.h"
#include "trainer/checkpoint.h"
#include "trainer/test_child.h"
#include "trainer/test_util.h"

using namespace swept::trainer;
using swept::trainer::testing::Child;
using swept::testing::free_port;
using swept::testing::HeldPort;

namespace {

std::map<std::string, std::string> rank_env(int rank, int size, int port) {
  return {{"WORLD_SIZE", std::to_string(size)}, {"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(size)},
          {"MASTER_ADDR", "127.0.0.1"},         {"MASTER_PORT", std::to_string(port)},
          {"SWEPT_RENDEZVOUS_TIMEOUT", "60"}};
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Every number of two runs' metric lines agrees within 1e-6 relative,
// timings aside; the same lines, in the same order.
void check_same_metrics(const std::vector<std::string>& expected, const std::vector<std::string>& got) {
  REQUIRE(expected.size() == got.size());
  REQUIRE(expected.size() > 3);
  for (size_t i = 0; i < expected.size(); ++i) {
    const nlohmann::json a = nlohmann::json::parse(expected[i]), b = nlohmann::json::parse(got[i]);
    INFO("line " << i << ": " << expected[i] << " vs " << got[i]);
    REQUIRE(a.size() == b.size());
    for (const auto& [key, value] : a.items()) {
      REQUIRE(b.contains(key));
      if (key == "samples_per_sec" || key == "train_seconds") continue;
      if (!value.is_number_float()) {
        CHECK(value == b[key]);
        continue;
      }
      const double x = value.get<double>(), y = b[key].get<double>();
      CHECK(std::abs(x - y) <= 1e-6 * std::max(1e-12, std::abs(x)));
    }
  }
}

// 1 process x 2 replicas, then 2 processes x 1 replica; compares them.
void check_two_processes_match_two_replicas(const std::vector<std::string>& args) {
  Child single(with(args, {"--replicas=2", "--threads=2"}));
  REQUIRE(single.wait_exit(120) == 0);
  const int port = free_port();  // free now; rank 0 binds it
  Child rank0(with(args, {"--threads=1"}), rank_env(0, 2, port));
  Child rank1(with(args, {"--threads=1"}), rank_env(1, 2, port));
  const int rc0 = rank0.wait_exit(120), rc1 = rank1.wait_exit(120);
  INFO("rank 0: " << rank0.err());
  INFO("rank 1: " << rank1.err());
  REQUIRE(rc0 == 0);
  REQUIRE(rc1 == 0);
  CHECK(rank1.lines().empty());  // only rank 0 prints metric lines
  CHECK(rank0.err().find("x1 replica(s) in each of 2 processes") != std::string::npos);
  check_same_metrics(single.lines(), rank0.lines());
}

}  // namespace

TEST_CASE("trainer dist: 2 processes x 1 replica give the losses of 1 process x 2 replicas, step by step") {
  TempDir data("dist");
  write_mnist_like(data.path(), 1100, 300, 2);
  SUBCASE("mlp, momentum, dropout") {
    check_two_processes_match_two_replicas({"--data=" + data.path(), "--model=mlp", "--hidden=24",
                                            "--optimizer=momentum", "--dropout=0.2", "--batch_size=20",
                                            "--max_steps=12", "--log_every=1", "--eval_every=6", "--seed=3"});
  }
  SUBCASE("cnn, adam") {
    check_two_processes_match_two_replicas({"--data=" + data.path(), "--model=cnn", "--optimizer=adam",
                                            "--lr=0.002", "--batch_size=8", "--max_steps=5", "--log_every=1",
                                            "--eval_every=3", "--seed=3"});
  }
}

TEST_CASE("trainer dist: a SIGTERM to one rank stops every rank after the same step, rank 0 saving") {
  TempDir data("dist-stop"), ckpt("dist-stop-ckpt");
  write_mnist_like(data.path(), 1100, 300, 2);
  const std::vector<std::string> args = {"--data=" + data.path(), "--model=mlp", "--hidden=16", "--batch_size=10",
                                         "--epochs=500", "--log_every=1", "--threads=1",
                                         "--checkpoint_dir=" + ckpt.path()};
  const int port = free_port();
  Child rank0(args, rank_env(0, 2, port));
  Child rank1(args, rank_env(1, 2, port));
  REQUIRE(rank0.wait_for_line([](const std::string& l) { return l.find("\"step\":3,") != std::string::npos; }));
  rank1.signal(SIGTERM);
  const int rc0 = rank0.wait_exit(60), rc1 = rank1.wait_exit(60);
  INFO("rank 0: " << rank0.err());
  INFO("rank 1: " << rank1.err());
  CHECK(rc0 == 130);
  CHECK(rc1 == 130);
  CHECK(list_checkpoints(ckpt.path()).size() == 1);  // rank 0's, once
}

TEST_CASE("trainer dist: --resume continues every rank from rank 0's checkpoint, as if never killed") {
  TempDir data("dist-resume"), ckpt0("dist-resume-0"), ckpt1("dist-resume-1");
  write_mnist_like(data.path(), 1100, 300, 2);
  const std::vector<std::string> args = {"--data=" + data.path(), "--model=mlp", "--hidden=16", "--batch_size=20",
                                         "--epochs=2", "--log_every=1", "--eval_every=10", "--optimizer=adam",
                                         "--lr=0.003", "--seed=4"};
  Child whole(with(args, {"--replicas=2", "--threads=2"}));
  REQUIRE(whole.wait_exit(120) == 0);

  // Killed part-way (rank 0 writes the checkpoints every 5 steps; rank 1's
  // folder stays empty), then both resumed. Its stdout pipe keeps rank 0
  // within a page of lines (< 40 steps) of the reader: far from the end.
  {
    const int port = free_port();
    const std::vector<std::string> saving = {"--threads=1", "--checkpoint_every=5"};
    Child rank0(with(with(args, saving), {"--checkpoint_dir=" + ckpt0.path()}), rank_env(0, 2, port));
    Child rank1(with(with(args, saving), {"--checkpoint_dir=" + ckpt1.path()}), rank_env(1, 2, port));
    REQUIRE(rank0.wait_for_line([](const std::string& l) { return l.find("\"step\":10,") != std::string::npos; }));
    rank0.signal(SIGKILL);
    rank1.signal(SIGKILL);
    rank0.wait_exit(60);
    rank1.wait_exit(60);
  }
  REQUIRE(!list_checkpoints(ckpt0.path()).empty());
  REQUIRE(list_checkpoints(ckpt1.path()).empty());
  const int port = free_port();
  Child rank0(with(args, {"--threads=1", "--resume", "--checkpoint_dir=" + ckpt0.path()}), rank_env(0, 2, port));
  Child rank1(with(args, {"--threads=1", "--resume", "--checkpoint_dir=" + ckpt1.path()}), rank_env(1, 2, port));
  const int rc0 = rank0.wait_exit(120), rc1 = rank1.wait_exit(120);
  INFO("rank 0: " << rank0.err());
  INFO("rank 1: " << rank1.err());
  REQUIRE(rc0 == 0);
  REQUIRE(rc1 == 0);
  // The resumed run's lines are the uninterrupted run's last ones.
  REQUIRE(rank0.lines().size() > 3);
  REQUIRE(rank0.lines().size() < whole.lines().size());
  const std::vector<std::string> tail(whole.lines().end() - static_cast<std::ptrdiff_t>(rank0.lines().size()),
                                      whole.lines().end());
  check_same_metrics(tail, rank0.lines());
}

TEST_CASE("trainer dist: a rank whose peers are unreachable or missing exits 1 within the timeout, saying why") {
  TempDir data("dist-alone");
  write_mnist_like(data.path(), 200, 50, 2);
  const std::vector<std::string> args = {"--data=" + data.path(), "--model=mlp", "--hidden=8", "--batch_size=10",
                                         "--max_steps=2", "--threads=1"};
  HeldPort dead;
  SUBCASE("rank 1, no rank 0 at MASTER_PORT") {
    std::map<std::string, std::string> env = rank_env(1, 2, dead.port());
    env["SWEPT_RENDEZVOUS_TIMEOUT"] = "1";
    Child lonely(args, env);
    CHECK(lonely.wait_exit(60) == 1);
    CHECK(lonely.err().find("rank 1 could not reach the rendezvous at tcp://127.0.0.1:" +
                            std::to_string(dead.port()) + " within 1 s") != std::string::npos);
  }
  SUBCASE("rank 0 of 3, the others never come") {
    std::map<std::string, std::string> env = rank_env(0, 3, free_port());
    env["SWEPT_RENDEZVOUS_TIMEOUT"] = "1";
    env["LOCAL_WORLD_SIZE"] = "3";
    Child lonely(args, env);
    CHECK(lonely.wait_exit(60) == 1);
    CHECK(lonely.err().find("a rank of this run never arrived") != std::string::npos);
  }
  SUBCASE("a peer killed mid-run") {
    const std::vector<std::string> long_run = {"--data=" + data.path(), "--model=mlp", "--hidden=8",
                                               "--batch_size=10", "--epochs=1000", "--log_every=1", "--threads=1"};
    const int port = free_port();
    Child rank0(long_run, rank_env(0, 2, port));
    Child rank1(long_run, rank_env(1, 2, port));
    REQUIRE(rank0.wait_for_line([](const std::string& l) { return l.find("\"step\":2,") != std::string::npos; }));
    rank1.signal(SIGKILL);
    CHECK(rank0.wait_exit(60) == 1);
    CHECK(rank0.err().find("a peer process ended or is unreachable") != std::string::npos);
  }
}

TEST_CASE("trainer dist: a bad WORLD_SIZE/RANK pair is refused with exit 2") {
  Child bad({"--max_steps=1"}, {{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_ADDR", "127.0.0.1"}});
  CHECK(bad.wait_exit(30) == 2);
  CHECK(bad.err().find("RANK=2 is not below WORLD_SIZE=2") != std::string::npos);
  Child half({"--max_steps=1"}, {{"RANK", "0"}});
  CHECK(half.wait_exit(30) == 2);
  CHECK(half.err().find("RANK is set but WORLD_SIZE is not") != std::string::npos);
  Child no_master({"--max_steps=1"}, {{"WORLD_SIZE", "2"}, {"RANK", "1"}});
  CHECK(no_master.wait_exit(30) == 2);
  CHECK(no_master.err().find("MASTER_ADDR is not set") != std::string::npos);
  TempDir data("dist-bad-env");
  write_mnist_like(data.path(), 200, 50, 2);
  std::map<std::string, std::string> env = rank_env(1, 2, free_port());
  env["GLOO_SOCKET_IFNAME"] = "nosuch0";
  Child no_iface({"--data=" + data.path(), "--max_steps=1", "--batch_size=10", "--threads=1"}, env);
  CHECK(no_iface.wait_exit(30) == 2);  // at once, not after the rendezvous timeout
  CHECK(no_iface.err().find("GLOO_SOCKET_IFNAME=nosuch0 names no network interface") != std::string::npos);
}
