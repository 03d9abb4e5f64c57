// API tests: a real Server on a port picked at run time, over a database the
// test creates with store/schema.sql and fills, queried with httplib's
// client. Covers every endpoint, paging/sorting/filtering, bad requests,
// user text with <script> and quotes, the token, cancel, live events, and
// that the server never writes.
#include <doctest/doctest.h>
#include <httplib.h>
#include <sqlite3.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/testing/eventually.h"
#include "common/testing/loopback.h"
#include "common/testing/temp_dir.h"
#include "store/reader.h"
#include "store/state_checks.h"
#include "store/writer.h"
#include "web/server.h"
#include "web/static_files.h"

using nlohmann::json;
using swept::web::Server;
using swept::web::ServerOptions;

namespace {

const std::string kXss = "<script>window.__xss=1</script>\"'&<img src=x onerror=alert(1)>";

// A scratch database created from the schema contract; the test is its writer.
class TestDb {
 public:
  TestDb() : path_(dir_ / "swept.db") { REQUIRE(!dir_.path().empty()); }
  ~TestDb() {
    if (db_) sqlite3_close(db_);
  }
  const std::string& path() const { return path_; }

  void create_empty_file() { std::ofstream(path_).put('\0').flush(); std::filesystem::resize_file(path_, 0); }

  void create_schema() {
    REQUIRE(sqlite3_open(path_.c_str(), &db_) == SQLITE_OK);
    exec("PRAGMA journal_mode=WAL");
    // store/schema.sql as the writer creates it: state CHECKs filled.
    exec(swept::store::schema_sql());
  }

  void exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    INFO(sql.substr(0, 200), " -> ", err ? err : "");
    REQUIRE(rc == SQLITE_OK);
  }

  // Binds text parameters positionally and runs one statement.
  void run(const std::string& sql, const std::vector<std::string>& args) {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    for (size_t i = 0; i < args.size(); ++i)
      sqlite3_bind_text(st, static_cast<int>(i + 1), args[i].c_str(), -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    REQUIRE(rc == SQLITE_DONE);
  }

  // Sweep 1: 30 trials, lr/layers params (and a hostile one), loss metric.
  void fill() {
    create_schema();
    exec("BEGIN");
    run("INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at) "
        "VALUES (1, ?, 'grid', 'loss', 'minimize', 'spec', 'running', 30, 30, 1700000000)",
        {"mnist " + kXss});
    run("INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at) "
        "VALUES (2, 'empty', 'random', NULL, NULL, 'spec', 'running', NULL, 0, 1700000001)", {});
    for (int i = 0; i < 30; ++i) {
      std::string state = i < 20 ? "completed" : i < 24 ? "running" : i < 27 ? "queued" : "failed";
      json params = {{"lr", 0.001 * (i + 1)}, {"model", {{"layers", i % 3}}}, {kXss, kXss}};
      double loss = 1.0 / (i + 1) + (i % 3) * 0.01;
      std::string metric = state == "queued" ? "NULL" : std::to_string(loss);
      std::string gpus = state == "running" ? (i == 20 ? "'[0]'" : "'[1]'") : "NULL";
      std::string frac = (state == "running" && i != 20) ? "0.5" : "NULL";
      std::string agent = state == "queued" ? "NULL" : "'host-a'";
      run("INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, agent, gpus, gpu_fraction, env, "
          "metric_value, created_at, started_at) VALUES (" +
              std::to_string(100 + i) + ", 1, " + std::to_string(i) + ", ?, ?, '" + state + "', " +
              (state == "queued" ? "0" : "1") + ", " + agent + ", " + gpus + ", " + frac + ", ?, " + metric +
              ", 1700000000, 1700000001)",
          {params.dump(), json::array({"python3", "train.py", kXss}).dump(),
           json{{"SWEPT_TRIAL_ID", std::to_string(100 + i)}, {"XSS", kXss}}.dump()});
      if (state == "queued") continue;
      for (int step = 0; step < 300; ++step) {
        double v = loss + 1.0 / (step + 1);
        run("INSERT INTO metrics (trial_id, name, step, value) VALUES (" + std::to_string(100 + i) + ", 'loss', " +
                std::to_string(step) + ", " + std::to_string(v) + ")",
            {});
        run("INSERT INTO metrics (trial_id, name, step, value) VALUES (" + std::to_string(100 + i) + ", ?, " +
                std::to_string(step) + ", " + std::to_string(step * 0.5) + ")",
            {kXss});
      }
      run("INSERT INTO trial_latest (trial_id, name, step, value) VALUES (" + std::to_string(100 + i) + ", 'loss', 299, " +
              std::to_string(loss) + ")",
          {});
      run("INSERT INTO trial_latest (trial_id, name, step, value) VALUES (" + std::to_string(100 + i) + ", ?, 299, " +
              std::to_string(149.5) + ")",
          {kXss});
      run("INSERT INTO trial_logs (trial_id, tail) VALUES (" + std::to_string(100 + i) + ", ?)",
          {"epoch 1\n" + kXss + "\n\xff\xfe invalid utf-8\n"});
      run("INSERT INTO attempts (trial_id, attempt, agent, gpus, state, started_at) VALUES (" + std::to_string(100 + i) +
              ", 1, 'host-a', NULL, ?, 1700000001)",
          {state});
    }
    run("INSERT INTO agents (name, host, state, slots, registered_at, last_seen) VALUES ('host-a', ?, 'alive', 4, 1, 2)",
        {kXss});
    run("INSERT INTO agent_gpus (agent, idx, uuid, name, memory_bytes) VALUES ('host-a', 0, 'GPU-0', 'H100', 85899345920)", {});
    run("INSERT INTO agent_gpus (agent, idx, uuid, name, memory_bytes) VALUES ('host-a', 1, 'GPU-1', ?, 85899345920)", {kXss});
    exec("COMMIT");
  }

 private:
  swept::testing::TempDir dir_{"swept-web-test"};  // before path_: it is made from dir_
  std::string path_;
  sqlite3* db_ = nullptr;
};

std::string percent_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

struct Running {
  std::unique_ptr<Server> server;
  std::unique_ptr<httplib::Client> client;
};

Running start(const std::string& db, const std::string& token = "", swept::web::CancelFn cancel = nullptr,
              int poll_ms = 50) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_path = db;
  o.token = token;
  o.cancel = std::move(cancel);
  o.poll_interval_ms = poll_ms;
  auto s = Server::start(o);
  REQUIRE_MESSAGE(s.ok(), s.status().ToString());
  Running r;
  r.server = std::move(*s);
  r.client = std::make_unique<httplib::Client>("127.0.0.1", r.server->port());
  r.client->set_read_timeout(20, 0);
  return r;
}

json get_json(httplib::Client& c, const std::string& path, int expect_status) {
  auto res = c.Get(path.c_str());
  REQUIRE_MESSAGE(res, "no response for " << path);
  INFO(path, " -> ", res->status, " ", res->body.substr(0, 300));
  CHECK(res->status == expect_status);
  CHECK(res->get_header_value("Content-Type").find("application/json") == 0);
  json j = json::parse(res->body, nullptr, false);
  REQUIRE(!j.is_discarded());
  if (expect_status >= 400) {
    REQUIRE(j.contains("error"));
    CHECK(j["error"]["message"].get<std::string>().size() > 10);
  }
  return j;
}

}  // namespace

TEST_CASE("web: a missing database, an empty file and a schema without rows answer empty lists") {
  TestDb db;
  auto r = start(db.path());
  CHECK(get_json(*r.client, "/api/sweeps", 200)["sweeps"].empty());
  CHECK(get_json(*r.client, "/api/agents", 200)["agents"].empty());
  CHECK(get_json(*r.client, "/api/info", 200)["database"]["exists"] == false);
  auto missing = get_json(*r.client, "/api/sweeps/1", 404);
  CHECK(missing["error"]["message"].get<std::string>().find("does not exist") != std::string::npos);
  db.create_empty_file();
  CHECK(get_json(*r.client, "/api/sweeps", 200)["sweeps"].empty());
  get_json(*r.client, "/api/sweeps/1/trials", 404);
  get_json(*r.client, "/api/trials/1", 404);
  CHECK(get_json(*r.client, "/api/series?trials=1", 200)["series"].empty());
  db.create_schema();
  CHECK(get_json(*r.client, "/api/sweeps", 200)["sweeps"].empty());
  CHECK(get_json(*r.client, "/api/info", 200)["database"]["schema"] == true);
}

TEST_CASE("web: a file that is not a database is a clear error, not a crash") {
  TestDb db;
  std::ofstream(db.path()) << std::string(8192, 'x');
  auto r = start(db.path());
  auto err = get_json(*r.client, "/api/sweeps", 500);
  CHECK(err["error"]["code"] == "corruption");
  CHECK(err["error"]["message"].get<std::string>().find("not a database") != std::string::npos);
  get_json(*r.client, "/api/trials/1", 500);
}

TEST_CASE("web: sweeps list counts per state and the best trial") {
  TestDb db;
  db.fill();
  auto r = start(db.path());
  auto sweeps = get_json(*r.client, "/api/sweeps", 200)["sweeps"];
  REQUIRE(sweeps.size() == 2);
  json s1 = sweeps[1];
  CHECK(s1["id"] == 1);
  CHECK(s1["name"] == "mnist " + kXss);  // returned verbatim: escaping is the page's job
  CHECK(s1["counts"]["completed"] == 20);
  CHECK(s1["counts"]["running"] == 4);
  CHECK(s1["counts"]["queued"] == 3);
  CHECK(s1["counts"]["failed"] == 3);
  CHECK(s1["counts"]["lost"] == 0);
  // Lowest loss among completed trials (store/reader.h, "Best"): i = 18,
  // 1/19 + 0; the running i = 21 (1/22) and the failed i = 27 (1/28) are
  // lower but do not count.
  CHECK(s1["best"]["trial_id"] == 118);
  CHECK(sweeps[0]["best"].is_null());
  CHECK(get_json(*r.client, "/api/sweeps/1", 200)["counts"]["running"] == 4);
}

TEST_CASE("web: trials are paged, filtered by state and sorted by columns, parameters and metrics") {
  TestDb db;
  db.fill();
  auto r = start(db.path());
  auto page = get_json(*r.client, "/api/sweeps/1/trials?limit=10&offset=5", 200);
  CHECK(page["total"] == 30);
  REQUIRE(page["trials"].size() == 10);
  CHECK(page["trials"][0]["index"] == 5);
  CHECK(page["best_trial_id"] == 118);
  auto params = page["columns"]["params"].get<std::vector<std::string>>();
  CHECK(std::find(params.begin(), params.end(), "lr") != params.end());
  CHECK(std::find(params.begin(), params.end(), "model.layers") != params.end());
  CHECK(std::find(params.begin(), params.end(), kXss) != params.end());
  auto metrics = page["columns"]["metrics"].get<std::vector<std::string>>();
  CHECK(metrics == std::vector<std::string>{"<script>window.__xss=1</script>\"'&<img src=x onerror=alert(1)>", "loss"});
  json t5 = page["trials"][0];
  CHECK(t5["params"]["model.layers"] == 2);
  CHECK(t5["params"][kXss] == kXss);
  CHECK(t5["metrics"]["loss"].get<double>() == doctest::Approx(1.0 / 6 + 0.02).epsilon(1e-5));

  auto running = get_json(*r.client, "/api/sweeps/1/trials?state=running,queued", 200);
  CHECK(running["total"] == 7);
  for (const auto& t : running["trials"]) CHECK((t["state"] == "running" || t["state"] == "queued"));

  auto by_lr = get_json(*r.client, "/api/sweeps/1/trials?sort=param:lr&order=desc&limit=3", 200);
  CHECK(by_lr["trials"][0]["index"] == 29);
  auto by_layers = get_json(*r.client, "/api/sweeps/1/trials?sort=param:model.layers&limit=30", 200);
  CHECK(by_layers["trials"][0]["params"]["model.layers"] == 0);
  CHECK(by_layers["trials"][29]["params"]["model.layers"] == 2);
  auto by_loss = get_json(*r.client, "/api/sweeps/1/trials?sort=metric:loss&limit=30", 200);
  double prev = -1;
  int with_loss = 0;
  for (const auto& t : by_loss["trials"]) {
    if (!t["metrics"].contains("loss")) continue;  // NULLs last
    CHECK(t["metrics"]["loss"].get<double>() >= prev);
    prev = t["metrics"]["loss"].get<double>();
    ++with_loss;
  }
  CHECK(with_loss == 27);
  CHECK(by_loss["trials"][29]["state"] == "queued");
  // Small pages take the index-walk plan, a whole page the per-trial plan:
  // both must give the same order, trials without the metric last.
  for (std::string order : {"asc", "desc"}) {
    auto whole = get_json(*r.client, "/api/sweeps/1/trials?sort=metric:loss&limit=30&order=" + order, 200)["trials"];
    std::vector<int64_t> expected, paged;
    for (const auto& t : whole) expected.push_back(t["id"].get<int64_t>());
    for (int offset = 0; offset < 32; offset += 4) {
      auto page = get_json(*r.client, "/api/sweeps/1/trials?sort=metric:loss&limit=4&order=" + order +
                                          "&offset=" + std::to_string(offset), 200);
      for (const auto& t : page["trials"]) paged.push_back(t["id"].get<int64_t>());
    }
    CHECK(paged == expected);
    CHECK(whole[29]["state"] == "queued");
  }
  auto by_metric = get_json(*r.client, "/api/sweeps/1/trials?sort=metric&limit=1", 200);
  CHECK(by_metric["trials"][0]["id"] == 127);  // the failed i = 27 has the lowest stored value
  auto by_state = get_json(*r.client, "/api/sweeps/1/trials?sort=state&order=desc&limit=1", 200);
  CHECK(by_state["trials"][0]["state"] == "running");
  // A hostile parameter name is a column like any other; only sorting by it is refused.
  auto hostile = get_json(*r.client, "/api/sweeps/1/trials?sort=param:" + percent_encode(kXss), 400);
  CHECK(hostile["error"]["message"].get<std::string>().find("double quote") != std::string::npos);
}

TEST_CASE("web: bad requests get 4xx JSON errors naming the problem") {
  TestDb db;
  db.fill();
  auto r = start(db.path());
  get_json(*r.client, "/api/sweeps/1/trials?limit=0", 400);
  get_json(*r.client, "/api/sweeps/1/trials?limit=abc", 400);
  get_json(*r.client, "/api/sweeps/1/trials?limit=5000", 400);
  get_json(*r.client, "/api/sweeps/1/trials?offset=-1", 400);
  get_json(*r.client, "/api/sweeps/1/trials?offset=1e3", 400);
  auto sort = get_json(*r.client, "/api/sweeps/1/trials?sort=bogus", 400);
  CHECK(sort["error"]["message"].get<std::string>().find("bogus") != std::string::npos);
  get_json(*r.client, "/api/sweeps/1/trials?sort=param:nope", 400);
  get_json(*r.client, "/api/sweeps/1/trials?sort=metric:nope", 400);
  get_json(*r.client, "/api/sweeps/1/trials?order=up", 400);
  auto st = get_json(*r.client, "/api/sweeps/1/trials?state=zombie", 400);
  CHECK(st["error"]["message"].get<std::string>().find("zombie") != std::string::npos);
  auto unknown = get_json(*r.client, "/api/sweeps/1/trials?colour=red", 400);
  CHECK(unknown["error"]["message"].get<std::string>().find("colour") != std::string::npos);
  get_json(*r.client, "/api/sweeps/1/trials?limit=%zz%", 400);
  get_json(*r.client, "/api/sweeps/999/trials", 404);
  get_json(*r.client, "/api/sweeps/99999999999999999999999", 400);
  get_json(*r.client, "/api/sweeps/0", 400);
  get_json(*r.client, "/api/trials/999", 404);
  get_json(*r.client, "/api/trials/100?points=1", 400);
  get_json(*r.client, "/api/series", 400);
  get_json(*r.client, "/api/series?trials=1,x", 400);
  get_json(*r.client, "/api/series?trials=", 400);
  get_json(*r.client, "/api/sweeps/1/points?limit=0", 400);
  get_json(*r.client, "/api/nothing/here", 404);
  get_json(*r.client, "/api/sweeps/abc", 404);
  auto post = r.client->Post("/api/sweeps/1/cancel", "", "application/json");
  REQUIRE(post);
  CHECK(post->status == 404);  // no cancel without a scheduler
}

TEST_CASE("web: one trial has its command, environment, attempts, log tail and downsampled series") {
  TestDb db;
  db.fill();
  auto r = start(db.path());
  auto t = get_json(*r.client, "/api/trials/103?points=50", 200);
  CHECK(t["sweep_id"] == 1);
  CHECK(t["sweep_name"] == "mnist " + kXss);
  CHECK(t["command"] == json::array({"python3", "train.py", kXss}));
  CHECK(t["env"]["XSS"] == kXss);
  CHECK(t["log_tail"].get<std::string>().find(kXss) != std::string::npos);  // invalid UTF-8 replaced, not fatal
  CHECK(t["attempt_history"].size() == 1);
  // A database of schema version 1 (no trials.suggestion column) reads as null.
  CHECK(t.contains("suggestion"));
  CHECK(t["suggestion"].is_null());
  REQUIRE(t["series"].size() == 2);
  for (const auto& s : t["series"]) {
    CHECK(s["total_points"] == 300);
    CHECK(s["steps"].size() == 50);
    CHECK(s["steps"][0] == 0);
    CHECK(s["steps"][49] == 299);
  }
  auto many = get_json(*r.client, "/api/series?trials=100,101,999&metric=loss&points=20", 200);
  REQUIRE(many["series"].size() == 2);
  CHECK(many["series"][1]["trial_id"] == 101);
  CHECK(many["series"][1]["values"].size() == 20);
}

TEST_CASE("web: agents show their GPUs and which trial holds which share") {
  TestDb db;
  db.fill();
  auto r = start(db.path());
  auto agents = get_json(*r.client, "/api/agents", 200)["agents"];
  REQUIRE(agents.size() == 1);
  CHECK(agents[0]["host"] == kXss);
  // A file of schema version 1: no containment column, read as unsaid.
  CHECK(agents[0]["containment"].is_null());
  REQUIRE(agents[0]["gpus"].size() == 2);
  CHECK(agents[0]["gpus"][0]["trials"].size() == 1);
  CHECK(agents[0]["gpus"][0]["trials"][0]["trial_id"] == 120);
  CHECK(agents[0]["gpus"][0]["trials"][0]["fraction"].is_null());
  CHECK(agents[0]["gpus"][1]["name"] == kXss);
  REQUIRE(agents[0]["gpus"][1]["trials"].size() == 3);
  CHECK(agents[0]["gpus"][1]["trials"][0]["fraction"] == 0.5);
}

TEST_CASE("web: an agent's containment mode is the one its REGISTER named, null when it named none") {
  swept::testing::TempDir dir;
  const std::string path = dir / "swept.db";
  {
    auto writer = swept::store::Writer::open(path);
    REQUIRE(writer.ok());
    REQUIRE((*writer)->begin().ok());
    REQUIRE((*writer)->upsert_agent("a", "host-a", 2, {}, 1, "cgroup").ok());
    REQUIRE((*writer)->upsert_agent("b", "host-b", 2, {}, 1).ok());
    REQUIRE((*writer)->commit().ok());
  }
  auto r = start(path);
  auto agents = get_json(*r.client, "/api/agents", 200)["agents"];
  REQUIRE(agents.size() == 2);
  CHECK(agents[0]["name"] == "a");
  CHECK(agents[0]["containment"] == "cgroup");
  CHECK(agents[1]["containment"].is_null());
}

TEST_CASE("web: points and importance summarise a sweep from a sample") {
  TestDb db;
  db.fill();
  auto r = start(db.path());
  auto pts = get_json(*r.client, "/api/sweeps/1/points?limit=10", 200);
  CHECK(pts["population"] == 30);
  CHECK(pts["stride"] == 3);
  for (const auto& p : pts["points"]) CHECK(!p["metric_value"].is_null());
  bool has_best = false;
  for (const auto& p : pts["points"]) has_best |= p["id"] == 121;
  CHECK(has_best);
  auto imp = get_json(*r.client, "/api/sweeps/1/importance", 200);
  CHECK(imp["method"].get<std::string>().find("eta^2") != std::string::npos);
  CHECK(imp["sampled"] == 27);  // the 3 queued trials have no metric value
  CHECK(imp["population"] == 30);
  // The hostile parameter has one value in every trial: never changed, so
  // not listed at all (not with eta^2 0).
  REQUIRE(imp["params"].size() == 2);
  CHECK(imp["params"][0]["name"] == "lr");  // loss falls with lr here: it explains most
  CHECK(imp["params"][0]["eta_squared"].get<double>() > 0.5);
  CHECK(imp["params"][1]["name"] == "model.layers");
  CHECK_FALSE(imp.contains("objectives"));
  auto empty = get_json(*r.client, "/api/sweeps/2/importance", 200);
  CHECK(empty["population"] == 0);
}

// Sweep 5: two objectives (loss down, acc up) and a constraint (mem at most
// 8), in the sweep file as submitted. Trial 500 and its equal 502 and trial
// 501 are the front; 503 would dominate them but violates mem; 504 is
// dominated; 505 is running. `fixed` never changes.
void fill_objectives_sweep(TestDb& db) {
  db.exec("BEGIN");
  db.run("INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at) "
         "VALUES (5, 'front', 'random', NULL, NULL, ?, 'running', 6, 6, 1000)",
         {"method: random\nrun_cap: 6\nmetrics:\n  - {name: loss, goal: minimize}\n  - {name: acc, goal: maximize}\n"
          "constraints:\n  - {name: mem, max: 8}\nparameters:\n  lr: {min: 0.0, max: 1.0}\n  fixed: {value: 1}\n"});
  const double values[6][3] = {{1, 0.5, 4}, {2, 0.9, 4}, {1, 0.5, 8}, {0.5, 0.95, 16}, {3, 0.4, 4}, {0.1, 1.0, 1}};
  for (int i = 0; i < 6; ++i) {
    const std::string id = std::to_string(500 + i);
    db.run("INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, created_at, ended_at) VALUES (" + id +
               ", 5, " + std::to_string(i) + ", ?, '[]', '" + (i == 5 ? "running" : "completed") + "', 1, 1000, 1010)",
           {json{{"lr", 0.1 * i}, {"fixed", 1}}.dump()});
    const char* names[3] = {"loss", "acc", "mem"};
    for (int k = 0; k < 3; ++k)
      db.run("INSERT INTO trial_latest (trial_id, name, step, value) VALUES (" + id + ", ?, 1, " +
                 std::to_string(values[i][k]) + ")",
             {names[k]});
  }
  db.exec("COMMIT");
}

TEST_CASE("web: a sweep with several objectives serves its Pareto front, each trial's objectives and feasibility") {
  TestDb db;
  db.fill();
  fill_objectives_sweep(db);
  auto r = start(db.path());
  auto sweep = get_json(*r.client, "/api/sweeps/5", 200);
  CHECK(sweep["best"].is_null());
  const json& front = sweep["front"];
  CHECK(front["trial_ids"] == json::array({500, 501, 502}));
  CHECK(front["objectives"] == json::parse(R"([{"name": "loss", "goal": "minimize"}, {"name": "acc", "goal": "maximize"}])"));
  CHECK(front["evaluated"] == 5);
  CHECK(front["infeasible"] == 1);
  CHECK(front["reference"][0].get<double>() == doctest::Approx(3));
  CHECK(front["reference"][1].get<double>() == doctest::Approx(0.4));
  CHECK(front["hypervolume"].get<double>() == doctest::Approx(0.6));
  CHECK(sweep["constraints"] == json::parse(R"([{"name": "mem", "min": null, "max": 8}])"));
  // The list has the same summary; a sweep with one metric and no constraints has neither key.
  auto list = get_json(*r.client, "/api/sweeps", 200);
  for (const auto& s : list["sweeps"]) {
    if (s["id"] == 5) CHECK(s["front"] == front);
    if (s["id"] == 1) CHECK_FALSE(s.contains("front"));
    if (s["id"] == 1) CHECK_FALSE(s.contains("constraints"));
  }

  auto page = get_json(*r.client, "/api/sweeps/5/trials", 200);
  CHECK(page["best_trial_id"].is_null());
  for (const auto& t : page["trials"]) {
    if (t["id"] == 503) {
      CHECK(t["feasible"] == false);
      CHECK(t["violated"] == json::array({"mem"}));
    } else if (t["id"] == 505) {
      CHECK_FALSE(t.contains("feasible"));  // running: not judged yet
    } else {
      CHECK(t["feasible"] == true);
    }
  }

  auto points = get_json(*r.client, "/api/sweeps/5/objectives", 200);
  CHECK(points["front"] == front);
  CHECK(points["total"] == 5);
  CHECK(points["params"] == json::array({"fixed", "lr"}));
  REQUIRE(points["points"].size() == 5);
  for (const auto& p : points["points"]) {
    const int id = p["trial_id"];
    CHECK(p["on_front"] == (id == 500 || id == 501 || id == 502));
    CHECK(p["feasible"] == (id != 503));
    if (id == 501) CHECK(p["values"] == json::array({2.0, 0.9}));
  }
  get_json(*r.client, "/api/sweeps/5/objectives?limit=0", 400);
  get_json(*r.client, "/api/sweeps/99/objectives", 404);
  // One metric: one objective, its best the one point on the "front".
  auto one = get_json(*r.client, "/api/sweeps/1/objectives", 200);
  CHECK(one["objectives"].size() == 1);
  CHECK(one["front"].is_null());
  int best = 0;
  for (const auto& p : one["points"]) best += p["on_front"].get<bool>() ? p["trial_id"].get<int>() : 0;
  CHECK(best == get_json(*r.client, "/api/sweeps/1", 200)["best"]["trial_id"]);
  CHECK(best == 118);  // the lowest loss among completed trials (running 121 is lower, but not best)

  // Importance per objective; `fixed` never changed, so it is not listed.
  auto imp = get_json(*r.client, "/api/sweeps/5/importance", 200);
  REQUIRE(imp["objectives"].size() == 2);
  CHECK(imp["objectives"][0]["metric"] == "loss");
  CHECK(imp["objectives"][1]["metric"] == "acc");
  CHECK(imp["objectives"][1]["goal"] == "maximize");
  for (const auto& o : imp["objectives"]) {
    REQUIRE(o["params"].size() == 1);
    CHECK(o["params"][0]["name"] == "lr");
    CHECK(o["params"][0]["trials"] == 5);
  }
  CHECK(imp["metric"] == "loss");
  CHECK(imp["sampled"] == 5);
  CHECK(imp["population"] == 6);
}

// Sweep 3 (maximize): trials whose index order and completion order differ,
// a tie, and better values on trials that do not count for best (failed,
// running) or a completed trial without a value.
void fill_history_sweep(TestDb& db) {
  db.exec("BEGIN");
  db.run("INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at) "
         "VALUES (3, 'history', 'random', 'acc', 'maximize', 'spec', 'running', 8, 8, 1000)", {});
  struct Row { const char* state; const char* value; const char* ended; };
  const Row rows[] = {{"completed", "0.5", "1010"}, {"completed", "0.7", "1040"}, {"failed", "0.99", "1015"},
                      {"completed", "0.6", "1020"}, {"running", "0.95", "NULL"},  {"completed", "0.7", "1030"},
                      {"completed", "NULL", "1025"}, {"completed", "0.65", "1005"}};
  for (int i = 0; i < 8; ++i)
    db.run("INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, metric_value, created_at, ended_at) "
           "VALUES (" + std::to_string(300 + i) + ", 3, " + std::to_string(i) + ", '{}', '[]', '" + rows[i].state + "', 1, " +
               rows[i].value + ", 1000, " + rows[i].ended + ")",
           {});
  db.exec("COMMIT");
}

TEST_CASE("web: the optimisation history gives each trial's value and the best so far by index and by time") {
  TestDb db;
  db.fill();
  fill_history_sweep(db);
  auto r = start(db.path());
  auto h = get_json(*r.client, "/api/sweeps/3/history", 200);
  CHECK(h["metric"]["name"] == "acc");
  CHECK(h["metric"]["goal"] == "maximize");
  CHECK(h["created_at"] == 1000.0);
  // Only what "best" ranks: completed trials with a value (idx 0, 1, 3, 5, 7).
  CHECK(h["total"] == 5);
  CHECK(h["stride"] == 1);
  REQUIRE(h["points"].size() == 5);
  const int64_t ids[] = {300, 301, 303, 305, 307};
  const double values[] = {0.5, 0.7, 0.6, 0.7, 0.65};
  // Best so far by index: 0.5, then 0.7 from idx 1 on.
  const double by_index[] = {0.5, 0.7, 0.7, 0.7, 0.7};
  // By completion time: idx 7 (t=1005, 0.65), 0 (1010), 3 (1020), 5 (1030, 0.7), 1 (1040).
  const double by_time[] = {0.65, 0.7, 0.65, 0.7, 0.65};
  for (int k = 0; k < 5; ++k) {
    CAPTURE(k);
    const json& p = h["points"][k];
    CHECK(p["trial_id"] == ids[k]);
    CHECK(p["value"].get<double>() == doctest::Approx(values[k]));
    CHECK(p["best_by_index"].get<double>() == doctest::Approx(by_index[k]));
    CHECK(p["best_by_time"].get<double>() == doctest::Approx(by_time[k]));
  }
  CHECK(h["points"][4]["ended_at"] == 1005.0);
  // The one definition of best: the sweep's best (the tie at 0.7 goes to the
  // lower id) is where both staircases end.
  auto sweep = get_json(*r.client, "/api/sweeps/3", 200);
  CHECK(sweep["best"]["trial_id"] == 301);
  CHECK(h["best"]["trial_id"] == 301);
  CHECK(h["best"]["value"] == sweep["best"]["value"]);
  CHECK(h["points"][4]["best_by_index"] == sweep["best"]["value"]);

  // Sampled: every stride-th point and each one that improved the best, each
  // with the best values of the whole sweep.
  auto small = get_json(*r.client, "/api/sweeps/3/history?limit=2", 200);
  CHECK(small["total"] == 5);
  CHECK(small["stride"] == 3);
  CHECK(small["points"].size() < 5);
  for (const auto& p : small["points"]) {
    bool matched = false;
    for (const auto& q : h["points"])
      if (q["trial_id"] == p["trial_id"]) {
        matched = true;
        CHECK(q == p);
      }
    CHECK(matched);
  }

  // Sweep 1 (minimize, no ended_at): its 20 completed trials.
  auto h1 = get_json(*r.client, "/api/sweeps/1/history", 200);
  CHECK(h1["total"] == 20);
  CHECK(h1["best"]["trial_id"] == 118);
  CHECK(h1["points"].back()["best_by_index"] == get_json(*r.client, "/api/sweeps/1", 200)["best"]["value"]);
  // No metric: no history. Unknown sweep, bad limit: errors.
  auto none = get_json(*r.client, "/api/sweeps/2/history", 200);
  CHECK(none["points"].empty());
  CHECK(none["metric"]["name"].is_null());
  get_json(*r.client, "/api/sweeps/99/history", 404);
  get_json(*r.client, "/api/sweeps/3/history?limit=0", 400);
  get_json(*r.client, "/api/sweeps/3/history?points=5", 400);
}

TEST_CASE("web: a sweep whose metric no trial reports says so, with the names its trials did report") {
  TestDb db;
  db.fill();
  db.exec("BEGIN");
  // Sweep 4 names val_loss; its two completed trials report loss and
  // validation_loss, its running one nothing yet. Sweep 5 names val_loss too,
  // and only its running trial has reported it: no warning.
  for (int sweep : {4, 5})
    db.run("INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, "
           "created_at) VALUES (" + std::to_string(sweep) + ", 'typo', 'grid', 'val_loss', 'minimize', 'spec', 'running', 3, 3, 1)",
           {});
  for (int i = 0; i < 6; ++i) {
    const int sweep = i < 3 ? 4 : 5;
    const bool running = i % 3 == 2;
    const std::string id = std::to_string(400 + i);
    const std::string value = sweep == 5 && running ? "0.3" : "NULL";
    db.run("INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, metric_value, created_at) VALUES (" + id +
               ", " + std::to_string(sweep) + ", " + std::to_string(i % 3) + ", '{}', '[]', '" +
               (running ? "running" : "completed") + "', 1, " + value + ", 1)",
           {});
    for (const char* name : {"loss", "validation_loss"}) {
      if (running && sweep == 4) continue;
      const std::string metric = sweep == 5 && running ? "val_loss" : name;
      db.run("INSERT OR REPLACE INTO trial_latest (trial_id, name, step, value) VALUES (" + id + ", ?, 1, 0.5)", {metric});
    }
  }
  db.exec("COMMIT");
  auto r = start(db.path());
  auto s4 = get_json(*r.client, "/api/sweeps/4", 200);
  CHECK(s4["best"].is_null());
  REQUIRE(s4.contains("metric_missing"));
  CHECK(s4["metric_missing"]["completed"] == 2);
  CHECK(s4["metric_missing"]["reported"] == json::array({"loss", "validation_loss"}));
  // The same object in the list (and on the event stream, which sends these).
  bool listed = false;
  const json all = get_json(*r.client, "/api/sweeps", 200);
  for (const auto& s : all["sweeps"]) {
    if (s["id"] == 4) listed = s["metric_missing"] == s4["metric_missing"];
    if (s["id"] == 1 || s["id"] == 2 || s["id"] == 5) CHECK_MESSAGE(!s.contains("metric_missing"), s["id"]);
  }
  CHECK(listed);
  // `swept status` reads the same summary (the protocol's SweepRow).
  auto reader = swept::store::open_reader(db.path());
  REQUIRE(reader.ok());
  auto sums = swept::store::sweep_summaries(**reader, 4);
  REQUIRE(sums.ok());
  REQUIRE(sums->front().metric_missing);
  CHECK(sums->front().metric_missing->reported == std::vector<std::string>{"loss", "validation_loss"});
}

TEST_CASE("web: the token guards every request: header, ?token= then cookie") {
  TestDb db;
  db.fill();
  auto r = start(db.path(), "s3cret-T0ken");
  get_json(*r.client, "/api/sweeps", 401);
  auto page = r.client->Get("/");
  REQUIRE(page);
  CHECK(page->status == 401);
  httplib::Headers bearer = {{"Authorization", "Bearer s3cret-T0ken"}};
  auto ok = r.client->Get("/api/sweeps", bearer);
  REQUIRE(ok);
  CHECK(ok->status == 200);
  httplib::Headers wrong = {{"Authorization", "Bearer s3cret-T0kem"}};
  CHECK(r.client->Get("/api/sweeps", wrong)->status == 401);
  auto login = r.client->Get("/?token=s3cret-T0ken");
  REQUIRE(login);
  CHECK(login->status == 302);
  std::string cookie = login->get_header_value("Set-Cookie");
  CHECK(cookie.find("swept_token=s3cret-T0ken") == 0);
  CHECK(cookie.find("HttpOnly") != std::string::npos);
  httplib::Headers with_cookie = {{"Cookie", "other=1; swept_token=s3cret-T0ken"}};
  auto index = r.client->Get("/", with_cookie);
  REQUIRE(index);
  CHECK(index->status == 200);
  CHECK(index->body.find("<title>swept</title>") != std::string::npos);
  CHECK(r.client->Get("/d3.min.js", with_cookie)->body.find("d3") != std::string::npos);
  ServerOptions bad;
  bad.listen = "127.0.0.1:0";
  bad.token = "has space";
  CHECK(Server::start(bad).status().code() == swept::StatusCode::kInvalidArgument);
}

TEST_CASE("web: without a token, requests naming another host are refused (DNS rebinding)") {
  TestDb db;
  db.fill();
  auto r = start(db.path());
  httplib::Headers evil = {{"Host", "attacker.example:8080"}};
  auto res = r.client->Get("/api/sweeps", evil);
  REQUIRE(res);
  CHECK(res->status == 421);
  CHECK(res->body.find("DNS rebinding") != std::string::npos);
  httplib::Headers local = {{"Host", "localhost:8080"}};
  CHECK(r.client->Get("/api/sweeps", local)->status == 200);
  auto with_token = start(db.path(), "tok");
  httplib::Headers evil_with_token = {{"Host", "attacker.example"}, {"Authorization", "Bearer tok"}};
  CHECK(with_token.client->Get("/api/sweeps", evil_with_token)->status == 200);
}

TEST_CASE("web: cancel exists only with a callback and needs the custom header") {
  TestDb db;
  db.fill();
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> calls;
  auto r = start(db.path(), "", [&](std::optional<int64_t> sweep, std::optional<int64_t> trial) {
    std::lock_guard<std::mutex> lock(mu);
    calls.emplace_back(sweep.value_or(-1), trial.value_or(-1));
    if (trial && *trial == 999) return swept::Status::NotFound("trial 999 does not exist");
    return swept::Status::Ok();
  });
  CHECK(get_json(*r.client, "/api/info", 200)["cancel"] == true);
  auto no_header = r.client->Post("/api/sweeps/1/cancel", "", "application/json");
  REQUIRE(no_header);
  CHECK(no_header->status == 400);
  httplib::Headers h = {{"X-Requested-With", "swept"}};
  auto ok = r.client->Post("/api/sweeps/1/cancel", h, "", "application/json");
  REQUIRE(ok);
  CHECK(ok->status == 200);
  auto trial = r.client->Post("/api/trials/999/cancel", h, "", "application/json");
  REQUIRE(trial);
  CHECK(trial->status == 404);
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(calls.size() == 2);
  CHECK(calls[0] == std::make_pair<int64_t, int64_t>(1, -1));
  CHECK(calls[1] == std::make_pair<int64_t, int64_t>(-1, 999));
}

TEST_CASE("web: live events report a trial that starts running after the stream opened") {
  TestDb db;
  db.fill();
  auto r = start(db.path(), "", nullptr, 20);
  std::mutex mu;
  std::string received;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    httplib::Client c("127.0.0.1", r.server->port());
    c.set_read_timeout(30, 0);
    c.Get("/api/events", [&](const char* data, size_t n) {
      std::lock_guard<std::mutex> lock(mu);
      received.append(data, n);
      return !done.load();
    });
  });
  auto received_has = [&](const std::string& needle) {
    std::lock_guard<std::mutex> lock(mu);
    return received.find(needle) != std::string::npos;
  };
  CHECK(swept::testing::eventually([&] { return received_has("event: hello"); }, 20));
  db.exec("UPDATE trials SET state = 'running', agent = 'host-a' WHERE id = 125");
  CHECK(swept::testing::eventually([&] { return received_has("{\"id\":125,\"sweep_id\":1}"); }, 20));
  done = true;
  db.exec("UPDATE trials SET state = 'completed' WHERE id = 125");  // one more event unblocks the reader
  r.server->stop();  // also ends the stream
  reader.join();
}

TEST_CASE("web: both plans for sorting by a final metric give the same pages") {
  TestDb db;
  db.fill();
  auto conn = swept::store::Connection::open(db.path(), swept::store::Connection::Mode::kReadOnly, 100);
  REQUIRE(conn.ok());
  using Plan = swept::store::TrialQuery::MetricPlan;
  for (bool desc : {false, true}) {
    for (auto states : {std::vector<swept::TrialState>{}, std::vector<swept::TrialState>{swept::TrialState::kRunning, swept::TrialState::kQueued}}) {
      std::vector<int64_t> walk, per_trial;
      for (int64_t offset = 0; offset < 34; offset += 4) {
        for (Plan plan : {Plan::kIndexWalk, Plan::kPerTrial}) {
          swept::store::TrialQuery q;
          q.sweep_id = 1;
          q.sort = "metric:loss";
          q.descending = desc;
          q.states = states;
          q.limit = 4;
          q.offset = offset;
          q.metric_plan = plan;
          auto page = swept::store::list_trials(**conn, q);
          REQUIRE_MESSAGE(page.ok(), page.status().ToString());
          for (const auto& row : page->rows) (plan == Plan::kIndexWalk ? walk : per_trial).push_back(row.id);
        }
      }
      CHECK(walk == per_trial);
      CHECK(walk.size() == (states.empty() ? 30u : 7u));
    }
  }
}

TEST_CASE("web: the server's connections cannot write") {
  TestDb db;
  db.fill();
  auto conn = swept::store::Connection::open(db.path(), swept::store::Connection::Mode::kReadOnly, 100);
  REQUIRE(conn.ok());
  auto s = (*conn)->exec("DELETE FROM trials");
  CHECK(!s.ok());
  CHECK(s.message().find("readonly") != std::string::npos);  // SQLite's reason, not its internals
  CHECK(s.message().find("sqlite3_exec") == std::string::npos);
}

TEST_CASE("web: a bad listen address is a clear error") {
  ServerOptions o;
  o.listen = "localhost";
  CHECK(Server::start(o).status().code() == swept::StatusCode::kInvalidArgument);
  o.listen = "127.0.0.1:99999";
  CHECK(Server::start(o).status().code() == swept::StatusCode::kInvalidArgument);
  o.listen = "127.0.0.1:0";
  auto a = Server::start(o);
  REQUIRE(a.ok());
  o.listen = "127.0.0.1:" + std::to_string((*a)->port());
  CHECK(Server::start(o).status().code() == swept::StatusCode::kIoError);  // in use
  CHECK((*a)->url() == "http://127.0.0.1:" + std::to_string((*a)->port()) + "/");
}

// Issue 15, defect 12: the dashboard's small faults.
TEST_CASE("web: one malformed JSON row is shown as damaged, the rest of the page as usual") {
  TestDb db;
  db.fill();
  db.exec("UPDATE trials SET params='{\"lr\": 0.1, broken' WHERE id=105");
  auto r = start(db.path());
  auto page = get_json(*r.client, "/api/sweeps/1/trials?limit=10", 200);
  REQUIRE(page["trials"].size() == 10);
  json t5 = page["trials"][5];
  CHECK(t5["id"] == 105);
  CHECK(t5["damaged"].get<std::string>().find("parameters") != std::string::npos);
  CHECK(page["trials"][4].value("damaged", "") == "");
  // Sorting by a parameter, and the sweep's own views, still answer.
  get_json(*r.client, "/api/sweeps/1/trials?sort=param:lr", 200);
  get_json(*r.client, "/api/sweeps/1/trials?sort=param:model.layers&order=desc&limit=50", 200);
  get_json(*r.client, "/api/sweeps/1", 200);
  get_json(*r.client, "/api/trials/105", 200);
  get_json(*r.client, "/api/sweeps/1/points", 200);
}

TEST_CASE("web: a database of a newer schema is refused as the CLI refuses it") {
  TestDb db;
  db.fill();
  db.exec("INSERT INTO meta(key, value) VALUES('schema_version', '99') "
          "ON CONFLICT(key) DO UPDATE SET value=excluded.value");
  auto r = start(db.path());
  auto j = get_json(*r.client, "/api/sweeps", 409);
  CHECK(j["error"]["message"].get<std::string>().find("schema version 99") != std::string::npos);
  auto reader = swept::store::open_reader(db.path());
  CHECK_FALSE(reader.ok());
}

TEST_CASE("web: ?token= never redirects off the site, and a token's prefix or repetition is refused") {
  TestDb db;
  db.fill();
  auto r = start(db.path(), "tok");
  for (const char* path : {"//evil.example/x?token=tok", "/\\evil.example?token=tok", "/%2F%2Fevil.example?token=tok"}) {
    auto res = r.client->Get(path);
    REQUIRE(res);
    INFO(path);
    CHECK(res->status == 302);
    CHECK(res->get_header_value("Location") == "/");
  }
  auto fine = r.client->Get("/index.html?token=tok");
  REQUIRE(fine);
  CHECK(fine->get_header_value("Location") == "/index.html");
  for (const char* bad : {"to", "toktok", "t", "x", "tokk"}) {
    httplib::Headers h = {{"Authorization", std::string("Bearer ") + bad}};
    INFO(bad);
    CHECK(r.client->Get("/api/sweeps", h)->status == 401);
  }
}

TEST_CASE("web: a cancel POST without a body length is answered at once and cancels nothing") {
  TestDb db;
  db.fill();
  std::atomic<int> calls{0};
  auto r = start(db.path(), "", [&](std::optional<int64_t>, std::optional<int64_t>) {
    ++calls;
    return swept::Status::Ok();
  });
  httplib::Client raw("127.0.0.1", r.server->port());
  // A request without Content-Length, sent on a socket the test keeps open.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(r.server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string req = "POST /api/sweeps/1/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Requested-With: swept\r\n\r\n";
  REQUIRE(::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size()));
  // The answer comes before the server's 10 s read timeout would end a body
  // read: wait for it with a deadline well under that.
  pollfd p{fd, POLLIN, 0};
  REQUIRE_MESSAGE(::poll(&p, 1, 8000) == 1, "no answer: the server waits for a body that never comes");
  char buf[512] = {};
  ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
  ::close(fd);
  REQUIRE(n > 0);
  CHECK(std::string(buf).rfind("HTTP/1.1 411", 0) == 0);
  CHECK(calls == 0);
  // With Content-Length: 0 it works.
  httplib::Headers h = {{"X-Requested-With", "swept"}};
  CHECK(r.client->Post("/api/sweeps/1/cancel", h, "", "application/json")->status == 200);
  CHECK(calls == 1);
}

namespace {

// Whether the server has given up on `fd` already (an answer or EOF is readable).
bool given_up_by_server(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// Reads until the server closes `fd` (true) or 30 s pass (false).
bool reads_to_eof(int fd) {
  char buf[1024];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 30000) != 1) return false;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
  }
}

}  // namespace

// Issue 15, defect 9: half-open requests (headers never finished) must not
// stall everyone else. Ordering, not timing: the other requests are
// answered while every half-open connection is still held open by the
// server, i.e. without waiting for any of them to time out.
TEST_CASE("web: 100 half-open requests do not stall the others") {
  TestDb db;
  db.fill();
  auto r = start(db.path());
  std::vector<int> half_open;
  for (int i = 0; i < 100; ++i) {
    int fd = swept::testing::connect_loopback(r.server->port());
    REQUIRE(fd >= 0);
    const std::string partial = "GET /api/sweeps HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    REQUIRE(::send(fd, partial.data(), partial.size(), 0) == static_cast<ssize_t>(partial.size()));
    half_open.push_back(fd);
  }
  for (int i = 0; i < 20; ++i) {
    auto res = r.client->Get("/api/sweeps");
    REQUIRE(res);
    CHECK(res->status == 200);
  }
  int closed = 0;
  for (int fd : half_open) closed += given_up_by_server(fd) ? 1 : 0;
  CHECK_MESSAGE(closed == 0, closed << " half-open connections had to time out before the others were answered");
  // And the server does drop them in the end (the header read deadline).
  for (int fd : half_open) {
    CHECK(reads_to_eof(fd));
    ::close(fd);
  }
}

TEST_CASE("web: a non-loopback address without a token is refused unless insecure") {
  TestDb db;
  db.fill();
  for (const char* listen : {"0.0.0.0:0", "[::]:0"}) {
    ServerOptions o;
    o.listen = listen;
    o.db_path = db.path();
    auto refused = Server::start(o);
    INFO(listen);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == swept::StatusCode::kInvalidArgument);
    CHECK(refused.status().message().find("--insecure") != std::string::npos);
    o.token = "tok";
    CHECK(Server::start(o).ok());
    o.token.clear();
    o.insecure = true;
    CHECK(Server::start(o).ok());
  }
  ServerOptions local;
  local.listen = "127.0.0.1:0";
  local.db_path = db.path();
  CHECK(Server::start(local).ok());
}

TEST_CASE("web: an early-stopped trial's series says where it was stopped, the states come from the one table") {
  TestDb db;
  db.fill();
  {
    // The scheduler's writer upgrades the file (schema v4) and records a stop.
    auto w = swept::store::Writer::open(db.path());
    REQUIRE(w.ok());
    REQUIRE((*w)->set_trial_state(101, swept::TrialState::kEarlyStopped, std::nullopt, "early-stopped: hyperband: band 27",
                                  1700000009).ok());
    swept::store::Writer::StopDecision d;
    d.rule = "hyperband";
    d.at = 27;
    d.step = 26;
    d.value = 1.2;
    d.threshold = 0.9;
    d.reason = "hyperband: band 27, value 1.2 worse than threshold 0.9: stop";
    d.decided_at = 1700000008;
    REQUIRE((*w)->record_stop_decision(101, d).ok());
  }
  auto r = start(db.path());
  auto s = get_json(*r.client, "/api/series?trials=100,101&metric=loss&points=400", 200);
  REQUIRE(s["series"].size() == 2);
  CHECK_FALSE(s["series"][0].contains("stopped"));
  REQUIRE(s["series"][1].contains("stopped"));
  CHECK(s["series"][1]["stopped"]["step"] == 26);
  CHECK(s["series"][1]["stopped"]["reason"] == "hyperband: band 27, value 1.2 worse than threshold 0.9: stop");
  auto info = get_json(*r.client, "/api/info", 200);
  REQUIRE(info["trial_states"].size() == swept::kTrialStateCount);
  for (size_t i = 0; i < swept::kTrialStateCount; ++i) {
    CHECK(info["trial_states"][i]["name"] == std::string(swept::kTrialStates[i].name));
    CHECK(info["trial_states"][i]["final"] == swept::kTrialStates[i].final);
    CHECK(info["trial_states"][i]["tone"] == std::string(swept::name(swept::kTrialStates[i].tone)));
  }
  CHECK(info["trial_states"][swept::index_of(swept::TrialState::kEarlyStopped)]["label"] == "early-stopped");
  // The dashboard's cancel buttons and agent badges act on these flags, not on literals of its own.
  REQUIRE(info["sweep_states"].size() == swept::kSweepStateCount);
  for (size_t i = 0; i < swept::kSweepStateCount; ++i) {
    CHECK(info["sweep_states"][i]["name"] == std::string(swept::kSweepStateNames[i]));
    CHECK(info["sweep_states"][i]["final"] == (static_cast<swept::SweepState>(i) != swept::SweepState::kRunning));
    CHECK(info["sweep_states"][i]["tone"] == std::string(swept::name(swept::tone(static_cast<swept::SweepState>(i)))));
  }
  REQUIRE(info["agent_states"].size() == swept::kAgentStateCount);
  for (size_t i = 0; i < swept::kAgentStateCount; ++i) {
    CHECK(info["agent_states"][i]["name"] == std::string(swept::kAgentStateNames[i]));
    CHECK(info["agent_states"][i]["live"] == (static_cast<swept::AgentState>(i) == swept::AgentState::kAlive));
    CHECK(info["agent_states"][i]["tone"] == std::string(swept::name(swept::tone(static_cast<swept::AgentState>(i)))));
  }
  auto sweeps = get_json(*r.client, "/api/sweeps", 200);
  CHECK(sweeps["sweeps"][1]["id"] == 1);
  CHECK(sweeps["sweeps"][1]["counts"]["early_stopped"] == 1);
}

TEST_CASE("web: the dashboard's CSS styles every tone a state can have, each in its own colour") {
  std::string css;
  for (const auto& f : swept::web::static_files())
    if (f.url_path == "/app.css") css = std::string(f.body);
  REQUIRE(!css.empty());
  // Every tone: a colour of its own in :root and a badge rule that uses it.
  std::set<std::string> colours;
  for (std::string_view tone : swept::kToneNames) {
    CAPTURE(tone);
    const std::string var = "--tone-" + std::string(tone);
    const size_t def = css.find(var + ":");
    REQUIRE(def != std::string::npos);
    const size_t end = css.find(';', def);
    REQUIRE(end != std::string::npos);
    const std::string colour = css.substr(def + var.size() + 1, end - def - var.size() - 1);
    CHECK(colours.insert(colour).second);
    CHECK(css.find(".state.tone-" + std::string(tone) + " { background: var(" + var + "); }") != std::string::npos);
  }
  // Every state of every table has one of those tones (what /api/info serves
  // and app.js turns into the class), so every badge is coloured.
  std::set<std::string> used;
  for (const auto& s : swept::kTrialStates) used.insert(std::string(swept::name(s.tone)));
  for (size_t i = 0; i < swept::kSweepStateCount; ++i)
    used.insert(std::string(swept::name(swept::tone(static_cast<swept::SweepState>(i)))));
  for (size_t i = 0; i < swept::kAgentStateCount; ++i)
    used.insert(std::string(swept::name(swept::tone(static_cast<swept::AgentState>(i)))));
  for (const std::string& tone : used) CHECK(css.find(".state.tone-" + tone + " ") != std::string::npos);
}

// Sweep 6: one metric (loss, minimised) and a constraint (mem at most 8), a
// warm start's two imported trials (indices -1, -2) and four of its own:
// 600 feasible, 601 infeasible with a better loss, 602 running and 603
// failed with better ones still. Only 604 and 600 may be shown as best.
void fill_constrained_sweep(TestDb& db) {
  db.exec("BEGIN");
  db.run("INSERT INTO sweeps (id, name, method, metric_name, metric_goal, spec, state, total_trials, next_index, created_at) "
         "VALUES (6, 'constrained', 'random', 'loss', 'minimize', ?, 'running', 4, 4, 1000)",
         {"method: random\nrun_cap: 4\nmetric: {name: loss, goal: minimize}\nconstraints:\n  - {name: mem, max: 8}\n"
          "parameters:\n  lr: {min: 0.0, max: 1.0}\n"});
  struct Row { int id, idx; const char* state; double loss, mem; const char* reason; };
  const Row rows[] = {{600, 0, "completed", 0.5, 4, "exit code 0"},  {601, 1, "completed", 0.1, 16, "exit code 0"},
                      {602, 2, "running", 0.05, 4, ""},               {603, 3, "failed", 0.01, 4, "exit code 1"},
                      {604, -1, "imported", 0.3, 2, "imported from sweep 3, trial 17"},
                      {605, -2, "imported", 0.2, 20, "imported from sweep 3, trial 18"}};
  for (const Row& r : rows) {
    const std::string id = std::to_string(r.id);
    db.run("INSERT INTO trials (id, sweep_id, idx, params, command, state, attempts, metric_value, reason, created_at, "
           "ended_at) VALUES (" + id + ", 6, " + std::to_string(r.idx) + ", ?, '[]', '" + r.state + "', " +
               (std::string(r.state) == "imported" ? "0" : "1") + ", " + std::to_string(r.loss) + ", ?, 1000, 1010)",
           {json{{"lr", 0.1 * r.idx}}.dump(), r.reason});
    db.run("INSERT INTO trial_latest (trial_id, name, step, value) VALUES (" + id + ", 'loss', 1, " +
               std::to_string(r.loss) + ")", {});
    db.run("INSERT INTO trial_latest (trial_id, name, step, value) VALUES (" + id + ", 'mem', 1, " +
               std::to_string(r.mem) + ")", {});
  }
  db.exec("COMMIT");
}

TEST_CASE("web: /points of a sweep with constraints shows as best only feasible trials that count, each judged one marked") {
  TestDb db;
  db.fill();
  fill_constrained_sweep(db);
  auto r = start(db.path());
  CHECK(get_json(*r.client, "/api/sweeps/6", 200)["best"]["trial_id"] == 604);
  // One sampled index (the lowest, -2: imported trials are sampled too) and
  // the best ones, which skip the running, failed and infeasible trials
  // however good their values.
  auto pts = get_json(*r.client, "/api/sweeps/6/points?limit=1", 200);
  CHECK(pts["population"] == 6);
  CHECK(pts["stride"] == 6);
  std::map<int, json> by_id;
  for (const auto& p : pts["points"]) by_id[p["id"].get<int>()] = p;
  CHECK(by_id.size() == 3);
  REQUIRE(by_id.count(605));
  REQUIRE(by_id.count(604));
  REQUIRE(by_id.count(600));
  CHECK(by_id[605]["feasible"] == false);
  CHECK(by_id[605]["violated"] == json::array({"mem"}));
  CHECK(by_id[605]["state"] == "imported");
  CHECK(by_id[604]["feasible"] == true);
  CHECK(by_id[600]["feasible"] == true);
  // Every trial: the infeasible one marked, those not judged (running,
  // failed) without the key, as on the trials page.
  auto all = get_json(*r.client, "/api/sweeps/6/points", 200);
  REQUIRE(all["points"].size() == 6);
  for (const auto& p : all["points"]) {
    const int id = p["id"];
    if (id == 602 || id == 603) CHECK_FALSE(p.contains("feasible"));
    else CHECK(p["feasible"] == (id != 601 && id != 605));
  }
  // Importance samples the same trials, imported ones included.
  auto imp = get_json(*r.client, "/api/sweeps/6/importance", 200);
  CHECK(imp["population"] == 6);
  CHECK(imp["sampled"] == 6);
  // A sweep without constraints has no feasibility on its points.
  for (const auto& p : get_json(*r.client, "/api/sweeps/1/points?limit=10", 200)["points"]) CHECK_FALSE(p.contains("feasible"));
}

TEST_CASE("web: imported trials say where they came from and filter by state, and a pbt member's rows carry its schedule") {
  TestDb db;
  db.fill();
  fill_constrained_sweep(db);
  {
    // The scheduler's writer upgrades the file (schema v8: pbt_lineage) and
    // records trial 100's lineage: its first parameters, then an exploit.
    auto w = swept::store::Writer::open(db.path());
    REQUIRE(w.ok());
    swept::store::Writer::LineageRow first;
    first.trial_id = 100;
    first.params_json = R"({"lr": 0.1})";
    first.decided_at = 1700000001;
    REQUIRE((*w)->record_lineage(first).ok());
    swept::store::Writer::LineageRow exploit = first;
    exploit.round = 1;
    exploit.from_step = 10;
    exploit.donor_trial_id = 101;
    exploit.donor_segment = 1;
    exploit.params_json = R"({"lr": 0.24})";
    exploit.changes_json = R"j(["lr: 0.2 -> 0.24 (x1.2)"])j";
    REQUIRE((*w)->record_lineage(exploit).ok());
  }
  auto r = start(db.path());
  auto imported = get_json(*r.client, "/api/sweeps/6/trials?state=imported", 200);
  CHECK(imported["total"] == 2);
  REQUIRE(imported["trials"].size() == 2);
  CHECK(imported["trials"][0]["id"] == 605);  // by index: -2 first
  CHECK(imported["trials"][0]["imported_from"] == "imported from sweep 3, trial 18");
  for (const auto& t : get_json(*r.client, "/api/sweeps/6/trials", 200)["trials"])
    CHECK(t.contains("imported_from") == (t["state"] == "imported"));

  auto page = get_json(*r.client, "/api/sweeps/1/trials?limit=2", 200);
  REQUIRE(page["trials"].size() == 2);
  const json& member = page["trials"][0];
  REQUIRE(member["id"] == 100);
  REQUIRE(member.contains("schedule"));
  REQUIRE(member["schedule"].size() == 2);
  CHECK(member["schedule"][0]["from_step"] == 0);
  CHECK(member["schedule"][0]["donor_trial_id"].is_null());
  CHECK(member["schedule"][1]["round"] == 1);
  CHECK(member["schedule"][1]["from_step"] == 10);
  CHECK(member["schedule"][1]["donor_trial_id"] == 101);
  CHECK(member["schedule"][1]["donor_segment"] == 1);
  CHECK(member["schedule"][1]["params"] == json{{"lr", 0.24}});
  CHECK(member["schedule"][1]["changes"] == json::array({"lr: 0.2 -> 0.24 (x1.2)"}));
  CHECK_FALSE(page["trials"][1].contains("schedule"));  // no lineage: not a pbt member
  // The trial's own page has it too.
  CHECK(get_json(*r.client, "/api/trials/100", 200)["schedule"] == member["schedule"]);
}
