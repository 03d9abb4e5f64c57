// Broker tests of what issues 16 and 17 left to fix, each failing without
// its fix: a stop decided by early termination sent again to an agent that
// reconnects, the log and swept run's view when every agent is quarantined,
// the gather window on a clock that does not move, an agent that comes
// back after its lease stopped its trials, and the scheduler's own stall
// (not blamed on its agents). The same real socket, SQLite
// file and FakeClock as broker_test.cpp (helpers: broker_test_support.h).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/testing/temp_dir.h"
#include "scheduler/broker_test_support.h"

using namespace swept;
using namespace swept::scheduler;
using namespace swept::scheduler::testing;
using namespace swept::protocol;

using store::testing::query_int;

namespace {

// What the process writes to stderr (the log) while it lives, in a file.
struct StderrCapture {
  swept::testing::TempDir dir{"swept-broker-log"};
  std::string path = dir / "stderr.log";
  int saved = -1;
  StderrCapture() {
    saved = dup(STDERR_FILENO);
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  ~StderrCapture() {
    dup2(saved, STDERR_FILENO);
    close(saved);
  }
  std::string text() const {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

}  // namespace

TEST_CASE("an early-terminated trial is stopped again when its agent reconnects before it ended (issue 16)") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 1);
  // A median rule judging from the first finished trial on.
  REQUIRE(f.broker->submit(R"({"method": "grid", "metric": {"name": "loss", "goal": "minimize"},
      "early_terminate": {"type": "median", "n_startup_trials": 1, "n_warmup_steps": 0},
      "command": ["/bin/true", "${args}"], "parameters": {"x": {"values": [1, 2]}}})").ok());
  auto good = expect<StartTrial>(*f.broker, a);
  a.send(TrialStarted{good.trial_id, 1, 5, 1.0, "w", {}});
  a.send(Metrics{good.trial_id, 1, 1, {{0, "loss", 0.1}, {1, "loss", 0.1}}, "", 0});
  a.send(exited(good.trial_id, 1, 0, 1));
  expect<ExitAck>(*f.broker, a);
  auto loser = expect<StartTrial>(*f.broker, a);
  a.send(TrialStarted{loser.trial_id, 1, 6, 2.0, "w", {}});
  a.send(Metrics{loser.trial_id, 1, 1, {{0, "loss", 5.0}}, "", 0});
  auto stop = expect<StopTrial>(*f.broker, a);
  CHECK(stop.trial_id == loser.trial_id);
  // The agent's connection breaks before the stop took effect there (the
  // STOP_TRIAL was lost with it): the same process registers again on a new
  // connection, still running the trial. It must be told again.
  Peer again(f.broker->endpoint(), "a#2");
  Register r = registration("a", 1);
  r.running = {{loser.trial_id, 1, 6, 2.0}};
  again.send(r);
  expect<RegisterAck>(*f.broker, again);
  again.send(Heartbeat{});  // recorded, and given work, from its next message
  auto resent = expect<StopTrial>(*f.broker, again);
  CHECK(resent.trial_id == loser.trial_id);
  CHECK(resent.attempt == 1);
  CHECK(resent.reason.rfind("early-stopped: median", 0) == 0);
  TrialExited stopped = exited(loser.trial_id, 1, 0);
  stopped.cause = ExitCause::kStopped;
  stopped.exit_code.reset();
  again.send(stopped);
  expect<ExitAck>(*f.broker, again);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE id=" + std::to_string(loser.trial_id) +
                                 " AND state='early_stopped'") == 1);
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1; });
}

TEST_CASE("every agent quarantined: the log says so and how to release, and no sweep is called too big") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 1);
  StderrCapture log;
  const int64_t sweep = f.broker->submit(R"({"method": "grid", "command": ["/bin/true", "${args}"],
      "parameters": {"x": {"min": 1, "max": 5}}})")->sweep_id;
  // Three launch failures its agent blames on its host: quarantined (BrokerOptions::quarantine_after).
  for (int i = 0; i < 3; ++i) {
    auto st = expect<StartTrial>(*f.broker, a);
    TrialExited e;
    e.trial_id = st.trial_id;
    e.attempt = st.attempt;
    e.cause = ExitCause::kLaunchFailed;
    e.host_fault = true;
    e.reason = "cannot create the trial directory: disk full";
    e.ended_at = 1.0;
    a.send(e);
    expect<ExitAck>(*f.broker, a);
  }
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM agents WHERE quarantine IS NOT NULL") == 1; });
  for (int i = 0; i < 5; ++i) REQUIRE(f.broker->turn(1).ok());
  // The trials wait for an agent that is there but held back, not for a bigger one.
  auto unfit = f.broker->unplaceable_sweeps();
  CHECK(std::find(unfit.begin(), unfit.end(), sweep) == unfit.end());
  const std::string text = log.text();
  CHECK_MESSAGE(text.find("every registered agent is held back from new work; quarantined: a (3 host faults in a row") !=
                    std::string::npos, text);
  CHECK_MESSAGE(text.find("swept agents --release NAME") != std::string::npos, text);
  CHECK_MESSAGE(text.find("than any registered agent has") == std::string::npos, text);
  // What swept run stops on (its one agent cannot work), with the reason.
  CHECK(f.broker->all_quarantined().rfind("every registered agent is quarantined: a (3 host faults in a row", 0) == 0);
  // Released: the trials run again, and the warning is not repeated meanwhile.
  Peer cli(f.broker->endpoint(), "cli#1");
  cli.send(ReleaseAgent{"r", "a"});
  expect<Done>(*f.broker, cli);
  expect<StartTrial>(*f.broker, a);
  CHECK(f.broker->all_quarantined().empty());
  size_t said = 0;
  for (size_t at = log.text().find("held back from new work"); at != std::string::npos;
       at = log.text().find("held back from new work", at + 1))
    ++said;
  CHECK(said == 1);
}

TEST_CASE("the gather window on a fake clock: held while more comes, committed before anything is sent") {
  // The window closes when its time is over or when a turn brings nothing
  // more to gather, so a clock that does not move (FakeClock) cannot hold
  // it open, and nothing of it outlives the broker's loop.
  Fixture f;
  f.commit = CommitPolicy{};  // all on, the gather window included
  f.start();
  Peer& a = f.agent("a", 2, /*start_after=*/true);
  REQUIRE(f.broker->submit(kTenShortTrials).ok());
  auto first = starts(*f.broker, a, 2);
  REQUIRE(first.size() == 2);
  // The exit's acknowledgement may wait: the turn that reads it gathers.
  const int64_t seen = f.broker->stats().messages_in;
  run_for(a, first[0].trial_id, 100.0, 100.01);
  while (f.broker->stats().messages_in < seen + 2) REQUIRE(f.broker->turn(5).ok());
  // Not sent before it is committed: when the ack arrives, the trial is on record.
  expect<ExitAck>(*f.broker, a);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed' AND id=" +
                                 std::to_string(first[0].trial_id)) == 1);
  // The rest of the sweep runs through, successors and all, with the clock still.
  std::set<int64_t> done = {first[0].trial_id};
  std::vector<StartTrial> pending = {first[1]};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (done.size() < 10) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    REQUIRE(f.broker->turn(2).ok());
    while (auto m = a.poll())
      if (auto* st = std::get_if<StartTrial>(&*m)) pending.push_back(*st);
    for (const StartTrial& st : pending)
      if (done.insert(st.trial_id).second) run_for(a, st.trial_id, 100.0, 100.01);
    pending.clear();
  }
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1; },
             {&a});
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 10);
  CHECK(f.broker->stats().successors > 0);
  // The waiter sees the end without the fake clock moving.
  CHECK(f.broker->wait_for_change(0, std::chrono::hours(1)) >= 1);
}

TEST_CASE("an agent whose lease stopped its trials registers again and gets work: it is not draining") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 1);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "parameters": {"x": {"values": [1]}}})").ok());
  auto st = expect<StartTrial>(*f.broker, a);
  a.send(TrialStarted{st.trial_id, 1, 5, 1.0, "w", {}});
  // The scheduler stalled past the agent's lease: the agent stopped the
  // trial (reported as agent_shutdown: not the trial's doing) and registers
  // again, on the same connection, reporting it.
  TrialExited e = exited(st.trial_id, 1, 0);
  e.cause = ExitCause::kAgentShutdown;
  e.exit_code.reset();
  e.reason = "lease expired: no word from the scheduler for 5014 ms (lease 10000 ms)";
  Register again = registration("a", 1);
  again.finished = {e};
  a.send(again);
  expect<RegisterAck>(*f.broker, a);
  a.send(Heartbeat{});  // recorded, and given work, from its next message
  // Requeued at no cost, and this agent, the only one, runs it again.
  auto rerun = expect<StartTrial>(*f.broker, a);
  CHECK(rerun.trial_id == st.trial_id);
  CHECK(rerun.attempt == 2);
}

TEST_CASE("a stall of the scheduler's own loop past liveness declares no agent lost - one still silent a liveness later is") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 1);
  Peer& b = f.agent("b", 1);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "max_retries": 0,
      "parameters": {"x": {"values": [1, 2]}}})").ok());
  std::map<std::string, StartTrial> by_agent;
  by_agent["a"] = expect<StartTrial>(*f.broker, a);
  by_agent["b"] = expect<StartTrial>(*f.broker, b);
  a.send(TrialStarted{by_agent["a"].trial_id, 1, 5, 1.0, "w", {}});
  b.send(TrialStarted{by_agent["b"].trial_id, 1, 6, 1.0, "w", {}});
  wait_start_written(*f.broker, f.clock, f.db.path, 2);
  const std::string lost_agents = "SELECT COUNT(*) FROM agents WHERE state='lost'";
  // Both heard at the same moment, and the loop's last turn then too.
  int64_t seen = f.broker->stats().messages_in;
  a.send(Heartbeat{});
  b.send(Heartbeat{});
  turn_until(*f.broker, [&] { return f.broker->stats().messages_in >= seen + 2; });

  // The loop does not turn for 400 ms of the clock (starved of CPU, or
  // SIGSTOPped), past the liveness of 3 x 100 ms. What the agents sent
  // meanwhile is not read yet: both look silent for 400 ms.
  f.clock.advance_ms(400);
  REQUIRE(f.broker->turn(0).ok());
  CHECK(query_int(f.db.path, lost_agents) == 0);
  CHECK(f.broker->stats().stalls == 1);
  CHECK(f.broker->stats().stalled_ms == 300);  // the gap less the heartbeat a turn may wait

  // Time passes as usual; a heartbeats, b stays silent: b is lost a
  // liveness after the loop came back, a never is.
  int64_t heard = f.broker->stats().messages_in;
  pass_time(*f.broker, f.clock, 150, [&] { a.send(Heartbeat{}); });
  turn_until(*f.broker, [&] { return f.broker->stats().messages_in >= heard + 3; });
  CHECK(query_int(f.db.path, lost_agents) == 0);
  pass_time(*f.broker, f.clock, 200, [&] { a.send(Heartbeat{}); });
  turn_until(*f.broker, [&] { return query_int(f.db.path, lost_agents) == 1; });
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM agents WHERE name='b' AND state='lost'") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM agents WHERE name='a' AND state='alive'") == 1);
  // a's trial still runs its first attempt: nothing was rerun.
  CHECK(query_int(f.db.path, "SELECT attempts FROM trials WHERE id=" + std::to_string(by_agent["a"].trial_id) +
                                 " AND state='running'") == 1);
}

TEST_CASE("an agent that says it drains gets no more work - an agent_shutdown exit alone says nothing of its agent") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 1);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "max_retries": 0,
      "parameters": {"x": {"values": [1, 2, 3]}}})").ok());
  auto first = expect<StartTrial>(*f.broker, a);
  a.send(TrialStarted{first.trial_id, 1, 5, 1.0, "w", {}});
  // Its trial ends agent_shutdown, the agent saying nothing of a drain (its
  // lease stopped it, say, whatever the reason's words): requeued at no
  // cost, and the agent, still taking work, gets the next one.
  TrialExited stopped = exited(first.trial_id, 1, 0);
  stopped.cause = ExitCause::kAgentShutdown;
  stopped.exit_code.reset();
  stopped.reason = "agent a draining";
  a.send(stopped);
  expect<ExitAck>(*f.broker, a);
  auto second = expect<StartTrial>(*f.broker, a);
  a.send(TrialStarted{second.trial_id, second.attempt, 6, 2.0, "w", {}});

  // Now it says it drains (before it reports what it stops, as agents do):
  // its freed place gets nothing.
  Heartbeat leaving;
  leaving.draining = true;
  a.send(leaving);
  TrialExited again = exited(second.trial_id, second.attempt, 0);
  again.cause = ExitCause::kAgentShutdown;
  again.exit_code.reset();
  again.reason = "agent a draining";
  a.send(again);
  expect<ExitAck>(*f.broker, a);
  CHECK(starts(*f.broker, a, 0).empty());
  CHECK(second.trial_id == first.trial_id);  // the requeued trial went first
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='queued' AND id=" +
                                 std::to_string(first.trial_id)) == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE state='queued' AND reason LIKE "
                             "'requeued (costs no retry)%'") == 2);
  // Another agent takes the work.
  Peer& b = f.agent("b", 1);
  expect<StartTrial>(*f.broker, b);
}

TEST_CASE("a peer of protocol version 1 is refused in words it can read") {
  Fixture f;
  f.start();
  Peer old(f.broker->endpoint(), "old#1");
  Register reg = registration("old", 1);
  Frames v1 = encode(reg, kPreviousProtocolId);
  REQUIRE(v1[0] == "swept/1");
  old.send_raw(v1);
  Frames reply;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reply.empty()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    REQUIRE(f.broker->turn(5).ok());
    auto got = zmqio::receive(old.sock, false, true);
    REQUIRE(got.ok());
    if (got->has_value()) reply = (*got)->frames;
  }
  REQUIRE(reply.size() == 3);
  CHECK(reply[0] == "swept/1");  // its own framing: an old agent reads this and stops
  CHECK(reply[1] == "REGISTER_REJECT");
  CHECK(reply[2].find("\"version\"") != std::string::npos);
  CHECK(reply[2].find("this peer speaks swept/2") != std::string::npos);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM agents") == 0);
}
