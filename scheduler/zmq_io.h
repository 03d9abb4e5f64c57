// ZeroMQ glue for the scheduler's side: moving protocol frames (common/
// protocol.h) through cppzmq sockets. ZeroMQ calls are checked with the one
// SWEPT_ZMQ_CHECK (common/zmq_check.h), so no exception leaves the scheduler
// or the CLI.
// Thread safety: as the socket's (one thread per socket).
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/protocol.h"
#include "common/status.h"
#include "common/zmq_check.h"

namespace swept::zmqio {

// One received message: the routing id (ROUTER sockets only; empty
// otherwise) and the protocol frames after it.
struct Received {
  std::string routing_id;
  protocol::Frames frames;
};

// Receives one whole multipart message. nullopt when none is waiting
// (dontwait) or the wait timed out; Unavailable on a socket error.
Result<std::optional<Received>> receive(zmq::socket_t& socket, bool with_routing_id, bool dontwait);

// Sends frames, prefixed by routing_id when it is not empty. Never blocks:
// a peer that is gone or full makes it return Unavailable (the message is dropped).
Status send(zmq::socket_t& socket, const std::string& routing_id, const protocol::Frames& frames);

}  // namespace swept::zmqio
