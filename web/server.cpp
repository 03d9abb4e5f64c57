// The dashboard server: routes of docs/api.md over cpp-httplib. See server.h.
//
// Every handler runs inside `guarded`, which turns a failed Status into a 4xx/
// 5xx JSON error and an escaped exception into a 500, so no request can crash
// the process. Query parameters are checked against each endpoint's list:
// an unknown or malformed one is a 400 naming it.
#include "web/server.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <thread>

#include "common/log.h"
#include "web/api_json.h"
#include "web/gated_server.h"
#include "store/reader.h"
#include "web/sweep_importance.h"
#include "web/live.h"
#include "web/response_cache.h"
#include "web/static_files.h"

namespace swept::web {

using nlohmann::json;

namespace {

constexpr const char* kJson = "application/json; charset=utf-8";
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

Result<int64_t> parse_int(const std::string& text, const std::string& name, int64_t min, int64_t max) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    return Status::InvalidArgument(name + " must be an integer, got '" + text + "'");
  if (v < min || v > max)
    return Status::InvalidArgument(name + " must be between " + std::to_string(min) + " and " + std::to_string(max) +
                                   ", got " + text);
  return v;
}

// The `limit` query parameter of the chart endpoints: points to return,
// 2,000 unless asked, at most 20,000.
Result<int64_t> limit_param(const httplib::Request& req) {
  if (!req.has_param("limit")) return int64_t{2000};
  return parse_int(req.get_param_value("limit"), "limit", 1, 20000);
}

// Rejects parameters the endpoint does not know and repeated ones it does not allow.
Status check_params(const httplib::Request& req, const std::set<std::string>& allowed) {
  for (const auto& [key, value] : req.params) {
    if (key == "token") continue;
    if (!allowed.count(key)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return Status::InvalidArgument("unknown query parameter '" + key + "'" +
                                     (list.empty() ? "; this endpoint takes none" : "; this endpoint takes " + list));
    }
  }
  return Status::Ok();
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), kJson);
}

void send_error(httplib::Response& res, const Status& s) { send_json(res, http_status_for(s), error_json(s)); }

// What identifies a GET's answer in the response cache: its path and its
// query parameters but the token, each length-prefixed (so no value can
// pass for a separator), in httplib's order (by name, then as sent).
std::string cache_key(const httplib::Request& req) {
  std::string key;
  auto add = [&key](const std::string& part) {
    key.append(std::to_string(part.size())).append(1, ':').append(part);
  };
  add(req.path);
  for (const auto& [name, value] : req.params) {
    if (name == "token") continue;
    add(name);
    add(value);
  }
  return key;
}


// The newest OpenSSL error on this thread, as text ("" when none), and the
// queue cleared so that the next failure reports its own.
std::string openssl_error() {
  unsigned long code = ERR_peek_last_error();
  std::string text;
  if (code != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    text = buf;
  }
  ERR_clear_error();
  return text;
}

// A key file that asks for a passphrase must fail, not prompt on the
// terminal of a daemon: this callback supplies none.
extern "C" int no_passphrase(char*, int, int, void*) { return 0; }

// Loads the certificate chain and its private key into `ctx`, and checks
// that they belong together. InvalidArgument names the file and the fix.
Status load_tls_files(SSL_CTX& ctx, const std::string& cert, const std::string& key) {
  for (const auto& [flag, file] : {std::pair<const char*, const std::string&>{"--tls-cert", cert}, {"--tls-key", key}}) {
    if (::access(file.c_str(), R_OK) != 0)
      return Status::InvalidArgument(std::string("cannot read ") + flag + " " + file + ": " + std::strerror(errno) +
                                     "; give a PEM file this user can read");
  }
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  SSL_CTX_set_default_passwd_cb(&ctx, no_passphrase);
  if (SSL_CTX_use_certificate_chain_file(&ctx, cert.c_str()) != 1)
    return Status::InvalidArgument("--tls-cert " + cert + " is not a PEM certificate (chain) (OpenSSL: " +
                                   openssl_error() + "); give the server's certificate in PEM form, e.g. the "
                                   "fullchain.pem of your certificate authority");
  if (SSL_CTX_use_PrivateKey_file(&ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    std::string why = openssl_error();
    if (why.find("values mismatch") != std::string::npos)
      return Status::InvalidArgument("--tls-key " + key + " is not the private key of --tls-cert " + cert +
                                     "; give the key the certificate was issued for");
    return Status::InvalidArgument("--tls-key " + key + " is not an unencrypted PEM private key (OpenSSL: " + why +
                                   "); a key with a passphrase cannot be used: decrypt it with "
                                   "'openssl pkey -in KEY -out PLAIN.key'");
  }
  if (SSL_CTX_check_private_key(&ctx) != 1)
    return Status::InvalidArgument("--tls-key " + key + " is not the private key of --tls-cert " + cert +
                                   " (OpenSSL: " + openssl_error() + "); give the key the certificate was issued for");
  if (X509* x = SSL_CTX_get0_certificate(&ctx); x && X509_cmp_current_time(X509_get0_notAfter(x)) < 0)
    log::warn("web: the TLS certificate " + cert + " has expired: browsers will refuse it; renew it");
  return Status::Ok();
}

// The HTTP server (web/gated_server.h): plain, or TLS with the options'
// certificate and key.
Result<std::unique_ptr<GatedServer>> make_http_server(const ServerOptions& options) {
  GateOptions gate;
  gate.max_unauthenticated = options.max_unauthenticated;
  gate.unauthenticated_timeout = std::chrono::milliseconds(options.unauthenticated_timeout_ms);
  if (options.tls_cert.empty() && options.tls_key.empty()) return std::make_unique<GatedServer>(gate, nullptr);
  if (options.tls_cert.empty() || options.tls_key.empty())
    return Status::InvalidArgument(std::string(options.tls_cert.empty() ? "--tls-key" : "--tls-cert") +
                                   " was given without " + (options.tls_cert.empty() ? "--tls-cert" : "--tls-key") +
                                   ": TLS needs both the certificate and its private key");
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) return Status::Internal("cannot create a TLS context (OpenSSL: " + openssl_error() + ")");
  Status loaded = load_tls_files(*ctx, options.tls_cert, options.tls_key);
  if (!loaded.ok()) {
    SSL_CTX_free(ctx);
    return loaded;
  }
  return std::make_unique<GatedServer>(gate, ctx);
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
  std::atomic<int> streams{0};
  std::atomic<bool> stopped{false};

  Impl(const ServerOptions& o, std::unique_ptr<GatedServer> s, bool with_tls)
      : options(o),
        server(std::move(s)),
        http(*server),
        tls(with_tls),
        pool(o.db_path, 2000),
        feed(o.db_path, o.poll_interval_ms),
        cache(o.db_path) {}

  // Runs a handler body; turns failures and exceptions into JSON errors.
  template <typename Fn>
  void guarded(const httplib::Request& req, httplib::Response& res, Fn&& fn) {
    try {
      Result<json> r = fn();
      if (r.ok()) {
        send_json(res, 200, *r);
      } else {
        send_error(res, r.status());
      }
    } catch (const std::exception& e) {
      log::error("web: " + req.method + " " + req.path + ": internal error: " + e.what());
      send_error(res, Status::Internal(std::string("internal error: ") + e.what()));
    }
  }

  // Like guarded, for an answer that depends on the database alone: served
  // from the response cache while the database has not changed (see
  // web/response_cache.h), computed by fn otherwise.
  template <typename Fn>
  void cached(const httplib::Request& req, httplib::Response& res, Fn&& fn) {
    try {
      Result<std::string> body = cache.get(cache_key(req), [&]() -> Result<std::string> {
        Result<json> r = fn();
        if (!r.ok()) return r.status();
        return dump_json(*r);
      });
      if (body.ok()) {
        res.status = 200;
        res.set_content(*body, kJson);
      } else {
        send_error(res, body.status());
      }
    } catch (const std::exception& e) {
      log::error("web: " + req.method + " " + req.path + ": internal error: " + e.what());
      send_error(res, Status::Internal(std::string("internal error: ") + e.what()));
    }
  }

  // A list endpoint's body: {key: [to_json(item), ...]} from fetch(db), or an
  // empty list while the database file does not exist yet (the dashboard may
  // start before the scheduler has written anything).
  template <typename Fetch, typename ToJson>
  Result<json> json_list(const char* key, Fetch&& fetch, ToJson&& to_json) {
    auto conn = pool.acquire();
    if (!conn.ok()) {
      if (conn.status().code() == StatusCode::kNotFound) return json{{key, json::array()}};
      return conn.status();
    }
    auto items = fetch(**conn);
    if (!items.ok()) return items.status();
    json list = json::array();
    for (const auto& item : *items) list.push_back(to_json(item));
    return json{{key, list}};
  }

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
  Result<json> trials_page(const httplib::Request& req, int64_t sweep_id);
  void events(const httplib::Request& req, httplib::Response& res);
};

void Server::Impl::install_routes() {
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

  http.Get("/api/info", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&]() -> Result<json> {
      SWEPT_RETURN_IF_ERROR(check_params(req, {}));
      bool exists = false, schema = false;
      if (auto conn = pool.acquire(); conn.ok()) {
        exists = true;
        auto s = (*conn)->has_schema();
        schema = s.ok() && *s;
      }
      // The trial states, in the order of common/states.h's one table: the
      // dashboard takes their names from here, not from literals of its own.
      // Sweeps and agents likewise: `final` (a sweep that will not run
      // again) and `live` (an agent that takes work) are what the pages act
      // on, and `tone` is how each is coloured (app.css styles tones only).
      json states = json::array();
      for (const auto& s : kTrialStates)
        states.push_back(
            {{"name", s.name}, {"label", display_name(s.state)}, {"final", s.final}, {"tone", name(s.tone)}});
      json sweep_states = json::array();
      for (size_t i = 0; i < kSweepStateCount; ++i) {
        const auto st = static_cast<SweepState>(i);
        sweep_states.push_back(
            {{"name", name(st)}, {"final", st != SweepState::kRunning}, {"tone", name(tone(st))}});
      }
      json agent_states = json::array();
      for (size_t i = 0; i < kAgentStateCount; ++i) {
        const auto st = static_cast<AgentState>(i);
        agent_states.push_back({{"name", name(st)}, {"live", st == AgentState::kAlive}, {"tone", name(tone(st))}});
      }
      return json{{"cancel", static_cast<bool>(options.cancel)},
                  {"trial_states", states},
                  {"sweep_states", sweep_states},
                  {"agent_states", agent_states},
                  {"poll_interval_ms", options.poll_interval_ms},
                  {"database", {{"exists", exists}, {"schema", schema}}}};
    });
  });

  http.Get("/api/sweeps", [this](const httplib::Request& req, httplib::Response& res) {
    cached(req, res, [&]() -> Result<json> {
      SWEPT_RETURN_IF_ERROR(check_params(req, {}));
      return json_list(
          "sweeps", [](auto& db) { return store::list_sweeps(db); }, [](const auto& s) { return sweep_json(s); });
    });
  });

  http.Get(R"(/api/sweeps/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
    cached(req, res, [&]() -> Result<json> {
      SWEPT_RETURN_IF_ERROR(check_params(req, {}));
      auto id = parse_int(req.matches[1], "sweep id", 1, INT64_MAX);
      if (!id.ok()) return id.status();
      auto conn = pool.acquire();
      if (!conn.ok()) return conn.status();
      auto sweep = store::get_sweep(**conn, *id);
      if (!sweep.ok()) return sweep.status();
      return sweep_json(*sweep);
    });
  });

  http.Get(R"(/api/sweeps/(\d+)/trials)", [this](const httplib::Request& req, httplib::Response& res) {
    cached(req, res, [&]() -> Result<json> {
      auto id = parse_int(req.matches[1], "sweep id", 1, INT64_MAX);
      if (!id.ok()) return id.status();
      return trials_page(req, *id);
    });
  });

  http.Get(R"(/api/sweeps/(\d+)/points)", [this](const httplib::Request& req, httplib::Response& res) {
    cached(req, res, [&]() -> Result<json> {
      SWEPT_RETURN_IF_ERROR(check_params(req, {"limit"}));
      auto id = parse_int(req.matches[1], "sweep id", 1, INT64_MAX);
      if (!id.ok()) return id.status();
      auto limit = limit_param(req);
      if (!limit.ok()) return limit.status();
      auto conn = pool.acquire();
      if (!conn.ok()) return conn.status();
      auto points = store::sweep_points(**conn, *id, *limit);
      if (!points.ok()) return points.status();
      return points_json(*points);
    });
  });

  http.Get(R"(/api/sweeps/(\d+)/history)", [this](const httplib::Request& req, httplib::Response& res) {
    cached(req, res, [&]() -> Result<json> {
      SWEPT_RETURN_IF_ERROR(check_params(req, {"limit"}));
      auto id = parse_int(req.matches[1], "sweep id", 1, INT64_MAX);
      if (!id.ok()) return id.status();
      auto limit = limit_param(req);
      if (!limit.ok()) return limit.status();
      auto conn = pool.acquire();
      if (!conn.ok()) return conn.status();
      auto history = store::optimization_history(**conn, *id, *limit);
      if (!history.ok()) return history.status();
      return history_json(*history);
    });
  });

  http.Get(R"(/api/sweeps/(\d+)/importance)", [this](const httplib::Request& req, httplib::Response& res) {
    cached(req, res, [&]() -> Result<json> {
      SWEPT_RETURN_IF_ERROR(check_params(req, {}));
      auto id = parse_int(req.matches[1], "sweep id", 1, INT64_MAX);
      if (!id.ok()) return id.status();
      auto conn = pool.acquire();
      if (!conn.ok()) return conn.status();
      auto report = sweep_importance(**conn, *id, 2000);
      if (!report.ok()) return report.status();
      return importance_json(*report);
    });
  });

  http.Get(R"(/api/trials/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
    cached(req, res, [&]() -> Result<json> {
      SWEPT_RETURN_IF_ERROR(check_params(req, {"points"}));
      auto id = parse_int(req.matches[1], "trial id", 1, INT64_MAX);
      if (!id.ok()) return id.status();
      int64_t points = 1000;
      if (req.has_param("points")) {
        auto p = parse_int(req.get_param_value("points"), "points", 3, 10000);
        if (!p.ok()) return p.status();
        points = *p;
      }
      auto conn = pool.acquire();
      if (!conn.ok()) return conn.status();
      auto detail = store::get_trial(**conn, *id, static_cast<size_t>(points));
      if (!detail.ok()) return detail.status();
      return trial_detail_json(*detail);
    });
  });

  http.Get("/api/series", [this](const httplib::Request& req, httplib::Response& res) {
    cached(req, res, [&]() -> Result<json> {
      SWEPT_RETURN_IF_ERROR(check_params(req, {"trials", "metric", "points"}));
      if (!req.has_param("trials"))
        return Status::InvalidArgument("trials is required: a comma-separated list of trial ids, e.g. trials=1,2,3");
      std::vector<int64_t> ids;
      for (const auto& part : split_commas(req.get_param_value("trials"))) {
        auto id = parse_int(part, "trial id in trials", 1, INT64_MAX);
        if (!id.ok()) return id.status();
        ids.push_back(*id);
      }
      if (ids.empty() || ids.size() > 50) return Status::InvalidArgument("trials must list between 1 and 50 trial ids");
      int64_t points = 500;
      if (req.has_param("points")) {
        auto p = parse_int(req.get_param_value("points"), "points", 3, 10000);
        if (!p.ok()) return p.status();
        points = *p;
      }
      std::string metric = req.has_param("metric") ? req.get_param_value("metric") : "";
      return json_list(
          "series", [&](auto& db) { return store::metric_series(db, ids, metric, static_cast<size_t>(points)); },
          [](const auto& s) { return series_json(s); });
    });
  });

  http.Get("/api/agents", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&]() -> Result<json> {
      SWEPT_RETURN_IF_ERROR(check_params(req, {}));
      return json_list(
          "agents", [](auto& db) { return store::list_agents(db); }, [](const auto& a) { return agent_json(a); });
    });
  });

  http.Get("/api/events", [this](const httplib::Request& req, httplib::Response& res) { events(req, res); });

  if (options.cancel) {
    auto cancel_route = [this](bool is_sweep) {
      return [this, is_sweep](const httplib::Request& req, httplib::Response& res) {
        guarded(req, res, [&]() -> Result<json> {
          // A custom header forces a CORS preflight, which this server never
          // grants: other sites cannot make a browser send this request.
          if (req.get_header_value("X-Requested-With") != "swept")
            return Status::InvalidArgument("cancel requests must carry the header 'X-Requested-With: swept'");
          auto id = parse_int(req.matches[1], is_sweep ? "sweep id" : "trial id", 1, INT64_MAX);
          if (!id.ok()) return id.status();
          Status s = is_sweep ? options.cancel(*id, std::nullopt) : options.cancel(std::nullopt, *id);
          if (!s.ok()) return s;
          return json{{"cancelled", {{is_sweep ? "sweep_id" : "trial_id", *id}}}};
        });
      };
    };
    http.Post(R"(/api/sweeps/(\d+)/cancel)", cancel_route(true));
    http.Post(R"(/api/trials/(\d+)/cancel)", cancel_route(false));
  }
}

// "queued, running, ... or lost": the states a filter may name.
static std::string trial_state_list() {
  std::string list;
  for (size_t i = 0; i < kTrialStates.size(); ++i) {
    if (i) list += i + 1 == kTrialStates.size() ? " or " : ", ";
    list += kTrialStates[i].name;
  }
  return list;
}

Result<json> Server::Impl::trials_page(const httplib::Request& req, int64_t sweep_id) {
  SWEPT_RETURN_IF_ERROR(check_params(req, {"state", "sort", "order", "limit", "offset"}));
  store::TrialQuery q;
  q.sweep_id = sweep_id;
  size_t n_states = req.get_param_value_count("state");
  for (size_t i = 0; i < n_states; ++i)
    for (const auto& st : split_commas(req.get_param_value("state", i))) {
      auto state = trial_state_named(st);
      if (!state) return Status::InvalidArgument("unknown state '" + st + "'; use " + trial_state_list());
      q.states.push_back(*state);
    }
  if (req.has_param("sort")) q.sort = req.get_param_value("sort");
  if (req.has_param("order")) {
    std::string order = req.get_param_value("order");
    if (order != "asc" && order != "desc") return Status::InvalidArgument("order must be asc or desc, got '" + order + "'");
    q.descending = order == "desc";
  }
  if (req.has_param("limit")) {
    auto l = parse_int(req.get_param_value("limit"), "limit", 1, 1000);
    if (!l.ok()) return l.status();
    q.limit = *l;
  }
  if (req.has_param("offset")) {
    auto o = parse_int(req.get_param_value("offset"), "offset", 0, INT64_MAX / 2);
    if (!o.ok()) return o.status();
    q.offset = *o;
  }
  auto conn = pool.acquire();
  if (!conn.ok()) return conn.status();
  auto page = store::list_trials(**conn, q, &param_sort_cache);
  if (!page.ok()) return page.status();
  return trial_page_json(*page);
}

void Server::Impl::events(const httplib::Request& req, httplib::Response& res) {
  if (streams.fetch_add(1) >= options.max_event_streams) {
    streams.fetch_sub(1);
    send_error(res, Status::ResourceExhausted("too many live-update streams are open (" +
                                              std::to_string(options.max_event_streams) +
                                              "); close some dashboard tabs"));
    return;
  }
  auto cursor = std::make_shared<uint64_t>(feed.latest());
  auto started = std::make_shared<bool>(false);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  (void)req;
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, cursor, started](size_t, httplib::DataSink& sink) {
        if (!*started) {
          *started = true;
          std::string hello = "retry: 2000\nevent: hello\ndata: {\"seq\":" + std::to_string(*cursor) + "}\n\n";
          return sink.write(hello.data(), hello.size());
        }
        if (stopped.load() || feed.stopping()) return false;
        std::vector<std::string> events = feed.wait_events(cursor.get(), 15000);
        if (stopped.load() || feed.stopping()) return false;
        if (!sink.is_writable()) return false;
        std::string out;
        if (events.empty()) out = ": keep-alive\n\n";
        for (const auto& e : events) out += "id: " + std::to_string(*cursor) + "\nevent: change\ndata: " + e + "\n\n";
        return sink.write(out.data(), out.size());
      },
      [this](bool) { streams.fetch_sub(1); });
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
  const int threads = std::max(4, options.worker_threads);
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
