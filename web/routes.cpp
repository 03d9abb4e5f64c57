// Mounting the API's handlers: see routes.h.
#include "web/routes.h"

#include <exception>
#include <memory>
#include <utility>

#include "common/log.h"
#include "web/api_json.h"

namespace swept::web {

using nlohmann::json;

namespace {

constexpr const char* kJson = "application/json; charset=utf-8";

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

// The handler's answer, its parameters checked first when `allowed` says so.
Result<json> run(const AllowedParams& allowed, const ApiHandler& handler, const httplib::Request& req) {
  QueryParams query(req);
  if (allowed.checked()) {
    SWEPT_RETURN_IF_ERROR(query.allow_only(allowed.names()));
  }
  return handler(query);
}

// An exception a handler let escape: logged, and answered 500.
void answer_exception(const httplib::Request& req, httplib::Response& res, const std::exception& e) {
  log::error("web: " + req.method + " " + req.path + ": internal error: " + e.what());
  send_error(res, Status::Internal(std::string("internal error: ") + e.what()));
}

// The httplib handler answering fresh each time.
httplib::Server::Handler fresh(AllowedParams allowed, ApiHandler handler) {
  return [allowed = std::move(allowed), handler = std::move(handler)](const httplib::Request& req,
                                                                     httplib::Response& res) {
    try {
      Result<json> r = run(allowed, handler, req);
      if (r.ok()) {
        send_json(res, 200, *r);
      } else {
        send_error(res, r.status());
      }
    } catch (const std::exception& e) {
      answer_exception(req, res, e);
    }
  };
}

}  // namespace

void Routes::get(const std::string& pattern, AllowedParams allowed, ApiHandler handler) {
  http_.Get(pattern, fresh(std::move(allowed), std::move(handler)));
}

void Routes::post(const std::string& pattern, AllowedParams allowed, ApiHandler handler) {
  http_.Post(pattern, fresh(std::move(allowed), std::move(handler)));
}

void Routes::get_cached(const std::string& pattern, AllowedParams allowed, ApiHandler handler) {
  ResponseCache& cache = cache_;
  http_.Get(pattern, [&cache, allowed = std::move(allowed), handler = std::move(handler)](
                         const httplib::Request& req, httplib::Response& res) {
    try {
      // The parameters are checked inside the computation: a bad request
      // fails there, and failures are never cached.
      Result<std::string> body = cache.get(cache_key(req), [&]() -> Result<std::string> {
        SWEPT_ASSIGN_OR_RETURN(answer, run(allowed, handler, req));
        return dump_json(answer);
      });
      if (body.ok()) {
        res.status = 200;
        res.set_content(*body, kJson);
      } else {
        send_error(res, body.status());
      }
    } catch (const std::exception& e) {
      answer_exception(req, res, e);
    }
  });
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump_json(body), kJson);
}

void send_error(httplib::Response& res, const Status& s) { send_json(res, http_status_for(s), error_json(s)); }

}  // namespace swept::web
