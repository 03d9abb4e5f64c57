// Routes: how the JSON API's handlers are mounted on the HTTP server, so that
// each handler is only its own steps (read the parameters, ask the store,
// shape the JSON) and the rest is said once here:
//
//   Routes routes(http, cache);
//   routes.get_cached(R"(/api/sweeps/(\d+))", {}, [&](const QueryParams& q) -> Result<json> {
//     SWEPT_ASSIGN_OR_RETURN(id, q.path_id("sweep id"));
//     ...
//   });
//
// - Parameters: an unknown query parameter is a 400 naming it, before the
//   handler runs (see AllowedParams for the exceptions).
// - Answers: a handler's JSON is a 200; a failed Status becomes the JSON
//   error of docs/api.md with its HTTP status (web/api_json.h); an escaped
//   exception is logged and answered 500, so no request can end the process.
// - get_cached: for answers that depend on the database alone, served from
//   the ResponseCache while the database has not changed.
//
// Thread safety: mount routes before the server listens. The handlers run on
// the server's worker threads, possibly concurrently, and must be
// thread-safe; the cache and the handlers must outlive the serving.
#pragma once

#include <httplib.h>

#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/status.h"
#include "web/query_params.h"
#include "web/response_cache.h"

namespace swept::web {

using ApiHandler = std::function<Result<nlohmann::json>(const QueryParams&)>;

// The query parameters an endpoint takes: `{}` none, `{"limit"}` those
// named, checked before its handler runs; or checked_by_handler(), for a
// handler that checks them itself (at its own point) or takes any.
class AllowedParams {
 public:
  AllowedParams() = default;
  AllowedParams(std::initializer_list<std::string> names) : names_(names) {}  // NOLINT: implicit by design
  static AllowedParams checked_by_handler() {
    AllowedParams p;
    p.checked_ = false;
    return p;
  }
  bool checked() const { return checked_; }
  const std::set<std::string>& names() const { return names_; }

 private:
  std::set<std::string> names_;
  bool checked_ = true;
};

class Routes {
 public:
  Routes(httplib::Server& http, ResponseCache& cache) : http_(http), cache_(cache) {}

  // A GET answered fresh each time.
  void get(const std::string& pattern, AllowedParams allowed, ApiHandler handler);
  // A GET whose answer depends on the database alone (see above).
  void get_cached(const std::string& pattern, AllowedParams allowed, ApiHandler handler);
  // A POST, answered fresh (its handler acts, so it is never cached).
  void post(const std::string& pattern, AllowedParams allowed, ApiHandler handler);

 private:
  httplib::Server& http_;
  ResponseCache& cache_;
};

// `body` as the JSON answer with HTTP status `status`.
void send_json(httplib::Response& res, int status, const nlohmann::json& body);
// A failed Status as the JSON error of docs/api.md, with its HTTP status.
void send_error(httplib::Response& res, const Status& s);

}  // namespace swept::web
