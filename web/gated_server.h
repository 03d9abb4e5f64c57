// The dashboard's HTTP(S) server with a gate on connections that have not
// authenticated yet (issue 15, defect 9: slow and half-open clients).
//
// cpp-httplib serves each connection on one worker thread from accept to
// close. Left alone, a client that opens connections and never finishes its
// request headers (or never sends a byte) holds one worker per connection
// for as long as it trickles, and with enough of them every worker is taken
// before anyone has shown a token: authenticated users then wait in the
// queue. GatedServer keeps httplib's request parsing, routing and responses
// (Server::process_request, the library's extension point; httplib's own
// SSLServer is built the same way) and replaces only the per-connection loop
// around it, to add the gate:
//
// - Every connection starts *unauthenticated*. It becomes authenticated when
//   a request on it passes the pre-routing checks (the token, the Host
//   header): the server calls mark_connection_authenticated() from there.
//   Without a token, the first complete request does it.
// - At most `max_unauthenticated` connections are unauthenticated at once.
//   When one more arrives, the one that has waited longest with nothing
//   unread in its socket is closed (its socket shut down, which wakes its
//   worker at once); only when all have bytes waiting, the oldest. A client
//   whose request has arrived but whose worker has not read it yet (a loaded
//   host) is thus not pushed out by idle connections. Closing the oldest
//   rather than refusing the newest means a flood cannot lock a real user
//   out: a real client sends its request within a round trip of connecting,
//   so it authenticates long before the flood has cycled through the cap.
// - An unauthenticated connection lives at most `unauthenticated_timeout`
//   from accept to its first authorized request, however it trickles (a
//   deadline on the whole, not on each read); the TLS handshake counts.
// - Workers: `worker_threads` in all, so at least worker_threads -
//   max_unauthenticated of them are never held by unauthenticated clients.
//   Authenticated connections keep httplib's per-read timeout and keep-alive.
//
// Thread safety: configure before listening; afterwards the server is driven
// by httplib's listener thread and its workers. stats() may be called from
// any thread.
#pragma once

#include <httplib.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>

#include "common/mutex.h"

namespace swept::web {

// Counts and bounds the connections that have not authenticated. Owned by
// GatedServer; public for its test. Thread-safe.
class ConnectionGate {
 public:
  explicit ConnectionGate(int max_unauthenticated) : max_(max_unauthenticated) {}

  // Registers the connection on socket `fd` as unauthenticated and returns
  // its ticket. If that makes more than the cap, the oldest unauthenticated
  // connection with nothing unread (else the oldest) has its socket shut
  // down (not closed: its owner closes it) and is no longer counted.
  uint64_t admit(int fd) SWEPT_EXCLUDES(mu_);
  // The connection passed the checks: no longer counted. Idempotent.
  void authenticated(uint64_t ticket) SWEPT_EXCLUDES(mu_);
  // The connection ends: must be called before its socket is closed, so that
  // admit() never shuts down a descriptor number that was reused.
  void release(uint64_t ticket) SWEPT_EXCLUDES(mu_);

  int unauthenticated() const SWEPT_EXCLUDES(mu_);
  uint64_t evicted() const SWEPT_EXCLUDES(mu_);

 private:
  const int max_;
  mutable Mutex mu_;
  uint64_t next_ticket_ SWEPT_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, int> waiting_ SWEPT_GUARDED_BY(mu_);  // ticket (= age order) -> socket
  uint64_t evicted_ SWEPT_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point last_warning_ SWEPT_GUARDED_BY(mu_){};
};

struct GateOptions {
  int max_unauthenticated = 128;
  std::chrono::milliseconds unauthenticated_timeout{5000};
};

class GatedServer final : public httplib::Server {
 public:
  // `tls`: the TLS context (certificate and key loaded), owned from here on;
  // null serves plain HTTP.
  GatedServer(const GateOptions& options, SSL_CTX* tls);
  ~GatedServer() override;

  ConnectionGate& gate() { return gate_; }

 private:
  bool process_and_close_socket(socket_t sock) override;

  const GateOptions options_;
  SSL_CTX* tls_;
  ConnectionGate gate_;
};

// Called by a handler (the pre-routing one) on a worker thread: the
// connection this thread serves has authenticated. Does nothing outside a
// GatedServer's connection.
void mark_connection_authenticated();

// Called by a handler on a worker thread: once this response is written,
// close the connection instead of keeping it alive for another request.
// A refused event stream uses it (issue 26, item 4): a client that holds a
// refused connection open would otherwise keep its worker for the whole
// keep-alive timeout, and enough of them starve the API. Does nothing
// outside a GatedServer's connection.
void close_connection_after_response();

}  // namespace swept::web
