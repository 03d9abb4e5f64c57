// Client: the CLI's side of docs/protocol.md. One DEALER socket, one request
// at a time, every wait bounded: a client never hangs on a scheduler that is
// down, slow or gone (Unavailable after the timeout, which the CLI turns into
// exit code 6).
// Thread safety: one thread per Client.
#pragma once

#include <memory>
#include <string>
#include <zmq.hpp>

#include "common/curvezmq.h"
#include "common/protocol.h"
#include "common/status.h"

namespace swept::scheduler {

// The scheduler address: `flag` when not empty, else $SWEPT_SCHEDULER, else
// tcp://127.0.0.1:5555.
std::string scheduler_endpoint(const std::string& flag);

class Client {
 public:
  // Connecting never fails for a well-formed endpoint (ZeroMQ connects in
  // the background); InvalidArgument for a malformed one. With keys
  // enabled the connection is a CURVE client of the scheduler's key; a
  // refused key or a failed handshake ends call() at once with
  // FailedPrecondition saying which (curvezmq::HandshakeWatch).
  static Result<std::unique_ptr<Client>> connect(const std::string& endpoint, int timeout_ms,
                                                 const curvezmq::ClientKeys& keys = {});
  ~Client();

  // Sends `request` (its request_id is filled in) and returns the reply.
  // An ERROR reply becomes a Status: not_found -> kNotFound, bad_request and
  // malformed -> kInvalidArgument, forbidden and unauthorized (a key's role
  // or revocation) -> kFailedPrecondition, others -> kInternal. No reply within the
  // timeout -> kUnavailable naming the endpoint.
  Result<protocol::Message> call(protocol::Message request);

 private:
  Client(const std::string& endpoint, int timeout_ms);
  std::string endpoint_;
  int timeout_ms_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::unique_ptr<curvezmq::HandshakeWatch> watch_;  // closed before the context
};

}  // namespace swept::scheduler
