// ps_transport_bench: the parameter servers' traffic pattern over the two
// transports swept-train could use (trainer/README.md, "Parameter servers",
// why ZeroMQ): W worker processes each push a gradient of N floats to one
// server and pull N floats of parameters back, as fast as they can and
// each at its own pace; the server answers whichever worker's push arrives
// first.
//
//   ps_transport_bench --transport=zmq|gloo [--workers=4] [--floats=79510] [--rounds=200]
//
//   zmq   the server's ROUTER and one DEALER per worker (as dist/ps_*.cpp);
//   gloo  a Gloo context over all W + 1 processes (tcp, loopback, a FileStore
//         rendezvous), the server receiving with one unbound buffer posted
//         for any worker (recv(srcRanks)), answering with a buffer per worker.
// The server process prints one JSON line: round trips per second over all
// workers and the bytes per second both ways, between its first receive and
// its last answer. Every answer is checked (a fast wrong answer is not a
// result). Exit 0, 2 on bad flags, 1 when a process fails.
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace {

struct Flags {
  std::string transport = "zmq";
  int workers = 4;
  size_t floats = 79510;  // the MLP's parameters
  int rounds = 200;
};

using Clock = std::chrono::steady_clock;

void report(const Flags& f, Clock::time_point first, Clock::time_point last) {
  const double s = std::chrono::duration<double>(last - first).count();
  const double trips = static_cast<double>(f.workers) * f.rounds;
  std::printf("{\"transport\": \"%s\", \"workers\": %d, \"floats\": %zu, \"round_trips_per_sec\": %.1f, "
              "\"mb_per_sec_both_ways\": %.1f}\n",
              f.transport.c_str(), f.workers, f.floats, trips / s, trips * 2.0 * f.floats * 4.0 / s / 1e6);
  std::fflush(stdout);
}

// The answer a worker checks: the server's "parameters" are its round number.
int zmq_server(const Flags& f, int port) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.bind("tcp://127.0.0.1:" + std::to_string(port));
  std::vector<float> params(f.floats, 1.0f);
  Clock::time_point first;
  for (int i = 0; i < f.workers * f.rounds; ++i) {
    std::vector<zmq::message_t> msg;
    if (!zmq::recv_multipart(s, std::back_inserter(msg))) return 1;
    if (i == 0) first = Clock::now();
    if (msg.size() != 2 || msg[1].size() != f.floats * 4) return 1;
    s.send(msg[0], zmq::send_flags::sndmore);
    s.send(zmq::buffer(params), zmq::send_flags::none);
  }
  report(f, first, Clock::now());
  return 0;
}

int zmq_worker(const Flags& f, int port, int w) {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.connect("tcp://127.0.0.1:" + std::to_string(port));
  std::vector<float> grad(f.floats, static_cast<float>(w)), params(f.floats);
  for (int r = 0; r < f.rounds; ++r) {
    s.send(zmq::buffer(grad), zmq::send_flags::none);
    zmq::message_t reply;
    if (!s.recv(reply) || reply.size() != f.floats * 4) return 1;
    std::memcpy(params.data(), reply.data(), reply.size());
    if (params[f.floats - 1] != 1.0f) return 1;
  }
  return 0;
}

std::shared_ptr<gloo::rendezvous::Context> gloo_join(const std::string& dir, int rank, int size) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  gloo::rendezvous::FileStore store(dir);
  context->connectFullMesh(store, device);
  return context;
}

int gloo_server(const Flags& f, const std::string& dir) {
  auto ctx = gloo_join(dir, 0, f.workers + 1);
  std::vector<float> in(f.floats), params(f.floats, 1.0f);
  auto recv = ctx->createUnboundBuffer(in.data(), in.size() * 4);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> out;
  std::vector<bool> pending(static_cast<size_t>(f.workers) + 1, false);
  for (int w = 0; w <= f.workers; ++w) out.push_back(ctx->createUnboundBuffer(params.data(), params.size() * 4));
  std::vector<int> any;
  for (int w = 1; w <= f.workers; ++w) any.push_back(w);
  Clock::time_point first;
  for (int i = 0; i < f.workers * f.rounds; ++i) {
    recv->recv(any, /*slot=*/1);
    int src = -1;
    recv->waitRecv(&src);
    if (i == 0) first = Clock::now();
    const auto w = static_cast<size_t>(src);
    if (pending[w]) out[w]->waitSend();  // the previous answer to w has gone (w waited for it)
    out[w]->send(src, /*slot=*/2);
    pending[w] = true;
  }
  for (int w = 1; w <= f.workers; ++w)
    if (pending[static_cast<size_t>(w)]) out[static_cast<size_t>(w)]->waitSend();
  report(f, first, Clock::now());
  return 0;
}

int gloo_worker(const Flags& f, const std::string& dir, int w) {
  auto ctx = gloo_join(dir, w + 1, f.workers + 1);
  std::vector<float> grad(f.floats, static_cast<float>(w)), params(f.floats);
  auto send = ctx->createUnboundBuffer(grad.data(), grad.size() * 4);
  auto recv = ctx->createUnboundBuffer(params.data(), params.size() * 4);
  for (int r = 0; r < f.rounds; ++r) {
    recv->recv(0, /*slot=*/2);
    send->send(0, /*slot=*/1);
    send->waitSend();
    recv->waitRecv();
    if (params[f.floats - 1] != 1.0f) return 1;
    params[f.floats - 1] = 0.0f;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string p = std::string("--") + name + "=";
      return a.rfind(p, 0) == 0 ? argv[i] + p.size() : nullptr;
    };
    if (const char* v = value("transport")) f.transport = v;
    else if (const char* v = value("workers")) f.workers = std::atoi(v);
    else if (const char* v = value("floats")) f.floats = std::strtoull(v, nullptr, 10);
    else if (const char* v = value("rounds")) f.rounds = std::atoi(v);
    else {
      std::fprintf(stderr, "ps_transport_bench: unknown argument %s (--transport, --workers, --floats, --rounds)\n",
                   argv[i]);
      return 2;
    }
  }
  if ((f.transport != "zmq" && f.transport != "gloo") || f.workers < 1 || f.floats < 1 || f.rounds < 1) {
    std::fprintf(stderr, "ps_transport_bench: --transport=zmq|gloo, --workers, --floats, --rounds >= 1\n");
    return 2;
  }
  // The port for ZeroMQ: the kernel's pick, from a socket bound and closed.
  int port = 0;
  {
    zmq::context_t ctx(1);
    zmq::socket_t probe(ctx, zmq::socket_type::router);
    probe.bind("tcp://127.0.0.1:*");
    const std::string ep = probe.get(zmq::sockopt::last_endpoint);
    port = std::stoi(ep.substr(ep.rfind(':') + 1));
  }
  char templ[] = "/tmp/ps-transport-XXXXXX";
  const std::string dir = ::mkdtemp(templ);
  std::vector<pid_t> children;
  for (int w = 0; w < f.workers; ++w) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(f.transport == "zmq" ? zmq_worker(f, port, w) : gloo_worker(f, dir, w));
    children.push_back(pid);
  }
  int rc = 0;
  try {
    rc = f.transport == "zmq" ? zmq_server(f, port) : gloo_server(f, dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ps_transport_bench: server failed: %s\n", e.what());
    rc = 1;
  }
  for (pid_t pid : children) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  }
  std::filesystem::remove_all(dir);
  return rc;
}
