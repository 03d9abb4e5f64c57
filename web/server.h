// swept's dashboard server: the JSON API of docs/api.md, the Server-Sent
// Events stream of live changes, and the dashboard's pages (compiled in).
//
// Embedding (swept web, swept scheduler --web, swept run):
//
//   ServerOptions opts;
//   opts.listen = "127.0.0.1:0";        // port 0: the system picks one
//   opts.db_path = "swept.db";
//   auto server = Server::start(opts);  // listening when it returns
//   if (!server.ok()) ...               // InvalidArgument (bad address, token, TLS files) or IoError (bind failed)
//   std::cout << (*server)->url();      // "http://127.0.0.1:41234/" ("https://" with TLS)
//   (*server)->stop();                  // or destroy it
//
// The server reads the store read-only and never writes to it; the file need
// not exist yet (pages then show empty lists). The one action, cancelling a
// sweep or a trial, exists only when `cancel` is set: the embedder forwards it
// to the scheduler. With a token, every request (API and pages) must carry it:
// "Authorization: Bearer T", the cookie set by visiting any page once with
// ?token=T, or ?token=T itself.
//
// Thread safety: start/stop/url may be called from any thread; stop() is
// idempotent and waits for the server's threads. Requests are served by a
// pool of threads; `cancel` is called from them, possibly concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"

namespace swept::web {

// Cancels a sweep (sweep_id set) or a trial (trial_id set). Returns the
// scheduler's answer; a non-ok Status is shown to the user.
using CancelFn = std::function<Status(std::optional<int64_t> sweep_id, std::optional<int64_t> trial_id)>;

struct ServerOptions {
  std::string listen = "127.0.0.1:8080";  // HOST:PORT; port 0 picks a free one
  std::string db_path = "swept.db";
  std::string token;                      // empty: no authentication (loopback addresses only)
  bool insecure = false;                  // allow a non-loopback listen address without a token
  CancelFn cancel;                        // empty: no cancel button or API
  // TLS (HTTPS): the server's certificate chain and its private key, PEM
  // files; both or neither. start() refuses (InvalidArgument, naming the
  // file) one without the other, an unreadable or non-PEM file, a key with a
  // passphrase, and a key that is not the certificate's.
  std::string tls_cert;
  std::string tls_key;
  int poll_interval_ms = 500;             // live-update polling of the store
  // Live-event streams (/api/events), issue 26 item 4. Each open stream
  // holds a thread for its lifetime; the pool has max_event_streams threads
  // on top of worker_threads, so that streams never take the workers API
  // requests need. One more stream than max_event_streams_per_client from
  // one peer address is refused at once with 429, one more than
  // max_event_streams in all with 503 (both with Retry-After), and the
  // refused connection is closed. start() refuses (InvalidArgument)
  // max_event_streams outside 1..4096 and a per-client limit outside
  // 1..max_event_streams.
  int max_event_streams = 32;
  int max_event_streams_per_client = 8;
  int worker_threads = 160;               // HTTP worker threads for requests (slow clients hold one each)
  // Connections that have not yet passed the token check (without a token:
  // not yet sent a whole request): at most this many at once, each for at
  // most unauthenticated_timeout_ms from accept; one more closes the oldest.
  // Must be below worker_threads: the rest serve authenticated users however
  // many clients stall (web/gated_server.h; docs/deploy.md).
  int max_unauthenticated = 128;
  int unauthenticated_timeout_ms = 5000;
};

// Whether `max_unauthenticated` fits `worker_threads` (ServerOptions): 1 or
// more and below the workers. InvalidArgument names the flag, the range and
// the value. Server::start() checks it; `swept run` and `swept scheduler
// --web` call it before they open anything. Pure; any thread.
Status check_max_unauthenticated(int max_unauthenticated, int worker_threads = ServerOptions{}.worker_threads);

class Server {
 public:
  static Result<std::unique_ptr<Server>> start(const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // "http://HOST:PORT/" (or "https://" with TLS) with the port actually bound.
  std::string url() const;
  int port() const;
  void stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Parses "HOST:PORT" ("[::1]:8080" for IPv6). InvalidArgument says what is wrong.
Result<std::pair<std::string, int>> parse_listen_address(const std::string& address);

}  // namespace swept::web
