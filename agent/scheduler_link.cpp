// SchedulerLink: see scheduler_link.h.
#include "agent/scheduler_link.h"

#include <zmq_addon.hpp>

#include <iterator>

#include "common/random_id.h"
#include "common/zmq_check.h"

namespace swept::agent {
namespace {

// The queue may hold a long backlog of metrics batches after a reconnect;
// the default high-water mark (1,000) would refuse them.
constexpr int kSendHighWaterMark = 100000;
// ZeroMQ routing ids are at most 255 bytes.
constexpr size_t kMaxNameInRoutingId = 200;

}  // namespace

Status SchedulerLink::open(const std::string& endpoint, const std::string& agent_name,
                           const curvezmq::ClientKeys& keys) {
  close(0);
  nonce_ = random_hex(16);
  std::string routing_id = agent_name.substr(0, kMaxNameInRoutingId) + "#" + nonce_;
  zmq::socket_t socket;
  SWEPT_ZMQ_CHECK(socket = zmq::socket_t(context_, zmq::socket_type::dealer));
  SWEPT_ZMQ_CHECK(socket.set(zmq::sockopt::routing_id, routing_id));
  SWEPT_ZMQ_CHECK(socket.set(zmq::sockopt::linger, 0));
  SWEPT_ZMQ_CHECK(socket.set(zmq::sockopt::maxmsgsize, protocol::kMaxMessageBytes));
  SWEPT_ZMQ_CHECK(socket.set(zmq::sockopt::sndhwm, kSendHighWaterMark));
  SWEPT_RETURN_IF_ERROR(curvezmq::apply_client(socket.handle(), keys));
  auto watch = std::make_unique<curvezmq::HandshakeWatch>();
  SWEPT_RETURN_IF_ERROR(watch->start(context_.handle(), socket.handle(), keys.enabled()));
  SWEPT_ZMQ_CHECK(socket.connect(endpoint));
  socket_.emplace(std::move(socket));
  watch_ = std::move(watch);
  return Status::Ok();
}

void SchedulerLink::close(int linger_ms) {
  watch_.reset();
  if (!socket_) return;
  try {
    socket_->set(zmq::sockopt::linger, linger_ms);
  } catch (const zmq::error_t&) {
    // Closing anyway; a failed linger change only means queued messages are dropped.
  }
  socket_.reset();
}

Status SchedulerLink::send(const protocol::Message& message) {
  if (!socket_) return Status::Unavailable("not connected to the scheduler");
  protocol::Frames frames = protocol::encode(message);
  std::vector<zmq::const_buffer> parts;
  for (const auto& f : frames) parts.push_back(zmq::buffer(f));
  zmq::send_result_t sent;
  SWEPT_ZMQ_CHECK(sent = zmq::send_multipart(*socket_, parts, zmq::send_flags::dontwait));
  if (!sent) {
    return Status::Unavailable(std::string("the queue to the scheduler is full; ") + protocol::kind_name(message) +
                               " not sent");
  }
  return Status::Ok();
}

Result<std::vector<protocol::Decoded>> SchedulerLink::receive_all() {
  std::vector<protocol::Decoded> out;
  if (!socket_) return out;
  while (true) {
    std::vector<zmq::message_t> parts;
    zmq::recv_result_t got;
    SWEPT_ZMQ_CHECK(got = zmq::recv_multipart(*socket_, std::back_inserter(parts), zmq::recv_flags::dontwait));
    if (!got) break;
    protocol::Frames frames;
    frames.reserve(parts.size());
    for (auto& p : parts) frames.push_back(p.to_string());
    out.push_back(protocol::decode(frames));
  }
  return out;
}

}  // namespace swept::agent
