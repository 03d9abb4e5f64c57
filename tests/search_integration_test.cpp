// Adaptive search end to end (issue 16): `swept run` on small bayes and tpe
// sweeps of examples/scripts/quadratic.py, checked in SQLite: every trial
// completed, every trial's suggestion (the model state that chose it)
// recorded, the model used after the startup trials, and the best trial
// better than the best random startup one. With one slot (and the one
// successor the broker sends ahead) the runs are small and near-serial. A scheduler
// killed with SIGKILL mid-sweep carries on from the stored history.
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/harness.h"

using namespace swept::itest;

namespace {

const std::string kQuadratic = std::string(SWEPT_SOURCE_DIR) + "/examples/scripts/quadratic.py";

// lr decides how close 4 gradient steps get to w = 3 (exact at lr = 0.5).
std::string sweep(const std::string& method, int startup, int run_cap) {
  return R"({"method": ")" + method + R"(", "seed": 11, "run_cap": )" + std::to_string(run_cap) +
         R"(, "metric": {"name": "loss", "goal": "minimize"}, ")" + method + R"(": {"n_startup_trials": )" +
         std::to_string(startup) + R"(}, "command": [")" + kQuadratic + R"(", "${args}"], )" +
         R"("parameters": {"lr": {"distribution": "log_uniform_values", "min": 0.01, "max": 1.0},
                           "target": {"value": 3.0}, "steps": {"value": 4}}})";
}

void check_adaptive_run(const std::string& method) {
  TempDir dir;
  const std::string db = dir / "s.db";
  const int startup = 6, cap = 20;
  write_file(dir / "s.json", sweep(method, startup, cap));
  std::string out;
  int rc = run_command({kSwept, "run", dir / "s.json", "--db", db, "--slots", "1", "--workdir", dir / "w",
                        "--dashboard", "off", "--progress", "off"},
                       dir / "run.log", &out, 120);
  INFO(out);
  REQUIRE(rc == 0);
  check_final_invariants(db, 1);
  CHECK(db_text(db, "SELECT method FROM sweeps WHERE id=1") == method);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed' AND metric_value IS NOT NULL") == cap);
  // Every trial's model state, as search::ModelState::to_json wrote it.
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE json_extract(suggestion, '$.method') = '" + method + "'") == cap);
  // Random until `startup` trials have finished, the model after.
  const std::string st = std::to_string(startup);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE (json_extract(suggestion, '$.n_finished') < " + st +
                       ") != (json_extract(suggestion, '$.mode') = 'startup')") == 0);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE json_extract(suggestion, '$.mode') = 'model'") >= cap - startup - 1);
  // Each suggestion saw every earlier trial, ended or pending (one slot, and
  // at most one successor waiting at the agent: docs/protocol.md).
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE json_extract(suggestion, '$.n_finished') + "
                   "json_extract(suggestion, '$.n_pending') = idx") == cap);
  // It learned: the best trial beats the best random startup trial.
  INFO(db_text(db, "SELECT group_concat(idx || ':' || json_extract(params, '$.lr') || '->' || metric_value, ' ') FROM trials"));
  CHECK(db_int(db, "SELECT (SELECT MIN(metric_value) FROM trials WHERE idx >= " + std::to_string(startup) +
                       ") < (SELECT MIN(metric_value) FROM trials WHERE idx < " + std::to_string(startup) + ")") == 1);
  // `swept trials --json` shows the suggestion.
  rc = run_command({kSwept, "trials", "1", "--db", db, "--json"}, dir / "trials.log", &out);
  REQUIRE(rc == 0);
  const nlohmann::json rows = nlohmann::json::parse(out, nullptr, false);
  REQUIRE(rows.is_array());
  REQUIRE(rows.size() == static_cast<size_t>(cap));
  CHECK(rows.back()["suggestion"]["mode"] == "model");
  CHECK(rows.front()["suggestion"]["mode"] == "startup");
  // The API's trial detail (docs/api.md) shows it too.
  Process web({kSwept, "web", "--db", db, "--listen", "127.0.0.1:0"}, dir / "web.log");
  int port = 0;
  REQUIRE_MESSAGE(eventually([&] {
                    const std::string log = web.log();
                    const auto at = log.find("serving http://127.0.0.1:");
                    if (at == std::string::npos || log.find('/', at + 25) == std::string::npos) return false;
                    port = std::stoi(log.substr(at + 25));
                    return true;
                  }),
                  web.log());
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(10, 0);
  const int64_t last = rows.back()["id"].get<int64_t>();
  auto detail = http.Get("/api/trials/" + std::to_string(last));
  REQUIRE(detail);
  CHECK(detail->status == 200);
  const nlohmann::json t = nlohmann::json::parse(detail->body, nullptr, false);
  CHECK(t["suggestion"]["mode"] == "model");
  CHECK(t["suggestion"]["method"] == method);
  web.signal(SIGTERM);
  web.wait(20);
}

}  // namespace

TEST_CASE("swept run: method bayes learns from its trials and records each suggestion") { check_adaptive_run("bayes"); }

TEST_CASE("swept run: method tpe learns from its trials and records each suggestion") { check_adaptive_run("tpe"); }

// Issue 28: a W&B user's multi-objective file (metrics, method custom,
// scheduler.engine optuna) runs tpe on both objectives. quadratic.py's final
// loss and w trade off (w from 0 to 3 lowers the loss): two objectives to
// minimize, with a constraint on w. Each suggestion after the startup ones
// is the model's, and learned from every finished trial's two final values:
// none of them counted as failed.
TEST_CASE("swept run: metrics with method custom and engine optuna runs tpe on every objective") {
  TempDir dir;
  const std::string db = dir / "s.db";
  write_file(dir / "s.yaml", "method: custom\nscheduler: {engine: optuna}\nseed: 3\nrun_cap: 14\n"
                             "metrics: [{name: loss}, {name: w}]\nconstraints: [{name: w, max: 2.5}]\n"
                             "tpe: {n_startup_trials: 5}\ncommand: [\"" + kQuadratic + "\", \"${args}\"]\n"
                             "parameters: {lr: {distribution: log_uniform_values, min: 0.01, max: 1.0}, "
                             "target: {value: 3.0}, steps: {value: 4}}\n");
  std::string out;
  const int rc = run_command({kSwept, "run", dir / "s.yaml", "--db", db, "--slots", "1", "--workdir", dir / "w",
                              "--dashboard", "off", "--progress", "off"},
                             dir / "run.log", &out, 120);
  INFO(out);
  REQUIRE(rc == 0);
  check_final_invariants(db, 1);
  CHECK(db_text(db, "SELECT method FROM sweeps WHERE id=1") == "tpe");
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 14);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE json_extract(suggestion, '$.method') = 'tpe'") == 14);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE json_extract(suggestion, '$.n_failed') != 0") == 0);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE (json_extract(suggestion, '$.n_finished') < 5) != "
                   "(json_extract(suggestion, '$.mode') = 'startup')") == 0);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE json_extract(suggestion, '$.mode') = 'model'") >= 8);
}

TEST_CASE("tpe: a scheduler killed with SIGKILL mid-sweep continues from the stored history") {
  TempDir dir;
  auto sched = std::make_unique<Scheduler>(dir);
  const std::string endpoint = sched->endpoint, db = sched->db;
  auto a = start_agent(dir, endpoint, "a", "none", 2);
  const int64_t id = submit(dir, endpoint, sweep("tpe", 4, 12));
  REQUIRE(eventually([&] { return db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed'") >= 5; }, 60));
  sched->process->signal(SIGKILL);
  sched->process->wait();
  sched = std::make_unique<Scheduler>(dir, endpoint);
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(db, id); }, 90), (sched->process->log() + a->log()));
  check_final_invariants(db, id);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 12);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE suggestion IS NULL") == 0);
  // After the restart the model still saw every trial that had ended: no
  // suggestion counts fewer finished trials than one made before it.
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials a JOIN trials b ON b.idx > a.idx WHERE "
                   "json_extract(b.suggestion, '$.n_finished') < json_extract(a.suggestion, '$.n_finished')") == 0);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE json_extract(suggestion, '$.mode') = 'model'") >= 1);
}

TEST_CASE("a metric no trial reports: said once per sweep in the scheduler's log, with the names reported, and in swept status") {
  TempDir dir;
  const std::string db = dir / "m.db";
  write_file(dir / "m.json", R"({"method": "grid", "metric": {"name": "val_loss"}, "command": [")" + kQuadratic +
                                 R"(", "${args}"], "parameters": {"lr": {"values": [0.1, 0.2, 0.3, 0.4]}}})");
  std::string out;
  int rc = run_command({kSwept, "run", dir / "m.json", "--db", db, "--slots", "2", "--workdir", dir / "w",
                        "--dashboard", "off", "--progress", "off"},
                       dir / "run.log", &out, 120);
  INFO(out);
  REQUIRE(rc == 0);
  // One warning line for the sweep (not one per trial), naming what the
  // trials did report, so that a typo shows as a near miss.
  size_t said = 0, said_with_names = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("metric 'val_loss' was reported by no trial") == std::string::npos) continue;
    ++said;
    if (line.find("they reported: final_loss, loss, w") != std::string::npos) ++said_with_names;
  }
  CHECK(said == 1);
  CHECK(said_with_names == 1);
  rc = run_command({kSwept, "status", "1", "--db", db}, dir / "status.log", &out);
  CHECK(rc == 0);
  CHECK(out.find("warning: 4 trials have completed and none reported the metric 'val_loss'; they reported: "
                 "final_loss, loss, w.") != std::string::npos);
  rc = run_command({kSwept, "status", "--db", db}, dir / "status.log", &out);
  CHECK(rc == 0);
  CHECK(out.find("never reported") != std::string::npos);
}

TEST_CASE("tpe whose metric never appears: random fall-back said in the log and recorded with each trial, the metric warned once") {
  TempDir dir;
  const std::string db = dir / "f.db";
  // The trials print loss, the sweep asks for val_loss: after the 2 startup
  // trials the model has no value to learn from.
  std::string spec = sweep("tpe", 2, 5);
  spec.replace(spec.find(R"("name": "loss")"), 14, R"("name": "val_loss")");
  write_file(dir / "f.json", spec);
  std::string out;
  int rc = run_command({kSwept, "run", dir / "f.json", "--db", db, "--slots", "1", "--workdir", dir / "w",
                        "--dashboard", "off", "--progress", "off"},
                       dir / "run.log", &out, 120);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 5);
  // Recorded: the trials chosen after startup say why they are random.
  const int64_t fallbacks =
      db_int(db, "SELECT COUNT(*) FROM trials WHERE json_extract(suggestion, '$.mode') = 'fallback' AND "
                 "json_extract(suggestion, '$.note') LIKE '%no finished trial reported a finite value%'");
  CHECK(fallbacks >= 1);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE json_extract(suggestion, '$.mode') = 'model'") == 0);
  // Said: one log line per fallen-back suggestion, one metric warning per sweep.
  size_t fell_back = 0, warned = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("tpe fell back to a random suggestion") != std::string::npos) ++fell_back;
    if (line.find("metric 'val_loss' was reported by no trial") != std::string::npos) ++warned;
  }
  CHECK(fell_back == static_cast<size_t>(fallbacks));
  CHECK(warned == 1);
}

TEST_CASE("a metric no trial reports: a scheduler killed and restarted mid-sweep does not say it again") {
  TempDir dir;
  auto sched = std::make_unique<Scheduler>(dir);
  const std::string endpoint = sched->endpoint, db = sched->db, log_path = dir / "scheduler.log";
  auto a = start_agent(dir, endpoint, "a", "none", 1);
  // tests/trial.sh prints loss after a second; the sweep asks for val_loss.
  const int64_t id = submit(dir, endpoint, R"({"method": "grid", "metric": {"name": "val_loss"}, "command": [")" +
                                               std::string(SWEPT_SOURCE_DIR) + R"(/tests/trial.sh", "${args}"],
      "parameters": {"secs": {"value": 1}, "k": {"values": [1, 2, 3, 4, 5, 6]}}})");
  const std::string said = "metric 'val_loss' was reported by no trial";
  auto count_said = [&] {
    const std::string log = read_file(log_path);
    size_t n = 0;
    for (size_t at = log.find(said); at != std::string::npos; at = log.find(said, at + 1)) ++n;
    return n;
  };
  REQUIRE_MESSAGE(eventually([&] { return count_said() == 1; }, 60), read_file(log_path));
  sched->process->signal(SIGKILL);
  sched->process->wait();
  const int64_t completed_before = db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed'");
  CHECK(completed_before < 6);
  sched = std::make_unique<Scheduler>(dir, endpoint);  // the same database and log file
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(db, id); }, 90), (read_file(log_path) + a->log()));
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 6);
  CHECK(count_said() == 1);
}

TEST_CASE("a trial that reports diverged and still exits 0 is never best, and its value is not kept") {
  TempDir dir;
  const std::string db = dir / "d.db";
  // lr 0.1 logs the best loss, then diverges (null, as JSON has no NaN) and exits 0.
  write_file(dir / "t.sh",
             "for a in \"$@\"; do case $a in --lr=*) lr=${a#--lr=};; esac; done\n"
             "echo \"{\\\"step\\\": 1, \\\"loss\\\": $lr}\"\n"
             "if [ \"$lr\" = 0.1 ]; then echo '{\"step\": 2, \"loss\": null, \"diverged\": true}'; fi\n"
             "exit 0\n");
  write_file(dir / "d.json", R"({"method": "grid", "metric": {"name": "loss", "goal": "minimize"}, "command": ["/bin/sh", ")" +
                                 std::string(dir / "t.sh") +
                                 R"(", "${args}"], "parameters": {"lr": {"values": [0.1, 0.2, 0.3]}}})");
  std::string out;
  int rc = run_command({kSwept, "run", dir / "d.json", "--db", db, "--slots", "2", "--workdir", dir / "w",
                        "--dashboard", "off", "--progress", "off"},
                       dir / "run.log", &out, 120);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='completed'") == 3);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE json_extract(params, '$.lr') = 0.1 AND metric_value IS NULL "
                   "AND reason LIKE '%diverged%'") == 1);
  // The best by the store's definition (completed, with a value) is lr 0.2.
  CHECK(db_text(db, "SELECT json_extract(params, '$.lr') FROM trials WHERE state='completed' AND metric_value IS NOT "
                    "NULL ORDER BY metric_value LIMIT 1") == "0.2");
}
