// The JSON API of docs/api.md: one handler per endpoint, each its own few
// steps (check the parameters, read the store, shape the JSON), mounted
// through web/routes.h. The live-event stream (/api/events) is not here: it
// holds its connection open, and lives with the server (web/server.cpp).
//
// Thread safety: install before the server listens; the handlers then run on
// its worker threads, concurrently, each on a connection of its own from
// the pool. The context's objects must outlive the serving.
#pragma once

#include "store/reader.h"
#include "store/sqlite.h"
#include "web/routes.h"
#include "web/server.h"

namespace swept::web {

// What the handlers read from: the store's read-only connections, the
// parameter-sort cache of the trials list, and the server's options (the
// poll interval shown in /api/info, the cancel action).
struct ApiContext {
  store::ConnectionPool& pool;
  store::ParamSortCache& param_sort_cache;
  const ServerOptions& options;
};

// Mounts every endpoint of docs/api.md but /api/events; the two cancel
// POSTs only when options.cancel is set.
void install_api_routes(Routes& routes, const ApiContext& api);

}  // namespace swept::web
