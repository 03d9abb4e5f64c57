// Tests of the broker with a real ROUTER socket, a scripted agent (a DEALER
// in the test speaking the protocol through the real codec), a real SQLite
// file and a FakeClock for liveness. Waits are bounded loops over broker
// turns, never sleeps. Helpers: broker_test_support.h; the leftovers of
// issues 16 and 17 are tested in broker_faults_test.cpp.
#include "scheduler/broker.h"
#include "store/fault_vfs.h"
#include "store/test_support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "common/testing/eventually.h"
#include "scheduler/broker_test_support.h"
#include "scheduler/zmq_io.h"

using namespace swept;
using namespace swept::scheduler;
using namespace swept::scheduler::testing;
using namespace swept::protocol;

using store::testing::TempDb;
using store::testing::query_int;


TEST_CASE("a sweep runs to completion through the protocol, metrics stored once") {
  Fixture f;
  f.start();
  Peer agent(f.broker->endpoint(), "a#1");
  agent.send(registration("a", 1));
  auto ack = expect<RegisterAck>(*f.broker, agent);
  agent.send(Heartbeat{});  // recorded, and given work, from its next message
  CHECK(ack.heartbeat_ms == 100);
  CHECK(ack.liveness == 3);
  auto sub = f.broker->submit(kThreeTrials);
  REQUIRE(sub.ok());
  CHECK(sub->total_trials == 3);
  std::set<int64_t> seen;
  for (int i = 0; i < 3; ++i) {
    auto st = expect<StartTrial>(*f.broker, agent);
    CHECK(st.attempt == 1);
    CHECK(st.argv.front() == "/bin/true");
    CHECK(st.sweep_id == sub->sweep_id);
    CHECK(st.params.contains("x"));
    CHECK(st.env.empty());  // the agent derives SWEPT_* from the fields
    CHECK(seen.insert(st.trial_id).second);
    agent.send(TrialStarted{st.trial_id, 1, 100 + i, 1.0, "w", {{"CUDA_VISIBLE_DEVICES", ""}}});
    Metrics m{st.trial_id, 1, 1, {{0, "loss", 1.0 + i}, {1, "loss", 0.5 + i}}, "log line\n", 0};
    agent.send(m);
    agent.send(m);  // a duplicate batch: stored once
    agent.send(exited(st.trial_id, 1, 0, 1));
    auto a = expect<ExitAck>(*f.broker, agent);
    CHECK(a.trial_id == st.trial_id);
  }
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1; });
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 3);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM metrics") == 6);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE env IS NOT NULL AND started_at IS NOT NULL") == 3);
  auto sums = store::sweep_summaries(f.store->connection(), sub->sweep_id);
  REQUIRE(sums.ok());
  REQUIRE(sums->front().best);
  CHECK(sums->front().best->value == doctest::Approx(0.5));
}

TEST_CASE("an agent silent past liveness loses its trials, requeued once its lease is over, and run elsewhere") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 1);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "max_retries": 1,
      "parameters": {"x": {"values": [1]}}})").ok());
  auto st = expect<StartTrial>(*f.broker, a);
  a.send(TrialStarted{st.trial_id, 1, 5, 1.0, "w", {}});
  wait_start_written(*f.broker, f.clock, f.db.path, 1);

  // Agent a goes silent (SIGSTOP). 3 x 100 ms of fake time later it is lost.
  pass_time(*f.broker, f.clock, 301);
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM agents WHERE name='a' AND state='lost'") == 1; });
  // But its trial is not requeued while a may still run it: a's lease
  // (2 x 100 ms x 3) and the margin (2 x 100 ms) are not over.
  Peer& b = f.agent("b", 1);
  auto pass_ms = [&](int ms) {  // fake time passes; b keeps heartbeating
    for (int t = 0; t < ms; t += 100) {
      f.clock.advance_ms(100);
      int64_t seen = f.broker->stats().messages_in;
      b.send(Heartbeat{});
      turn_until(*f.broker, [&] { return f.broker->stats().messages_in > seen; });
    }
  };
  pass_ms(400);  // about 750 ms after a's last message
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running' AND agent='a'") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE state='lost'") == 0);
  // Its lease and margin (806 ms) are over, the report window (600 ms) not.
  pass_ms(600);  // about 1350 ms
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running' AND agent='a'") == 1);
  pass_ms(100);  // about 1450 ms: lease + margin + report window over
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE state='lost'") == 1; });
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE state='lost' AND reason LIKE '%lease%'") == 1);

  auto st2 = expect<StartTrial>(*f.broker, b);
  CHECK(st2.trial_id == st.trial_id);
  CHECK(st2.attempt == 2);

  // a wakes up: its heartbeat is from an unknown session, it re-registers with
  // the stale attempt, which is stopped.
  a.send(Heartbeat{});
  expect<Disconnect>(*f.broker, a);
  Register again = registration("a", 1);
  again.running = {{st.trial_id, 1, 5, 1.0}};
  a.send(again);
  std::vector<Message> mail;
  expect<RegisterAck>(*f.broker, a, &mail);
  auto stop = expect<StopTrial>(*f.broker, a);
  CHECK(stop.trial_id == st.trial_id);
  CHECK(stop.attempt == 1);
  // The stale attempt ends with exit 0: history only, the trial stays b's.
  a.send(exited(st.trial_id, 1, 0));
  expect<ExitAck>(*f.broker, a);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running' AND agent='b'") == 1);
  b.send(exited(st2.trial_id, 2, 0));
  expect<ExitAck>(*f.broker, b);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE state='completed'") == 1);
}

// Issue 26: a trial that ran to its end while its agent was frozen past its
// lease is reported when the agent is back, within the report window, and
// never started elsewhere meanwhile.
TEST_CASE("a trial that ended while its agent was away past its lease is reported within the report window, not run again") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 1);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "max_retries": 1,
      "parameters": {"x": {"values": [1]}}})").ok());
  auto st = expect<StartTrial>(*f.broker, a);
  a.send(TrialStarted{st.trial_id, 1, 5, 1.0, "w", {}});
  wait_start_written(*f.broker, f.clock, f.db.path, 1);
  pass_time(*f.broker, f.clock, 301);
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM agents WHERE name='a' AND state='lost'") == 1; });
  Peer& b = f.agent("b", 1);
  for (int t = 0; t < 1000; t += 100) {  // to about 1300 ms: past a's lease and margin (806 ms)
    f.clock.advance_ms(100);
    int64_t seen = f.broker->stats().messages_in;
    b.send(Heartbeat{});
    turn_until(*f.broker, [&] { return f.broker->stats().messages_in > seen; });
  }
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running' AND agent='a'") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE state='lost'") == 0);
  // a is back: the trial ended there (exit 0) while it could not say so.
  a.send(Heartbeat{});
  expect<Disconnect>(*f.broker, a);
  Register again = registration("a", 1);
  again.finished = {exited(st.trial_id, 1, 0)};
  a.send(again);
  expect<RegisterAck>(*f.broker, a);
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 1; });
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE state='completed' AND agent='a'") == 1);
  // Nothing was sent to b: the trial never ran twice.
  pass_time(*f.broker, f.clock, 1000);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts") == 1);
}

TEST_CASE("without retries left a lost trial fails - one never started costs no retry") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 2);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"],
      "parameters": {"x": {"values": [1, 2]}}})").ok());
  auto s1 = expect<StartTrial>(*f.broker, a);
  auto s2 = expect<StartTrial>(*f.broker, a);
  a.send(TrialStarted{s1.trial_id, 1, 5, 1.0, "w", {}});
  wait_start_written(*f.broker, f.clock, f.db.path, 1);
  a.send(Disconnect{"test"});
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM agents WHERE state='gone'") == 1; });
  // Started and lost with no retries left: final state `lost`, not `failed`.
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE id=" + std::to_string(s1.trial_id) + " AND state='lost'") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE id=" + std::to_string(s2.trial_id) + " AND state='queued'") == 1);
}

TEST_CASE("malformed, unknown and foreign messages are answered, never fatal") {
  Fixture f;
  f.start();
  Peer p(f.broker->endpoint(), "x#1");
  p.send_raw({std::string(kProtocolId), "METRICS", "{not json"});
  auto e1 = expect<Error>(*f.broker, p);
  CHECK(e1.code == "malformed");
  p.send_raw({std::string(kProtocolId), "LAUNCH_MISSILES", "{}"});
  auto e2 = expect<Error>(*f.broker, p);
  CHECK(e2.message.find("LAUNCH_MISSILES") != std::string::npos);
  p.send_raw({"swept/9", "QUERY_AGENTS", R"({"request_id":"q"})"});
  auto e3 = expect<Error>(*f.broker, p);
  CHECK(e3.code == "version");
  CHECK(e3.request_id == "q");
  p.send_raw({std::string(kProtocolId), "START_TRIAL", R"({"trial_id":1,"attempt":1,"sweep_id":1,"argv":["x"],"workdir":"w"})"});
  auto e4 = expect<Error>(*f.broker, p);
  CHECK(e4.message.find("sent by the scheduler") != std::string::npos);
  p.send_raw({"garbage"});
  // A message from an agent the scheduler never met.
  p.send(exited(42, 1, 0));
  expect<Disconnect>(*f.broker, p);
  // Still serving.
  p.send(QueryAgents{"r"});
  auto agents = expect<Agents>(*f.broker, p);
  CHECK(agents.agents.empty());
  CHECK(f.broker->stats().messages_dropped >= 5);
}

TEST_CASE("a second agent with a live name is refused - a silent predecessor or the same process is replaced") {
  Fixture f;
  f.start();
  f.agent("a", 1);  // the first "a", alive (the fixture keeps it)
  Register other = registration("a", 1);
  other.pid = 2;  // another process on the same host: a true duplicate
  Peer dup(f.broker->endpoint(), "a#2");
  dup.send(other);
  auto rej = expect<RegisterReject>(*f.broker, dup);
  CHECK(rej.code == "duplicate_name");
  CHECK(rej.retry_after_ms == 300);
  // The first goes silent; after its liveness the second gets in.
  pass_time(*f.broker, f.clock, 200);
  dup.send(other);
  expect<RegisterReject>(*f.broker, dup);
  pass_time(*f.broker, f.clock, 150);
  dup.send(other);
  expect<RegisterAck>(*f.broker, dup);
  dup.send(Heartbeat{});  // recorded, and given work, from its next message
  // The same process (host and pid) on a fresh connection takes over at once.
  Peer again(f.broker->endpoint(), "a#3");
  again.send(other);
  expect<RegisterAck>(*f.broker, again);
  again.send(Heartbeat{});  // recorded, and given work, from its next message
  Peer bad(f.broker->endpoint(), "b#1");
  Register twice = registration("b", 1);
  twice.gpus = {{0, "u", "g", 1}, {0, "u", "g", 1}};
  bad.send(twice);
  CHECK(expect<RegisterReject>(*f.broker, bad).code == "bad_request");
}

TEST_CASE("after a restart, running trials are adopted, not restarted - finished ones recorded once") {
  Fixture f;
  f.start();
  int64_t t1 = 0, t2 = 0;
  {
    Peer a(f.broker->endpoint(), "a#1");
    a.send(registration("a", 2));
    expect<RegisterAck>(*f.broker, a);
    a.send(Heartbeat{});  // recorded, and given work, from its next message
    REQUIRE(f.broker->submit(kThreeTrials).ok());
    auto s1 = expect<StartTrial>(*f.broker, a);
    auto s2 = expect<StartTrial>(*f.broker, a);
    t1 = s1.trial_id;
    t2 = s2.trial_id;
    a.send(TrialStarted{t1, 1, 5, 1.0, "w", {}});
    a.send(TrialStarted{t2, 1, 6, 1.0, "w", {}});
    a.send(Metrics{t2, 1, 1, {{0, "loss", 3.0}}, "", 0});
    turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM metrics") == 1; });
  }
  std::string endpoint = f.broker->endpoint();
  f.stop();  // the scheduler dies; its state is what it committed
  f.start();
  // The agent reconnects: t1 still running, t2 finished while away.
  Peer a(f.broker->endpoint(), "a#2");
  Register r = registration("a", 2);
  r.running = {{t1, 1, 5, 1.0}};
  r.finished = {exited(t2, 1, 0, 2)};
  a.send(r);
  auto ack = expect<RegisterAck>(*f.broker, a);
  a.send(Heartbeat{});  // recorded, and given work, from its next message
  bool acked_t2 = false;
  for (const auto& k : ack.acked)
    if (k.trial_id == t2) {
      CHECK(k.seq == 1);  // batch 2 must be re-sent
      acked_t2 = true;
    }
  CHECK(acked_t2);
  // Replay: batch 1 again (dropped), batch 2, then the exit again.
  a.send(Metrics{t2, 1, 1, {{0, "loss", 3.0}}, "", 0});
  a.send(Metrics{t2, 1, 2, {{1, "loss", 2.0}}, "", 0});
  a.send(exited(t2, 1, 0, 2));
  std::vector<Message> mail;
  expect<ExitAck>(*f.broker, a, &mail);
  // t2 ended only now, with its batch 2 stored (its REGISTER entry said
  // last_seq 2, one batch above what was stored): the third trial starts in
  // the slot t2 held, with the same turn's mail or the next; t1 is never
  // sent again.
  std::vector<StartTrial> starts;
  for (const auto& m : mail)
    if (auto* st = std::get_if<StartTrial>(&m)) starts.push_back(*st);
  if (starts.empty()) starts.push_back(expect<StartTrial>(*f.broker, a));
  REQUIRE(starts.size() == 1);
  StartTrial s3 = starts.front();
  CHECK(s3.trial_id != t1);
  CHECK(s3.trial_id != t2);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE id=" + std::to_string(t2) + " AND state='completed'") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM metrics WHERE trial_id=" + std::to_string(t2)) == 2);
  CHECK(query_int(f.db.path, "SELECT attempts FROM trials WHERE id=" + std::to_string(t1)) == 1);
  a.send(exited(t1, 1, 0));
  a.send(exited(s3.trial_id, 1, 0));
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1; }, {&a});
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts") == 3);
}

TEST_CASE("a trial's start is written with the next commit, or on its own 50 ms later") {
  // TRIAL_STARTED adds nothing the scheduler acts on (the trial is on record
  // as running since its dispatch), so it does not cost a commit of its own
  // while others happen anyway; alone, it is written within 50 ms.
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 2);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"],
      "parameters": {"x": {"values": [1, 2, 3]}}})").ok());
  auto s1 = expect<StartTrial>(*f.broker, a);
  auto s2 = expect<StartTrial>(*f.broker, a);
  auto started = [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE started_at IS NOT NULL"); };
  int64_t seen = f.broker->stats().messages_in;
  a.send(TrialStarted{s1.trial_id, 1, 5, 1.0, "w", {{"CUDA_VISIBLE_DEVICES", ""}}});
  turn_until(*f.broker, [&] { return f.broker->stats().messages_in > seen; });
  REQUIRE(f.broker->turn(0).ok());
  CHECK(started() == 0);  // not yet: nothing else was written, and the fake clock has not moved
  f.clock.advance_ms(50);
  turn_until(*f.broker, [&] { return started() == 1; });
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE env IS NOT NULL") == 1);

  // The second trial's start rides on the commit of its own exit.
  a.send(TrialStarted{s2.trial_id, 1, 6, 2.0, "w", {}});
  a.send(TrialExited{s2.trial_id, 1, ExitCause::kExited, 0, std::nullopt, false, "exit code 0", 3.0, 0});
  expect<ExitAck>(*f.broker, a);
  CHECK(started() == 2);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed' AND started_at=2.0") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE state='completed' AND started_at=2.0") == 1);

  // A broker that is stopped (not killed) writes what it holds before run() returns.
  auto s3 = expect<StartTrial>(*f.broker, a);
  seen = f.broker->stats().messages_in;
  a.send(TrialStarted{s3.trial_id, 1, 7, 4.0, "w", {}});
  turn_until(*f.broker, [&] { return f.broker->stats().messages_in > seen; });
  CHECK(started() == 2);
  std::atomic<bool> stop{true};
  REQUIRE(f.broker->run(stop).ok());
  CHECK(started() == 3);
}

TEST_CASE("recovered trials whose agent never returns are lost after the grace period") {
  Fixture f;
  f.start();
  {
    Peer a(f.broker->endpoint(), "a#1");
    a.send(registration("a", 1));
    expect<RegisterAck>(*f.broker, a);
    a.send(Heartbeat{});  // recorded, and given work, from its next message
    REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"],
        "parameters": {"x": {"values": [1]}}})").ok());
    auto st = expect<StartTrial>(*f.broker, a);
    a.send(TrialStarted{st.trial_id, 1, 5, 1.0, "w", {}});
    wait_start_written(*f.broker, f.clock, f.db.path, 1);
  }
  f.stop();
  f.start(/*grace_ms=*/1000);
  REQUIRE(f.broker->turn(0).ok());
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running'") == 1);
  pass_time(*f.broker, f.clock, 1001);
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='lost'") == 1; });
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1);

  // Lost is final: cancelling it is refused, as for a failed trial.
  Peer cli(f.broker->endpoint(), "cli#1");
  int64_t lost_id = query_int(f.db.path, "SELECT id FROM trials WHERE state='lost'");
  cli.send(Cancel{"c", std::nullopt, lost_id});
  auto refused = expect<Error>(*f.broker, cli);
  CHECK(refused.code == "bad_request");
  CHECK(refused.message == "trial " + std::to_string(lost_id) + " is already lost");

  // `swept retry` takes lost trials back as it does failed ones.
  cli.send(Retry{"r", 1});
  CHECK(expect<Done>(*f.broker, cli).count == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='running'") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state IN ('queued', 'running')") == 1);
}

TEST_CASE("cancel stops queued and running trials - retry requeues failed ones") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 1);
  Peer cli(f.broker->endpoint(), "cli#1");
  cli.send(Submit{"s", kThreeTrials, "three.json"});
  auto sub = expect<Submitted>(*f.broker, cli);
  auto st = expect<StartTrial>(*f.broker, a);
  a.send(exited(st.trial_id, 1, 3));  // fails
  expect<ExitAck>(*f.broker, a);
  auto st2 = expect<StartTrial>(*f.broker, a);
  cli.send(Cancel{"c", sub.sweep_id, std::nullopt});
  auto done = expect<Done>(*f.broker, cli);
  CHECK(done.count == 1);  // trial 3 was never generated (lazy): nothing to stop
  auto stop = expect<StopTrial>(*f.broker, a);
  CHECK(stop.trial_id == st2.trial_id);
  TrialExited stopped = exited(st2.trial_id, 1, 0);
  stopped.cause = ExitCause::kStopped;
  stopped.exit_code.reset();
  stopped.signal = 15;
  a.send(stopped);
  expect<ExitAck>(*f.broker, a);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='stopped'") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='cancelled'") == 1);

  cli.send(Retry{"r", sub.sweep_id});
  auto retried = expect<Done>(*f.broker, cli);
  CHECK(retried.count == 1);
  auto again = expect<StartTrial>(*f.broker, a);
  CHECK(again.trial_id == st.trial_id);
  CHECK(again.attempt == 2);
  a.send(exited(again.trial_id, 2, 0));
  expect<ExitAck>(*f.broker, a);
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1; });
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE trial_id=" + std::to_string(st.trial_id)) == 2);

  cli.send(QueryTrials{"q", 999});
  CHECK(expect<Error>(*f.broker, cli).code == "not_found");
  cli.send(Submit{"bad", R"({"method": "grid", "parameters": {"lr": {"min": "abc"}}})", "bad.json"});
  auto err = expect<Error>(*f.broker, cli);
  CHECK(err.code == "bad_request");
  CHECK(err.message.find("bad.json") != std::string::npos);
}

TEST_CASE("a START_TRIAL that crossed the REGISTER: the unconfirmed attempt waits for its TRIAL_STARTED") {
  Fixture f;
  f.start();
  int64_t t1 = 0, t2 = 0;
  {
    Peer a(f.broker->endpoint(), "a#1");
    a.send(registration("a", 2));
    expect<RegisterAck>(*f.broker, a);
    a.send(Heartbeat{});  // recorded, and given work, from its next message
    REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "parameters": {"x": {"values": [1, 2]}}})").ok());
    t1 = expect<StartTrial>(*f.broker, a).trial_id;  // never confirmed before the scheduler dies
    t2 = expect<StartTrial>(*f.broker, a).trial_id;  // never reaches the agent at all
  }
  f.stop();
  f.start();
  Peer a(f.broker->endpoint(), "a#2");
  a.send(registration("a", 2));  // lists neither
  expect<RegisterAck>(*f.broker, a);
  a.send(Heartbeat{});  // recorded, and given work, from its next message
  // The START_TRIAL of t1 is read after the REGISTER left: the agent announces it.
  a.send(TrialStarted{t1, 1, 7, 1.0, "w", {}});
  wait_start_written(*f.broker, f.clock, f.db.path, 1);
  // t2 is never confirmed: after a liveness period it is requeued, costing no retry.
  // (The agent keeps heartbeating meanwhile, so it stays alive.)
  pass_time(*f.broker, f.clock, 200);
  int64_t seen = f.broker->stats().messages_in;
  a.send(Heartbeat{});
  turn_until(*f.broker, [&] { return f.broker->stats().messages_in > seen; }, {&a});
  pass_time(*f.broker, f.clock, 150);
  auto again = expect<StartTrial>(*f.broker, a);
  CHECK(again.trial_id == t2);
  CHECK(again.attempt == 2);
  CHECK(query_int(f.db.path, "SELECT attempts FROM trials WHERE id=" + std::to_string(t1)) == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE trial_id=" + std::to_string(t2) +
                                 " AND attempt=1 AND reason LIKE 'never started%'") == 1);
  a.send(exited(t1, 1, 0));
  a.send(exited(t2, 2, 0));
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1; }, {&a});
}


TEST_CASE("short trials get a successor waiting at their agent, which holds no place of its own") {
  Fixture f;
  f.start();
  Peer& agent = f.agent("a", 2, /*start_after=*/true);
  REQUIRE(f.broker->submit(kTenShortTrials).ok());
  auto first = starts(*f.broker, agent, 2);
  REQUIRE(first.size() == 2);  // two slots; nothing known yet of how long a trial runs
  CHECK(first[0].after_trial_id == 0);
  CHECK(first[1].after_trial_id == 0);

  // The first ends after 10 ms: its slot gets a trial at once, and each of
  // the two running trials gets one successor. No more than that.
  run_for(agent, first[0].trial_id, 100.0, 100.01);
  expect<ExitAck>(*f.broker, agent);
  auto next = starts(*f.broker, agent, 3);
  REQUIRE(next.size() == 3);
  std::map<int64_t, StartTrial> by_after;  // predecessor -> its successor
  int64_t fresh = 0;
  for (const StartTrial& st : next) {
    if (st.after_trial_id == 0) {
      fresh = st.trial_id;
    } else {
      CHECK(st.after_attempt == 1);
      by_after[st.after_trial_id] = st;
    }
  }
  REQUIRE(fresh != 0);
  REQUIRE(by_after.size() == 2);
  CHECK(by_after.count(first[1].trial_id) == 1);
  CHECK(by_after.count(fresh) == 1);
  // Dispatched trials are on record as running (waiting ones included).
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running'") == 4);

  // first[1] ends: its successor takes its place (no new free slot), and
  // gets a successor of its own.
  const StartTrial heir = by_after[first[1].trial_id];
  run_for(agent, first[1].trial_id, 100.0, 100.02);
  expect<ExitAck>(*f.broker, agent);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed' AND id=" +
                                 std::to_string(first[1].trial_id)) == 1);
  agent.send(TrialStarted{heir.trial_id, 1, 8, 100.02, "w", {}});
  auto later = starts(*f.broker, agent, 1);
  REQUIRE(later.size() == 1);
  CHECK(later[0].after_trial_id == heir.trial_id);

  // A waiting successor that its agent never started is requeued without
  // costing a retry when the agent is lost.
  pass_time(*f.broker, f.clock, 301);
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM agents WHERE state='lost'") == 1; });
  pass_time(*f.broker, f.clock, 1200);  // its lease, the margin and the report window are over
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running'") == 0; });
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 2);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE id=" + std::to_string(later[0].trial_id) +
                                 " AND state='queued'") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE trial_id=" + std::to_string(later[0].trial_id) +
                                 " AND reason LIKE 'never started%'") == 1);
}

TEST_CASE("no successors for an agent without start_after, for long trials, or while two sweeps wait") {
  // Two places, the first trial ends after `run_s`: what fills its place?
  auto after_first_end = [](bool feature, double run_s, int sweeps) {
    Fixture f;
    f.start();
    Peer& agent = f.agent("a", 2, feature);
    for (int i = 0; i < sweeps; ++i) REQUIRE(f.broker->submit(kTenShortTrials).ok());
    auto first = starts(*f.broker, agent, 2);
    REQUIRE(first.size() == 2);
    run_for(agent, first[0].trial_id, 100.0, 100.0 + run_s);
    return starts(*f.broker, agent, 1);
  };
  SUBCASE("the agent does not list the feature") {
    auto next = after_first_end(false, 0.01, 1);
    REQUIRE(next.size() == 1);
    CHECK(next[0].after_trial_id == 0);
  }
  SUBCASE("the sweep's trials run for seconds") {
    auto next = after_first_end(true, 5.0, 1);
    REQUIRE(next.size() == 1);
    CHECK(next[0].after_trial_id == 0);
  }
  SUBCASE("a second sweep waits for places too") {
    auto next = after_first_end(true, 0.01, 2);
    REQUIRE(next.size() == 1);
    CHECK(next[0].after_trial_id == 0);
  }
  SUBCASE("the same, short, alone, with the feature: successors (the control)") {
    CHECK(after_first_end(true, 0.01, 1).size() == 3);
  }
}

TEST_CASE("wait_for_change returns when a sweep ends, not at its timeout") {
  Fixture f;
  f.start();
  Peer& agent = f.agent("a", 1);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "parameters": {"x": {"values": [1]}}})").ok());
  auto st = expect<StartTrial>(*f.broker, agent);
  CHECK(f.broker->wait_for_change(0, std::chrono::milliseconds(0)) == 0);
  agent.send(exited(st.trial_id, 1, 0));
  expect<ExitAck>(*f.broker, agent);
  // The turn that recorded the end counted the change: a waiter with an
  // hour to spare returns at once with it.
  CHECK(f.broker->wait_for_change(0, std::chrono::hours(1)) >= 1);
}

TEST_CASE("hundreds of successors queued in one turn: exactly one behind each running trial") {
  Fixture f;
  f.start();
  Peer& agent = f.agent("a", 300, /*start_after=*/true);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true", "${args}"],
      "parameters": {"x": {"min": 1, "max": 1000}}})").ok());
  auto first = starts(*f.broker, agent, 300);
  REQUIRE(first.size() == 300);
  run_for(agent, first[0].trial_id, 100.0, 100.01);
  auto next = starts(*f.broker, agent, 301);
  // The freed place, and one successor behind each of the 300 running trials.
  REQUIRE(next.size() == 301);
  std::set<int64_t> behind;
  for (const StartTrial& st : next)
    if (st.after_trial_id) CHECK(behind.insert(st.after_trial_id).second);
  CHECK(behind.size() == 300);
  CHECK(behind.count(first[0].trial_id) == 0);  // it had ended
}

TEST_CASE("a commit that fails mid-turn: nothing acknowledged, the broker says why, a restart loses and doubles nothing") {
  auto& fault = store::testing::FaultVfs::install();
  // The failing VFS is process-wide: a failed check below must not leave it
  // failing the commits of the tests that run after this one.
  struct Healed {
    store::testing::FaultVfs& fault;
    ~Healed() { fault.fail_wal_writes(0); }
  } healed{fault};
  Fixture f;
  f.writer_options.vfs = store::testing::FaultVfs::kName;
  f.start();
  int64_t t1 = 0;
  {
    Peer a(f.broker->endpoint(), "a#1");
    a.send(registration("a", 1));
    expect<RegisterAck>(*f.broker, a);
    a.send(Heartbeat{});  // recorded, and given work, from its next message
    REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"],
        "metric": {"name": "loss", "goal": "minimize"}, "parameters": {"x": {"values": [1]}}})").ok());
    auto s1 = expect<StartTrial>(*f.broker, a);
    t1 = s1.trial_id;
    a.send(TrialStarted{t1, 1, 5, 1.0, "w", {}});
    a.send(Metrics{t1, 1, 1, {{0, "loss", 3.0}}, "", 0});
    turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM metrics") == 1; });

    // The disk fails under the turn that stores the last metrics and the exit.
    fault.fail_wal_writes(1000000);
    a.send(Metrics{t1, 1, 2, {{1, "loss", 2.0}}, "", 0});
    a.send(exited(t1, 1, 0, 2));
    Status failed;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (failed.ok() && std::chrono::steady_clock::now() < deadline) {
      failed = f.broker->turn(5);
      f.clock.advance_ms(10);
    }
    fault.fail_wal_writes(0);
    // The broker says what happened: the commit failed, with SQLite's reason.
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.code() == StatusCode::kIoError);
    CHECK(failed.message().find("commit failed") != std::string::npos);
    CHECK(failed.message().find("disk I/O error") != std::string::npos);
    CHECK(fault.failed_writes() > 0);
    // Nothing of that turn was acknowledged to the agent...
    while (auto m = a.poll()) {
      CHECK_FALSE(std::holds_alternative<ExitAck>(*m));
      if (auto* h = std::get_if<Heartbeat>(&*m))
        for (const auto& k : h->acked) CHECK(k.seq < 2);
    }
    // ...and nothing of it is in the file.
    CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM metrics") == 1);
    CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running'") == 1);
  }
  // A failed turn is fatal (swept scheduler exits with the message above);
  // it restarts on the same file and the agent re-sends what was not acked.
  f.stop();
  f.start();
  Peer a(f.broker->endpoint(), "a#2");
  Register r = registration("a", 1);
  r.finished = {exited(t1, 1, 0, 2)};
  a.send(r);
  auto ack = expect<RegisterAck>(*f.broker, a);
  a.send(Heartbeat{});  // recorded, and given work, from its next message
  REQUIRE(ack.acked.size() == 1);
  CHECK(ack.acked[0].seq == 1);  // batch 2 was lost with the failed commit: re-send it
  a.send(Metrics{t1, 1, 2, {{1, "loss", 2.0}}, "", 0});
  a.send(exited(t1, 1, 0, 2));
  expect<ExitAck>(*f.broker, a);
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1; }, {&a});
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts") == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM metrics WHERE trial_id=" + std::to_string(t1)) == 2);
  auto sums = store::sweep_summaries(f.store->connection(), std::nullopt);
  REQUIRE(sums.ok());
  REQUIRE(sums->front().best);
  CHECK(sums->front().best->value == doctest::Approx(2.0));
}

TEST_CASE("a lost trial is final: its agent coming back still running it gets a STOP_TRIAL, not the trial") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 1);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "max_retries": 0,
      "parameters": {"x": {"values": [1]}}})").ok());
  auto st = expect<StartTrial>(*f.broker, a);
  a.send(TrialStarted{st.trial_id, 1, 5, 1.0, "w", {}});
  wait_start_written(*f.broker, f.clock, f.db.path, 1);
  // Gone with no retries left: lost, and the sweep is over.
  a.send(Disconnect{"test"});
  const std::string lost = "SELECT COUNT(*) FROM trials WHERE id=" + std::to_string(st.trial_id) + " AND state='lost'";
  turn_until(*f.broker, [&] { return query_int(f.db.path, lost) == 1; });
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1);

  // It comes back still running that attempt: not adopted (docs/protocol.md,
  // Reconciliation), stopped as stale; its stop changes nothing.
  Register again = registration("a", 1);
  again.running = {{st.trial_id, 1, 5, 1.0}};
  a.send(again);
  expect<RegisterAck>(*f.broker, a);
  a.send(Heartbeat{});  // recorded, and given work, from its next message
  auto stop = expect<StopTrial>(*f.broker, a);
  CHECK(stop.trial_id == st.trial_id);
  TrialExited stopped = exited(st.trial_id, 1, 0);
  stopped.cause = ExitCause::kStopped;
  stopped.exit_code.reset();
  a.send(stopped);
  expect<ExitAck>(*f.broker, a);
  CHECK(query_int(f.db.path, lost) == 1);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running'") == 0);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM attempts WHERE state='lost'") == 1);
}

TEST_CASE("with the commit policy off: starts written in their turn, no successors, the same results") {
  Fixture f;
  f.commit = CommitPolicy::off();
  f.start();
  Peer& a = f.agent("a", 1, /*start_after=*/true);
  REQUIRE(f.broker->submit(kThreeTrials).ok());
  for (int n = 1; n <= 3; ++n) {
    std::vector<Message> mail;
    auto st = expect<StartTrial>(*f.broker, a, &mail);
    CHECK(st.after_trial_id == 0);  // never a successor
    a.send(TrialStarted{st.trial_id, st.attempt, 5, 1.0, "w", {}});
    // Written in the turn that read it: the fake clock does not move.
    turn_until(*f.broker, [&] {
      return query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE started_at IS NOT NULL") == n;
    });
    a.send(Metrics{st.trial_id, st.attempt, 1, {{0, "loss", 1.0 / n}}, "", 0});
    a.send(exited(st.trial_id, st.attempt, 0, 1));
    expect<ExitAck>(*f.broker, a);
  }
  turn_until(*f.broker, [&] { return query_int(f.db.path, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1; }, {&a});
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 3);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM metrics") == 3);
  CHECK(f.broker->stats().successors == 0);
}

// ---- multi-node trials (issue 25) ----

TEST_CASE("broker: a 2-node trial goes to two agents that run gangs, with node 0's address and a port of its range") {
  Fixture f;
  f.start();
  // An agent that predates gangs: offered nothing of a multi-node sweep.
  Peer& old = f.agent("old", 4);
  auto gang_agent = [&](const std::string& name, const std::string& addr) -> Peer& {
    f.peers.push_back(std::make_unique<Peer>(f.broker->endpoint(), name + "#1"));
    Peer& peer = *f.peers.back();
    Register reg = registration(name, 1);
    reg.features = {"gang"};
    reg.addr = addr;
    reg.ports_lo = 40100;
    reg.ports_hi = 40101;
    peer.send(reg);
    expect<RegisterAck>(*f.broker, peer);
    peer.send(Heartbeat{});  // recorded, and given work, from its next message
    return peer;
  };
  Peer& a = gang_agent("a", "10.9.0.1");
  Peer& b = gang_agent("b", "10.9.0.2");
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "resources": {"nodes": 2},
      "parameters": {"x": {"values": [1, 2]}}})").ok());
  auto on_a = starts(*f.broker, a, 1);
  auto on_b = starts(*f.broker, b, 1);
  // One slot each: one trial at a time, both nodes of it, and nothing for `old`.
  REQUIRE(on_a.size() == 1);
  REQUIRE(on_b.size() == 1);
  CHECK(starts(*f.broker, old, 0).empty());
  REQUIRE(on_a[0].gang);
  REQUIRE(on_b[0].gang);
  CHECK(on_a[0].trial_id == on_b[0].trial_id);
  const StartTrial& node0 = on_a[0].gang->node_rank == 0 ? on_a[0] : on_b[0];
  const StartTrial& node1 = on_a[0].gang->node_rank == 0 ? on_b[0] : on_a[0];
  CHECK(node1.gang->node_rank == 1);
  CHECK(node0.gang->nodes == 2);
  CHECK(node0.gang->master_addr == (&node0 == &on_a[0] ? "10.9.0.1" : "10.9.0.2"));
  CHECK(node1.gang->master_addr == node0.gang->master_addr);
  CHECK((node0.gang->master_port == 40100 || node0.gang->master_port == 40101));
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running' AND nodes IS NOT NULL") == 1);
  // Both nodes end 0: the trial completes, and the next goes out on a port
  // of the range again.
  Peer& p0 = &node0 == &on_a[0] ? a : b;
  Peer& p1 = &node0 == &on_a[0] ? b : a;
  run_for(p1, node1.trial_id, 1.0, 2.0);
  run_for(p0, node0.trial_id, 1.0, 2.0);
  auto next_a = starts(*f.broker, a, 1);
  auto next_b = starts(*f.broker, b, 1);
  REQUIRE(next_a.size() == 1);
  REQUIRE(next_a[0].gang);
  CHECK(next_a[0].trial_id != node0.trial_id);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 1);
}

TEST_CASE("broker: a gang node's TRIAL_EXITED is acknowledged only when the attempt ends") {
  Fixture f;
  f.start();
  auto gang_agent = [&](const std::string& name) -> Peer& {
    f.peers.push_back(std::make_unique<Peer>(f.broker->endpoint(), name + "#1"));
    Peer& peer = *f.peers.back();
    Register reg = registration(name, 1);
    reg.features = {"gang"};
    reg.ports_lo = 40100;
    reg.ports_hi = 40109;
    peer.send(reg);
    expect<RegisterAck>(*f.broker, peer);
    peer.send(Heartbeat{});
    return peer;
  };
  Peer& a = gang_agent("a");
  Peer& b = gang_agent("b");
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "resources": {"nodes": 2},
      "parameters": {"x": {"values": [1]}}})").ok());
  auto on_a = starts(*f.broker, a, 1);
  auto on_b = starts(*f.broker, b, 1);
  REQUIRE(on_a.size() == 1);
  REQUIRE(on_b.size() == 1);
  REQUIRE(on_a[0].gang);
  const bool a_first = on_a[0].gang->node_rank == 0;
  Peer& p0 = a_first ? a : b;
  Peer& p1 = a_first ? b : a;
  const int64_t id = on_a[0].trial_id;
  // Node 1 ends first: its exit is processed (the trial still runs), not acknowledged.
  p0.send(TrialStarted{id, 1, 7, 1.0, "w", {}});
  const int64_t before = f.broker->stats().messages_in;
  run_for(p1, id, 1.0, 2.0);
  turn_until(*f.broker, [&] { return f.broker->stats().messages_in >= before + 3; });
  std::vector<Message> seen;
  for (int i = 0; i < 20; ++i) {  // what the turns that read the exit sent has time to arrive
    REQUIRE(f.broker->turn(2).ok());
    while (auto m = p1.poll()) seen.push_back(*m);
  }
  for (const Message& m : seen) CHECK_FALSE(std::holds_alternative<ExitAck>(m));
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='running'") == 1);
  // Node 0 ends: the attempt completes, and both exits are acknowledged.
  p0.send(exited(id, 1, 0));
  expect<ExitAck>(*f.broker, p0);
  CHECK(expect<ExitAck>(*f.broker, p1).trial_id == id);
  CHECK(query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 1);
}

TEST_CASE("broker: a 2-node trial that waits past the bound gets both agents, however one-node trials keep coming") {
  Fixture f;
  f.gang_reserve_after_ms = 2000;
  f.commit.successors = false;
  f.start();
  auto gang_agent = [&](const std::string& name) -> Peer& {
    f.peers.push_back(std::make_unique<Peer>(f.broker->endpoint(), name + "#1"));
    Peer& peer = *f.peers.back();
    Register reg = registration(name, 1);
    reg.features = {"gang"};
    peer.send(reg);
    expect<RegisterAck>(*f.broker, peer);
    peer.send(Heartbeat{});  // recorded, and given work, from its next message
    return peer;
  };
  Peer& a = gang_agent("a");
  Peer& b = gang_agent("b");
  // A stream of one-node trials first, then one 2-node trial.
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "parameters": {"x": {"min": 1, "max": 200}}})").ok());
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "resources": {"nodes": 2},
      "parameters": {"y": {"values": [1]}}})").ok());
  std::map<Peer*, int64_t> running;  // the one-node trial each agent runs
  auto collect = [&](Peer& p, bool* gang) {
    for (const StartTrial& st : starts(*f.broker, p, 0, 3)) {
      if (st.gang) *gang = true;
      else running[&p] = st.trial_id;
    }
  };
  bool gang_a = false, gang_b = false;
  collect(a, &gang_a);
  collect(b, &gang_b);
  REQUIRE(running.count(&a));
  REQUIRE(running.count(&b));
  // Fake time passes in heartbeat steps, each turn waiting until the
  // broker has read both agents' heartbeats (they stay alive throughout).
  auto pass_ms = [&](int ms) {
    for (int t = 0; t < ms; t += 100) {
      f.clock.advance_ms(100);
      const int64_t seen = f.broker->stats().messages_in;
      a.send(Heartbeat{});
      b.send(Heartbeat{});
      turn_until(*f.broker, [&] { return f.broker->stats().messages_in >= seen + 2; });
    }
  };
  // Staggered ends: one agent frees every 500 ms, the other still busy, so
  // the two are never free together unless the broker holds one back.
  int64_t waited_ms = 0;
  bool held_back = false;
  for (int round = 0; round < 40 && !(gang_a && gang_b); ++round) {
    Peer& ending = round % 2 == 0 ? a : b;
    if (running.count(&ending)) {
      run_for(ending, running[&ending], 1.0, 1.1);
      running.erase(&ending);
    }
    pass_ms(500);
    waited_ms += 500;
    collect(a, &gang_a);
    collect(b, &gang_b);
    // Past the bound the freed agent is kept for the gang: no one-node trial takes it.
    if (waited_ms > 2000 + 500 && !running.count(&ending)) held_back = true;
  }
  CHECK(held_back);
  CHECK(gang_a);
  CHECK(gang_b);
  CHECK(waited_ms <= 2000 + 3 * 500);  // the bound, then the two agents freeing in turn
}

TEST_CASE("START_TRIAL carries the sweep's limits: resources.memory, pids (default 4096) and cpus") {
  Fixture f;
  f.start();
  Peer& a = f.agent("a", 4);
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"],
      "resources": {"memory": "8GiB", "pids": 64, "cpus": 2}, "parameters": {"x": {"values": [1]}}})").ok());
  auto st = expect<StartTrial>(*f.broker, a);
  CHECK(st.limits == swept::protocol::TrialLimits{int64_t{8} << 30, 64, 2});
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "parameters": {"x": {"values": [1]}}})").ok());
  auto plain = expect<StartTrial>(*f.broker, a);
  CHECK(plain.limits == swept::protocol::TrialLimits{0, 4096, 1});
}

// ---- parameter servers (issue 30) ----

TEST_CASE("broker: a trial with parameter servers gets every address and a port per process, apart on one host, "
          "and its servers are stopped once the workers end") {
  Fixture f;
  f.start();
  auto gang_agent = [&](const std::string& name) -> Peer& {
    f.peers.push_back(std::make_unique<Peer>(f.broker->endpoint(), name + "#1"));
    Peer& peer = *f.peers.back();
    Register reg = registration(name, 2);
    reg.features = {"gang"};
    reg.addr = "10.9.0.1";  // both agents on one host: one space of ports
    reg.ports_lo = 40100;
    reg.ports_hi = 40109;
    peer.send(reg);
    expect<RegisterAck>(*f.broker, peer);
    peer.send(Heartbeat{});
    return peer;
  };
  Peer& a = gang_agent("a");
  Peer& b = gang_agent("b");
  REQUIRE(f.broker->submit(R"({"method": "grid", "command": ["/bin/true"], "resources": {"nodes": 2, "ps": 2},
      "parameters": {"x": {"values": [1]}}})").ok());
  auto on_a = starts(*f.broker, a, 1);
  auto on_b = starts(*f.broker, b, 1);
  REQUIRE(on_a.size() == 1);
  REQUIRE(on_b.size() == 1);
  REQUIRE(on_a[0].gang);
  REQUIRE(on_b[0].gang);
  const bool a_first = on_a[0].gang->node_rank == 0;
  const StartTrial& node0 = a_first ? on_a[0] : on_b[0];
  const StartTrial& node1 = a_first ? on_b[0] : on_a[0];
  const protocol::Gang& g = *node0.gang;
  CHECK(g.nodes == 2);
  CHECK(g.addrs == std::vector<std::string>{"10.9.0.1", "10.9.0.1"});
  CHECK(g.ps_node == std::vector<int>{0, 1});  // round-robin
  REQUIRE(g.worker_ports.size() == 2);
  REQUIRE(g.ps_ports.size() == 2);
  CHECK(node1.gang->addrs == g.addrs);
  CHECK(node1.gang->worker_ports == g.worker_ports);
  CHECK(node1.gang->ps_ports == g.ps_ports);
  std::set<int> ports = {g.master_port, g.worker_ports[0], g.worker_ports[1], g.ps_ports[0], g.ps_ports[1]};
  CHECK(ports.size() == 5);  // never one port twice on the host
  for (int p : ports) CHECK((p >= 40100 && p <= 40109));
  // Both nodes run; each says its workers have ended: the servers are stopped.
  Peer& p0 = a_first ? a : b;
  Peer& p1 = a_first ? b : a;
  p0.send(TrialStarted{node0.trial_id, 1, 7, 1.0, "w", {}});
  p1.send(TrialStarted{node1.trial_id, 1, 8, 1.0, "w", {}});
  Heartbeat ended;
  ended.workers_ended = {{node0.trial_id, 1}};
  p1.send(ended);
  std::map<Peer*, std::vector<StopTrial>> stops;
  auto collect = [&](int turns) {
    for (int i = 0; i < turns; ++i) {
      REQUIRE(f.broker->turn(2).ok());
      for (Peer* p : {&p0, &p1})
        while (auto m = p->poll())
          if (auto* st = std::get_if<StopTrial>(&*m)) stops[p].push_back(*st);
    }
  };
  collect(20);
  CHECK(stops.empty());  // node 0's workers still run
  p0.send(ended);
  REQUIRE(swept::testing::eventually(
      [&] {
        collect(1);
        return stops[&p0].size() == 1 && stops[&p1].size() == 1;
      },
      10));
  CHECK(stops[&p0][0].reason == std::string(protocol::kWorkersEndedStop));
  CHECK(stops[&p1][0].trial_id == node0.trial_id);
  // Both nodes exit 0: the trial completed.
  TrialExited e = exited(node0.trial_id, 1, 0);
  p1.send(e);
  p0.send(e);
  REQUIRE(swept::testing::eventually(
      [&] {
        collect(1);
        return query_int(f.db.path, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 1;
      },
      10));
}
