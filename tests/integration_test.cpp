// Integration tests: real `swept scheduler` and `swept agent` processes on
// loopback, fake GPUs, tiny trial commands (tests/trial.sh), and every
// failure case of issue 5. Each test ends with every trial final, none
// completed twice and no metric row duplicated (check_final_invariants), and
// waits on conditions with deadlines, never on fixed sleeps.
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "common/protocol.h"
#include "scheduler/zmq_io.h"
#include "tests/harness.h"

using namespace swept::itest;
namespace fs = std::filesystem;

namespace {

const std::string kTrial = kTestsDir + "/trial.sh";

std::string grid(const std::string& extra, const std::string& params) {
  return R"({"method": "grid", "metric": {"name": "loss", "goal": "minimize"}, "command": [")" + kTrial +
         R"(", "${args}"], )" + extra + R"("parameters": )" + params + "}";
}

std::string q(int64_t v) { return std::to_string(v); }

}  // namespace

TEST_CASE("a sweep runs on agents with fake GPUs: whole GPUs, shares, CUDA_VISIBLE_DEVICES, CLI views") {
  TempDir dir;
  Scheduler sched(dir);
  auto agent = start_agent(dir, sched.endpoint, "gpu-host", "fake:2x16GiB", 2);
  int64_t whole = submit(dir, sched.endpoint,
                         grid(R"("resources": {"gpus": 1}, )",
                              R"({"mode": {"value": "normal"}, "secs": {"value": 0.2}, "steps": {"values": [2, 3, 4, 5]}})"));
  int64_t shared = submit(dir, sched.endpoint,
                          grid(R"("resources": {"gpu_memory_fraction": 0.4}, )",
                               R"({"mode": {"value": "normal"}, "steps": {"values": [1, 2, 3]}})"));
  std::string out;
  int rc = run_command({kSwept, "wait", q(whole), "--scheduler", sched.endpoint, "--poll-ms", "50"}, dir / "w.log", &out);
  CHECK_MESSAGE(rc == 0, out);
  rc = run_command({kSwept, "wait", q(shared), "--scheduler", sched.endpoint, "--poll-ms", "50"}, dir / "w.log", &out);
  CHECK_MESSAGE(rc == 0, out);
  check_final_invariants(sched.db, whole);
  check_final_invariants(sched.db, shared);
  // Whole-GPU trials got one GPU each, shares got a fraction of one.
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE sweep_id=" + q(whole) +
                             " AND json_extract(env, '$.CUDA_VISIBLE_DEVICES') IN ('0', '1')") == 4);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE sweep_id=" + q(shared) +
                             " AND gpu_fraction = 0.4 AND json_extract(env, '$.SWEPT_GPU_MEMORY_FRACTION') LIKE '0.4%'") == 3);
  // Every line the trials printed is stored: 2+3+4+5 and 1+2+3 rows.
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM metrics m JOIN trials t ON t.id = m.trial_id WHERE t.sweep_id=" + q(whole)) == 14);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM metrics m JOIN trials t ON t.id = m.trial_id WHERE t.sweep_id=" + q(shared)) == 6);

  // The read commands, through the scheduler and from the file alone.
  rc = run_command({kSwept, "best", q(whole), "--scheduler", sched.endpoint, "--json"}, dir / "c.log", &out);
  CHECK(rc == 0);
  CHECK(out.find("\"metric_value\": 0.5") != std::string::npos);
  rc = run_command({kSwept, "export", q(whole), "--db", sched.db, "--format", "csv"}, dir / "c.log", &out);
  CHECK(rc == 0);
  CHECK(std::count(out.begin(), out.end(), '\n') == 5);
  rc = run_command({kSwept, "status", q(whole), "--db", sched.db}, dir / "c.log", &out);
  CHECK(rc == 0);
  CHECK(out.find("completed 4") != std::string::npos);
  rc = run_command({kSwept, "agents", "--scheduler", sched.endpoint}, dir / "c.log", &out);
  CHECK(rc == 0);
  CHECK(out.find("gpu-host") != std::string::npos);
  CHECK(out.find("GPU 1") != std::string::npos);
}

TEST_CASE("trials that exit at once, fail, flood one line, stay silent, ignore SIGTERM or do not exist all end final") {
  TempDir dir;
  Scheduler sched(dir);
  auto agent = start_agent(dir, sched.endpoint, "a", "none", 3);
  int64_t modes = submit(dir, sched.endpoint,
                         grid(R"("timeout_s": 1, )",
                              R"({"mode": {"values": ["exit_now", "fail", "bigline", "silent", "ignore_term"]}, "secs": {"value": 0.1}})"));
  int64_t missing = submit(dir, sched.endpoint,
                           R"({"method": "grid", "command": ["/nonexistent/swept-trial", "${args}"], "parameters": {"x": {"values": [1, 2]}}})");
  std::string out;
  int rc = run_command({kSwept, "wait", q(modes), "--scheduler", sched.endpoint, "--poll-ms", "50"}, dir / "w.log", &out);
  CHECK(rc == 7);  // not every trial completed
  rc = run_command({kSwept, "wait", q(missing), "--scheduler", sched.endpoint, "--poll-ms", "50"}, dir / "w.log", &out);
  CHECK(rc == 7);
  check_final_invariants(sched.db, modes);
  check_final_invariants(sched.db, missing);
  auto state_of = [&](const std::string& mode) {
    return db_text(sched.db, "SELECT state || ' / ' || coalesce(reason, '') FROM trials WHERE sweep_id=" + q(modes) +
                                 " AND json_extract(params, '$.mode')='" + mode + "'");
  };
  CHECK(state_of("exit_now").rfind("completed", 0) == 0);
  CHECK(state_of("silent").rfind("completed", 0) == 0);
  CHECK(state_of("bigline").rfind("completed", 0) == 0);
  CHECK(state_of("fail").rfind("failed", 0) == 0);
  CHECK(db_int(sched.db, "SELECT exit_code FROM trials WHERE json_extract(params, '$.mode')='fail'") == 3);
  std::string term = state_of("ignore_term");
  CHECK_MESSAGE(term.rfind("failed", 0) == 0, term);
  CHECK_MESSAGE(term.find("time") != std::string::npos, term);
  // The metric line after 3 MB without a newline still arrived; the log tail stayed bounded.
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM metrics m JOIN trials t ON t.id=m.trial_id WHERE "
                         "json_extract(t.params, '$.mode')='bigline' AND m.name='loss'") == 1);
  CHECK(db_int(sched.db, "SELECT MAX(length(tail)) FROM trial_logs") <= 64 * 1024);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE sweep_id=" + q(missing) + " AND state='failed'") == 2);
  CHECK(agent->running());
}

TEST_CASE("an agent killed with SIGKILL: its trials are lost, requeued and finish on another agent") {
  TempDir dir;
  Scheduler sched(dir);
  auto a = start_agent(dir, sched.endpoint, "a", "none", 2);
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='a' AND state='alive'") == 1; }));
  int64_t sweep = submit(dir, sched.endpoint,
                         grid(R"("max_retries": 2, )",
                              R"({"mode": {"value": "normal"}, "secs": {"value": 1.5}, "x": {"values": [1, 2]}})"));
  REQUIRE(eventually([&] {
    return db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE agent='a' AND state='running' AND started_at IS NOT NULL") == 2;
  }));
  a->signal(SIGKILL);
  a->wait();
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='a' AND state='lost'") == 1; }));
  // Requeued once a's lease (and the margin) is over: the scheduler cannot
  // tell a dead agent from a cut-off one that may still run them.
  CHECK(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE state='queued'") == 2; }));
  auto b = start_agent(dir, sched.endpoint, "b", "none", 2);
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(sched.db, sweep); }), b->log());
  check_final_invariants(sched.db, sweep);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE state='completed' AND agent='b' AND attempts=2") == 2);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM attempts WHERE agent='a' AND state='lost'") == 2);
}

TEST_CASE("an agent frozen with SIGSTOP past liveness: its trials move - thawed, its stale attempts are stopped") {
  TempDir dir;
  Scheduler sched(dir);
  auto a = start_agent(dir, sched.endpoint, "a", "none", 1);
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE state='alive'") == 1; }));
  int64_t sweep = submit(dir, sched.endpoint,
                         grid(R"("max_retries": 1, )", R"({"mode": {"value": "normal"}, "secs": {"value": 3}, "steps": {"value": 2}})"));
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE started_at IS NOT NULL") == 1; }));
  a->signal(SIGSTOP);
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='a' AND state='lost'") == 1; }));
  auto b = start_agent(dir, sched.endpoint, "b", "none", 1);
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE agent='b' AND state='running'") == 1; }));
  a->signal(SIGCONT);
  // a re-registers; the attempt it still runs (or finished) is stale.
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='a' AND state='alive'") == 1; }));
  REQUIRE(eventually([&] { return sweep_done(sched.db, sweep); }));
  check_final_invariants(sched.db, sweep);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE state='completed' AND agent='b' AND attempts=2") == 1);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM attempts WHERE trial_id=1 AND attempt=1 AND state='lost'") == 1);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM metrics") == 2);
}

TEST_CASE("the scheduler killed with SIGKILL and restarted mid-sweep carries on - running trials are not restarted") {
  TempDir dir;
  auto sched = std::make_unique<Scheduler>(dir);
  std::string endpoint = sched->endpoint, db = sched->db;
  auto a = start_agent(dir, endpoint, "a", "none", 2);
  int64_t sweep = submit(dir, endpoint,
                         grid("", R"({"mode": {"value": "normal"}, "secs": {"value": 1.2}, "x": {"values": [1, 2, 3, 4, 5, 6]}})"));
  REQUIRE(eventually([&] {
    return db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed'") >= 1 &&
           db_int(db, "SELECT COUNT(*) FROM trials WHERE state='running' AND started_at IS NOT NULL") == 2;
  }));
  sched->process->signal(SIGKILL);
  sched->process->wait();
  // Restart on the same database and port; the agent reconnects on its own.
  sched = std::make_unique<Scheduler>(dir, endpoint);
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(db, sweep); }, 45), (sched->process->log() + a->log()));
  check_final_invariants(db, sweep);
  // Not one trial was started twice: one attempt each that ran, all completed.
  // (A START_TRIAL committed just before the kill may never have left: the
  // agent never saw it, and the history says "never started".)
  INFO(db_text(db, "SELECT group_concat(trial_id || '/' || attempt || ' ' || state || ' ' || coalesce(reason, ''), '; ') FROM attempts"));
  CHECK(db_int(db, "SELECT COUNT(*) FROM attempts WHERE coalesce(reason, '') NOT LIKE 'never started%'") == 6);
  CHECK(db_int(db, "SELECT COUNT(*) FROM attempts WHERE state='completed'") == 6);
  CHECK(db_int(db, "SELECT COUNT(*) FROM metrics") == 18);
}

TEST_CASE("malformed and unknown messages, a duplicate agent name and an unknown agent are answered, never fatal") {
  TempDir dir;
  Scheduler sched(dir);
  zmq::context_t ctx(1);
  zmq::socket_t rogue(ctx, zmq::socket_type::dealer);
  rogue.set(zmq::sockopt::linger, 0);
  rogue.set(zmq::sockopt::rcvtimeo, 5000);
  rogue.connect(sched.endpoint);
  auto exchange = [&](const swept::protocol::Frames& frames) {
    REQUIRE(swept::zmqio::send(rogue, "", frames).ok());
    auto got = swept::zmqio::receive(rogue, false, false);
    REQUIRE(got.ok());
    REQUIRE(got->has_value());
    auto d = swept::protocol::decode((*got)->frames);
    REQUIRE(d.ok());
    return *d.message;
  };
  using namespace swept::protocol;
  CHECK(std::get<Error>(exchange({std::string(swept::protocol::kProtocolId), "METRICS", "{\"trial_id\": \"x\"}"})).code == "malformed");
  CHECK(std::get<Error>(exchange({std::string(swept::protocol::kProtocolId), "SELF_DESTRUCT", "{}"})).code == "malformed");
  CHECK(std::get<Error>(exchange({std::string(swept::protocol::kProtocolId)})).code == "malformed");
  CHECK(std::get<Error>(exchange({"swept/7", "QUERY_AGENTS", "{\"request_id\": \"r\"}"})).code == "version");
  // A trial exit from an agent the scheduler never met: told to register.
  TrialExited e;
  e.trial_id = 1;
  e.attempt = 1;
  e.exit_code = 0;
  e.ended_at = 1;
  CHECK(std::holds_alternative<Disconnect>(exchange(encode(e))));

  // Two agents with one name: the second is refused while the first lives.
  auto first = start_agent(dir, sched.endpoint, "twin", "none", 1);
  REQUIRE(eventually([&] { return db_int(sched.db, "SELECT COUNT(*) FROM agents WHERE name='twin' AND state='alive'") == 1; }));
  auto second = start_agent(dir, sched.endpoint, "twin", "none", 1);
  REQUIRE(eventually([&] { return second->log().find("already connected") != std::string::npos; }));
  int64_t sweep = submit(dir, sched.endpoint, grid("", R"({"mode": {"value": "normal"}, "x": {"values": [1, 2, 3]}})"));
  REQUIRE(eventually([&] { return sweep_done(sched.db, sweep); }));
  check_final_invariants(sched.db, sweep);
  CHECK(db_int(sched.db, "SELECT COUNT(DISTINCT agent) FROM attempts") == 1);
  CHECK(sched.process->running());
  std::string out;
  CHECK(run_command({kSwept, "status", "--scheduler", sched.endpoint}, dir / "s.log", &out) == 0);
}

TEST_CASE("client commands: unreachable scheduler exits 6, a bad sweep file exits 2, unknown sweeps exit 2") {
  TempDir dir;
  std::string out;
  CHECK(run_command({kSwept, "status", "--scheduler", "tcp://127.0.0.1:9", "--timeout-ms", "300"}, dir / "c.log", &out) == 6);
  CHECK(out.find("no answer from the scheduler") != std::string::npos);
  Scheduler sched(dir);
  write_file(dir / "bad.json", R"({"method": "grid", "parameters": {"lr": {"min": 1, "max": 0}}})");
  CHECK(run_command({kSwept, "submit", dir / "bad.json", "--scheduler", sched.endpoint}, dir / "c.log", &out) == 2);
  CHECK(out.find("parameters.lr") != std::string::npos);
  CHECK(run_command({kSwept, "trials", "42", "--scheduler", sched.endpoint}, dir / "c.log", &out) == 2);
  CHECK(run_command({kSwept, "status", "42", "--db", sched.db}, dir / "c.log", &out) == 2);
  CHECK(run_command({kSwept, "status", "--db", dir / "missing.db"}, dir / "c.log", &out) == 2);
}

// Issue 28: a warm start through a real scheduler process. The file is read
// by `swept submit` and its trials travel with SUBMIT; the imported trial of a
// random sweep sits below index 0, and `swept trials` pages from there.
TEST_CASE("swept submit: a warm start's file travels with the sweep, its trial shown imported, a missing sweep exits 2") {
  TempDir dir;
  Scheduler sched(dir);
  std::string out;
  write_file(dir / "runs.csv",
             "trial_id,index,state,attempts,agent,exit_code,metric_value,reason,param.x,metric.loss\n"
             "1,0,completed,1,a,0,0.5,,0.25,0.5\n"
             "2,1,completed,1,a,0,0.7,,9,0.7\n");
  write_file(dir / "warm.json", R"({"method": "random", "run_cap": 2, "metric": {"name": "loss"},
      "warm_start": {"file": "runs.csv"}, "command": ["/bin/true"], "parameters": {"x": {"min": 0.0, "max": 1.0}}})");
  CHECK(run_command({kSwept, "submit", dir / "warm.json", "--scheduler", sched.endpoint}, dir / "s.log", &out) == 0);
  CHECK_MESSAGE(out.find("warm start: 1 of 2 earlier trials fit; 1 skipped: 1 outside this sweep's space") !=
                    std::string::npos,
                out);
  CHECK(run_command({kSwept, "trials", "1", "--json", "--scheduler", sched.endpoint}, dir / "t.log", &out) == 0);
  CHECK_MESSAGE(out.find("\"state\": \"imported\"") != std::string::npos, out);
  CHECK(out.find("\"index\": -1") != std::string::npos);
  CHECK(out.find("imported from " + dir / "runs.csv" + ", row 2") != std::string::npos);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE state='imported' AND attempts=0") == 1);
  CHECK(run_command({kSwept, "submit", dir / "warm.json", "--warm-start", "42", "--scheduler", sched.endpoint},
                    dir / "s2.log", &out) == 2);
  CHECK_MESSAGE(out.find("--warm-start: there is no sweep 42 in this scheduler's database") != std::string::npos, out);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM sweeps") == 1);  // the refused one left nothing
}

TEST_CASE("swept run: the whole system in one process - Ctrl-C stops every trial and leaves the database consistent") {
  TempDir dir;
  std::string db = dir / "run.db";
  write_file(dir / "quick.json", grid("", R"({"mode": {"value": "normal"}, "steps": {"values": [1, 2, 3, 4]}})"));
  std::string out;
  int rc = run_command({kSwept, "run", dir / "quick.json", "--db", db, "--slots", "2", "--workdir", dir / "w",
                        "--dashboard", "off"},
                       dir / "run.log", &out);
  CHECK_MESSAGE(rc == 0, out);
  CHECK(out.find("best: trial") != std::string::npos);
  check_final_invariants(db, 1);
  CHECK(db_int(db, "SELECT COUNT(*) FROM metrics") == 10);

  // A sweep this machine can never place is refused, not waited on forever.
  write_file(dir / "big.json", grid(R"("resources": {"gpus": 4}, )", R"({"mode": {"value": "normal"}, "x": {"values": [1, 2]}})"));
  rc = run_command({kSwept, "run", dir / "big.json", "--db", dir / "big.db", "--gpus", "fake:2", "--workdir", dir / "w3",
                    "--dashboard", "off"},
                   dir / "big.log", &out, 30);
  CHECK_MESSAGE(rc == 2, out);
  CHECK(out.find("need more than this machine offers") != std::string::npos);

  std::string db2 = dir / "stop.db";
  write_file(dir / "slow.json",
             grid("", R"({"mode": {"value": "ignore_term"}, "x": {"values": [1, 2, 3, 4, 5]}})"));
  Process run({kSwept, "run", dir / "slow.json", "--db", db2, "--slots", "2", "--workdir", dir / "w2", "--dashboard",
               "off", "--stop-grace-ms", "300"},
              dir / "run2.log");
  REQUIRE(eventually([&] { return db_int(db2, "SELECT COUNT(*) FROM trials WHERE started_at IS NOT NULL AND state='running'") == 2; }));
  run.signal(SIGINT);
  CHECK_MESSAGE(run.wait(30) == 130, run.log());
  CHECK(db_int(db2, "SELECT COUNT(*) FROM trials WHERE state NOT IN ('stopped')") == 0);
  CHECK(db_int(db2, "SELECT COUNT(*) FROM sweeps WHERE state='cancelled'") == 1);
  CHECK(db_int(db2, "SELECT COUNT(*) FROM attempts WHERE ended_at IS NULL") == 0);
  // No trial process survives: each trial ran `sleep 30` in its own group.
  // Look only at processes whose working directory is this test's (other
  // tests running at the same time have trials of the same kind).
  std::string ps;
  run_command({"/bin/sh", "-c",
               "for p in /proc/[0-9]*; do case $(readlink $p/cwd 2>/dev/null) in '" + std::string(dir / "w2") +
                   "'*) echo $p;; esac; done"},
              dir / "ps.log", &ps);
  CHECK_MESSAGE(ps.empty(), ps);
}

// The dashboard inside `swept run`: it starts on a port picked at run time,
// serves the sweep while it runs, and its cancel action reaches the embedded
// scheduler (the path the dashboard's cancel button takes).
TEST_CASE("swept run: the embedded dashboard serves the running sweep and cancels it through the scheduler") {
  TempDir dir;
  std::string db = dir / "dash.db";
  write_file(dir / "slow.json", grid("", R"({"mode": {"value": "ignore_term"}, "x": {"values": [1, 2, 3]}})"));
  Process run({kSwept, "run", dir / "slow.json", "--db", db, "--slots", "1", "--workdir", dir / "w", "--dashboard",
               "127.0.0.1:0", "--stop-grace-ms", "300", "--progress", "lines"},
              dir / "run.log");
  std::string url;
  REQUIRE_MESSAGE(eventually([&] {
                    const std::string log = run.log();
                    const auto at = log.find("dashboard at http://");
                    if (at == std::string::npos) return false;
                    const auto end = log.find('\n', at);
                    if (end == std::string::npos) return false;
                    url = log.substr(at + 13, end - at - 13);
                    return true;
                  }),
                  run.log());
  // "http://127.0.0.1:PORT/"
  const auto colon = url.rfind(':');
  const int port = std::stoi(url.substr(colon + 1));
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(10, 0);
  REQUIRE(eventually([&] { return db_int(db, "SELECT COUNT(*) FROM trials WHERE state='running'") == 1; }));

  auto info = http.Get("/api/info");
  REQUIRE(info);
  CHECK(info->status == 200);
  CHECK(nlohmann::json::parse(info->body).at("cancel") == true);
  auto sweeps = http.Get("/api/sweeps");
  REQUIRE(sweeps);
  REQUIRE(sweeps->status == 200);
  CHECK_MESSAGE(sweeps->body.find("\"running\"") != std::string::npos, sweeps->body);

  httplib::Headers headers = {{"X-Requested-With", "swept"}};
  auto cancelled = http.Post("/api/sweeps/1/cancel", headers, "", "application/json");
  REQUIRE(cancelled);
  CHECK_MESSAGE(cancelled->status == 200, cancelled->body);
  // Cancelled from the dashboard, the sweep ends with no trial completed: exit 7.
  CHECK_MESSAGE(run.wait(30) == 7, run.log());
  CHECK(db_int(db, "SELECT COUNT(*) FROM sweeps WHERE state='cancelled'") == 1);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state IN ('queued','running')") == 0);
}

// Trials that end at once: successors (START_TRIAL `after`) keep the slots
// busy, and neither a finished run, a Ctrl-C, nor a scheduler killed with
// SIGKILL while successors wait at the agent leaves a trial run twice or
// unaccounted for.
TEST_CASE("short trials: successors wait at the agent - a whole run, a Ctrl-C and a scheduler SIGKILL stay consistent") {
  TempDir dir;
  const std::string quick = grid("", R"({"mode": {"value": "exit_now"}, "x": {"min": 1, "max": 300}})");
  write_file(dir / "quick.json", quick);
  std::string db = dir / "run.db", out;
  int rc = run_command({kSwept, "run", dir / "quick.json", "--db", db, "--slots", "2", "--workdir", dir / "w",
                        "--dashboard", "off", "--progress", "off", "--stats", dir / "stats.json"},
                       dir / "run.log", &out, 120);
  REQUIRE_MESSAGE(rc == 0, out);
  check_final_invariants(db, 1);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 300);
  CHECK(db_int(db, "SELECT COUNT(*) FROM attempts") == 300);  // one each: none lost, none repeated
  auto stats = nlohmann::json::parse(read_file(dir / "stats.json"));
  CHECK(stats["trials_finished"] == 300);
  CHECK(stats["successors"].get<int64_t>() > 0);

  // Ctrl-C in the middle: waiting successors end stopped like queued trials.
  write_file(dir / "long.json", grid("", R"({"mode": {"value": "exit_now"}, "x": {"min": 1, "max": 100000}})"));
  std::string db2 = dir / "stop.db";
  Process run({kSwept, "run", dir / "long.json", "--db", db2, "--slots", "2", "--workdir", dir / "w2", "--dashboard",
               "off", "--progress", "off"},
              dir / "run2.log");
  REQUIRE(eventually([&] { return db_int(db2, "SELECT COUNT(*) FROM trials WHERE state='completed'") >= 200; }));
  run.signal(SIGINT);
  CHECK_MESSAGE(run.wait(30) == 130, run.log());
  CHECK(db_int(db2, "SELECT COUNT(*) FROM trials WHERE state NOT IN ('completed', 'stopped')") == 0);
  CHECK(db_int(db2, "SELECT COUNT(*) FROM attempts WHERE ended_at IS NULL") == 0);
  CHECK(db_int(db2, "SELECT COUNT(*) FROM sweeps WHERE state='cancelled'") == 1);

  // The scheduler dies while successors wait: after its restart the sweep
  // finishes, every trial completed exactly once.
  auto sched = std::make_unique<Scheduler>(dir);
  std::string endpoint = sched->endpoint, sdb = sched->db;
  auto a = start_agent(dir, endpoint, "a", "none", 2);
  int64_t sweep = submit(dir, endpoint, grid("", R"({"mode": {"value": "exit_now"}, "x": {"min": 1, "max": 600}})"));
  REQUIRE(eventually([&] { return db_int(sdb, "SELECT COUNT(*) FROM trials WHERE state='completed'") >= 100; }));
  sched->process->signal(SIGKILL);
  sched->process->wait();
  sched = std::make_unique<Scheduler>(dir, endpoint);
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(sdb, sweep); }, 60), (sched->process->log() + a->log()));
  // It restarted with trials out on the agent, running or waiting.
  CHECK_MESSAGE(sched->process->log().find("recovered") != std::string::npos, sched->process->log());
  check_final_invariants(sdb, sweep);
  CHECK(db_int(sdb, "SELECT COUNT(*) FROM trials WHERE sweep_id=" + q(sweep) + " AND state='completed'") == 600);
  CHECK(db_int(sdb, "SELECT COUNT(*) FROM attempts WHERE state='completed'") == 600);
}

// The scheduler expands ${args_json_file} (sweeps/) and the agent decides
// from the expanded argv whether to write the file (agent/supervisor.h,
// names_params_file): the two must agree on its name, or a trial that
// asked for the file would find none.
TEST_CASE("swept run: a command using the args_json_file macro reads its parameters from that file, and one without gets no file") {
  TempDir dir;
  write_file(dir / "named.json", R"({"method": "grid", "parameters": {"lr": {"values": [0.5, 0.25]}},
    "command": ["/bin/sh", "-c", "cp \"$0\" seen.json", "${args_json_file}"]})");
  std::string out;
  int rc = run_command({kSwept, "run", dir / "named.json", "--db", dir / "named.db", "--slots", "2", "--workdir",
                        dir / "w", "--dashboard", "off", "--progress", "off"},
                       dir / "named.log", &out);
  REQUIRE_MESSAGE(rc == 0, out);
  CHECK(db_int(dir / "named.db", "SELECT COUNT(*) FROM trials WHERE state='completed'") == 2);
  for (int trial : {1, 2}) {
    const std::string trial_dir = dir / ("w/sweep-1/trial-" + std::to_string(trial));
    CAPTURE(trial_dir);
    CHECK(fs::exists(trial_dir + "/swept-params.json"));
    CHECK(read_file(trial_dir + "/seen.json").find("\"lr\"") != std::string::npos);
  }
  write_file(dir / "unnamed.json", R"({"method": "grid", "parameters": {"lr": {"values": [0.5]}},
    "command": ["/bin/sh", "-c", "test -n \"$SWEPT_PARAMS\"", "${args}"]})");
  rc = run_command({kSwept, "run", dir / "unnamed.json", "--db", dir / "unnamed.db", "--slots", "1", "--workdir",
                    dir / "u", "--dashboard", "off", "--progress", "off"},
                   dir / "unnamed.log", &out);
  REQUIRE_MESSAGE(rc == 0, out);
  CHECK(fs::is_directory(dir / "u/sweep-1/trial-1/checkpoints"));
  CHECK_FALSE(fs::exists(dir / "u/sweep-1/trial-1/swept-params.json"));
}

// A user whose every trial fails (no data, a typo in the command) learns why
// from swept run itself: the first failed trial's reason and its stderr's
// ERROR line; and a run whose one agent is just registering is not told that
// every agent is "held back ... draining".
TEST_CASE("swept run: when trials fail, the outcome names the first one's exit and the error line it printed") {
  TempDir dir;
  write_file(dir / "fails.json", R"({"method": "grid", "parameters": {"lr": {"values": [0.5, 0.25]}},
    "command": ["/bin/sh", "-c", "echo starting >&2; echo 'tool ERROR no data in /nowhere: fetch it first' >&2; echo done >&2; exit 3", "${args}"]})");
  std::string out;
  int rc = run_command({kSwept, "run", dir / "fails.json", "--db", dir / "fails.db", "--slots", "1", "--workdir",
                        dir / "w", "--dashboard", "off", "--progress", "off"},
                       dir / "fails.log", &out);
  CHECK_MESSAGE(rc == 7, out);  // the sweep ended with trials not completed (docs/exit-codes.md)
  CHECK_MESSAGE(out.find("failed: 2 trials; the first, trial 1 (exit code 3), said: tool ERROR no data in /nowhere: "
                         "fetch it first") != std::string::npos,
                out);
  CHECK_MESSAGE(out.find("held back from new work") == std::string::npos, out);
  // With two local agents the trial's folder is under local-1 or local-2.
  rc = run_command({kSwept, "run", dir / "fails.json", "--db", dir / "fails2.db", "--slots", "2", "--local-agents", "2",
                    "--workdir", dir / "w2", "--dashboard", "off", "--progress", "off"},
                   dir / "fails2.log", &out);
  CHECK_MESSAGE(rc == 7, out);
  CHECK_MESSAGE(out.find("(exit code 3), said: tool ERROR no data in /nowhere") != std::string::npos, out);
}

// Issue 26, item 8: a trial the user stops shows `stopping` while its process
// takes its grace, keeps its slot until it has ended (the sweep's next trial
// waits), and then shows `stopped` with its end time.
TEST_CASE("swept cancel --trial: the trial is stopping until its process ends, and its slot stays its own until then") {
  TempDir dir;
  Scheduler sched(dir);
  Process agent({kSwept, "agent", "--scheduler", sched.endpoint, "--name", "one", "--gpus", "none", "--slots", "1",
                 "--workdir", dir / "work-one", "--heartbeat-ms", "100", "--stop-grace-ms", "60000"},
                dir / "agent-one.log");
  const std::string flag_dir = dir.path();
  int64_t sweep = submit(dir, sched.endpoint,
                         grid("", R"({"mode": {"value": "slow_stop"}, "dir": {"value": ")" + flag_dir +
                                      R"("}, "x": {"values": [1, 2]}})"));
  const std::string first = "SELECT MIN(id) FROM trials WHERE sweep_id=" + q(sweep);
  REQUIRE_MESSAGE(eventually([&] { return fs::exists(dir / ("up-" + q(db_int(sched.db, first)))); }, 30), agent.log());
  const int64_t id = db_int(sched.db, first);
  std::string out;
  int rc = run_command({kSwept, "cancel", "--trial", q(id), "--scheduler", sched.endpoint}, dir / "c.log", &out);
  REQUIRE_MESSAGE(rc == 0, out);
  // It holds on to its SIGTERM until released: stopping, and its slot is not given away.
  rc = run_command({kSwept, "trials", q(sweep), "--db", sched.db}, dir / "c.log", &out);
  CHECK(rc == 0);
  CHECK_MESSAGE(out.find("stopping") != std::string::npos, out);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE id=" + q(id) + " AND state='stopped' AND ended_at IS NULL") == 1);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE sweep_id=" + q(sweep) + " AND state='running'") == 0);
  CHECK_FALSE(fs::exists(dir / ("up-" + q(id + 1))));
  write_file(dir / "release", "");
  REQUIRE_MESSAGE(eventually([&] {
    return db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE id=" + q(id) + " AND ended_at IS NOT NULL") == 1;
  }, 30), agent.log());
  rc = run_command({kSwept, "trials", q(sweep), "--db", sched.db}, dir / "c.log", &out);
  CHECK(out.find("stopping") == std::string::npos);
  // Only now does the next trial get the slot (and, released, it stops at once when cancelled).
  REQUIRE_MESSAGE(eventually([&] { return fs::exists(dir / ("up-" + q(id + 1))); }, 30), agent.log());
  rc = run_command({kSwept, "cancel", q(sweep), "--scheduler", sched.endpoint}, dir / "c.log", &out);
  CHECK_MESSAGE(rc == 0, out);
  REQUIRE_MESSAGE(eventually([&] {
    return db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE sweep_id=" + q(sweep) + " AND ended_at IS NULL") == 0;
  }, 30), agent.log());
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM trials WHERE sweep_id=" + q(sweep) + " AND state='stopped'") == 2);
  CHECK(db_int(sched.db, "SELECT COUNT(*) FROM sweeps WHERE id=" + q(sweep) + " AND state='cancelled'") == 1);
}
