// Issue 15's faults with real processes: two schedulers on one database, a
// stale lock left by a SIGKILLed scheduler, bad flags and bad database files.
// Waits on conditions with deadlines, never on fixed sleeps.
#include <sys/stat.h>

#include "tests/harness.h"

using namespace swept::itest;

TEST_CASE("a second scheduler on the same database is refused naming the holder; a SIGKILLed holder's lock does not block a restart") {
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
