// What the broker's tests share (test code only): a scripted peer on a
// DEALER socket speaking the protocol through the real codec, waits that
// turn the broker until something happens (10 s deadlines, never sleeps), and
// a fixture with a broker on a temporary SQLite file and a FakeClock.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/broker.h"
#include "scheduler/zmq_io.h"
#include "store/test_support.h"

namespace swept::scheduler::testing {

using namespace swept::protocol;

using store::testing::TempDb;
using store::testing::query_int;

// A scripted peer on a DEALER socket.
struct Peer {
  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
  explicit Peer(const std::string& endpoint, const std::string& id) {
    sock.set(zmq::sockopt::linger, 0);
    sock.set(zmq::sockopt::routing_id, id);
    sock.connect(endpoint);
  }
  void send(const Message& m) { REQUIRE(zmqio::send(sock, "", encode(m)).ok()); }
  void send_raw(const Frames& f) { REQUIRE(zmqio::send(sock, "", f).ok()); }
  std::optional<Message> poll() {
    auto got = zmqio::receive(sock, false, true);
    REQUIRE(got.ok());
    if (!got->has_value()) return std::nullopt;
    Decoded d = decode((*got)->frames);
    REQUIRE_MESSAGE(d.ok(), d.error);
    return *d.message;
  }
};

// Turns the broker until `peer` receives a message of type T (other messages
// go to `others` if given). Fails after a 10 s deadline.
template <typename T>
T expect(Broker& broker, Peer& peer, std::vector<Message>* others = nullptr) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    REQUIRE(broker.turn(5).ok());
    while (auto m = peer.poll()) {
      if (auto* t = std::get_if<T>(&*m)) return *t;
      if (others) others->push_back(*m);
    }
  }
  FAIL("no " << std::string(kind_name(Message(T{}))) << " within 10 s");
  return T{};
}

// Turns until `cond` holds (10 s deadline), discarding the peers' mail.
inline void turn_until(Broker& broker, const std::function<bool()>& cond, std::vector<Peer*> drain = {}) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    REQUIRE(broker.turn(5).ok());
    for (Peer* p : drain)
      while (p->poll()) {
      }
  }
}

// Turns until `n` trials have their start written. With nothing else to
// write, a TRIAL_STARTED is written 50 ms after it came: the fake clock moves
// 10 ms a turn meanwhile (well inside any liveness limit of these tests).
inline void wait_start_written(Broker& broker, FakeClock& clock, const std::string& db, int n) {
  turn_until(broker, [&] {
    clock.advance_ms(10);
    return query_int(db, "SELECT COUNT(*) FROM trials WHERE started_at IS NOT NULL") == n;
  });
}

// Fake time passes as it does for a live scheduler: in steps of `step_ms`
// (at most the fixture's heartbeat, 100 ms), with a turn after each, so the
// broker never takes the time for a stall of its own loop (Broker::excuse_stall).
// `each` runs before every turn (an agent that keeps heartbeating).
inline void pass_time(Broker& broker, FakeClock& clock, int64_t ms, const std::function<void()>& each = {},
                      int64_t step_ms = 50) {
  for (int64_t passed = 0; passed < ms;) {
    const int64_t step = std::min(step_ms, ms - passed);
    clock.advance_ms(step);
    passed += step;
    if (each) each();
    REQUIRE(broker.turn(0).ok());
  }
}

inline Register registration(const std::string& name, int slots) {
  Register r;
  r.name = name;
  r.host = "localhost";
  r.session = name + "-session";
  r.pid = 1;
  r.slots = slots;
  return r;
}

inline const char* kThreeTrials = R"({"method": "grid", "metric": {"name": "loss", "goal": "minimize"},
  "command": ["/bin/true", "${args}"], "max_retries": 1,
  "parameters": {"x": {"values": [1, 2, 3]}}})";

inline TrialExited exited(int64_t trial, int attempt, int code, int64_t last_seq = 0) {
  TrialExited e;
  e.trial_id = trial;
  e.attempt = attempt;
  e.cause = ExitCause::kExited;
  e.exit_code = code;
  e.ended_at = 1.0;
  e.last_seq = last_seq;
  return e;
}

struct Fixture {
  TempDb db;
  FakeClock clock;
  store::WriterOptions writer_options;  // a failing VFS for fault injection
  std::unique_ptr<store::Writer> store;
  std::unique_ptr<Broker> broker;
  // The broker's batching tricks. The gather window runs on the broker's
  // clock, which in these tests moves only when a test moves it, so it is off
  // here; the integration tests (swept run, a real clock) exercise it.
  CommitPolicy commit{/*gather_window=*/false, /*defer_start_writes=*/true, /*successors=*/true};
  int64_t gang_reserve_after_ms = kGangReserveAfterMs;
  void start(int grace_ms = 60000) {
    auto s = store::Writer::open(db.path, writer_options);
    REQUIRE(s.ok());
    store = std::move(*s);
    BrokerOptions o;
    o.bind = "tcp://127.0.0.1:*";
    o.heartbeat_ms = 100;
    o.liveness = 3;
    o.recovery_grace_ms = grace_ms;
    o.commit = commit;
    o.gang_reserve_after_ms = gang_reserve_after_ms;
    broker = std::make_unique<Broker>(*store, clock, o);
    REQUIRE(broker->bind().ok());
    REQUIRE(broker->recover().ok());
  }
  void stop() {
    broker.reset();
    store.reset();
  }
  // A scripted agent NAME with `slots` places, registered (REGISTER_ACK
  // received); it lists start_after when asked. It lives as long as the
  // fixture.
  Peer& agent(const std::string& name, int slots, bool start_after = false) {
    peers.push_back(std::make_unique<Peer>(broker->endpoint(), name + "#1"));
    Peer& peer = *peers.back();
    Register reg = registration(name, slots);
    if (start_after) reg.features = {"start_after"};
    peer.send(reg);
    expect<RegisterAck>(*broker, peer);
    // As agents do at once after the ack: an unkeyed scheduler records an
    // agent, and places work on it, from its first message after REGISTER.
    peer.send(Heartbeat{});
    return peer;
  }
  std::vector<std::unique_ptr<Peer>> peers;  // after broker: closed first
};



// The START_TRIALs `peer` receives: at least `n` (waiting up to 10 s for
// them), plus any that come while the broker turns `settle` more times (so
// that a test can say there were no more than n).
inline std::vector<StartTrial> starts(Broker& broker, Peer& peer, size_t n, int settle = 20) {
  std::vector<StartTrial> out;
  auto collect = [&] {
    REQUIRE(broker.turn(2).ok());
    while (auto m = peer.poll())
      if (auto* st = std::get_if<StartTrial>(&*m)) out.push_back(*st);
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out.size() < n) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "only " << out.size() << " of " << n << " START_TRIALs");
    collect();
  }
  for (int i = 0; i < settle; ++i) collect();
  return out;
}

inline const char* kTenShortTrials = R"({"method": "grid", "command": ["/bin/true", "${args}"],
  "parameters": {"x": {"min": 1, "max": 10}}})";

// Reports trial `id` (attempt 1) as started at `t0` and exited at `t1`.
inline void run_for(Peer& agent, int64_t id, double t0, double t1) {
  agent.send(TrialStarted{id, 1, 7, t0, "w", {}});
  TrialExited e = exited(id, 1, 0);
  e.ended_at = t1;
  agent.send(e);
}


}  // namespace swept::scheduler::testing
