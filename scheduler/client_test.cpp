// Client: what it does with replies it must not trust (issue 15, item 3):
// a reply over the protocol's largest message is never taken in; the
// connection is dropped and the call ends as if no scheduler answered.
#include "scheduler/client.h"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

namespace {

using swept::StatusCode;
using swept::scheduler::Client;
namespace protocol = swept::protocol;

// A ROUTER posing as the scheduler: answers the first request with one frame
// of `reply_bytes` bytes after the protocol id.
struct FakeScheduler {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::router};
  std::string endpoint;
  FakeScheduler() {
    socket.set(zmq::sockopt::linger, 0);
    socket.bind("tcp://127.0.0.1:*");
    endpoint = socket.get(zmq::sockopt::last_endpoint);
  }
  // Waits (up to 10 s) for a request and answers it.
  bool answer(size_t reply_bytes) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(10000)) <= 0) return false;
    std::vector<zmq::message_t> frames;
    for (bool more = true; more;) {
      zmq::message_t m;
      if (!socket.recv(m)) return false;
      more = m.more();
      frames.push_back(std::move(m));
    }
    socket.send(zmq::buffer(frames[0].to_string()), zmq::send_flags::sndmore);
    socket.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
    socket.send(zmq::buffer(std::string(protocol::kProtocolId)), zmq::send_flags::sndmore);
    socket.send(zmq::buffer(std::string(reply_bytes, 'x')), zmq::send_flags::none);
    return true;
  }
};

swept::Status call_once(FakeScheduler& fake, size_t reply_bytes) {
  auto client = Client::connect(fake.endpoint, 3000);
  REQUIRE(client.ok());
  swept::Status status;
  std::thread t([&] {
    auto r = (*client)->call(protocol::QuerySweeps{});
    status = r.status();
  });
  CHECK(fake.answer(reply_bytes));
  t.join();
  return status;
}

}  // namespace

TEST_CASE("client: a reply too large for the protocol is never taken in, and the call ends unavailable") {
  FakeScheduler fake;
  // A small unreadable reply arrives and is refused as unreadable...
  swept::Status small = call_once(fake, 16);
  CHECK(small.code() == StatusCode::kInternal);
  // ... one past the protocol's limit never arrives at all.
  swept::Status big = call_once(fake, static_cast<size_t>(protocol::kMaxMessageBytes) + 1);
  INFO(big.ToString());
  CHECK(big.code() == StatusCode::kUnavailable);
}
