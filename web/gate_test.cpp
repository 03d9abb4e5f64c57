// Tests of the gate on unauthenticated connections (web/gated_server.h),
// with real sockets against a real Server on a port picked at run time.
// No timing thresholds: each test waits for an event (an answer, a closed
// socket) with a deadline far beyond what the behaviour needs, and the
// behaviour it checks would, without the gate, not happen before that
// deadline at all (the stalling clients keep trickling until the test ends).
#include <doctest/doctest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "web/gated_server.h"
#include "common/testing/loopback.h"
#include "web/server.h"

using swept::web::Server;
using swept::web::ServerOptions;

namespace {

const char* const kToken = "gate-test-token";

// Reads until the peer closes `fd` (true) or `ms` pass (false).
bool closed_by_peer_within(int fd, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  char buf[512];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) != 1) return false;
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
}

// Clients that open a request and send one more header byte every 100 ms,
// forever: each byte arrives well within any per-read timeout, so only a
// deadline on the whole request (or the cap) ends them.
class Tricklers {
 public:
  Tricklers(int port, int n) {
    for (int i = 0; i < n; ++i) {
      int fd = swept::testing::connect_loopback(port);
      REQUIRE(fd >= 0);
      const std::string start = "GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
      REQUIRE(::send(fd, start.data(), start.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(start.size()));
      fds_.push_back(fd);
    }
    thread_ = std::thread([this] {
      while (!stop_) {
        for (int fd : fds_) (void)::send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);  // fails once closed: fine
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the trickle's pace, not a wait for an event
      }
    });
  }
  ~Tricklers() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) ::close(fd);
  }
  const std::vector<int>& fds() const { return fds_; }

 private:
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::unique_ptr<Server> start(int workers, int max_unauthenticated, int unauthenticated_timeout_ms = 5000) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = "/nonexistent/swept-gate-test.db";  // /api/info answers without a database
  o.token = kToken;
  o.worker_threads = workers;
  o.max_unauthenticated = max_unauthenticated;
  o.unauthenticated_timeout_ms = unauthenticated_timeout_ms;
  auto s = Server::start(o);
  REQUIRE_MESSAGE(s.ok(), s.status().ToString());
  return std::move(*s);
}

}  // namespace

// Issue 15, defect 9. 20 clients trickle their headers (more than the 16
// workers: without the gate they hold every worker for as long as they
// trickle) and 200 more connect and send nothing. An authenticated client
// opening new connections is still answered, every time.
TEST_CASE("web gate: a flood of half-open and trickling connections does not stall an authenticated client") {
  auto server = start(/*workers=*/16, /*max_unauthenticated=*/8);
  Tricklers slow(server->port(), 20);
  std::vector<int> half_open;
  for (int i = 0; i < 200; ++i) {
    int fd = swept::testing::connect_loopback(server->port());
    REQUIRE(fd >= 0);
    half_open.push_back(fd);
  }
  httplib::Client client("127.0.0.1", server->port());
  client.set_bearer_token_auth(kToken);
  // 30 s: far beyond the milliseconds an answer takes, and far below the
  // time the tricklers could hold the workers (for ever).
  client.set_connection_timeout(30, 0);
  client.set_read_timeout(30, 0);
  for (int i = 0; i < 10; ++i) {
    auto res = client.Get("/api/info");
    REQUIRE_MESSAGE(res, "request " << i << " of the authenticated client got no answer within 30 s");
    CHECK(res->status == 200);
  }
  // The gate closed the surplus: of the 220, at most 8 may still wait (and
  // those go at their deadline).
  int closed = 0;
  for (int fd : slow.fds()) closed += closed_by_peer_within(fd, 30000) ? 1 : 0;
  CHECK(closed == 20);
  for (int fd : half_open) {
    CHECK(closed_by_peer_within(fd, 30000));
    ::close(fd);
  }
}

// The deadline is on the whole time before authentication, not on each
// read: a client trickling bytes well within the 3 s read timeout is still
// closed once its budget (here 1 s) is spent. And an authenticated
// connection is no longer under that budget.
TEST_CASE("web gate: a trickling unauthenticated connection is closed at its deadline, an authenticated one is not") {
  auto server = start(/*workers=*/8, /*max_unauthenticated=*/4, /*unauthenticated_timeout_ms=*/1000);
  Tricklers slow(server->port(), 1);
  CHECK_MESSAGE(closed_by_peer_within(slow.fds()[0], 30000),
                "a connection trickling its headers was not closed within 30 s");

  // An authenticated keep-alive connection, idle for less than its keep-alive
  // timeout but past the unauthenticated budget, still serves its next request.
  int fd = swept::testing::connect_loopback(server->port());
  REQUIRE(fd >= 0);
  const std::string req = std::string("GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ") + kToken +
                          "\r\n\r\n";
  auto answered = [&] {
    REQUIRE(::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
    std::string got;
    char buf[4096];
    while (got.find("\r\n\r\n") == std::string::npos || got.find("\"trial_states\"") == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 30000) != 1) return std::string("no answer");
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return std::string("closed after: ") + got;
      got.append(buf, static_cast<size_t>(n));
    }
    return got.substr(0, 12);
  };
  CHECK(answered() == "HTTP/1.1 200");
  // Past the 1 s budget: wait until a fresh unauthenticated connection, opened
  // now, has been closed by its deadline (an event, not a sleep).
  Tricklers later(server->port(), 1);
  REQUIRE(closed_by_peer_within(later.fds()[0], 30000));
  CHECK(answered() == "HTTP/1.1 200");
  ::close(fd);
}

// Over the cap, a waiting connection whose request has arrived (bytes unread
// in its socket: its worker has not run yet) is kept, and the oldest idle one
// goes; when every one has bytes waiting, the oldest goes.
TEST_CASE("web gate: over the cap, an idle connection goes before one whose request has arrived") {
  swept::web::ConnectionGate gate(2);
  int a[2], b[2], c[2], d[2];
  for (int* p : {a, b, c, d}) REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, p) == 0);
  REQUIRE(::send(a[1], "GET /", 5, 0) == 5);  // a, the oldest, has its request waiting
  (void)gate.admit(a[0]);
  (void)gate.admit(b[0]);
  (void)gate.admit(c[0]);  // one too many: b, the oldest idle one, goes
  char ch;
  CHECK(::recv(b[1], &ch, 1, MSG_DONTWAIT) == 0);   // EOF: shut down
  CHECK(::recv(a[1], &ch, 1, MSG_DONTWAIT) == -1);  // still open
  REQUIRE(::send(c[1], "GET /", 5, 0) == 5);
  (void)gate.admit(d[0]);  // a and c have bytes waiting, d is idle: d goes
  CHECK(::recv(d[1], &ch, 1, MSG_DONTWAIT) == 0);
  CHECK(::recv(a[1], &ch, 1, MSG_DONTWAIT) == -1);
  CHECK(gate.evicted() == 2);
  CHECK(gate.unauthenticated() == 2);
  for (int* p : {a, b, c, d}) {
    ::close(p[0]);
    ::close(p[1]);
  }
}

// The gate's bookkeeping alone, over socket pairs: the oldest waiting
// connection is shut down when one too many arrives; an authenticated one is
// never counted again.
TEST_CASE("web gate: over the cap, the oldest unauthenticated connection is shut down") {
  swept::web::ConnectionGate gate(2);
  int a[2], b[2], c[2], d[2];
  for (int* p : {a, b, c, d}) REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, p) == 0);
  const uint64_t ta = gate.admit(a[0]);
  const uint64_t tb = gate.admit(b[0]);
  gate.authenticated(tb);
  const uint64_t tc = gate.admit(c[0]);
  CHECK(gate.unauthenticated() == 2);
  CHECK(gate.evicted() == 0);
  (void)gate.admit(d[0]);  // three waiting: a, the oldest, goes
  CHECK(gate.unauthenticated() == 2);
  CHECK(gate.evicted() == 1);
  char ch;
  CHECK(::recv(a[1], &ch, 1, MSG_DONTWAIT) == 0);   // EOF: shut down
  CHECK(::recv(b[1], &ch, 1, MSG_DONTWAIT) == -1);  // still open (nothing to read)
  CHECK(::recv(c[1], &ch, 1, MSG_DONTWAIT) == -1);
  gate.release(ta);  // releasing an evicted or authenticated ticket is harmless
  gate.release(tb);
  gate.release(tc);
  CHECK(gate.unauthenticated() == 1);
  for (int* p : {a, b, c, d}) {
    ::close(p[0]);
    ::close(p[1]);
  }
}

TEST_CASE("web gate: the cap must leave workers for authenticated users") {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.worker_threads = 16;
  o.max_unauthenticated = 16;
  auto s = Server::start(o);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("--max-unauthenticated must be between 1 and 15") != std::string::npos);
  o.max_unauthenticated = 0;
  CHECK_FALSE(Server::start(o).ok());
}
