#include "cli/dashboard.h"

#include <cstdlib>
#include <variant>

#include "common/protocol.h"
#include "scheduler/client.h"

namespace swept::cli {

Result<std::unique_ptr<web::Server>> start_dashboard(const std::string& listen, const std::string& db_path,
                                                     const std::string& token,
                                                     const std::string& scheduler_endpoint, bool insecure,
                                                     const curvezmq::ClientKeys& keys, const DashboardTls& tls,
                                                     int max_unauthenticated) {
  web::ServerOptions options;
  options.max_unauthenticated = max_unauthenticated;
  options.tls_cert = tls.cert;
  options.tls_key = tls.key;
  options.insecure = insecure;
  options.listen = listen;
  options.db_path = db_path;
  options.token = token;
  if (options.token.empty()) {
    if (const char* t = std::getenv("SWEPT_WEB_TOKEN")) options.token = t;
  }
  options.cancel = [scheduler_endpoint, keys](std::optional<int64_t> sweep_id,
                                              std::optional<int64_t> trial_id) -> Status {
    auto client = scheduler::Client::connect(scheduler_endpoint, /*timeout_ms=*/5000, keys);
    if (!client.ok()) return client.status();
    protocol::Cancel request;
    request.sweep_id = sweep_id;
    request.trial_id = trial_id;
    auto reply = (*client)->call(request);
    if (!reply.ok()) return reply.status();
    return Status::Ok();
  };
  auto server = web::Server::start(options);
  if (!server.ok()) return server.status().WithContext("dashboard on " + listen);
  return server;
}

}  // namespace swept::cli
