// Issue 15's agent faults with real processes: a black-hole host beside a
// healthy one (host faults requeue without a retry, quarantine, release,
// self-check), REGISTER spam from one connection and from many, and the
// number of REGISTERs a scheduler restart brings. Waits on conditions with
// deadlines, never on fixed sleeps.
#include <zmq.hpp>

#include "common/protocol.h"
#include "scheduler/zmq_io.h"

#include "tests/harness.h"

using namespace swept::itest;
namespace fs = std::filesystem;
namespace pr = swept::protocol;

namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

std::string quarantine_of(const std::string& db, const std::string& agent) {
  return db_text(db, "SELECT quarantine FROM agents WHERE name='" + agent + "'");
}

}  // namespace

TEST_CASE("a black-hole host: its launch failures requeue trials without a retry, it is quarantined, released, and "
          "lifted once its self-check passes again") {
  TempDir dir;
  Scheduler sched(dir);
  // `bad`'s work directory is fine (its self-check passes) but the first
  // sweep's directory cannot be made in it: a file is in the way, so every
  // launch there fails for a reason of the host's.
  fs::create_directories(dir / "work-bad");
  write_file(dir / "work-bad/sweep-1", "in the way");
  auto bad = start_agent(dir, sched.endpoint, "bad", "none", 2);
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='bad' AND state='alive'") == 1; }));
  auto good = start_agent(dir, sched.endpoint, "good", "none", 2);
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='good' AND state='alive'") == 1; }));
  // No retries: a trial that spent one would end failed or lost.
  write_file(dir / "sweep.json", R"({"method": "grid", "max_retries": 0, "command": ["sleep", "0.2"],
    "parameters": {"x": {"values": [1, 2, 3, 4, 5, 6, 7, 8]}}})");
  std::string out;
  REQUIRE_MESSAGE(run_command({kSwept, "submit", dir / "sweep.json", "--scheduler", sched.endpoint}, dir / "submit.log",
                              &out) == 0,
                  out);
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(sched.db, 1); }, 60), sched.process->log());
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE sweep_id=1 AND state='completed' AND agent='good'") == 8);
  // bad got trials and could start none: each attempt there ended `queued`
  // (requeued at no cost), and it was quarantined after 3 in a row.
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM attempts WHERE agent='bad'") >= 3);
  INFO(db_text(sched.db, "SELECT group_concat(state || ': ' || reason, ' | ') FROM attempts WHERE agent='bad'"));
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM attempts WHERE agent='bad' AND (state <> 'queued' OR reason NOT LIKE "
                         "'%requeued (costs no retry): agent bad could not start it: cannot create the "
                         "trial directory%')") == 0);
  const std::string reason = quarantine_of(sched.db, "bad");
  CHECK_MESSAGE(reason.find("3 host faults in a row") != std::string::npos, reason);
  CHECK(quarantine_of(sched.db, "good").empty());
  // Visible in `swept agents`, with the reason.
  REQUIRE(run_command({kSwept, "agents", "--scheduler", sched.endpoint}, dir / "agents.log", &out) == 0);
  CHECK_MESSAGE(out.find("quarantined: 3 host faults in a row") != std::string::npos, out);
  // With each agent's containment mode, as its REGISTER named it (which
  // mode depends on the machine: a delegated cgroup v2, or the fallback).
  const std::string mode = db_text(sched.db, "SELECT containment FROM agents WHERE name='good'");
  // ... and the limits it sets (agent/limits.h), e.g. "cgroup; limits memory,pids".
  CHECK_MESSAGE((mode.rfind("cgroup; ", 0) == 0 || mode.rfind("subreaper; ", 0) == 0), mode);
  CHECK_MESSAGE(out.find("good (") != std::string::npos, out);
  CHECK_MESSAGE(out.find("CPU slots used, containment: " + mode + "\n") != std::string::npos, out);
  REQUIRE(run_command({kSwept, "agents", "--scheduler", sched.endpoint, "--json"}, dir / "agents.log", &out) == 0);
  CHECK_MESSAGE(out.find("\"quarantine\": \"3 host faults in a row") != std::string::npos, out);
  CHECK_MESSAGE(out.find("\"containment\": \"" + mode + "\"") != std::string::npos, out);
  // The same from the database file.
  REQUIRE(run_command({kSwept, "agents", "--db", sched.db}, dir / "agents.log", &out) == 0);
  CHECK_MESSAGE(out.find("CPU slots used, containment: " + mode + "\n") != std::string::npos, out);

  // An operator releases it; releasing an agent that is not quarantined is
  // a usage error naming it.
  REQUIRE_MESSAGE(run_command({kSwept, "agents", "--release", "bad", "--scheduler", sched.endpoint}, dir / "release.log",
                              &out) == 0,
                  out);
  CHECK_MESSAGE(out.find("released agent bad") != std::string::npos, out);
  CHECK(quarantine_of(sched.db, "bad").empty());
  CHECK(run_command({kSwept, "agents", "--release", "good", "--scheduler", sched.endpoint}, dir / "release.log", &out) ==
        2);
  CHECK_MESSAGE(out.find("\"good\" is not quarantined") != std::string::npos, out);

  // Its work directory goes bad as a whole: its self-check fails and it is
  // quarantined at once; fixed, the check passes and the quarantine lifts.
  fs::rename(dir / "work-bad", dir / "work-bad.saved");
  write_file(dir / "work-bad", "not a directory");
  REQUIRE_MESSAGE(eventually([&] { return quarantine_of(sched.db, "bad").find("its self-check failed") != std::string::npos; }),
                  bad->log());
  fs::remove(dir / "work-bad");
  fs::rename(dir / "work-bad.saved", dir / "work-bad");
  REQUIRE_MESSAGE(eventually([&] { return quarantine_of(sched.db, "bad").empty(); }), bad->log());
  CHECK(sched.process->log().find("released from quarantine: its self-check passes again") != std::string::npos);
  CHECK(bad->running());
  CHECK(good->running());
}

TEST_CASE("a scheduler restarted under a live agent gets exactly one REGISTER from it") {
  TempDir dir;
  const std::string db = dir / "swept.db";
  // A liveness (20 x 200 ms) longer than the restart takes: the agent's old
  // connection survives it with messages queued, each of which the new
  // scheduler answers with a DISCONNECT.
  auto start = [&](const std::string& bind, const std::string& log) {
    std::string endpoint_file = dir / ("endpoint-" + log);
    auto p = std::make_unique<Process>(
        std::vector<std::string>{kSwept, "scheduler", "--bind", bind, "--db", db, "--heartbeat-ms", "200", "--liveness",
                                 "20", "--endpoint-file", endpoint_file},
        dir / log);
    REQUIRE_MESSAGE(eventually([&] { return fs::exists(endpoint_file); }, 20), p->log());
    std::string endpoint = read_file(endpoint_file);
    while (!endpoint.empty() && endpoint.back() == '\n') endpoint.pop_back();
    return std::make_pair(std::move(p), endpoint);
  };
  auto started = start("tcp://127.0.0.1:*", "first.log");
  std::unique_ptr<Process> first = std::move(started.first);
  const std::string endpoint = started.second;
  auto agent = start_agent(dir, endpoint, "a", "none", 1);
  REQUIRE(eventually([&] { return count(first->log(), "agent a registered") == 1; }));
  // A trial that prints a metric line every 20 ms (150 in all) and writes
  // how far it got: its METRICS batches keep leaving while the scheduler is
  // down, queued on the agent's old connection.
  const std::string progress = dir / "progress";
  write_file(dir / "ticker.sh", "i=0; while [ $i -lt 150 ]; do i=$((i+1)); printf '{\"step\": %d, \"loss\": 1}\\n' $i; "
                                "echo $i > " + progress + "; sleep 0.02; done\n");
  write_file(dir / "sweep.json", R"({"method": "grid", "command": ["/bin/sh", ")" + dir / "ticker.sh" +
                                     R"("], "parameters": {"x": {"value": 1}}})");
  std::string out;
  REQUIRE_MESSAGE(run_command({kSwept, "submit", dir / "sweep.json", "--scheduler", endpoint}, dir / "submit.log", &out) == 0,
                  out);
  auto step = [&] { return std::atoi(read_file(progress).c_str()); };
  REQUIRE(eventually([&] { return step() >= 10; }));
  // Kill the scheduler; restart it on the same address and database once
  // the trial has printed 25 more lines (~10 batches queued meanwhile).
  first->signal(SIGKILL);
  first->wait();
  const int at_kill = step();
  REQUIRE(eventually([&] { return step() >= at_kill + 25 || step() >= 150; }));
  auto restarted = start(endpoint, "second.log");
  std::unique_ptr<Process> second = std::move(restarted.first);
  REQUIRE(restarted.second == endpoint);
  REQUIRE_MESSAGE(eventually([&] { return count(second->log(), "agent a registered") >= 1; }), agent->log());
  // The trial ends through the new session: every DISCONNECT the queued
  // messages drew has been answered by then.
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(db, 1); }), second->log());
  CHECK(db_int(db, "SELECT COUNT(*) FROM metrics WHERE name='loss'") == 150);
  CHECK_MESSAGE(count(second->log(), "agent a registered") == 1, second->log());
}

namespace {

pr::Register bogus(const std::string& name) {
  pr::Register r;
  r.name = name;
  r.host = "nowhere";
  r.session = "0000000000000000";
  r.pid = 1;
  r.slots = 0;
  for (int g = 0; g < 8; ++g) r.gpus.push_back({g, "GPU-" + std::to_string(g), "fake", 1 << 30});
  return r;
}

// The next message `sock` receives (10 s deadline).
pr::Message next_message(zmq::socket_t& sock) {
  auto got = swept::zmqio::receive(sock, false, false);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  pr::Decoded d = pr::decode((*got)->frames);
  REQUIRE_MESSAGE(d.ok(), d.error);
  return *d.message;
}

}  // namespace

TEST_CASE("REGISTER spam: one agent per connection, unkeyed REGISTERs throttled and rowless until heard, idle "
          "agents leave no row, the rest go after the retention") {
  TempDir dir;
  const std::string db = dir / "swept.db";
  const std::string endpoint_file = dir / "endpoint";
  Process sched({kSwept, "scheduler", "--bind", "tcp://127.0.0.1:*", "--db", db, "--heartbeat-ms", "300", "--liveness",
                 "5", "--agent-display-s", "1", "--forget-agents-after-s", "8", "--unkeyed-register-rate", "4",
                 "--endpoint-file", endpoint_file},
                dir / "scheduler.log");
  REQUIRE_MESSAGE(eventually([&] { return fs::exists(endpoint_file); }, 20), sched.log());
  std::string endpoint = read_file(endpoint_file);
  while (!endpoint.empty() && endpoint.back() == '\n') endpoint.pop_back();
  auto real = start_agent(dir, endpoint, "real", "none", 1);
  REQUIRE(eventually([&] { return db_int(db, "SELECT COUNT(*) FROM agents WHERE name='real' AND state='alive'") == 1; }));

  zmq::context_t ctx(1);
  auto dealer = [&] {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 10000);
    s.connect(endpoint);
    return s;
  };
  {
    // One connection, 100 names: the first is registered, the rest refused;
    // it never says anything more, so it leaves no row.
    zmq::socket_t one = dealer();
    for (int i = 0; i < 100; ++i) REQUIRE(swept::zmqio::send(one, "", pr::encode(bogus("one-" + std::to_string(i)))).ok());
    int acks = 0, refused = 0;
    for (int i = 0; i < 100; ++i) {
      pr::Message m = next_message(one);
      if (std::holds_alternative<pr::RegisterAck>(m)) ++acks;
      if (auto* r = std::get_if<pr::RegisterReject>(&m)) {
        ++refused;
        if (refused == 1) CHECK_MESSAGE(r->code == "one_agent_per_connection", r->message);
        if (refused == 1) CHECK_MESSAGE(r->message.find("already registered agent \"one-0\"") != std::string::npos, r->message);
      }
    }
    CHECK(acks == 1);
    CHECK(refused == 99);
  }
  std::vector<zmq::socket_t> many;
  std::vector<int> admitted;
  {
    // 200 connections at once, one bogus agent each, 8 GPUs each: admitted at
    // the unkeyed rate (4 a second here, a burst of 8), the rest throttled.
    for (int i = 0; i < 200; ++i) {
      many.push_back(dealer());
      REQUIRE(swept::zmqio::send(many.back(), "", pr::encode(bogus("many-" + std::to_string(i)))).ok());
    }
    int throttled = 0;
    for (int i = 0; i < 200; ++i) {
      pr::Message m = next_message(many[i]);
      if (std::holds_alternative<pr::RegisterAck>(m)) {
        admitted.push_back(i);
        // It heartbeats at once, as agents do: now it is an agent, with a row.
        REQUIRE(swept::zmqio::send(many[i], "", pr::encode(pr::Heartbeat{})).ok());
      }
      if (auto* r = std::get_if<pr::RegisterReject>(&m)) {
        CHECK_MESSAGE(r->code == "throttled", r->message);
        CHECK(r->retry_after_ms == 1000);
        ++throttled;
      }
    }
    CHECK(admitted.size() >= 6);  // the burst of 8, less the real agent's and one-0's tokens
    CHECK(throttled > 0);
    CHECK(admitted.size() + throttled == 200);
    // Rows and GPUs for the admitted ones; none for the throttled, nor for
    // one-0, which never said anything after its REGISTER.
    REQUIRE(eventually(
        [&] { return db_int(db, "SELECT COUNT(*) FROM agents WHERE name LIKE 'many-%'") == int64_t(admitted.size()); }));
    CHECK(db_int(db, "SELECT COUNT(*) FROM agent_gpus WHERE agent LIKE 'many-%'") == int64_t(8 * admitted.size()));
    CHECK(db_int(db, "SELECT COUNT(*) FROM agents WHERE name LIKE 'one-%'") == 0);
    // One of them reports a trial (one the scheduler never gave: it is told
    // to forget it): an agent that ran something keeps its row when it goes.
    pr::TrialExited e;
    e.trial_id = 999999;
    e.attempt = 1;
    e.cause = pr::ExitCause::kExited;
    e.ended_at = 1.0;
    REQUIRE(swept::zmqio::send(many[admitted.front()], "", pr::encode(e)).ok());
  }
  const std::string worker = "many-" + std::to_string(admitted.front());
  // Silent past liveness: the idle ones leave no row; the one that reported
  // is lost, still listed by --all.
  // (The worker spoke last, so the idle ones may be gone before it is
  // declared lost: wait for both.)
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        return db_int(db, "SELECT COUNT(*) FROM agents") == 2 &&
                               db_text(db, "SELECT state FROM agents WHERE name='" + worker + "'") == "lost";
                      },
                      30),
                  sched.log());
  std::string out;
  REQUIRE(run_command({kSwept, "agents", "--all", "--scheduler", endpoint}, dir / "agents.log", &out) == 0);
  CHECK_MESSAGE(out.find(worker + " (nowhere): lost") != std::string::npos, out);
  // Gone from the live view after the display window (1 s); the real agent stays.
  REQUIRE(eventually([&] {
    run_command({kSwept, "agents", "--scheduler", endpoint}, dir / "agents.log", &out);
    return out.find("many-") == std::string::npos && out.find("one-0") == std::string::npos;
  }));
  CHECK_MESSAGE(out.find("real (") != std::string::npos, out);
  // Deleted from the database after the retention (8 s), GPUs too; the real agent stays.
  REQUIRE_MESSAGE(eventually([&] { return db_int(db, "SELECT COUNT(*) FROM agents") == 1; }, 60), sched.log());
  CHECK(db_int(db, "SELECT COUNT(*) FROM agent_gpus") == 0);
  CHECK(db_text(db, "SELECT name FROM agents") == "real");
  CHECK(sched.log().find("forgot ") != std::string::npos);
}

TEST_CASE("QUERY_TRIALS is paged: a reply holds at most a page, swept trials pages through the whole sweep") {
  TempDir dir;
  Scheduler sched(dir);
  // A finished sweep of one trial, then 2,999 more rows written straight
  // into the database (as a long sweep would have left them).
  write_file(dir / "sweep.json", R"({"method": "grid", "command": ["true"], "parameters": {"x": {"value": 1}}})");
  std::string out;
  REQUIRE(run_command({kSwept, "submit", dir / "sweep.json", "--scheduler", sched.endpoint}, dir / "submit.log", &out) == 0);
  auto agent = start_agent(dir, sched.endpoint, "a");
  REQUIRE(eventually([&] { return sweep_done(sched.db, 1); }));
  {
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(sched.db.c_str(), &h) == SQLITE_OK);
    sqlite3_busy_timeout(h, 10000);
    REQUIRE(sqlite3_exec(h,
                         "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2999) "
                         "INSERT INTO trials(sweep_id, idx, params, command, state, attempts, created_at, metric_value) "
                         "SELECT 1, i, '{\"x\": ' || i || '}', '[\"true\"]', 'completed', 1, 0, i FROM n",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(h);
  }
  // One request without a limit: the first page only (1,000), and where to go on.
  zmq::context_t ctx(1);
  zmq::socket_t client(ctx, zmq::socket_type::dealer);
  client.set(zmq::sockopt::linger, 0);
  client.set(zmq::sockopt::rcvtimeo, 10000);
  client.connect(sched.endpoint);
  REQUIRE(swept::zmqio::send(client, "", {std::string(swept::protocol::kProtocolId), "QUERY_TRIALS", R"({"request_id": "q", "sweep_id": 1})"}).ok());
  pr::Message reply = next_message(client);
  auto* page = std::get_if<pr::Trials>(&reply);
  REQUIRE(page);
  CHECK(page->trials.size() == 1000);
  CHECK(page->next_after_index == 999);
  // The CLI pages through all 3,000, in order, each once.
  REQUIRE(run_command({kSwept, "trials", "1", "--json", "--scheduler", sched.endpoint}, dir / "trials.log", &out) == 0);
  nlohmann::json rows = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_MESSAGE(rows.is_array(), out.substr(0, 500));
  REQUIRE(rows.size() == 3000);
  for (size_t i = 0; i < rows.size(); ++i) CHECK(rows[i]["index"] == static_cast<int64_t>(i));
}

namespace {

// The resident memory of process `pid` in MiB (VmRSS), -1 if unreadable.
int64_t rss_mib(pid_t pid) {
  std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
  size_t at = status.find("VmRSS:");
  if (at == std::string::npos) return -1;
  return std::atoll(status.c_str() + at + 6) / 1024;
}

}  // namespace

TEST_CASE("a peer flooding big and oversized messages, reading no reply: a real agent is not lost, the scheduler's "
          "memory stays bounded") {
  TempDir dir;
  Scheduler sched(dir);
  auto agent = start_agent(dir, sched.endpoint, "real", "none", 1);
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='real' AND state='alive'") == 1; }));
  const int64_t rss_before = rss_mib(sched.process->pid());
  REQUIRE(rss_before > 0);
  zmq::context_t ctx(1);
  zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
  rogue.set(zmq::sockopt::linger, 0);
  rogue.set(zmq::sockopt::sndhwm, 0);  // queue everything it is given
  rogue.set(zmq::sockopt::rcvtimeo, 60000);
  rogue.connect(sched.endpoint);
  // 10 SUBMITs of 4 MiB (under the limit: decoded, refused, answered) and
  // 20 of 40 MiB (over it: the connection is dropped before the scheduler
  // holds them), then a small query.
  const std::string big = R"({"request_id": "r", "spec": ")" + std::string(4 << 20, 'x') + R"("})";
  const std::string huge = R"({"request_id": "h", "spec": ")" + std::string(40 << 20, 'y') + R"("})";
  for (int i = 0; i < 20; ++i) {
    if (i < 10) REQUIRE(swept::zmqio::send(rogue, "", {std::string(swept::protocol::kProtocolId), "SUBMIT", big}).ok());
    REQUIRE(swept::zmqio::send(rogue, "", {std::string(swept::protocol::kProtocolId), "SUBMIT", huge}).ok());
  }
  REQUIRE(swept::zmqio::send(rogue, "", {std::string(swept::protocol::kProtocolId), "QUERY_SWEEPS", R"({"request_id": "last"})"}).ok());
  // Until the query is answered (the flood is behind it), the scheduler's
  // memory is sampled: it never holds the flood.
  int64_t rss_max = 0;
  bool answered = eventually(
      [&] {
        rss_max = std::max(rss_max, rss_mib(sched.process->pid()));
        auto got = swept::zmqio::receive(rogue, false, true);
        if (!got.ok() || !got->has_value()) return false;
        pr::Decoded d = pr::decode((*got)->frames);
        auto* s = d.ok() ? std::get_if<pr::Sweeps>(&*d.message) : nullptr;
        return s && s->request_id == "last";
      },
      120);
  CHECK(answered);
  MESSAGE("scheduler VmRSS " << rss_before << " MiB before, at most " << rss_max << " MiB during the flood");
  CHECK(rss_max < rss_before + 300);
  // The real agent was never declared lost; it still runs trials.
  CHECK(sched.process->log().find("agent real missed") == std::string::npos);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='real' AND state='alive'") == 1);
  write_file(dir / "sweep.json", R"({"method": "grid", "command": ["true"], "parameters": {"x": {"values": [1, 2]}}})");
  int64_t sweep = submit(dir, sched.endpoint, read_file(dir / "sweep.json"));
  CHECK(eventually([&] { return sweep_done(sched.db, sweep); }));
}

TEST_CASE("swept run whose one agent is quarantined stops and says why, not that the trials are too big") {
  TempDir dir;
  // The sweep's folder under the work directory is a file: the agent cannot
  // make a trial's directory (a host fault), three times in a row.
  fs::create_directories(dir / "w");
  write_file(dir / "w/sweep-1", "");
  write_file(dir / "sweep.json", R"({"method": "grid", "command": ["/bin/true"], "parameters": {"x": {"values": [1, 2, 3]}}})");
  std::string out;
  int rc = run_command({kSwept, "run", dir / "sweep.json", "--db", dir / "swept.db", "--workdir", dir / "w",
                        "--dashboard", "off", "--progress", "off"},
                       dir / "run.log", &out, 60);
  CHECK_MESSAGE(rc == 1, out);
  CHECK_MESSAGE(out.find("swept run: every registered agent is quarantined: local (3 host faults in a row") !=
                    std::string::npos, out);
  CHECK_MESSAGE(out.find("need more than this machine offers") == std::string::npos, out);
  CHECK(db_int(dir / "swept.db", "SELECT COUNT(*) FROM trials WHERE state IN ('queued', 'running')") == 0);
}
