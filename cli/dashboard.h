// Starting the dashboard (web/) beside a scheduler: `swept run` and
// `swept scheduler --web` share this so that the cancel button reaches the
// scheduler the same way `swept cancel` does (a CANCEL request over the
// protocol). web/ cannot include scheduler/ (see GUIDE.md); the CLI, which
// sits above both, joins them here.
// Thread safety: the returned server's cancel callback may be called from the
// server's worker threads; it opens its own client per call.
#pragma once

#include <memory>
#include <string>

#include "common/curvezmq.h"
#include "common/status.h"
#include "web/server.h"

namespace swept::cli {

// Starts the dashboard on `listen` (HOST:PORT) over the database `db_path`,
// with a cancel action forwarded to the scheduler at `scheduler_endpoint`.
// `token`: empty, or the bearer token every request must carry.
// `tls`: empty, or the certificate and key files to serve HTTPS with
// (web::ServerOptions::tls_cert/tls_key; a bad pair is InvalidArgument).
// `max_unauthenticated`: web::ServerOptions::max_unauthenticated (out of
// range: InvalidArgument, see web::check_max_unauthenticated).
struct DashboardTls {
  std::string cert, key;
};
Result<std::unique_ptr<web::Server>> start_dashboard(const std::string& listen, const std::string& db_path,
                                                     const std::string& token,
                                                     const std::string& scheduler_endpoint, bool insecure = false,
                                                     const curvezmq::ClientKeys& keys = {},
                                                     const DashboardTls& tls = {},
                                                     int max_unauthenticated = web::ServerOptions{}.max_unauthenticated);

// The help line of --max-unauthenticated, shared by swept web, run and scheduler.
inline constexpr const char* kMaxUnauthenticatedHelp =
    "dashboard connections that have not yet shown the token, at most (the oldest is closed when one more "
    "arrives); 1 to 159, below the 160 worker threads";

// The help line of --tls-cert and --tls-key, shared by swept web, run and scheduler.
inline constexpr const char* kTlsCertHelp =
    "serve the dashboard over HTTPS with this PEM certificate (chain); needs --tls-key";
inline constexpr const char* kTlsKeyHelp = "the PEM private key of --tls-cert (unencrypted; keep it mode 0600)";

}  // namespace swept::cli
