// Tests of the bounds on live-event streams (/api/events; issue 26, item 4)
// with real sockets against a real Server on a port picked at run time: the
// per-client share (429), the total (503), both answered at once with
// Retry-After and the refused connection closed, a freed slot reused, and
// the API answering while every stream is open. Clients are told apart by
// their source address: Linux routes all of 127.0.0.0/8 to loopback, so a
// socket bound to 127.0.0.N is another peer address. No timing thresholds:
// each wait has a deadline far beyond what the behaviour needs.
#include <doctest/doctest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/testing/eventually.h"
#include "common/testing/loopback.h"
#include "web/server.h"

using swept::web::Server;
using swept::web::ServerOptions;

namespace {

const char* const kToken = "stream-test-token";
constexpr int kDeadlineMs = 30000;  // bounds a test that would otherwise hang; never a threshold

// A TCP connection to 127.0.0.1:port from source address `from` (127.0.0.N).
int connect_from(const std::string& from, int port) { return swept::testing::connect_loopback(port, from); }

// Reads from `fd` until the response's head is complete; returns it, or ""
// when the peer closes first or the deadline passes.
std::string read_head(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kDeadlineMs);
  std::string got;
  char buf[1024];
  while (got.find("\r\n\r\n") == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return "";
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) != 1) return "";
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "";
    got.append(buf, static_cast<size_t>(n));
  }
  return got.substr(0, got.find("\r\n\r\n") + 2);
}

// The status code of a head ("HTTP/1.1 429 ..."), 0 when there is none.
int status_of(const std::string& head) {
  if (head.size() < 12 || head.rfind("HTTP/1.", 0) != 0) return 0;
  return std::atoi(head.substr(9, 3).c_str());
}

// Reads until the peer closes `fd` (true) or the deadline passes (false).
bool closed_by_peer(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kDeadlineMs);
  char buf[512];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) != 1) return false;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
}

// One event-stream request from `from`; the connection stays open (the
// caller closes it) and its answer's head is in `head`.
struct Stream {
  int fd = -1;
  std::string head;
  int status() const { return status_of(head); }
};

Stream open_stream(int port, const std::string& from) {
  Stream s;
  s.fd = connect_from(from, port);
  REQUIRE_MESSAGE(s.fd >= 0, "cannot connect from " << from);
  const std::string request = std::string("GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ") +
                              kToken + "\r\n\r\n";
  REQUIRE(::send(s.fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
  s.head = read_head(s.fd);
  return s;
}

struct Streams {
  std::vector<Stream> open;
  ~Streams() {
    for (auto& s : open) ::close(s.fd);
  }
  Stream& add(Stream s) { return open.emplace_back(std::move(s)); }
};

std::unique_ptr<Server> start(int workers, int max_streams, int per_client) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = "/nonexistent/swept-stream-test.db";  // /api/info answers without a database
  o.token = kToken;
  o.worker_threads = workers;
  o.max_unauthenticated = 2;
  o.max_event_streams = max_streams;
  o.max_event_streams_per_client = per_client;
  auto s = Server::start(o);
  REQUIRE_MESSAGE(s.ok(), s.status().ToString());
  return std::move(*s);
}

}  // namespace

TEST_CASE("web streams: one client's stream beyond its share gets 429 at once, and a closed one frees its slot") {
  auto server = start(/*workers=*/16, /*max_streams=*/8, /*per_client=*/2);
  Streams streams;
  for (int i = 0; i < 2; ++i) CHECK(streams.add(open_stream(server->port(), "127.0.0.1")).status() == 200);
  Stream& refused = streams.add(open_stream(server->port(), "127.0.0.1"));
  CHECK_MESSAGE(refused.status() == 429, refused.head);
  CHECK(refused.head.find("Retry-After: ") != std::string::npos);
  CHECK_MESSAGE(closed_by_peer(refused.fd), "the server kept a refused stream's connection open");
  // Another client still has its share.
  CHECK(streams.add(open_stream(server->port(), "127.0.0.2")).status() == 200);
  // The client closes one of its streams: its slot comes back.
  ::close(streams.open[0].fd);
  streams.open[0].fd = ::socket(AF_INET, SOCK_STREAM, 0);  // a harmless descriptor for the destructor
  CHECK(swept::testing::eventually([&] {
    Stream s = open_stream(server->port(), "127.0.0.1");
    const bool ok = s.status() == 200;
    streams.add(std::move(s));
    return ok;
  }));
}

TEST_CASE("web streams: one stream beyond the server's total gets 503 at once, and the connection is closed") {
  auto server = start(/*workers=*/16, /*max_streams=*/4, /*per_client=*/2);
  Streams streams;
  for (const char* from : {"127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"})
    CHECK(streams.add(open_stream(server->port(), from)).status() == 200);
  Stream& refused = streams.add(open_stream(server->port(), "127.0.0.4"));
  CHECK_MESSAGE(refused.status() == 503, refused.head);
  CHECK(refused.head.find("Retry-After: ") != std::string::npos);
  CHECK_MESSAGE(closed_by_peer(refused.fd), "the server kept a refused stream's connection open");
}

// With every stream open and more refused clients holding their connections,
// the API still answers: streams have threads of their own beyond the 4
// workers, and refused connections are closed rather than kept alive.
TEST_CASE("web streams: with the most streams open and refused clients lingering, an API request is answered") {
  auto server = start(/*workers=*/4, /*max_streams=*/8, /*per_client=*/8);
  Streams streams;
  for (int i = 0; i < 8; ++i) CHECK(streams.add(open_stream(server->port(), "127.0.0.1")).status() == 200);
  for (int i = 0; i < 12; ++i) CHECK(streams.add(open_stream(server->port(), "127.0.0.1")).status() == 429);
  httplib::Client client("127.0.0.1", server->port());
  client.set_bearer_token_auth(kToken);
  client.set_connection_timeout(kDeadlineMs / 1000, 0);
  client.set_read_timeout(kDeadlineMs / 1000, 0);
  auto res = client.Get("/api/info");
  REQUIRE(res);
  CHECK(res->status == 200);
}

TEST_CASE("web streams: start() refuses stream limits out of range, naming them") {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = "/nonexistent/swept-stream-test.db";
  o.max_event_streams = 0;
  auto s = Server::start(o);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("max_event_streams must be between 1 and 4096") != std::string::npos);
  o.max_event_streams = 4;
  o.max_event_streams_per_client = 5;
  s = Server::start(o);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("max_event_streams_per_client must be between 1 and max_event_streams (4)") !=
        std::string::npos);
}
