// The rendezvous of a multi-process run: a small key-value store that rank 0
// serves over ZeroMQ at MASTER_PORT and every rank (rank 0 too) uses as a
// client, so that the ranks can exchange what their collectives need (Gloo's
// addresses, NCCL's unique id) before any of them knows where the others are.
// It carries a few kilobytes once per run; the gradients never pass here.
//
// Wire (one ZeroMQ message of frames per request, DEALER -> ROUTER):
//   ["", "hello"]            -> ["", "ok"]            reachability check
//   ["", "set", key, value]  -> ["", "ok"]
//   ["", "get", key]         -> ["", "value", value]  answered when the key
//                                                      is set (held until then)
// Every client call has a deadline: a rank that cannot reach rank 0, or
// waits for a key that no rank sets, gets kIoError naming the address, the
// key and the time waited, never a hang.
//
// GlooStore adapts a client to gloo::rendezvous::Store (Debian 12's
// libgloo-dev: set, get, wait(keys), wait(keys, timeout)), so Gloo's own
// connectFullMesh exchanges its addresses through it.
//
// Thread safety: RendezvousServer runs its own thread; a RendezvousClient
// (and a GlooStore) is used by one thread at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "common/status.h"

namespace swept::trainer {

class RendezvousServer {
 public:
  // Binds tcp://*:port (every interface: the others reach rank 0 by
  // MASTER_ADDR, whichever interface that is) and serves until destroyed.
  // port 0: any free port (tests; port() says which).
  // Errors: kIoError when the port cannot be bound (in use: another run).
  static Result<std::unique_ptr<RendezvousServer>> start(int port);
  ~RendezvousServer();
  int port() const { return port_; }

 private:
  struct State;
  RendezvousServer() = default;
  void serve();
  std::unique_ptr<State> state_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class RendezvousClient {
 public:
  // Connects to tcp://host:port and checks within `timeout` that the server
  // answers. Errors: kIoError ("could not reach the rendezvous ...").
  static Result<std::unique_ptr<RendezvousClient>> connect(const std::string& host, int port, int rank,
                                                           std::chrono::milliseconds timeout);
  ~RendezvousClient();

  Status set(const std::string& key, const std::string& value);
  // Waits until some rank has set `key` (at most `timeout`, default the one
  // given to connect) and returns its value.
  Result<std::string> get(const std::string& key);
  Result<std::string> get(const std::string& key, std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  struct Socket;
  RendezvousClient() = default;
  Result<std::vector<std::string>> request(const std::vector<std::string>& frames, std::chrono::milliseconds timeout,
                                           const std::string& what);
  std::unique_ptr<Socket> socket_;
  std::string endpoint_;
  int rank_ = 0;
  std::chrono::milliseconds timeout_{0};
};

// gloo::rendezvous::Store over a RendezvousClient. Gloo's interface has no
// error values: a failure throws GlooStore::Failure (a std::runtime_error),
// whose status() the caller turns back into a Status at the module's edge.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  class Failure : public std::runtime_error {
   public:
    explicit Failure(Status s) : std::runtime_error(s.message()), status_(std::move(s)) {}
    const Status& status() const { return status_; }

   private:
    Status status_;
  };

  explicit GlooStore(RendezvousClient& client) : client_(client) {}
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  RendezvousClient& client_;
};

}  // namespace swept::trainer
