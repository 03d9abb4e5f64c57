// Issue 15's faults with real processes: two schedulers on one database, a
// stale lock left by a SIGKILLed scheduler, bad flags and bad database files,
// an agent whose lease ran out while the scheduler was frozen, a scheduler
// stopped past liveness that must not blame its agents.
// Waits on conditions with deadlines, never on fixed sleeps.
#include <sys/stat.h>

#include <zmq.hpp>

#include "common/protocol.h"
#include "scheduler/zmq_io.h"

#include "tests/harness.h"

using namespace swept::itest;

TEST_CASE("a second scheduler on the same database is refused naming the holder, a SIGKILLed holder's lock does not block a restart") {
  TempDir dir;
  auto first = std::make_unique<Scheduler>(dir);
  const std::string db = first->db;
  // The second one, on its own port, the same --db: refused, exit 1, naming
  // the first one's pid and address.
  std::string out;
  int rc = run_command({kSwept, "scheduler", "--bind", "tcp://127.0.0.1:*", "--db", db}, dir / "second.log", &out, 20);
  CHECK_MESSAGE(rc == 1, out);
  CHECK_MESSAGE(out.find("in use by a scheduler") != std::string::npos, out);
  CHECK_MESSAGE(out.find("pid " + std::to_string(first->process->pid())) != std::string::npos, out);
  CHECK_MESSAGE(out.find(first->endpoint) != std::string::npos, out);
  // `swept run` on the same database is refused the same way.
  write_file(dir / "sweep.json", R"({"method": "grid", "command": ["true"], "parameters": {"x": {"value": 1}}})");
  rc = run_command({kSwept, "run", dir / "sweep.json", "--db", db, "--dashboard", "off"}, dir / "run.log", &out, 20);
  CHECK_MESSAGE(rc == 1, out);
  CHECK_MESSAGE(out.find("in use by a scheduler") != std::string::npos, out);
  // The holder SIGKILLed: its lock file stays, its lock does not.
  first->process->signal(SIGKILL);
  first->process->wait();
  REQUIRE(std::filesystem::exists(db + ".lock"));
  Scheduler restarted(dir);  // REQUIREs that it comes up and listens
  CHECK(restarted.process->running());
}

namespace {

// Runs `swept ARGS` as a user who cannot write the database's folder: as
// root, through setpriv as nobody; otherwise with the folder made read-only.
int run_as_reader(const TempDir& dir, std::vector<std::string> args, std::string* out) {
  std::vector<std::string> argv;
  if (::geteuid() == 0) {
    argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", kSwept};
    ::chmod(dir.path().c_str(), 0755);
  } else {
    argv = {kSwept};
    ::chmod(dir.path().c_str(), 0555);
  }
  argv.insert(argv.end(), args.begin(), args.end());
  int rc = run_command(argv, "/tmp/swept-reader-" + std::to_string(::getpid()) + ".log", out);
  ::chmod(dir.path().c_str(), 0700);
  return rc;
}

}  // namespace

TEST_CASE("a reader who cannot write the database's folder reads a WAL database, or says why not and what to do") {
  TempDir dir;
  const std::string db = dir / "swept.db";
  std::string out;
  {
    // A sweep recorded, then the scheduler stopped cleanly: no -wal, no -shm.
    write_file(dir / "sweep.json",
               R"({"name": "ro", "method": "grid", "command": ["true"], "parameters": {"x": {"values": [1, 2]}}})");
    int rc = run_command({kSwept, "run", dir / "sweep.json", "--db", db, "--dashboard", "off", "--progress", "off",
                          "--workdir", dir / "work"},
                         dir / "run.log", &out, 60);
    REQUIRE_MESSAGE(rc == 0, out);
  }
  REQUIRE_FALSE(std::filesystem::exists(db + "-shm"));
  int rc = run_as_reader(dir, {"status", "--db", db}, &out);
  CHECK_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(out.find("ro") != std::string::npos, out);

  // A scheduler killed with SIGKILL: -wal and -shm stay, and are read.
  auto sched = std::make_unique<Scheduler>(dir);
  submit(dir, sched->endpoint, R"({"name": "second", "method": "grid", "command": ["true"], "parameters": {"x": {"value": 1}}})");
  sched->process->signal(SIGKILL);
  sched->process->wait();
  REQUIRE(std::filesystem::exists(db + "-wal"));
  REQUIRE(std::filesystem::exists(db + "-shm"));
  rc = run_as_reader(dir, {"status", "--db", db}, &out);
  CHECK_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(out.find("second") != std::string::npos, out);

  // A WAL with data but no -shm: no safe way to read; the message says why and what to do.
  std::filesystem::remove(db + "-shm");
  if (std::filesystem::file_size(db + "-wal") > 0) {
    rc = run_as_reader(dir, {"status", "--db", db}, &out);
    CHECK_MESSAGE(rc == 1, out);
    CHECK_MESSAGE(out.find("is not writable by this user") != std::string::npos, out);
    CHECK_MESSAGE(out.find("-wal") != std::string::npos, out);
  }
}

TEST_CASE("swept status, trials and best escape terminal control sequences from names and values") {
  TempDir dir;
  const std::string db = dir / "swept.db";
  // ESC ] (retitle), BEL, ESC [ (colour, clear screen), CR, and a C1 CSI.
  write_file(dir / "sweep.json",
             R"({"name": "evil\u001b]0;pwned\u0007\u001b[2J", "method": "grid", "command": ["true"],)"
             R"( "parameters": {"x": {"values": ["a\u001b[31mred\r\u009b1m"]}}})");
  std::string out;
  int rc = run_command({kSwept, "run", dir / "sweep.json", "--db", db, "--dashboard", "off", "--progress", "off",
                        "--workdir", dir / "work"},
                       dir / "run.log", &out, 60);
  REQUIRE_MESSAGE(rc == 0, out);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"status", "--db", db}, {"status", "1", "--db", db}, {"trials", "1", "--db", db}}) {
    std::vector<std::string> argv{kSwept};
    argv.insert(argv.end(), args.begin(), args.end());
    rc = run_command(argv, dir / "out.log", &out);
    INFO(args[0], " ", args.size(), ": ", out);
    CHECK(rc == 0);
    CHECK(out.find('\x1b') == std::string::npos);
    CHECK(out.find('\x07') == std::string::npos);
    CHECK(out.find('\r') == std::string::npos);
    CHECK(out.find("\xc2\x9b") == std::string::npos);
    if (args[0] == "trials") {
      CHECK(out.find("x=a\\x1b[31mred\\x0d\\u009b1m") != std::string::npos);
    } else {
      CHECK(out.find("evil\\x1b]0;pwned\\x07\\x1b[2J") != std::string::npos);
    }
  }
}

TEST_CASE("a flood of malformed messages is logged throttled, with the count of the lines not shown") {
  TempDir dir;
  Scheduler sched(dir);
  zmq::context_t ctx(1);
  zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
  rogue.set(zmq::sockopt::linger, 0);
  rogue.set(zmq::sockopt::rcvtimeo, 10000);
  rogue.connect(sched.endpoint);
  const int kFlood = 500;
  for (int i = 0; i < kFlood; ++i)
    REQUIRE(swept::zmqio::send(rogue, "", {std::string(swept::protocol::kProtocolId), "METRICS", "{\"trial_id\": \"x\"}"}).ok());
  // Every one is still answered.
  for (int i = 0; i < kFlood; ++i) {
    auto got = swept::zmqio::receive(rogue, false, false);
    REQUIRE(got.ok());
    REQUIRE(got->has_value());
  }
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
    return n;
  };
  // The count of the rest is written once the window is over (10 s).
  REQUIRE_MESSAGE(eventually([&] { return sched.process->log().find("more like this") != std::string::npos; }, 30),
                  sched.process->log().substr(0, 2000));
  const std::string log = sched.process->log();
  // 20 a window (and the last one quoted in each summary); the flood may
  // straddle two windows on a slow machine.
  CHECK(count(log, "refused a message from a client") <= 42);
  CHECK(count(log, "more like this") <= 2);
}

TEST_CASE("an agent whose lease ran out while the scheduler was frozen gets work again once it is back: a lease is no drain") {
  // Issue 15's chaos test found it with a link cut: the trials an agent
  // stops at the end of its lease end with cause agent_shutdown, which the
  // scheduler took for the agent leaving, and it sent that healthy agent no
  // more work for the rest of its session. Here the silence comes from the
  // scheduler (SIGSTOP), so that it needs no network namespaces.
  TempDir dir;
  Scheduler sched(dir);
  auto agent = start_agent(dir, sched.endpoint, "a", "none", 1);
  // One slot: trial 0 (3 s) runs when the scheduler freezes; 1 and 2 wait.
  int64_t sweep = submit(dir, sched.endpoint,
                         R"({"method": "grid", "max_retries": 5, "command": [")" + kTestsDir + R"(/trial.sh", "${args}"],
                             "parameters": {"mode": {"value": "normal"}, "steps": {"value": 1},
                                            "secs": {"values": [3, 0.1, 0.2]}}})");
  // Running there, as the agent confirmed (TRIAL_STARTED): so the agent has
  // its lease. Under load its first REGISTER_ACK can come after it gave up
  // that connection, while the scheduler already placed the trial there.
  REQUIRE(eventually([&] {
    return db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE agent='a' AND state='running' AND started_at IS NOT NULL") == 1;
  }));
  sched.process->signal(SIGSTOP);
  // The lease (2 x 100 ms x 5) runs out: the agent stops trial 0.
  const bool stopped = eventually([&] { return agent->log().find("lease expired") != std::string::npos; }, 30);
  sched.process->signal(SIGCONT);
  REQUIRE_MESSAGE(stopped, agent->log());
  // Back in touch, the same agent runs trial 0 again and the other two.
  const bool done = eventually([&] { return sweep_done(sched.db, sweep); }, 60);
  CHECK_MESSAGE(done, "the agent got no work once its lease had run out:\n" << sched.process->log());
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE sweep_id=" + std::to_string(sweep) +
                             " AND state='completed'") == 3);
  check_final_invariants(sched.db, sweep);
}

TEST_CASE("a scheduler stopped past liveness (SIGSTOP) declares no agent lost on its return, and reruns nothing") {
  // A scheduler starved of CPU, or stopped, must not blame its agents for
  // its own silence (docs/protocol.md, "Heartbeats"). Heartbeats of 300 ms
  // and a liveness of 3: the agent gives up the connection after 900 ms of
  // silence and reconnects at once; its lease (1.8 s, SIGTERM 100 ms before)
  // leaves room between the two for the test to wake the scheduler.
  TempDir dir;
  const std::string db = dir / "swept.db", endpoint_file = dir / "endpoint";
  Process sched({kSwept, "scheduler", "--bind", "tcp://127.0.0.1:*", "--db", db, "--heartbeat-ms", "300",
                 "--liveness", "3", "--endpoint-file", endpoint_file},
                dir / "scheduler.log");
  REQUIRE_MESSAGE(eventually([&] { return std::filesystem::exists(endpoint_file); }, 20), sched.log());
  std::string endpoint = read_file(endpoint_file);
  while (!endpoint.empty() && endpoint.back() == '\n') endpoint.pop_back();
  Process agent({kSwept, "agent", "--scheduler", endpoint, "--name", "a", "--gpus", "none", "--slots", "1",
                 "--workdir", dir / "work", "--heartbeat-ms", "300", "--liveness", "3", "--reconnect-min-ms", "50",
                 "--reconnect-max-ms", "400", "--stop-grace-ms", "100"},
                dir / "agent.log");
  int64_t sweep = submit(dir, endpoint,
                         R"({"method": "grid", "max_retries": 0, "command": [")" + kTestsDir + R"(/trial.sh", "${args}"],
                             "parameters": {"mode": {"value": "normal"}, "steps": {"value": 1}, "secs": {"value": 4}}})");
  REQUIRE(eventually([&] {
    return db_int(db, "SELECT COUNT(*) FROM trials WHERE agent='a' AND state='running' AND started_at IS NOT NULL") == 1;
  }));  // confirmed by the agent: registered, with its lease
  sched.signal(SIGSTOP);
  // Stopped until the agent itself has found it silent past liveness.
  const bool noticed = eventually([&] { return agent.log().find("scheduler silent for") != std::string::npos; }, 30);
  sched.signal(SIGCONT);
  REQUIRE_MESSAGE(noticed, agent.log());
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(db, sweep); }, 60), sched.log());
  const std::string log = sched.log();
  CHECK_MESSAGE(log.find("declared lost") == std::string::npos, log);
  CHECK_MESSAGE(log.find("came back") != std::string::npos, log);  // it saw its own stall
  // The trial ran once, to its end, on its first attempt.
  CHECK(db_int(db, "SELECT COUNT(*) FROM attempts") == 1);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed' AND attempts=1") == 1);
  CHECK_MESSAGE(agent.log().find("lease expired") == std::string::npos, agent.log());
}
