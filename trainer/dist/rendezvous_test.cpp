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
