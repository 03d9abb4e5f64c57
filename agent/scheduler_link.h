// SchedulerLink: the agent's DEALER socket to the scheduler, one connection
// attempt at a time (docs/protocol.md, "Sockets and roles").
//
// Each open() makes a fresh socket whose routing id is NAME#NONCE with a new
// random 16-hex-digit NONCE, as the Paranoid Pirate worker does: a reconnect
// never collides with the stale connection the scheduler may still hold.
// Sends never block (ZMQ_DONTWAIT); a full queue is reported as Unavailable.
// Every ZeroMQ failure becomes a Status naming the call, file and line
// (SWEPT_ZMQ_CHECK); no exception leaves this class.
// Thread safety: none; the agent's event loop owns its link.
#pragma once

#include <zmq.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/curvezmq.h"
#include "common/protocol.h"
#include "common/status.h"

namespace swept::agent {

class SchedulerLink {
 public:
  explicit SchedulerLink(zmq::context_t& context) : context_(context) {}

  // Closes any previous socket (discarding what it had queued) and connects
  // a new one. The nonce is the new socket's session id.
  // With `keys` enabled the socket is a CURVE client of the scheduler.
  Status open(const std::string& endpoint, const std::string& agent_name, const curvezmq::ClientKeys& keys = {});
  // What went wrong in the current socket's handshake (a refused key, a
  // wrong scheduler key, keys on one side only); nullopt while none did.
  std::optional<std::string> handshake_failure() { return watch_ ? watch_->failure() : std::nullopt; }
  // The handshake monitor's socket, for zmq_poll; null when closed.
  void* watch_socket() const { return watch_ ? watch_->socket() : nullptr; }
  // Closes the socket; `linger_ms` bounds how long queued messages may still
  // be delivered (0: dropped at once).
  void close(int linger_ms = 0);
  bool is_open() const { return socket_.has_value(); }
  const std::string& nonce() const { return nonce_; }

  // For zmq_poll; precondition: is_open().
  zmq::socket_t& socket() { return *socket_; }

  Status send(const protocol::Message& message);
  // Every message waiting on the socket, decoded (failures included, so the
  // caller can log them). Never blocks.
  Result<std::vector<protocol::Decoded>> receive_all();

 private:
  zmq::context_t& context_;
  std::optional<zmq::socket_t> socket_;
  std::unique_ptr<curvezmq::HandshakeWatch> watch_;
  std::string nonce_;
};

}  // namespace swept::agent
