// The dashboard server over cpp-httplib: its lifetime (start, listen, stop),
// the checks every request passes before routing (Host, token, POST length),
// the pages, and the live-event stream. See server.h.
//
// The JSON API's endpoints are in web/api_routes.cpp, mounted through
// web/routes.h (which turns a failed Status into the JSON error and an
// escaped exception into a 500, so no request can crash the process); the
// TLS setup is in web/tls_setup.cpp.
#include "web/server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <map>
#include <memory>
#include <thread>

#include "common/log.h"
#include "common/mutex.h"
#include "store/reader.h"
#include "web/api_routes.h"
#include "web/gated_server.h"
#include "web/live.h"
#include "web/query_params.h"
#include "web/response_cache.h"
#include "web/routes.h"
#include "web/static_files.h"
#include "web/tls_setup.h"

namespace swept::web {

using nlohmann::json;

namespace {

constexpr const char* kTokenCookie = "swept_token";

// Compares a presented secret with the token in time that depends only on
// the presented secret's length: neither where the first difference lies nor
// the token's length shows in the timing.
bool constant_time_equal(const std::string& presented, const std::string& token) {
  if (token.empty()) return false;
  volatile unsigned char diff = presented.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < presented.size(); ++i)
    diff = diff | static_cast<unsigned char>(presented[i] ^ token[i % token.size()]);
  return diff == 0;
}

// Where a page opened with ?token= is sent back to: its own path when that
// is a plain local path. "//host/..." or "/\\host" would be read by a
// browser as another site (an open redirect), so anything unusual goes to "/".
std::string local_redirect_target(const std::string& path) {
  if (path.size() < 1 || path[0] != '/' || (path.size() > 1 && (path[1] == '/' || path[1] == '\\'))) return "/";
  for (char c : path)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string("/-._~").find(c) != std::string::npos)) return "/";
  return path;
}

// The value of the request's cookie `name`, "" when it sent none.
std::string cookie_value(const httplib::Request& req, const std::string& name) {
  std::string header = req.get_header_value("Cookie");
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string::npos) end = header.size();
    std::string part = header.substr(pos, end - pos);
    size_t start = part.find_first_not_of(' ');
    if (start != std::string::npos) part = part.substr(start);
    if (part.rfind(name + "=", 0) == 0) return part.substr(name.size() + 1);
    pos = end + 1;
  }
  return {};
}

}  // namespace

struct Server::Impl {
  ServerOptions options;
  std::unique_ptr<GatedServer> server;  // serves TLS when the options name a certificate
  httplib::Server& http;
  bool tls;
  store::ConnectionPool pool;
  LiveFeed feed;
  store::ParamSortCache param_sort_cache;
  ResponseCache cache;
  std::thread listener;
  std::string host;
  int port = 0;
  // Open event streams, in all and per peer address (issue 26, item 4).
  Mutex streams_mu;
  int streams SWEPT_GUARDED_BY(streams_mu) = 0;
  std::map<std::string, int> streams_by_client SWEPT_GUARDED_BY(streams_mu);
  std::atomic<bool> stopped{false};

  Impl(const ServerOptions& o, std::unique_ptr<GatedServer> s, bool with_tls)
      : options(o),
        server(std::move(s)),
        http(*server),
        tls(with_tls),
        pool(o.db_path, 2000),
        feed(o.db_path, o.poll_interval_ms),
        cache(o.db_path) {}

  // Without a token, a page on another site could rebind its own name to
  // 127.0.0.1 and read the API as same-origin; checking the Host header
  // against the names this server listens under defeats that. A wildcard
  // listen address (0.0.0.0, ::) has no such list: use a token there.
  bool host_allowed(const httplib::Request& req) const {
    if (!options.token.empty() || host.empty() || host == "0.0.0.0" || host == "::") return true;
    std::string value = req.get_header_value("Host");
    std::string name = value;
    if (!name.empty() && name.front() == '[') {
      name = name.substr(1, name.find(']') == std::string::npos ? std::string::npos : name.find(']') - 1);
    } else if (auto colon = name.rfind(':'); colon != std::string::npos) {
      name = name.substr(0, colon);
    }
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name == host || name == "localhost" || name == "127.0.0.1" || name == "::1";
  }

  bool authorized(const httplib::Request& req) const {
    if (options.token.empty()) return true;
    std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0 && constant_time_equal(auth.substr(7), options.token)) return true;
    if (constant_time_equal(cookie_value(req, kTokenCookie), options.token)) return true;
    if (req.has_param("token") && constant_time_equal(req.get_param_value("token"), options.token)) return true;
    return false;
  }

  void install_routes();
  void install_guards();
  void install_error_handlers();
  void install_static_files();
  bool admit_stream(const std::string& client, httplib::Response& res) SWEPT_EXCLUDES(streams_mu);
  void release_stream(const std::string& client) SWEPT_EXCLUDES(streams_mu);
  void events(const httplib::Request& req, httplib::Response& res);
};

// Every route, in the order httplib is to try them: the checks every request
// passes first, the answers to failed requests, the pages, then the API.
void Server::Impl::install_routes() {
  install_guards();
  install_error_handlers();
  install_static_files();
  Routes routes(http, cache);
  install_api_routes(routes, ApiContext{pool, param_sort_cache, options});
  http.Get("/api/events", [this](const httplib::Request& req, httplib::Response& res) { events(req, res); });
}

// Before routing, for every request: the security headers, then the Host
// and token checks, the refusal of a POST without a length, and the
// redirect that moves a page's ?token= into a cookie.
void Server::Impl::install_guards() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                   "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    res.set_header("Referrer-Policy", "no-referrer");
    if (!host_allowed(req)) {
      send_json(res, 421,
                json{{"error", {{"code", "invalid_argument"},
                                {"message", "unexpected Host header '" + req.get_header_value("Host") +
                                                "': without a token this server answers only to its own address "
                                                "(a guard against DNS rebinding); open it by that address or set a token"}}}});
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!authorized(req)) {
      res.set_header("WWW-Authenticate", "Bearer");
      send_json(res, 401,
                json{{"error", {{"code", "unauthenticated"},
                                {"message", "this dashboard needs its token: send 'Authorization: Bearer TOKEN', "
                                            "or open the page once as /?token=TOKEN"}}}});
      return httplib::Server::HandlerResponse::Handled;
    }
    // Past the token (and Host) checks: this connection no longer counts
    // against the cap on unauthenticated ones (web/gated_server.h).
    mark_connection_authenticated();
    // A POST without Content-Length (nor chunked encoding) would make httplib
    // read its body until the client closes or the read times out, and then
    // act on it after the client gave up: refuse it before reading.
    if (req.method == "POST" && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
      send_error(res, Status::InvalidArgument("a POST needs a Content-Length header (send an empty body as "
                                              "'Content-Length: 0')"));
      res.status = 411;
      return httplib::Server::HandlerResponse::Handled;
    }
    // A page opened with ?token=: remember it in a cookie and drop it from the URL.
    if (!options.token.empty() && req.has_param("token") && req.method == "GET" && req.path.rfind("/api/", 0) != 0) {
      res.set_header("Set-Cookie", std::string(kTokenCookie) + "=" + options.token +
                                       "; Path=/; HttpOnly; SameSite=Strict" + (tls ? "; Secure" : ""));
      res.set_redirect(local_redirect_target(req.path));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

// httplib's own failures (no route, a malformed request, an exception past
// the handlers) as the API's JSON errors.
void Server::Impl::install_error_handlers() {
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    int status = res.status;
    if (status == 404) {
      send_error(res, Status::NotFound("no such endpoint: " + req.method + " " + req.path + "; docs/api.md lists them"));
    } else {
      send_error(res, Status::InvalidArgument("bad request (HTTP " + std::to_string(status) + ")"));
    }
    res.status = status;
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, Status::Internal("internal error while handling the request"));
  });
}

// The dashboard's pages and scripts (web/static_files.h), each at its exact path.
void Server::Impl::install_static_files() {
  for (const auto& file : static_files()) {
    std::string pattern;
    for (char c : file.url_path) {
      if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) pattern += '\\';
      pattern += c;
    }
    http.Get(pattern, [&file](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_content(std::string(file.body), std::string(file.content_type).c_str());
    });
  }
}

// Counts a new stream from `client` (its peer address), or answers the
// refusal in `res` and returns false: 429 when the client has its share
// open, 503 when the server has all it serves. The refused connection is
// closed after the answer, so that a client keeping it open holds no worker.
bool Server::Impl::admit_stream(const std::string& client, httplib::Response& res) {
  int status = 0;
  std::string message;
  {
    MutexLock lock(streams_mu);
    int& mine = streams_by_client[client];
    if (mine >= options.max_event_streams_per_client) {
      status = 429;
      message = "this client (" + client + ") already has " + std::to_string(mine) +
                " live-update streams open, the most one client may; close some dashboard tabs";
    } else if (streams >= options.max_event_streams) {
      status = 503;
      message = "the server already serves " + std::to_string(streams) +
                " live-update streams, the most it allows; retry later or close some dashboard tabs";
    } else {
      ++mine;
      ++streams;
      return true;
    }
    if (mine == 0) streams_by_client.erase(client);
  }
  send_error(res, Status::ResourceExhausted(message));
  res.status = status;
  res.set_header("Retry-After", "10");
  res.set_header("Connection", "close");
  close_connection_after_response();
  return false;
}

void Server::Impl::release_stream(const std::string& client) {
  MutexLock lock(streams_mu);
  --streams;
  auto it = streams_by_client.find(client);
  if (it != streams_by_client.end() && --it->second <= 0) streams_by_client.erase(it);
}

void Server::Impl::events(const httplib::Request& req, httplib::Response& res) {
  const std::string client = req.remote_addr;
  if (!admit_stream(client, res)) return;
  auto cursor = std::make_shared<uint64_t>(feed.latest());
  auto started = std::make_shared<bool>(false);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, cursor, started](size_t, httplib::DataSink& sink) {
        if (!*started) {
          *started = true;
          std::string hello = "retry: 2000\nevent: hello\ndata: {\"seq\":" + std::to_string(*cursor) + "}\n\n";
          return sink.write(hello.data(), hello.size());
        }
        // Wait for events a second at a time, up to the 15 s keep-alive,
        // checking in between whether the client went away: a closed tab
        // gives its stream's slot back within a second, not at the next
        // keep-alive comment.
        std::vector<std::string> events;
        for (int waited = 0; waited < 15 && events.empty(); ++waited) {
          if (stopped.load() || feed.stopping()) return false;
          events = feed.wait_events(cursor.get(), 1000);
          if (!sink.is_writable()) return false;
        }
        if (stopped.load() || feed.stopping()) return false;
        std::string out;
        if (events.empty()) out = ": keep-alive\n\n";
        for (const auto& e : events) out += "id: " + std::to_string(*cursor) + "\nevent: change\ndata: " + e + "\n\n";
        return sink.write(out.data(), out.size());
      },
      [this, client](bool) { release_stream(client); });
}

Result<std::pair<std::string, int>> parse_listen_address(const std::string& address) {
  std::string what = "listen address '" + address + "'";
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    return Status::InvalidArgument(what + " must be HOST:PORT, e.g. 127.0.0.1:8080 (port 0 picks a free one)");
  std::string host = address.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto port = parse_int(address.substr(colon + 1), what + ": port", 0, 65535);
  if (!port.ok()) return port.status();
  return std::make_pair(host, static_cast<int>(*port));
}

Status check_max_unauthenticated(int max_unauthenticated, int worker_threads) {
  const int threads = std::max(4, worker_threads);  // as Server::start runs them
  if (max_unauthenticated >= 1 && max_unauthenticated < threads) return Status::Ok();
  return Status::InvalidArgument("--max-unauthenticated must be between 1 and " + std::to_string(threads - 1) +
                                 " (below the " + std::to_string(threads) +
                                 " worker threads, so that some are kept for authenticated users), got " +
                                 std::to_string(max_unauthenticated));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::start(const ServerOptions& options) {
  auto address = parse_listen_address(options.listen);
  if (!address.ok()) return address.status();
  for (char c : options.token) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string("-._~+/=").find(c) != std::string::npos))
      return Status::InvalidArgument("the web token may hold only letters, digits and -._~+/= (it travels in a cookie)");
  }
  if (options.poll_interval_ms < 10) return Status::InvalidArgument("poll_interval_ms must be at least 10");
  SWEPT_RETURN_IF_ERROR(check_max_unauthenticated(options.max_unauthenticated, options.worker_threads));
  if (options.max_event_streams < 1 || options.max_event_streams > 4096)
    return Status::InvalidArgument("max_event_streams must be between 1 and 4096, got " +
                                   std::to_string(options.max_event_streams));
  if (options.max_event_streams_per_client < 1 || options.max_event_streams_per_client > options.max_event_streams)
    return Status::InvalidArgument("max_event_streams_per_client must be between 1 and max_event_streams (" +
                                   std::to_string(options.max_event_streams) + "), got " +
                                   std::to_string(options.max_event_streams_per_client));
  // The event streams get threads of their own on top of the workers: a
  // stream holds its thread while open, and must never take one an API
  // request needs (issue 26, item 4: 500 streams stalled the API for 7-9 s).
  const int threads = std::max(4, options.worker_threads) + options.max_event_streams;
  if (options.unauthenticated_timeout_ms < 100)
    return Status::InvalidArgument("unauthenticated_timeout_ms must be at least 100");
  // Without a token, only this machine may be served: a wildcard or outside
  // address would show every sweep (and cancel them) to anyone who can reach
  // it. --insecure is the operator saying the network is trusted.
  const std::string& host = address->first;
  const bool loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
  if (!loopback && options.token.empty() && !options.insecure)
    return Status::InvalidArgument("refusing to serve " + options.listen +
                                   " without a token: anyone who can reach it would see and cancel your sweeps. "
                                   "Pass --token TOKEN (or set SWEPT_WEB_TOKEN), listen on 127.0.0.1, or pass "
                                   "--insecure if this network is trusted");
  if (!loopback && !options.token.empty() && options.tls_cert.empty())
    log::warn("web: serving " + options.listen + " over plain HTTP: the token and every page cross the network "
              "unencrypted; add --tls-cert FILE --tls-key FILE (docs/deploy.md)");
  auto http = make_http_server(options);
  if (!http.ok()) return http.status();
  const bool tls = !options.tls_cert.empty();
  auto impl = std::make_unique<Impl>(options, std::move(*http), tls);
  Impl* p = impl.get();
  p->http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which would let
  // a second server share a port in use instead of failing clearly.
  auto listen_fd = std::make_shared<std::atomic<int>>(-1);
  p->http.set_socket_options([listen_fd](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    *listen_fd = sock;
  });
  // Slow clients (issue 15, defect 9). Each connection holds a worker thread
  // while it is served, so: many workers (a thread blocked in poll costs
  // little), the gate of web/gated_server.h (at most max_unauthenticated
  // connections before the token, each for at most unauthenticated_timeout_ms
  // in all, so that the other workers stay free for authenticated users), a
  // short read deadline once authenticated (3 s per read, where 10 s let 60
  // half-open requests stall every other one), and keep-alive sized for a
  // dashboard polling every second.
  p->http.set_keep_alive_timeout(5);
  p->http.set_keep_alive_max_count(1000);
  p->http.set_tcp_nodelay(true);  // small JSON answers must not wait for delayed ACKs
  p->http.set_read_timeout(3);
  p->http.set_payload_max_length(64 * 1024);
  p->install_routes();
  p->host = address->first;
  if (address->second == 0) {
    p->port = p->http.bind_to_any_port(p->host);
    if (p->port <= 0) return Status::IoError("cannot listen on " + options.listen + ": no free port on that address");
  } else {
    if (!p->http.bind_to_port(p->host, address->second))
      return Status::IoError("cannot listen on " + options.listen +
                             ": the address is in use or not local; pick another with --listen HOST:PORT");
    p->port = address->second;
  }
  // httplib 0.11 listens with a backlog of 5 (compiled into the library):
  // under 50 concurrent clients, connections were refused and retried after
  // a second. listen(2) again on the bound socket raises it.
  if (*listen_fd >= 0) ::listen(*listen_fd, 1024);
  p->feed.start();
  p->listener = std::thread([p] { p->http.listen_after_bind(); });
  // Wait until the loop runs, so that a stop() right after start() is not
  // lost (httplib's stop() does nothing before listening starts).
  for (int i = 0; i < 5000 && !p->http.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

std::string Server::url() const {
  std::string host = impl_->host.find(':') != std::string::npos ? "[" + impl_->host + "]" : impl_->host;
  return std::string(impl_->tls ? "https://" : "http://") + host + ":" + std::to_string(impl_->port) + "/";
}

int Server::port() const { return impl_->port; }

void Server::stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  impl_->feed.stop();  // wakes the event streams first
  impl_->http.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

}  // namespace swept::web
