// ZeroMQ glue: see zmq_io.h.
#include "scheduler/zmq_io.h"


namespace swept::zmqio {

Result<std::optional<Received>> receive(zmq::socket_t& socket, bool with_routing_id, bool dontwait) {
  Received out;
  bool first = true;
  try {
    for (;;) {
      zmq::message_t part;
      auto got = socket.recv(part, (first && dontwait) ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
      if (!got) return std::optional<Received>();
      if (first && with_routing_id)
        out.routing_id = part.to_string();
      else
        out.frames.push_back(part.to_string());
      first = false;
      if (!part.more()) break;
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(std::string("receiving a message failed: ") + e.what());
  }
  return std::optional<Received>(std::move(out));
}

Status send(zmq::socket_t& socket, const std::string& routing_id, const protocol::Frames& frames) {
  try {
    if (!routing_id.empty()) {
      if (!socket.send(zmq::buffer(routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
        return Status::Unavailable("peer " + routing_id + " cannot take more messages now");
    }
    for (size_t i = 0; i < frames.size(); ++i) {
      auto flags = zmq::send_flags::dontwait;
      if (i + 1 < frames.size()) flags = flags | zmq::send_flags::sndmore;
      if (!socket.send(zmq::buffer(frames[i]), flags)) return Status::Unavailable("the socket cannot take more messages now");
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(std::string("sending to ") + (routing_id.empty() ? "the peer" : routing_id) +
                               " failed: " + e.what());
  }
  return Status::Ok();
}

}  // namespace swept::zmqio
