// Client: see client.h.
#include "scheduler/client.h"

#include <chrono>
#include <cstdlib>

#include "common/random_id.h"
#include "scheduler/zmq_io.h"

namespace swept::scheduler {

std::string scheduler_endpoint(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("SWEPT_SCHEDULER"); env && *env) return env;
  return "tcp://127.0.0.1:5555";
}

Client::Client(const std::string& endpoint, int timeout_ms)
    : endpoint_(endpoint), timeout_ms_(timeout_ms), context_(1), socket_(context_, zmq::socket_type::dealer) {}

Client::~Client() {
  watch_.reset();
  socket_.close();
  context_.close();
}

Result<std::unique_ptr<Client>> Client::connect(const std::string& endpoint, int timeout_ms,
                                                const curvezmq::ClientKeys& keys) {
  std::unique_ptr<Client> c(new Client(endpoint, timeout_ms));
  SWEPT_RETURN_IF_ERROR(curvezmq::apply_client(c->socket_.handle(), keys));
  c->watch_ = std::make_unique<curvezmq::HandshakeWatch>();
  SWEPT_RETURN_IF_ERROR(c->watch_->start(c->context_.handle(), c->socket_.handle(), keys.enabled()));
  try {
    c->socket_.set(zmq::sockopt::linger, 0);
    // A reply is at most a page (docs/protocol.md): whatever claims to be
    // the scheduler cannot make the client hold more.
    c->socket_.set(zmq::sockopt::maxmsgsize, protocol::kMaxMessageBytes);
    c->socket_.set(zmq::sockopt::routing_id, "cli#" + random_hex(16));
    c->socket_.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot use scheduler address \"" + endpoint + "\": " + e.what() +
                                   " (expected e.g. tcp://HOST:5555)");
  }
  return c;
}

Result<protocol::Message> Client::call(protocol::Message request) {
  std::string request_id = random_hex(12);
  std::visit(
      [&](auto& m) {
        if constexpr (requires { m.request_id; }) m.request_id = request_id;
      },
      request);
  SWEPT_RETURN_IF_ERROR(zmqio::send(socket_, "", protocol::encode(request)));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {watch_->socket(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, left);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) return Status::Unavailable("interrupted");
      return Status::Unavailable(std::string("zmq_poll failed: ") + e.what());
    }
    if (auto failed = watch_->failure()) return Status::FailedPrecondition(*failed + " (scheduler " + endpoint_ + ")");
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    auto got = zmqio::receive(socket_, false, true);
    if (!got.ok()) return got.status();
    if (!got->has_value()) continue;
    protocol::Decoded d = protocol::decode((*got)->frames);
    if (!d.ok()) return Status::Internal("the scheduler sent a message this client cannot read: " + d.error);
    if (!d.request_id.empty() && d.request_id != request_id) continue;  // a late reply to an earlier request
    if (auto* e = std::get_if<protocol::Error>(&*d.message)) {
      if (e->code == "not_found") return Status::NotFound(e->message);
      if (e->code == "bad_request" || e->code == "malformed") return Status::InvalidArgument(e->message);
      if (e->code == "forbidden" || e->code == "unauthorized")
        return Status::FailedPrecondition("the scheduler refused this request: " + e->message);
      return Status::Internal(e->code + ": " + e->message);
    }
    return std::move(*d.message);
  }
  return Status::Unavailable("no answer from the scheduler at " + endpoint_ + " within " +
                             std::to_string(timeout_ms_) + " ms: is it running? (--scheduler or SWEPT_SCHEDULER)");
}

}  // namespace swept::scheduler
