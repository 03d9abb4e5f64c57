// Tests of the read model's constraints and several objectives (reader.h):
// databases built by hand through the Writer, with sweep files that name
// `metrics:` and `constraints:`, against fronts, hypervolumes and "best"
// computed by hand, ties and infeasible trials included.
#include "store/reader.h"
#include "store/test_support.h"
#include "store/writer.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace swept::store;
using swept::TrialState;
using swept::protocol::Metrics;

namespace {

using testing::TempDb;

// Two objectives (loss down, acc up) and one constraint (mem at most 8).
constexpr const char* kTwoObjectives = R"(
method: random
run_cap: 20
metrics:
  - {name: loss, goal: minimize}
  - {name: acc, goal: maximize}
constraints:
  - {name: mem, max: 8}
parameters:
  x: {min: 0.0, max: 1.0}
)";

// One objective with the same constraint.
constexpr const char* kOneObjective = R"(
method: random
run_cap: 20
metric: {name: loss, goal: minimize}
constraints:
  - {name: mem, max: 8}
parameters:
  x: {min: 0.0, max: 1.0}
)";

swept::SweepRow sweep_row(const char* spec, bool single) {
  swept::SweepRow s;
  s.name = "mo";
  s.method = "random";
  if (single) {
    s.metric_name = "loss";
    s.metric_goal = "minimize";
  }
  s.spec = spec;
  s.state = swept::SweepState::kRunning;
  s.total_trials = 20;
  s.created_at = 100;
  return s;
}

// Trials of one sweep built through the Writer: each reports its metrics
// and ends in the state asked.
struct Sweep {
  TempDb db;
  std::unique_ptr<Writer> writer;
  int64_t id = 0;
  std::optional<std::string> metric;  // the sweep's one metric (trials.metric_value), if any

  Sweep(const char* spec, bool single) {
    auto opened = Writer::open(db.path);
    REQUIRE(opened.ok());
    writer = std::move(*opened);
    auto sid = writer->insert_sweep(sweep_row(spec, single));
    REQUIRE(sid.ok());
    id = *sid;
    if (single) metric = "loss";
  }

  int64_t trial(const std::map<std::string, double>& metrics, TrialState state = TrialState::kCompleted) {
    const int64_t idx = next_idx++;
    auto tid = writer->insert_trial(id, idx, "{\"x\":" + std::to_string(0.1 * static_cast<double>(idx)) + "}",
                                    "[\"run\"]", 1);
    REQUIRE(tid.ok());
    REQUIRE(writer->start_attempt(*tid, 1, "a", {}, 0, 2).ok());
    Metrics m;
    m.trial_id = *tid;
    m.attempt = 1;
    m.seq = 1;
    for (const auto& [name, value] : metrics) m.records.push_back({1, name, value});
    if (!m.records.empty()) REQUIRE(writer->add_metrics(m, metric).ok());
    if (state != TrialState::kRunning) REQUIRE(writer->set_trial_state(*tid, state, 0, "done", 3).ok());
    return *tid;
  }

  swept::SweepRow summary() {
    auto sums = sweep_summaries(writer->connection(), id);
    REQUIRE(sums.ok());
    return sums->front();
  }

  int next_idx = 0;
};

const swept::TrialRow& row_of(const std::vector<swept::TrialRow>& rows, int64_t id) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const swept::TrialRow& r) { return r.id == id; });
  REQUIRE(it != rows.end());
  return *it;
}

}  // namespace

TEST_CASE("store: several objectives: the front keeps ties, leaves out infeasible, running and unevaluated trials") {
  Sweep s(kTwoObjectives, /*single=*/false);
  const int64_t t0 = s.trial({{"loss", 1}, {"acc", 0.5}, {"mem", 4}});
  const int64_t t1 = s.trial({{"loss", 2}, {"acc", 0.9}, {"mem", 4}});
  const int64_t t2 = s.trial({{"loss", 1}, {"acc", 0.5}, {"mem", 8}});        // equal to t0: both on the front
  const int64_t t3 = s.trial({{"loss", 0.5}, {"acc", 0.95}, {"mem", 16}});    // would dominate all: infeasible
  s.trial({{"loss", 3}, {"acc", 0.4}, {"mem", 4}});                           // t4: dominated by t0
  const int64_t t5 = s.trial({{"loss", 0.1}, {"acc", 1.0}, {"mem", 1}}, TrialState::kRunning);
  const int64_t t6 = s.trial({{"loss", 0.2}, {"mem", 1}});                    // never reported acc
  const int64_t t7 = s.trial({{"loss", 1.5}, {"acc", 0.7}});                  // never reported mem: infeasible
  const int64_t t8 = s.trial({{"loss", 0.1}, {"acc", 1.0}, {"mem", 1}}, TrialState::kFailed);

  swept::SweepRow sum = s.summary();
  CHECK_FALSE(sum.best);  // several objectives: no one best
  REQUIRE(sum.front);
  CHECK(sum.front->objectives == std::vector<swept::Objective>{{"loss", "minimize"}, {"acc", "maximize"}});
  CHECK(sum.front->trial_ids == std::vector<int64_t>{t0, t1, t2});
  CHECK(sum.front->evaluated == 6);  // t0 t1 t2 t3 t4 t7
  CHECK(sum.front->infeasible == 2);  // t3 t7
  // The worst value seen per objective, infeasible trials included.
  REQUIRE(sum.front->reference.size() == 2);
  CHECK(sum.front->reference[0] == doctest::Approx(3));
  CHECK(sum.front->reference[1] == doctest::Approx(0.4));
  // Boxes from (1, 0.5) and (2, 0.9) to (3, 0.4): 0.2 + 0.5 - 0.1 overlap.
  CHECK(sum.front->hypervolume == doctest::Approx(0.6));
  REQUIRE(sum.constraints.size() == 1);
  CHECK(sum.constraints[0].name == "mem");
  CHECK(*sum.constraints[0].max == 8);
  CHECK_FALSE(sum.constraints[0].min);

  // Completed trials are judged; others are not.
  auto rows = trial_rows(s.writer->connection(), s.id);
  REQUIRE(rows.ok());
  CHECK(*row_of(*rows, t0).feasible);
  CHECK(*row_of(*rows, t2).feasible);  // at the bound: feasible
  CHECK_FALSE(*row_of(*rows, t3).feasible);
  CHECK(row_of(*rows, t3).violated == std::vector<std::string>{"mem"});
  CHECK_FALSE(*row_of(*rows, t7).feasible);
  CHECK(*row_of(*rows, t6).feasible);
  CHECK_FALSE(row_of(*rows, t5).feasible.has_value());
  CHECK_FALSE(row_of(*rows, t8).feasible.has_value());

  // The charts' points: every evaluated completed trial, the front marked.
  auto points = objective_points(s.writer->connection(), s.id, 100);
  REQUIRE(points.ok());
  REQUIRE(points->front);
  CHECK(points->front->trial_ids == sum.front->trial_ids);
  CHECK(points->total == 6);
  std::vector<int64_t> on_front, infeasible;
  for (const auto& p : points->points) {
    if (p.on_front) on_front.push_back(p.trial_id);
    if (!p.feasible) infeasible.push_back(p.trial_id);
    CHECK(p.values.size() == 2);
  }
  CHECK(on_front == std::vector<int64_t>{t0, t1, t2});
  CHECK(infeasible == std::vector<int64_t>{t3, t7});
  CHECK(points->params == std::vector<std::string>{"x"});

  // A stride keeps the front: with room for 2 points, every 3rd trial plus the front.
  auto few = objective_points(s.writer->connection(), s.id, 2);
  REQUIRE(few.ok());
  CHECK(few->stride == 3);
  std::vector<int64_t> kept;
  for (const auto& p : few->points) kept.push_back(p.trial_id);
  CHECK(kept == std::vector<int64_t>{t0, t1, t2, t3});  // t0 and t3 by stride (positions 0, 3), t1 t2 on the front
}

TEST_CASE("store: several objectives: a reference value from the file, and a sweep with no evaluated trial yet") {
  Sweep s(R"(
method: random
run_cap: 20
metrics:
  - {name: loss, goal: minimize, ref: 4}
  - {name: acc, goal: maximize}
parameters:
  x: {min: 0.0, max: 1.0}
)",
          /*single=*/false);
  REQUIRE(s.summary().front);
  CHECK(s.summary().front->trial_ids.empty());
  CHECK(s.summary().front->hypervolume == 0);
  s.trial({{"loss", 1}, {"acc", 0.5}, {"mem", 4}});
  s.trial({{"loss", 2}, {"acc", 0.9}, {"mem", 4}});
  s.trial({{"loss", 3}, {"acc", 0.4}, {"mem", 4}});
  REQUIRE(s.summary().front);
  auto f = *s.summary().front;
  CHECK(f.reference[0] == doctest::Approx(4));    // the file's ref
  CHECK(f.reference[1] == doctest::Approx(0.4));  // the worst seen
  // Boxes from (1, 0.5) and (2, 0.9) to (4, 0.4): 0.3 + 1.0 - 0.2 overlap.
  CHECK(f.hypervolume == doctest::Approx(1.1));
}

TEST_CASE("store: one objective with constraints: an infeasible trial is never best nor in the history") {
  Sweep s(kOneObjective, /*single=*/true);
  const int64_t lowest = s.trial({{"loss", 0.1}, {"mem", 16}});  // the lowest loss, but infeasible
  const int64_t unreported = s.trial({{"loss", 0.15}});        // never reported mem: infeasible
  const int64_t feasible = s.trial({{"loss", 0.2}, {"mem", 4}});
  s.trial({{"loss", 0.3}, {"mem", 2}});

  swept::SweepRow sum = s.summary();
  CHECK_FALSE(sum.front);  // one objective: best, not a front
  REQUIRE(sum.best);
  CHECK(sum.best->trial_id == feasible);
  CHECK(sum.best->value == doctest::Approx(0.2));

  auto history = optimization_history(s.writer->connection(), s.id, 100);
  REQUIRE(history.ok());
  CHECK(history->total == 2);
  for (const auto& p : history->points) {
    CHECK(p.trial_id != lowest);
    CHECK(p.trial_id != unreported);
  }

  TrialQuery q;
  q.sweep_id = s.id;
  auto page = list_trials(s.writer->connection(), q);
  REQUIRE(page.ok());
  CHECK(page->best_trial_id == feasible);
  CHECK_FALSE(*row_of(page->rows, lowest).feasible);
  CHECK(*row_of(page->rows, feasible).feasible);

  auto detail = get_trial(s.writer->connection(), unreported, 10);
  REQUIRE(detail.ok());
  CHECK(detail->row.violated == std::vector<std::string>{"mem"});

  // Every trial infeasible: no best at all.
  Sweep none(kOneObjective, /*single=*/true);
  none.trial({{"loss", 0.1}, {"mem", 9}});
  CHECK_FALSE(none.summary().best);
}

TEST_CASE("store: a sweep without constraints or objectives reads as before") {
  // A file this build cannot parse reads as its metric alone: no constraints.
  Sweep old("{}", /*single=*/true);
  const int64_t t = old.trial({{"loss", 0.1}, {"mem", 16}});
  swept::SweepRow sum = old.summary();
  CHECK(sum.constraints.empty());
  CHECK_FALSE(sum.front);
  REQUIRE(sum.best);
  CHECK(sum.best->trial_id == t);
  auto rows = trial_rows(old.writer->connection(), old.id);
  REQUIRE(rows.ok());
  CHECK_FALSE(rows->front().feasible.has_value());
}
