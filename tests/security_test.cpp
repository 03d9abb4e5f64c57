// Security tests (issue 14, docs/protocol.md "Security"): real `swept`
// processes over TCP on 127.0.0.1 with ports picked at run time. A keyed
// scheduler (swept keygen, --key, --authorized with agents/ and clients/)
// runs a sweep for a keyed agent and client; rogue agents and clients (no
// key, an unlisted key, the wrong role, the wrong scheduler key) fail fast
// and get nothing done; a second key cannot take an agent's name; SIGHUP
// revokes a live agent. Every wait has a deadline; no fixed sleeps.
#include <sys/stat.h>

#include <httplib.h>

#include <filesystem>

#include "tests/harness.h"

using namespace swept::itest;
namespace fs = std::filesystem;

namespace {

const std::string kTrial = kTestsDir + "/trial.sh";
std::string q(int64_t v) { return std::to_string(v); }

// n trials of `secs` each, with retries: an agent lost on purpose costs no trial.
std::string grid_spec(int n, double secs) {
  std::string values;
  for (int i = 1; i <= n; ++i) values += (i > 1 ? ", " : "") + std::to_string(i);
  return R"({"method": "grid", "max_retries": 3, "metric": {"name": "loss", "goal": "minimize"}, "command": [")" + kTrial +
         R"(", "${args}"], "parameters": {"mode": {"value": "normal"}, "secs": {"value": )" + std::to_string(secs) +
         R"(}, "steps": {"values": [)" + values + "]}}}";
}

// A key pair made by the real `swept keygen`.
void keygen(const TempDir& dir, const std::string& prefix) {
  std::string out;
  REQUIRE_MESSAGE(run_command({kSwept, "keygen", "--out", prefix}, dir / "keygen.log", &out) == 0, out);
}

// A keyed scheduler: scheduler.key, and DIR/auth with agents/ and clients/
// holding agent.pub, agent2.pub and client.pub. rogue.key is listed nowhere.
struct KeyedCluster {
  const TempDir& dir;
  std::string db, endpoint, auth;
  std::unique_ptr<Process> scheduler;

  explicit KeyedCluster(const TempDir& d, std::vector<std::string> extra = {}) : dir(d) {
    for (const char* name : {"scheduler", "agent", "agent2", "client", "rogue"}) keygen(dir, dir / name);
    auth = dir / "auth";
    fs::create_directories(auth + "/agents");
    fs::create_directories(auth + "/clients");
    fs::copy_file(dir / "agent.pub", auth + "/agents/agent.pub");
    fs::copy_file(dir / "agent2.pub", auth + "/agents/agent2.pub");
    fs::copy_file(dir / "client.pub", auth + "/clients/client.pub");
    db = dir / "swept.db";
    std::string endpoint_file = dir / "endpoint";
    std::vector<std::string> argv{kSwept, "scheduler", "--bind", "tcp://127.0.0.1:*", "--db", db, "--heartbeat-ms",
                                  "100", "--liveness", "5", "--endpoint-file", endpoint_file, "--key",
                                  dir / "scheduler.key", "--authorized", auth};
    argv.insert(argv.end(), extra.begin(), extra.end());
    scheduler = std::make_unique<Process>(argv, dir / "scheduler.log");
    REQUIRE_MESSAGE(eventually([&] { return fs::exists(endpoint_file); }, 20), scheduler->log());
    endpoint = read_file(endpoint_file);
    while (!endpoint.empty() && endpoint.back() == '\n') endpoint.pop_back();
  }

  // argv for a client command with `key` (empty: none) and the scheduler's public key (or `pub`).
  std::vector<std::string> client(std::vector<std::string> argv, const std::string& key,
                                   const std::string& pub = "") const {
    argv.insert(argv.begin(), kSwept);
    argv.insert(argv.end(), {"--scheduler", endpoint});
    if (!key.empty()) argv.insert(argv.end(), {"--key", dir / (key + ".key"), "--scheduler-pub",
                                               pub.empty() ? dir / "scheduler.pub" : pub});
    return argv;
  }
  std::unique_ptr<Process> agent(const std::string& name, const std::string& key, const std::string& pub = "") const {
    std::vector<std::string> argv{kSwept, "agent", "--scheduler", endpoint, "--name", name, "--gpus", "none",
                                  "--slots", "2", "--workdir", dir / ("work-" + name), "--heartbeat-ms", "100",
                                  "--liveness", "5", "--reconnect-min-ms", "100", "--reconnect-max-ms", "400",
                                  "--stop-grace-ms", "500"};
    if (!key.empty()) argv.insert(argv.end(), {"--key", dir / (key + ".key"), "--scheduler-pub",
                                               pub.empty() ? dir / "scheduler.pub" : pub});
    return std::make_unique<Process>(argv, dir / ("agent-" + name + "-" + key + ".log"));
  }
  int64_t submit(const std::string& spec) const {
    write_file(dir / "sweep.json", spec);
    std::string out;
    int rc = run_command(client({"submit", dir / "sweep.json"}, "client"), dir / "submit.log", &out);
    REQUIRE_MESSAGE(rc == 0, out);
    return std::stoll(out);
  }
  bool registered(const std::string& name) const {
    return db_int(db, "SELECT COUNT(*) FROM agents WHERE name='" + name + "' AND state='alive'") == 1;
  }
};

}  // namespace

TEST_CASE("keygen writes a 0600 secret and a public key and never overwrites either") {
  TempDir dir;
  keygen(dir, dir / "k");
  struct stat st;
  REQUIRE(::stat((dir / "k.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  std::string pub = read_file(dir / "k.pub");
  CHECK(pub.size() == 41);  // 40 Z85 characters and a newline
  std::string before = read_file(dir / "k.key"), out;
  CHECK(run_command({kSwept, "keygen", "--out", dir / "k"}, dir / "again.log", &out) == 2);
  CHECK(out.find("already exists") != std::string::npos);
  CHECK(read_file(dir / "k.key") == before);
  CHECK(run_command({kSwept, "keygen"}, dir / "none.log", &out) == 2);
}

TEST_CASE("an unkeyed scheduler refuses a network address, warns with --insecure and on loopback") {
  TempDir dir;
  std::string out;
  int rc = run_command({kSwept, "scheduler", "--bind", "tcp://0.0.0.0:*", "--db", dir / "a.db"}, dir / "s.log", &out);
  CHECK(rc == 2);
  CHECK(out.find("--key") != std::string::npos);
  CHECK(out.find("--insecure") != std::string::npos);
  CHECK(!fs::exists(dir / "a.db"));
  // --key without --authorized is a usage error, not an open door.
  keygen(dir, dir / "s");
  rc = run_command({kSwept, "scheduler", "--bind", "tcp://0.0.0.0:*", "--db", dir / "b.db", "--key", dir / "s.key"},
                   dir / "s.log", &out);
  CHECK(rc == 2);
  CHECK(out.find("--authorized") != std::string::npos);

  for (const std::string& bind : {std::string("tcp://0.0.0.0:*"), std::string("tcp://127.0.0.1:*")}) {
    std::vector<std::string> argv{kSwept, "scheduler", "--bind", bind, "--db", dir / "c.db", "--endpoint-file",
                                  dir / "ep"};
    if (bind.find("0.0.0.0") != std::string::npos) argv.push_back("--insecure");
    fs::remove(dir / "ep");
    Process p(argv, dir / "warn.log");
    REQUIRE_MESSAGE(eventually([&] { return fs::exists(dir / "ep"); }, 20), p.log());
    std::string log = p.log();
    CHECK_MESSAGE(log.find("WARN") != std::string::npos, log);
    CHECK(log.find(bind.find("0.0.0.0") != std::string::npos ? "--insecure" : "--key") != std::string::npos);
    p.signal(SIGTERM);
    CHECK(p.wait() == 130);
    fs::remove(dir / "warn.log");
  }
}

TEST_CASE("a keyed sweep completes - rogue agents and clients fail fast and get nothing") {
  TempDir dir;
  KeyedCluster c(dir);
  std::string out;
  // Rogue clients: no key, an unlisted key, the wrong scheduler key, an agent's key.
  const std::string spec_file = dir / "rogue.json";
  write_file(spec_file, grid_spec(2, 0));
  CHECK(run_command(c.client({"submit", spec_file}, ""), dir / "r.log", &out, 20) == 1);
  CHECK_MESSAGE(out.find("requires keys") != std::string::npos, out);
  CHECK(run_command(c.client({"submit", spec_file}, "rogue"), dir / "r.log", &out, 20) == 1);
  CHECK_MESSAGE(out.find("refused this key") != std::string::npos, out);
  CHECK(run_command(c.client({"submit", spec_file}, "client", dir / "agent.pub"), dir / "r.log", &out, 20) == 1);
  CHECK_MESSAGE(out.find("--scheduler-pub") != std::string::npos, out);
  CHECK(run_command(c.client({"submit", spec_file}, "agent"), dir / "r.log", &out, 20) == 1);
  CHECK_MESSAGE(out.find("agent key") != std::string::npos, out);
  CHECK(run_command(c.client({"cancel", "1"}, "agent"), dir / "r.log", &out, 20) == 1);
  CHECK(db_int(c.db, "SELECT COUNT(*) FROM sweeps") == 0);

  // Rogue agents: each stops at once with a message, and is never registered.
  struct Rogue {
    std::string key, pub, says;
  };
  for (const Rogue& r : {Rogue{"", "", "requires keys"}, Rogue{"rogue", "", "refused this key"},
                         Rogue{"agent", dir / "client.pub", "--scheduler-pub"},
                         Rogue{"client", "", "client key"}}) {
    auto rogue = c.agent("rogue", r.key, r.pub);
    CHECK(rogue->wait(20) == 1);
    CHECK_MESSAGE(rogue->log().find(r.says) != std::string::npos, rogue->log());
  }
  CHECK(db_int(c.db, "SELECT COUNT(*) FROM agents") == 0);

  // The keyed agent and client run a sweep to the end, while an unkeyed agent keeps trying.
  auto good = c.agent("good", "agent");
  REQUIRE_MESSAGE(eventually([&] { return c.registered("good"); }, 20), good->log());
  int64_t sweep = c.submit(grid_spec(6, 0.1));
  auto rogue = c.agent("rogue-late", "");
  int rc = run_command(c.client({"wait", q(sweep), "--poll-ms", "50"}, "client"), dir / "w.log", &out, 60);
  CHECK_MESSAGE(rc == 0, out);
  check_final_invariants(c.db, sweep);
  CHECK(db_int(c.db, "SELECT COUNT(*) FROM attempts WHERE agent <> 'good'") == 0);
  CHECK(db_int(c.db, "SELECT COUNT(*) FROM metrics") == 21);  // 1+2+...+6 lines
  CHECK(rogue->wait(20) == 1);
  // The read commands work with the client key (and from the environment).
  ::setenv("SWEPT_KEY", (dir / "client.key").c_str(), 1);
  ::setenv("SWEPT_SCHEDULER_PUB", (dir / "scheduler.pub").c_str(), 1);
  rc = run_command({kSwept, "best", q(sweep), "--scheduler", c.endpoint}, dir / "b.log", &out, 20);
  ::unsetenv("SWEPT_KEY");
  ::unsetenv("SWEPT_SCHEDULER_PUB");
  CHECK_MESSAGE(rc == 0, out);
  rc = run_command(c.client({"agents"}, "client"), dir / "a.log", &out, 20);
  CHECK(rc == 0);
  CHECK(out.find("good") != std::string::npos);
  // No key material in any log.
  std::string logs = c.scheduler->log() + good->log();
  for (const char* name : {"scheduler", "agent", "client", "rogue"}) {
    std::string pub = read_file(dir / (std::string(name) + ".pub"));
    pub.pop_back();
    CHECK_MESSAGE(logs.find(pub) == std::string::npos, name);
  }
}

TEST_CASE("an agent's name is bound to its key: a second key cannot take it, a restart with the same key can") {
  TempDir dir;
  KeyedCluster c(dir);
  auto first = c.agent("gpu-1", "agent");
  REQUIRE_MESSAGE(eventually([&] { return c.registered("gpu-1"); }, 20), first->log());
  int64_t sweep = c.submit(grid_spec(4, 0.3));
  REQUIRE(eventually([&] { return db_int(c.db, "SELECT COUNT(*) FROM attempts WHERE state='running'") > 0; }, 20));

  auto thief = c.agent("gpu-1", "agent2");  // a listed agent key, but not this name's
  CHECK(thief->wait(20) == 1);
  CHECK_MESSAGE(thief->log().find("belongs to another key") != std::string::npos, thief->log());
  CHECK(first->running());
  CHECK(db_int(c.db, "SELECT COUNT(*) FROM attempts WHERE state='stopped' OR state='lost'") == 0);

  // The same key after a crash takes its name back at once.
  first->signal(SIGKILL);
  first->wait();
  auto again = c.agent("gpu-1", "agent");
  std::string out;
  int rc = run_command(c.client({"wait", q(sweep), "--poll-ms", "50"}, "client"), dir / "w.log", &out, 90);
  std::string why = out + again->log();
  CHECK_MESSAGE(rc == 0, why);
  check_final_invariants(c.db, sweep);
}

TEST_CASE("SIGHUP re-reads --authorized: a revoked agent's live session is dropped and it cannot come back") {
  TempDir dir;
  KeyedCluster c(dir);
  auto agent = c.agent("doomed", "agent");
  REQUIRE_MESSAGE(eventually([&] { return c.registered("doomed"); }, 20), agent->log());
  int64_t sweep = c.submit(grid_spec(2, 30));
  REQUIRE(eventually([&] { return db_int(c.db, "SELECT COUNT(*) FROM attempts WHERE state='running'") > 0; }, 20));

  fs::remove(c.auth + "/agents/agent.pub");
  c.scheduler->signal(SIGHUP);
  CHECK_MESSAGE(agent->wait(20) == 1, agent->log());
  CHECK_MESSAGE(agent->log().find("no longer authorized") != std::string::npos, agent->log());
  CHECK(eventually([&] { return db_int(c.db, "SELECT COUNT(*) FROM agents WHERE name='doomed' AND state='alive'") == 0; }));
  // Its trials go back to the queue; nothing of theirs runs under its name any more.
  CHECK(eventually([&] {
    return db_int(c.db, "SELECT COUNT(*) FROM trials WHERE sweep_id=" + q(sweep) + " AND state='running'") == 0;
  }));
  CHECK(c.scheduler->running());
  CHECK(c.scheduler->log().find("re-read") != std::string::npos);

  auto back = c.agent("doomed", "agent");
  CHECK(back->wait(20) == 1);
  CHECK_MESSAGE(back->log().find("refused this key") != std::string::npos, back->log());
  // The keys still listed get in as before.
  auto other = c.agent("fresh", "agent2");
  REQUIRE(eventually([&] { return c.registered("fresh"); }, 20));
  std::string out;
  CHECK(run_command(c.client({"cancel", q(sweep)}, "client"), dir / "c.log", &out, 20) == 0);
}

TEST_CASE("the keyed scheduler's own dashboard cancels through the key it made for itself") {
  TempDir dir;
  KeyedCluster c(dir, {"--web", "127.0.0.1:0"});
  auto agent = c.agent("dash-host", "agent");
  REQUIRE_MESSAGE(eventually([&] { return c.registered("dash-host"); }, 20), agent->log());
  int64_t sweep = c.submit(grid_spec(2, 30));
  REQUIRE(eventually([&] { return db_int(c.db, "SELECT COUNT(*) FROM attempts WHERE state='running'") > 0; }, 20));
  std::string log = c.scheduler->log();
  auto at = log.find("dashboard at http://127.0.0.1:");
  REQUIRE_MESSAGE(at != std::string::npos, log);
  int port = std::stoi(log.substr(at + std::string("dashboard at http://127.0.0.1:").size()));
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(10, 0);
  httplib::Headers headers = {{"X-Requested-With", "swept"}};
  auto cancelled = http.Post("/api/sweeps/" + q(sweep) + "/cancel", headers, "", "application/json");
  REQUIRE(cancelled);
  CHECK_MESSAGE(cancelled->status == 200, cancelled->body);
  CHECK(eventually([&] { return db_int(c.db, "SELECT COUNT(*) FROM sweeps WHERE state='cancelled'") == 1; }));
  CHECK_MESSAGE(c.scheduler->log().find("refused") == std::string::npos, c.scheduler->log());
}
