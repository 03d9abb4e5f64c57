// "Best" has one definition (store/reader.h): the dashboard's API, `swept
// status SWEEP` and `swept best SWEEP` name the same trial for every sweep.
// The database is written by the scheduler's own writer with sweeps chosen
// to tell definitions apart: a running trial and a failed one better than
// every completed one, a stopped one better still, maximize and minimize,
// ties, a sweep without a metric, one with no completed trial yet.
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "store/reader.h"
#include "store/writer.h"
#include "tests/harness.h"
#include "web/server.h"

using namespace swept::itest;
using nlohmann::json;

namespace {

using S = swept::TrialState;

struct TrialSpec {
  S state;                      // final state (or running / queued)
  std::optional<double> value;  // the sweep metric's last value
};

// Writes one sweep and its trials through the writer, as the broker would.
int64_t write_sweep(swept::store::Writer& w, const char* name, std::optional<std::string> goal,
                    const std::vector<TrialSpec>& trials) {
  swept::SweepRow r;
  r.name = name;
  r.method = "grid";
  if (goal) {
    r.metric_name = "loss";
    r.metric_goal = *goal;
  }
  r.spec = "{}";
  r.state = swept::SweepState::kRunning;
  r.total_trials = static_cast<int64_t>(trials.size());
  r.created_at = 1;
  auto sid = w.insert_sweep(r);
  REQUIRE(sid.ok());
  for (size_t i = 0; i < trials.size(); ++i) {
    auto tid = w.insert_trial(*sid, static_cast<int64_t>(i), "{\"i\":" + std::to_string(i) + "}", "[\"true\"]", 1);
    REQUIRE(tid.ok());
    const TrialSpec& t = trials[i];
    if (t.state == S::kQueued) continue;
    REQUIRE(w.start_attempt(*tid, 1, "a", {}, 0, 2).ok());
    if (t.value) {
      swept::protocol::Metrics m;
      m.trial_id = *tid;
      m.attempt = 1;
      m.seq = 1;
      m.records = {{1, "loss", *t.value}};
      REQUIRE(w.add_metrics(m, goal ? std::optional<std::string>("loss") : std::nullopt).ok());
    }
    if (t.state == S::kRunning) continue;
    REQUIRE(w.end_attempt(*tid, 1, t.state, 0, "test", 3).ok());
    REQUIRE(w.set_trial_state(*tid, t.state, 0, "test", 3).ok());
  }
  return *sid;
}

// The trial id `swept status SWEEP --db` names as best, or -1 when none.
int64_t status_best(const TempDir& dir, const std::string& db, int64_t sweep) {
  std::string out;
  int rc = run_command({kSwept, "status", std::to_string(sweep), "--db", db}, dir / "status.log", &out);
  REQUIRE_MESSAGE(rc == 0, out);
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"(\(trial (\d+)\))"))) return std::stoll(m[1]);
  return -1;
}

// The trial id `swept best SWEEP --db --json` prints, or -1 when it says none.
int64_t cli_best(const TempDir& dir, const std::string& db, int64_t sweep) {
  std::string out;
  int rc = run_command({kSwept, "best", std::to_string(sweep), "--db", db, "--json"}, dir / "best.log", &out);
  if (rc != 0) return -1;
  return json::parse(out)["id"].get<int64_t>();
}

}  // namespace

TEST_CASE("the dashboard, swept status and swept best agree on the best trial of every sweep") {
  TempDir dir;
  std::string db = dir / "swept.db";
  std::vector<int64_t> sweeps;
  // Per sweep, the trial index the one definition picks (-1: none).
  std::vector<int> expected;
  {
    auto w = swept::store::Writer::open(db);
    REQUIRE(w.ok());
    REQUIRE((*w)->begin().ok());
    sweeps.push_back(write_sweep(**w, "min", "minimize",
                                 {{S::kCompleted, 0.5}, {S::kCompleted, 0.3}, {S::kRunning, 0.1}, {S::kFailed, 0.05},
                                  {S::kStopped, 0.01}, {S::kLost, 0.02}, {S::kQueued, std::nullopt}}));
    expected.push_back(1);
    sweeps.push_back(write_sweep(**w, "max", "maximize",
                                 {{S::kCompleted, 0.5}, {S::kCompleted, 0.7}, {S::kRunning, 0.9}, {S::kCompleted, 0.6}}));
    expected.push_back(1);
    sweeps.push_back(write_sweep(**w, "tie", "minimize", {{S::kCompleted, 0.4}, {S::kCompleted, 0.4}}));
    expected.push_back(0);
    sweeps.push_back(write_sweep(**w, "none-yet", "minimize", {{S::kRunning, 0.2}, {S::kFailed, 0.1}}));
    expected.push_back(-1);
    sweeps.push_back(write_sweep(**w, "no-metric", std::nullopt, {{S::kCompleted, std::nullopt}}));
    expected.push_back(-1);
    REQUIRE((*w)->commit().ok());
  }

  swept::web::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = db;
  auto server = swept::web::Server::start(options);
  REQUIRE(server.ok());
  httplib::Client http("127.0.0.1", (*server)->port());
  auto res = http.Get("/api/sweeps");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  json api = json::parse(res->body)["sweeps"];
  REQUIRE(api.size() == sweeps.size());

  for (size_t k = 0; k < sweeps.size(); ++k) {
    int64_t sweep = sweeps[k];
    CAPTURE(sweep);
    int64_t first_trial = db_int(db, "SELECT MIN(id) FROM trials WHERE sweep_id=" + std::to_string(sweep));
    int64_t want = expected[k] < 0 ? -1 : first_trial + expected[k];
    int64_t dashboard = -1;
    for (const auto& s : api)
      if (s["id"] == sweep && !s["best"].is_null()) dashboard = s["best"]["trial_id"].get<int64_t>();
    auto page = http.Get(("/api/sweeps/" + std::to_string(sweep) + "/trials").c_str());
    REQUIRE(page);
    json p = json::parse(page->body);
    int64_t dashboard_page = p["best_trial_id"].is_null() ? -1 : p["best_trial_id"].get<int64_t>();
    CHECK(dashboard == want);
    CHECK(dashboard_page == want);
    CHECK(status_best(dir, db, sweep) == want);
    CHECK(cli_best(dir, db, sweep) == want);
  }

  // One JSON shape for a sweep summary: the dashboard's and the protocol's
  // SWEEPS reply (what `swept status` decodes) are the same object.
  auto reader = swept::store::open_reader(db);
  REQUIRE(reader.ok());
  for (int64_t sweep : sweeps) {
    auto one = http.Get(("/api/sweeps/" + std::to_string(sweep)).c_str());
    REQUIRE(one);
    auto sums = swept::store::sweep_summaries(**reader, sweep);
    REQUIRE(sums.ok());
    CHECK(json::parse(one->body) == swept::protocol::to_json(sums->front()));
  }
}
