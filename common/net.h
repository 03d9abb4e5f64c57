// Addresses of this host, for the parts that tell other hosts where to reach
// it: the agent's advertised address, swept-train's Gloo interface.
// Thread safety: pure functions over the kernel's routing table.
#pragma once

#include <string>

#include "common/status.h"

namespace swept {

// The source address (numeric) this host uses toward HOST:PORT: a UDP
// connect() picks the route and its source address, and sends nothing.
// Unavailable "cannot resolve 'HOST': ..." or "no route to 'HOST': ...".
Result<std::string> source_address_toward(const std::string& host, const std::string& port);

}  // namespace swept
