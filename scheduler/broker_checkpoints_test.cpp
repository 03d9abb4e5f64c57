// The broker's relay of checkpoint parts between agents over its real socket
// (broker_checkpoints.cpp; docs/protocol.md, "Checkpoints between agents"):
// a part's bytes arrive as a fourth frame and leave as one, byte for byte,
// to an agent that lists checkpoint_frames; an agent that does not is sent
// them as base64 in the body, and a holder that sends base64 is read too.
// The relay checks only whose the segments are, so a grid sweep's two
// running trials stand in for a pbt round's puller and holder.
#include <doctest/doctest.h>

#include <string>

#include "scheduler/broker_test_support.h"

using namespace swept;
using namespace swept::scheduler;
using namespace swept::scheduler::testing;
using namespace swept::protocol;

namespace {

// A registered agent that runs checkpoint segments, with or without the frame feature.
Peer& segment_agent(Fixture& f, const std::string& name, bool frames) {
  f.peers.push_back(std::make_unique<Peer>(f.broker->endpoint(), name + "#1"));
  Peer& peer = *f.peers.back();
  Register reg = registration(name, 1);
  reg.features = {kFeatureCheckpointSegments};
  if (frames) reg.features.push_back(kFeatureCheckpointFrames);
  peer.send(reg);
  expect<RegisterAck>(*f.broker, peer);
  peer.send(Heartbeat{});
  return peer;
}

// Turns the broker until `peer` receives a CHECKPOINT_PART (10 s deadline): its raw frames.
Frames part_frames(Broker& broker, Peer& peer) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    REQUIRE(broker.turn(5).ok());
    while (true) {
      auto got = zmqio::receive(peer.sock, false, true);
      REQUIRE(got.ok());
      if (!got->has_value()) break;
      if ((*got)->frames.size() > 1 && (*got)->frames[1] == "CHECKPOINT_PART") return (*got)->frames;
    }
  }
  FAIL("no CHECKPOINT_PART within 10 s");
  return {};
}

}  // namespace

TEST_CASE("broker: a checkpoint part's bytes are relayed as a frame, or as base64 to an agent without the feature") {
  Fixture f;
  f.start();
  Peer& a = segment_agent(f, "a", /*frames=*/true);
  Peer& b = segment_agent(f, "b", /*frames=*/false);
  REQUIRE(f.broker->submit(kThreeTrials).ok());
  const StartTrial on_a = starts(*f.broker, a, 1).at(0);
  const StartTrial on_b = starts(*f.broker, b, 1).at(0);
  a.send(TrialStarted{on_a.trial_id, 1, 7, 1.0, "w", {}});
  b.send(TrialStarted{on_b.trial_id, 1, 8, 1.0, "w", {}});
  std::string bytes(1 << 20, '\0');  // every byte value, and more than a JSON string would like
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 % 256);

  // a pulls b's segment: the pull goes to b, b answers, as an agent from
  // before the frame would (base64 in the body), and a gets the bytes as a frame.
  a.send(CheckpointPull{on_a.trial_id, 1, 0, on_b.trial_id, 1, "ckpt.bin", 0});
  const CheckpointPull to_b = expect<CheckpointPull>(*f.broker, b);
  CHECK(to_b.sweep_id == on_b.sweep_id);
  CheckpointPart old_style{on_a.trial_id, 1, on_b.trial_id, 1, "ckpt.bin", 0, bytes, {}, ""};
  old_style.data_in_body = true;
  b.send(old_style);
  Frames at_a = part_frames(*f.broker, a);
  REQUIRE(at_a.size() == 4);
  CHECK(at_a[3] == bytes);
  CHECK(at_a[2].find("\"data\"") == std::string::npos);

  // b pulls a's segment: a answers with a frame, and b, without the
  // feature, gets base64 in the body, which decodes to the same bytes.
  b.send(CheckpointPull{on_b.trial_id, 1, 0, on_a.trial_id, 1, "ckpt.bin", 0});
  expect<CheckpointPull>(*f.broker, a);
  a.send(CheckpointPart{on_b.trial_id, 1, on_a.trial_id, 1, "ckpt.bin", 0, bytes, {}, ""});
  Frames at_b = part_frames(*f.broker, b);
  REQUIRE(at_b.size() == 3);
  Decoded d = decode(at_b);
  REQUIRE(d.ok());
  CHECK(std::get<CheckpointPart>(*d.message).data == bytes);
}
