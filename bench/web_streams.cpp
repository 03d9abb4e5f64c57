// web_streams: the dashboard API's latency while hundreds of live-event
// streams are attempted (issue 26, item 4: with 500 authenticated
// /api/events streams open, a plain API request took 7.2-9.3 s).
//
//   web_streams [--db PATH] [--streams 500] [--addresses 50] [--clients 4] [--seconds 10] [--pace-ms 20]
//
// Starts the dashboard server in this process with `swept web`'s defaults
// and a token. API clients, `--clients` over kept-alive connections and as
// many opening a new connection per request, each send a request
// (/api/info and /api/sweeps in turn) every `--pace-ms` for `--seconds`:
// first with no stream open (the peer), then while `--streams`
// authenticated /api/events requests are sent from `--addresses` source
// addresses (127.0.0.10 and up, as many clients), starting together, every
// stream connection left open whatever its answer (the hostile case: a
// refused client that does not hang up). Prints p50/p99/max latency of
// each kind in each phase and how the streams were answered (200, 429,
// 503, other, none within 10 s) (docs/benchmarks.md, "Dashboard"). Raw
// sockets and poll() throughout: the process holds over 1,000 descriptors,
// past what select() may watch.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/testing/loopback.h"
#include "web/server.h"

namespace {

using Clock = std::chrono::steady_clock;
const char* const kToken = "web-streams-bench-token";

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

int connect_from(const std::string& from, int port) { return swept::testing::connect_loopback(port, from); }

bool send_all(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

std::string request(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + kToken + "\r\n\r\n";
}

// Reads one whole response (head and Content-Length body) within 30 s;
// returns its status, 0 on failure.
int read_response(int fd) {
  std::string got;
  char buf[16384];
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  size_t need = std::string::npos;
  while (need == std::string::npos || got.size() < need) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) != 1) return 0;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return 0;
    got.append(buf, static_cast<size_t>(n));
    const size_t end = got.find("\r\n\r\n");
    if (need == std::string::npos && end != std::string::npos) {
      const size_t cl = got.find("Content-Length: ");
      need = end + 4 + (cl != std::string::npos && cl < end ? std::stoul(got.substr(cl + 16)) : 0);
    }
  }
  return std::atoi(got.substr(9, 3).c_str());
}

// API requests (/api/info and /api/sweeps in turn) from `clients` clients
// at once for `seconds`, each client sending one every `pace_ms` (so that a
// stall shows in as many samples as it lasts), over keep-alive connections
// or (`fresh`) a new connection each, as curl or a page load makes; the
// latency of each in ms, connecting included (a failed request counts as 30 s).
std::vector<double> api_latencies(int port, int clients, bool fresh, int seconds, int pace_ms) {
  std::vector<std::vector<double>> per(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      int fd = fresh ? -1 : connect_from("127.0.0.1", port);
      for (int i = c; Clock::now() < end; i += clients) {
        const auto t = Clock::now();
        if (fresh) fd = connect_from("127.0.0.1", port);
        const std::string req = request(i % 2 ? "/api/sweeps" : "/api/info");
        bool ok = fd >= 0 && send_all(fd, req) && read_response(fd) == 200;
        if (!ok && !fresh) {  // the server closed a kept-alive connection: one reconnect
          if (fd >= 0) ::close(fd);
          fd = connect_from("127.0.0.1", port);
          ok = fd >= 0 && send_all(fd, req) && read_response(fd) == 200;
        }
        per[static_cast<size_t>(c)].push_back(ok ? std::chrono::duration<double, std::milli>(Clock::now() - t).count()
                                                 : 30000.0);
        if (fresh && fd >= 0) ::close(fd), fd = -1;
        std::this_thread::sleep_until(t + std::chrono::milliseconds(pace_ms));  // the pace, not a wait for an event
      }
      if (fd >= 0) ::close(fd);
    });
  }
  for (auto& t : threads) t.join();
  std::vector<double> all;
  for (auto& v : per) all.insert(all.end(), v.begin(), v.end());
  return all;
}

void report(const char* what, const std::vector<double>& ms) {
  std::printf("| %s | %zu | %.2f | %.2f | %.2f |\n", what, ms.size(), percentile(ms, 0.5), percentile(ms, 0.99),
              *std::max_element(ms.begin(), ms.end()));
}

// Both kinds of API client at once, `clients` of each, for `seconds`.
struct Measured {
  std::vector<double> keep_alive, fresh;
};
Measured measure(int port, int clients, int seconds, int pace_ms) {
  Measured m;
  std::thread keep([&] { m.keep_alive = api_latencies(port, clients, false, seconds, pace_ms); });
  m.fresh = api_latencies(port, clients, true, seconds, pace_ms);
  keep.join();
  return m;
}

// Opens `streams` event-stream requests from `addresses` source addresses
// into `fds` (left open) and counts their answers (the status of the first
// line, "none" without one within 10 s).
std::map<std::string, int> attempt_streams(int port, int streams, int addresses, std::vector<int>& fds) {
  for (int i = 0; i < streams; ++i) {
    const std::string from = "127.0.0." + std::to_string(10 + i % addresses);
    const int fd = connect_from(from, port);
    if (fd < 0 || !send_all(fd, request("/api/events"))) {
      std::cerr << "web_streams: cannot open stream " << i << " from " << from << "\n";
      std::exit(1);
    }
    fds.push_back(fd);
  }
  std::vector<std::string> heads(fds.size());
  std::vector<bool> done(fds.size(), false);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  size_t left = fds.size();
  while (left > 0 && Clock::now() < deadline) {
    std::vector<pollfd> polls;
    std::vector<size_t> which;
    for (size_t i = 0; i < fds.size(); ++i)
      if (!done[i]) polls.push_back({fds[i], POLLIN, 0}), which.push_back(i);
    if (::poll(polls.data(), polls.size(), 100) <= 0) continue;
    for (size_t k = 0; k < polls.size(); ++k) {
      if (!polls[k].revents) continue;
      const size_t i = which[k];
      char buf[512];
      const ssize_t n = ::recv(fds[i], buf, sizeof buf, 0);
      if (n > 0) heads[i].append(buf, static_cast<size_t>(n));
      if (n <= 0 || heads[i].find("\r\n") != std::string::npos) done[i] = true, --left;
    }
  }
  std::map<std::string, int> answers;
  for (const auto& head : heads) {
    const std::string code = head.size() >= 12 ? head.substr(9, 3) : "none";
    ++answers[code == "200" || code == "429" || code == "503" || code == "none" ? code : "other"];
  }
  return answers;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db = "/nonexistent/web-streams-bench.db";
  int streams = 500, addresses = 50, clients = 4, seconds = 10, pace_ms = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--db") db = value;
    else if (flag == "--streams") streams = std::stoi(value);
    else if (flag == "--addresses") addresses = std::clamp(std::stoi(value), 1, 200);
    else if (flag == "--clients") clients = std::max(1, std::stoi(value));
    else if (flag == "--seconds") seconds = std::max(1, std::stoi(value));
    else if (flag == "--pace-ms") pace_ms = std::max(1, std::stoi(value));
    else {
      std::cerr << "web_streams: unknown flag " << flag << "; usage: web_streams [--db PATH] [--streams N] "
                << "[--addresses N] [--clients N] [--seconds N] [--pace-ms N]\n";
      return 2;
    }
  }
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);

  swept::web::ServerOptions options;  // `swept web`'s defaults
  options.listen = "127.0.0.1:0";
  options.db_path = db;
  options.token = kToken;
  auto server = swept::web::Server::start(options);
  if (!server.ok()) {
    std::cerr << "web_streams: " << server.status().ToString() << "\n";
    return 1;
  }
  const int port = (*server)->port();

  std::printf("| phase | requests | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n");
  Measured peer = measure(port, clients, seconds, pace_ms);
  report("API keep-alive, no stream open (peer)", peer.keep_alive);
  report("API new connections, no stream open (peer)", peer.fresh);

  // The attack and the API clients start together: the API is measured
  // while the streams are being answered and after, as they stay open.
  std::vector<int> fds;
  std::map<std::string, int> answers;
  std::thread attack([&] { answers = attempt_streams(port, streams, addresses, fds); });
  Measured during = measure(port, clients, seconds, pace_ms);
  attack.join();
  const std::string held = std::to_string(streams) + " stream attempts";
  report(("API keep-alive, " + held).c_str(), during.keep_alive);
  report(("API new connections, " + held).c_str(), during.fresh);
  std::printf("\nstream answers:");
  for (const auto& [code, n] : answers) std::printf(" %s=%d", code.c_str(), n);
  std::printf("\n");
  for (int fd : fds) ::close(fd);
  (*server)->stop();
  return 0;
}
