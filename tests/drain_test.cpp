// Issue 14: an agent drained before a Slurm time limit (SIGUSR1, which
// deploy/slurm/swept-agent.sbatch asks Slurm for) with real processes: its
// trials get SIGTERM and checkpoint, the agent exits 0, the scheduler
// requeues them without spending a retry, and they finish elsewhere. The
// retry they did not spend is still there for a real loss afterwards.
#include <signal.h>

#include <filesystem>
#include <string>

#include "tests/harness.h"

using namespace swept::itest;

namespace {

const std::string kTrial = kTestsDir + "/trial.sh";

std::string q(int64_t v) { return std::to_string(v); }

}  // namespace

TEST_CASE("a drained agent (SIGUSR1) hands its trials back without spending a retry - they resume elsewhere") {
  TempDir dir;
  const std::string shared = dir / "shared";  // the trials' checkpoints, as on a shared filesystem
  std::filesystem::create_directories(shared);
  Scheduler sched(dir);
  auto a = start_agent(dir, sched.endpoint, "a", "none", 2);
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='a' AND state='alive'") == 1; }));
  // max_retries 1: the drain must not spend it, so that the loss on agent b
  // below can still requeue; run 3 of each trial completes.
  int64_t sweep = submit(dir, sched.endpoint,
                         R"({"method": "grid", "max_retries": 1, "metric": {"name": "loss", "goal": "minimize"},
                             "command": [")" + kTrial + R"(", "${args}"], "parameters": {
                             "mode": {"value": "checkpoint"}, "dir": {"value": ")" + shared + R"("},
                             "finish_on": {"value": 3}, "secs": {"value": 120}, "x": {"values": [1, 2]}}})");
  auto ready = [&](int run) {
    int n = 0;
    for (int64_t id : {1, 2}) n += std::filesystem::exists(shared + "/ready-" + q(id) + "-" + q(run));
    return n == 2;
  };
  REQUIRE_MESSAGE(eventually([&] { return ready(1); }), a->log());
  REQUIRE(eventually([&] {
    return db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE agent='a' AND state='running' AND started_at IS NOT NULL") == 2;
  }));

  a->signal(SIGUSR1);
  int code = a->wait(30);
  CHECK_MESSAGE(code == 0, "agent a exited ", code, "\n", a->log());
  CHECK(a->log().find("draining") != std::string::npos);
  // Each trial got SIGTERM and checkpointed (its TERM trap ran).
  CHECK(std::filesystem::exists(shared + "/ckpt-1"));
  CHECK(std::filesystem::exists(shared + "/ckpt-2"));
  // Back in the queue; the attempt is recorded as requeued at no cost; the
  // agent unregistered (gone, not lost).
  REQUIRE_MESSAGE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE state='queued'") == 2; }),
                  sched.process->log());
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM attempts WHERE agent='a' AND state='queued' AND reason LIKE "
                         "'requeued (costs no retry)%draining%'") == 2);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='a' AND state='gone'") == 1);

  // Agent b takes them (run 2) and is killed outright: a real loss, which
  // spends the one retry. Without the drain's retry kept, they would be lost.
  auto b = start_agent(dir, sched.endpoint, "b", "none", 2);
  REQUIRE_MESSAGE(eventually([&] { return ready(2); }), b->log());
  b->signal(SIGKILL);
  b->wait();
  REQUIRE_MESSAGE(eventually([&] {
    return db_int(sched.db, "SELECT COUNT(*) FROM attempts WHERE agent='b' AND state='lost'") == 2;
  }), sched.process->log());
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE state='lost'") == 0);

  // Agent c runs them a third time: they complete.
  auto c = start_agent(dir, sched.endpoint, "c", "none", 2);
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(sched.db, sweep); }), c->log(), sched.process->log());
  check_final_invariants(sched.db, sweep);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE state='completed' AND agent='c' AND attempts=3") == 2);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM metrics WHERE name='run' AND value=3") == 2);
}

TEST_CASE("a drained agent's trials are requeued even with max_retries 0, and finish after the agent restarts") {
  TempDir dir;
  const std::string shared = dir / "shared";
  std::filesystem::create_directories(shared);
  Scheduler sched(dir);
  auto a = start_agent(dir, sched.endpoint, "a", "none", 1);
  int64_t sweep = submit(dir, sched.endpoint,
                         R"({"method": "grid", "metric": {"name": "loss", "goal": "minimize"},
                             "command": [")" + kTrial + R"(", "${args}"], "parameters": {
                             "mode": {"value": "checkpoint"}, "dir": {"value": ")" + shared + R"("},
                             "finish_on": {"value": 2}, "secs": {"value": 120}}})");
  REQUIRE_MESSAGE(eventually([&] { return std::filesystem::exists(shared + "/ready-1-1"); }), a->log());
  a->signal(SIGUSR1);
  CHECK(a->wait(30) == 0);
  CHECK(std::filesystem::exists(shared + "/ckpt-1"));
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE state='queued'") == 1; }));

  // The same agent, restarted (a new Slurm job of the same name), resumes it.
  a = start_agent(dir, sched.endpoint, "a", "none", 1);
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(sched.db, sweep); }), a->log(), sched.process->log());
  check_final_invariants(sched.db, sweep);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE state='completed' AND attempts=2") == 1);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM attempts WHERE attempt=1 AND state='queued'") == 1);
}
