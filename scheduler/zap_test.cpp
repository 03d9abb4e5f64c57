// Tests of the ZAP handler's log under a flood of refused handshakes (issue
// 26, item 5): a few WARN lines a minute, not one per refusal, and a summary
// with the count and the addresses, written by the handler's own timer once
// the minute is over even when no request comes after the flood. Driven
// through the ZAP protocol itself (a REQ socket on inproc://zeromq.zap.01,
// as libzmq asks) and through real CURVE handshakes over TCP on a port
// picked at run time; the address count's bound on RefusalLog itself. The
// log is stderr, captured in a file; the minute passes on a FakeClock.
// Every wait has a deadline.
#include "scheduler/zap.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>
#include <zmq_addon.hpp>

#include "common/clock.h"
#include "common/curvezmq.h"
#include "common/testing/eventually.h"
#include "common/testing/temp_dir.h"

using namespace swept;
using namespace swept::scheduler;
using swept::testing::eventually;

namespace {

// What the process writes to stderr (the log) while it lives, in a file.
class LogCapture {
 public:
  LogCapture() {
    REQUIRE(!dir_.path().empty());
    saved_ = dup(STDERR_FILENO);
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  ~LogCapture() {
    dup2(saved_, STDERR_FILENO);
    close(saved_);
  }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // How many lines hold `needle`.
  int lines_with(const std::string& needle) const {
    std::istringstream in(text());
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
    return n;
  }

 private:
  swept::testing::TempDir dir_{"swept-zap-log"};
  std::string path_ = dir_ / "stderr.log";
  int saved_ = -1;
};

constexpr const char* kOneRefusal = "refused a connection from";

// A ZAP request as libzmq sends it for a CURVE handshake from `address`
// offering the public key `z85`; the handler's status code.
std::string ask(zmq::socket_t& req, const std::string& address, const std::string& z85) {
  uint8_t key[32];
  REQUIRE(zmq_z85_decode(key, z85.c_str()) != nullptr);
  std::vector<zmq::const_buffer> request = {zmq::str_buffer("1.0"), zmq::str_buffer("7"), zmq::str_buffer("swept"),
                                            zmq::buffer(address),   zmq::const_buffer(),  zmq::str_buffer("CURVE"),
                                            zmq::buffer(key, 32)};
  REQUIRE(zmq::send_multipart(req, request));
  std::vector<zmq::message_t> reply;
  REQUIRE(zmq::recv_multipart(req, std::back_inserter(reply)));
  REQUIRE(reply.size() >= 3);
  return reply[2].to_string();
}

std::string fresh_public_key() {
  auto keys = curvezmq::generate();
  REQUIRE(keys.ok());
  return keys->public_key;
}

}  // namespace

TEST_CASE("500 refused handshakes write a few WARN lines and one summary once the minute is over (issue 26)") {
  LogCapture log;
  zmq::context_t context;
  auto keys = std::make_shared<KeyRing>("unused");
  const std::string good = fresh_public_key();
  keys->add_fixed(good, KeyRing::Entry{KeyRole::kAgent, "agents/good.pub"});
  FakeClock clock;
  ZapHandler zap(context, keys, clock);
  REQUIRE(zap.start().ok());
  zmq::socket_t req(context, zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.connect("inproc://zeromq.zap.01");

  // Five hosts, 100 unlisted keys each; a listed key still gets in meanwhile.
  for (int i = 0; i < 500; ++i) CHECK(ask(req, "10.0.0." + std::to_string(1 + i % 5), fresh_public_key()) == "400");
  CHECK(ask(req, "10.0.0.9", good) == "200");
  CHECK(zap.refused() == 500);
  const int shown = log.lines_with(kOneRefusal);
  CHECK(shown >= 1);
  CHECK(shown <= 10);  // was 500: one line per refusal
  CHECK(log.lines_with("refused handshakes from") == 0);  // the minute is not over

  // The flood is over and no request comes: the handler's timer writes the summary.
  clock.advance_ms(60'000);
  const std::string summary = "500 refused handshakes from 5 addresses in the last minute (" + std::to_string(shown) +
                              " shown above; the most, 100, from 10.0.0.1)";
  CHECK_MESSAGE(eventually([&] { return log.lines_with(summary) == 1; }, 10), log.text());

  // A new minute: its first refusals are shown again, and counted anew.
  CHECK(ask(req, "10.0.0.7", fresh_public_key()) == "400");
  CHECK(log.lines_with(kOneRefusal) == shown + 1);
  zap.stop();
  CHECK(log.lines_with("refused handshakes from") == 1);  // nothing went unshown in the new minute
}

TEST_CASE("refused CURVE handshakes over TCP are counted by address in the summary (issue 26)") {
  LogCapture log;
  zmq::context_t context;
  auto keys = std::make_shared<KeyRing>("unused");
  FakeClock clock;
  ZapHandler zap(context, keys, clock);
  REQUIRE(zap.start().ok());
  auto server_keys = curvezmq::generate();
  REQUIRE(server_keys.ok());
  zmq::socket_t server(context, zmq::socket_type::router);
  server.set(zmq::sockopt::linger, 0);
  REQUIRE(curvezmq::apply_server(server.handle(), *server_keys, "swept").ok());
  server.bind("tcp://127.0.0.1:*");
  const std::string endpoint = server.get(zmq::sockopt::last_endpoint);

  // 40 clients with keys the scheduler does not list, each trying once.
  constexpr int kClients = 40;
  std::vector<zmq::socket_t> clients;
  for (int i = 0; i < kClients; ++i) {
    auto own = curvezmq::generate();
    REQUIRE(own.ok());
    clients.emplace_back(context, zmq::socket_type::dealer);
    zmq::socket_t& c = clients.back();
    c.set(zmq::sockopt::linger, 0);
    c.set(zmq::sockopt::reconnect_ivl, -1);
    REQUIRE(curvezmq::apply_client(c.handle(), curvezmq::ClientKeys{*own, server_keys->public_key}).ok());
    c.connect(endpoint);
  }
  REQUIRE_MESSAGE(eventually([&] { return zap.refused() >= kClients; }, 20), log.text());
  for (zmq::socket_t& c : clients) c.close();
  const uint64_t refused = zap.refused();
  CHECK(log.lines_with(kOneRefusal) <= 10);
  clock.advance_ms(60'000);
  const std::string summary = std::to_string(refused) + " refused handshakes from 1 address in the last minute";
  CHECK_MESSAGE(eventually([&] { return log.lines_with(summary) == 1; }, 10), log.text());
}

TEST_CASE("a RefusalLog counts addresses up to its bound, then says more than, and sums up at finish") {
  LogCapture log;
  RefusalLog refusals(3, 60'000);
  const size_t hosts = RefusalLog::kMaxAddresses + 100;
  for (size_t i = 0; i < hosts; ++i) refusals.refused(5'000, "host-" + std::to_string(i), "key not authorized");
  refusals.refused(6'000, "host-7", "key not authorized");
  CHECK(log.lines_with(kOneRefusal) == 3);
  refusals.flush(64'999);  // the minute is not over
  CHECK(log.lines_with("refused handshakes from") == 0);
  refusals.finish(20'000);  // stopping early: the time so far
  CHECK_MESSAGE(log.lines_with(std::to_string(hosts + 1) + " refused handshakes from more than " +
                               std::to_string(RefusalLog::kMaxAddresses) +
                               " addresses in the last 15 s (3 shown above; the most, 2, from host-7)") == 1,
                log.text());
  refusals.finish(30'000);  // nothing left to say
  CHECK(log.lines_with("refused handshakes from") == 1);
}

TEST_CASE("an authorized key's NAME.max makes it a pool of that many agents, a bad one is refused by name") {
  swept::testing::TempDir dir;
  std::filesystem::create_directories(dir.path() + "/agents");
  auto one = curvezmq::generate(), pool = curvezmq::generate();
  REQUIRE(one.ok());
  REQUIRE(pool.ok());
  REQUIRE(curvezmq::write_key_files(dir.path() + "/agents/one", *one).ok());
  REQUIRE(curvezmq::write_key_files(dir.path() + "/agents/pool", *pool).ok());
  std::ofstream(dir.path() + "/agents/pool.max") << "16\n";
  KeyRing keys(dir.path());
  REQUIRE(keys.reload().ok());
  CHECK(keys.find(one->public_key)->max_agents == 1);
  CHECK(keys.find(pool->public_key)->max_agents == 16);
  for (const char* bad : {"0", "many", "100001", "", "3 4"}) {
    std::ofstream(dir.path() + "/agents/pool.max") << bad;
    Status s = keys.reload();
    CHECK(!s.ok());
    CHECK(s.message().find("pool.max") != std::string::npos);
    CHECK(keys.find(pool->public_key)->max_agents == 16);  // the previous set stays
  }
}
