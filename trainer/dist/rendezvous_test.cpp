// The rendezvous store and the Gloo process group, in one process: ranks
// are threads, the sockets are real (loopback). A store reached by nobody,
// and a key no rank sets, end with kIoError within their timeout.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "common/testing/loopback.h"
#include "trainer/dist/process_group.h"
#include "trainer/dist/rendezvous.h"

using namespace swept::trainer;
using namespace std::chrono_literals;
using swept::testing::free_port;
using swept::testing::HeldPort;


TEST_CASE("trainer dist: the rendezvous store hands a value set by one rank to another that waits for it") {
  auto server = RendezvousServer::start(0);
  REQUIRE(server.ok());
  auto a = RendezvousClient::connect("127.0.0.1", (*server)->port(), 1, 10s);
  auto b = RendezvousClient::connect("127.0.0.1", (*server)->port(), 2, 10s);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::future<swept::Result<std::string>> waiting = std::async(std::launch::async, [&] { return (*a)->get("key"); });
  REQUIRE((*b)->set("key", std::string("va\0lue", 6)).ok());
  swept::Result<std::string> got = waiting.get();
  REQUIRE(got.ok());
  CHECK(*got == std::string("va\0lue", 6));
  CHECK(*(*b)->get("key") == std::string("va\0lue", 6));  // already set: at once

  GlooStore store(**a);
  store.set("g", {'x', 'y'});
  CHECK(store.get("g") == std::vector<char>{'x', 'y'});
  CHECK_THROWS_AS(store.wait({"g", "never"}, 200ms), GlooStore::Failure);
}

TEST_CASE("trainer dist: a rank that cannot reach the rendezvous, or waits for a rank that never comes, fails in time") {
  HeldPort dead;
  swept::Result<std::unique_ptr<RendezvousClient>> c = RendezvousClient::connect("127.0.0.1", dead.port(), 1, 300ms);
  REQUIRE(!c.ok());
  CHECK(c.status().code() == swept::StatusCode::kIoError);
  CHECK(c.status().message().find("rank 1 could not reach the rendezvous at tcp://127.0.0.1:" +
                                  std::to_string(dead.port()) + " within 0.3 s") != std::string::npos);

  auto server = RendezvousServer::start(0);
  REQUIRE(server.ok());
  auto lonely = RendezvousClient::connect("127.0.0.1", (*server)->port(), 0, 300ms);
  REQUIRE(lonely.ok());
  swept::Result<std::string> v = (*lonely)->get("1");
  REQUIRE(!v.ok());
  CHECK(v.status().message().find("for key \"1\": a rank of this run never arrived") != std::string::npos);

  // The port taken: rank 0 says so instead of serving nothing.
  auto second = RendezvousServer::start((*server)->port());
  REQUIRE(!second.ok());
  CHECK(second.status().message().find("MASTER_PORT is taken") != std::string::npos);
}

TEST_CASE("trainer dist: three ranks join over Gloo and sum, gather and broadcast the same bits everywhere") {
  const int n = 3, port = free_port();
  std::vector<std::vector<float>> sums(n), gathered(n);
  std::vector<std::vector<char>> bytes(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      World w;
      w.size = n;
      w.rank = r;
      w.master_addr = "127.0.0.1";
      w.master_port = port;
      w.timeout = 20s;
      auto g = ProcessGroup::join(w);
      if (!g.ok()) {
        errors[r] = g.status().message();
        return;
      }
      sums[r] = {0.1f * static_cast<float>(r + 1), -1.0f, 1e-8f * static_cast<float>(r)};
      swept::Status s = (*g)->sum(sums[r].data(), sums[r].size());
      const float mine[2] = {static_cast<float>(r), 10.0f + static_cast<float>(r)};
      gathered[r].resize(2 * n);
      if (s.ok()) s = (*g)->all_gather(mine, 2, gathered[r].data());
      if (r == 0) bytes[r] = {'r', 'a', 'n', 'k', '0'};
      if (s.ok()) s = (*g)->broadcast(bytes[r]);
      if (!s.ok()) errors[r] = s.message();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
    CHECK(sums[r] == sums[0]);
    CHECK(gathered[r] == std::vector<float>{0, 10, 1, 11, 2, 12});
    CHECK(bytes[r] == std::vector<char>{'r', 'a', 'n', 'k', '0'});
  }
  CHECK(sums[0][0] == doctest::Approx(0.6f));
  CHECK(sums[0][1] == -3.0f);
}

// Two ranks take the exchange path of ProcessGroup::sum (not Gloo's ring):
// lengths of one and of several segments, a length per call that changes,
// more lengths than the group keeps receive lanes for (so lanes are dropped
// and made again), and other collectives in between. Every call's values are
// new, so data of an earlier or later call landing in a posted receive shows
// as a wrong sum; each sum must be exactly a + b on both ranks.
TEST_CASE("trainer dist: two ranks sum by exchange, exactly a + b on both, across lengths, segments and lanes") {
  const int port = free_port();
  // 300,000 floats: two segments of the exchange (1 MiB each at most).
  const std::vector<size_t> lengths = {300000, 2, 300000, 2, 7, 1, 3, 5, 300000, 2, 300000, 11};
  auto value = [](int rank, size_t call, size_t i) {
    return 0.1f * static_cast<float>(rank + 1) + 1e-3f * static_cast<float>(call) + 1e-7f * static_cast<float>(i % 1013);
  };
  std::vector<std::vector<std::vector<float>>> got(2);
  std::vector<std::vector<float>> gathered(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      World w;
      w.size = 2;
      w.rank = r;
      w.master_addr = "127.0.0.1";
      w.master_port = port;
      w.timeout = 20s;
      auto g = ProcessGroup::join(w);
      if (!g.ok()) {
        errors[r] = g.status().message();
        return;
      }
      for (size_t call = 0; call < lengths.size() && errors[r].empty(); ++call) {
        std::vector<float> v(lengths[call]);
        for (size_t i = 0; i < v.size(); ++i) v[i] = value(r, call, i);
        swept::Status s = (*g)->sum(v.data(), v.size());
        if (s.ok() && call == 4) {  // another collective between two sums
          const float mine = static_cast<float>(r);
          gathered[r].resize(2);
          s = (*g)->all_gather(&mine, 1, gathered[r].data());
        }
        if (!s.ok()) errors[r] = s.message();
        got[r].push_back(std::move(v));
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
    REQUIRE(got[r].size() == lengths.size());
    CHECK(gathered[r] == std::vector<float>{0, 1});
  }
  for (size_t call = 0; call < lengths.size(); ++call) {
    size_t wrong = 0;
    for (size_t i = 0; i < lengths[call]; ++i) {
      const float want = value(0, call, i) + value(1, call, i);
      wrong += static_cast<size_t>(got[0][call][i] != want) + static_cast<size_t>(got[1][call][i] != want);
    }
    INFO("call " << call << " of " << lengths[call] << " floats");
    CHECK(wrong == 0);
  }
}
