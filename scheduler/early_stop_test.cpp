// EarlyStopper: decisions on the curves it is fed, independent of how the
// values are cut into batches, and the same after a restart that rebuilds the
// curves from what the store holds.
#include <doctest/doctest.h>

#include <random>

#include "common/clock.h"
#include "scheduler/early_stop.h"
#include "scheduler/sweep_runner.h"
#include "store/test_support.h"

using namespace swept;
using namespace swept::scheduler;
namespace st = swept::sweeps::stopping;

namespace {

const sweeps::Metric kLoss{"loss", sweeps::Goal::kMinimize, std::nullopt};

st::Rule rule(const nlohmann::json& et) {
  auto r = st::parse_rule(et, kLoss);
  REQUIRE(r.ok());
  return *r;
}

std::vector<protocol::MetricRecord> values(int64_t first_step, std::vector<double> v, const std::string& name = "loss") {
  std::vector<protocol::MetricRecord> out;
  for (double x : v) out.push_back({first_step++, name, x});
  return out;
}

// One METRICS batch of one trial, in the order the scheduler stores them.
struct Event {
  int64_t trial_id, index;
  std::vector<protocol::MetricRecord> records;
  bool last = false;  // the trial's process ends after this batch (completed)
};

// What the store holds after `events`: each trial's curve in step order, a
// repeated step keeping its last value (what Writer::metric_curves returns).
std::vector<store::Writer::CurveRows> stored(const std::vector<Event>& events, const EarlyStopper& live,
                                             const std::map<int64_t, int64_t>& stop_steps) {
  std::map<int64_t, store::Writer::CurveRows> rows;
  for (const Event& e : events) {
    auto& r = rows[e.trial_id];
    r.trial_id = e.trial_id;
    r.index = e.index;
    r.state = e.last ? TrialState::kCompleted : TrialState::kRunning;
    r.stop_decided = live.decided(e.trial_id);
    if (auto it = stop_steps.find(e.trial_id); it != stop_steps.end()) r.stop_step = it->second;
    std::map<int64_t, double> pts(r.points.begin(), r.points.end());
    for (const auto& m : e.records)
      if (m.name == "loss") pts[m.step] = m.value;
    r.points.assign(pts.begin(), pts.end());
  }
  std::vector<store::Writer::CurveRows> out;
  for (auto& [id, r] : rows) out.push_back(std::move(r));
  return out;
}

// Synthetic learning curves: trial i decays towards its own floor, with noise;
// 4 trials run at a time, each reporting 3 values per batch.
std::vector<Event> workload(uint32_t seed, int trials, int steps) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> floor(0.1, 1.0), noise(-0.02, 0.02);
  std::vector<double> floors;
  for (int i = 0; i < trials; ++i) floors.push_back(floor(rng));
  std::vector<Event> out;
  for (int wave = 0; wave < trials; wave += 4)
    for (int step = 0; step < steps; step += 3)
      for (int i = wave; i < std::min(trials, wave + 4); ++i) {
        std::vector<double> v;
        for (int k = step; k < std::min(steps, step + 3); ++k) v.push_back(floors[i] + 2.0 / (1 + k) + noise(rng));
        out.push_back({100 + i, i, values(step, v), step + 3 >= steps});
      }
  return out;
}

// Feeds events [from, to) and returns "trial@step" for each stop.
std::vector<std::string> feed(EarlyStopper& s, const std::vector<Event>& events, size_t from, size_t to,
                              std::map<int64_t, int64_t>* stop_steps = nullptr) {
  std::vector<std::string> out;
  for (size_t i = from; i < to; ++i) {
    const Event& e = events[i];
    if (auto v = s.observe(e.trial_id, e.index, e.records)) {
      CHECK(v->decision.stop);
      CHECK(!v->decision.reason.empty());
      out.push_back(std::to_string(e.trial_id) + "@" + std::to_string(v->step));
      if (stop_steps) (*stop_steps)[e.trial_id] = v->step;
    }
    if (e.last) s.set_state(e.trial_id, e.index, TrialState::kCompleted);
  }
  return out;
}

}  // namespace

TEST_CASE("scheduler.early_stop: hyperband stops the clearly worse trial at its band, with the reason") {
  EarlyStopper s(rule({{"type", "hyperband"}, {"min_iter", 2}, {"eta", 3}}), "loss");
  s.set_state(1, 0, TrialState::kRunning);
  s.set_state(2, 1, TrialState::kRunning);
  CHECK_FALSE(s.observe(1, 0, values(0, {1.0, 0.5})));  // alone at band 2: its own threshold
  // Other metrics are ignored; trial 2 is far worse at band 2.
  CHECK_FALSE(s.observe(2, 1, values(0, {9.0}, "acc")));
  auto v = s.observe(2, 1, values(0, {5.0, 4.0, 3.0}));
  REQUIRE(v);
  CHECK(v->trial_id == 2);
  CHECK(v->rule == "hyperband");
  CHECK(v->step == 1);  // judged as the second value arrived, not at the batch's end
  CHECK(v->decision.at == 2);
  CHECK(v->decision.value == doctest::Approx(4.0));
  CHECK(v->decision.threshold == doctest::Approx(0.5));
  CHECK(v->decision.reason.find("band 2") != std::string::npos);
  CHECK(s.decided(2));
  // Its later values are kept in the curve, never judged again.
  CHECK_FALSE(s.observe(2, 1, values(3, {2.0})));
  CHECK(s.curve(2)->reports.size() == 4);
  CHECK_FALSE(s.decided(1));
}

TEST_CASE("scheduler.early_stop: a step logged twice keeps its last value, as the store does") {
  EarlyStopper s(rule({{"type", "median"}, {"n_startup_trials", 1}}), "loss");
  s.set_state(1, 0, TrialState::kRunning);
  s.observe(1, 0, values(0, {3.0, 2.0, 1.0}));
  s.observe(1, 0, {{1, "loss", 1.5}, {5, "loss", 0.5}, {4, "loss", 0.7}});
  const auto* c = s.curve(1);
  REQUIRE(c);
  std::vector<std::pair<int64_t, double>> got;
  for (const auto& r : c->reports) got.emplace_back(r.step, r.value);
  CHECK(got == std::vector<std::pair<int64_t, double>>{{0, 3.0}, {1, 1.5}, {2, 1.0}, {4, 0.7}, {5, 0.5}});
}

TEST_CASE("scheduler.early_stop: only running trials are judged, ended ones are context") {
  EarlyStopper s(rule({{"type", "median"}, {"n_startup_trials", 1}}), "loss");
  s.set_state(1, 0, TrialState::kRunning);
  CHECK_FALSE(s.observe(1, 0, values(0, {1.0, 0.5, 0.2})));
  s.set_state(1, 0, TrialState::kCompleted);
  s.set_state(2, 1, TrialState::kRunning);
  auto v = s.observe(2, 1, values(0, {4.0}));
  REQUIRE(v);  // worse than the completed trial's median at step 0
  CHECK(v->rule == "median");
  CHECK(v->decision.threshold == doctest::Approx(1.0));
  // A queued (requeued) trial's values are kept but not judged.
  s.set_state(3, 2, TrialState::kQueued);
  CHECK_FALSE(s.observe(3, 2, values(0, {9.0})));
  CHECK_FALSE(s.decided(3));
}

TEST_CASE("scheduler.early_stop: decisions do not depend on how values are cut into batches") {
  for (const char* type : {"hyperband", "asha", "median"}) {
    const std::string type_name = type;
    CAPTURE(type_name);
    nlohmann::json et = {{"type", type}};
    if (std::string(type) == "hyperband") et["min_iter"] = 3;
    if (std::string(type) == "asha") et["min_resource"] = 2, et["reduction_factor"] = 2;
    if (std::string(type) == "median") et["n_startup_trials"] = 3;
    const auto events = workload(7, 12, 30);
    EarlyStopper batched(rule(et), "loss"), single(rule(et), "loss");
    auto a = feed(batched, events, 0, events.size());
    std::vector<Event> one_by_one;
    for (const Event& e : events)
      for (size_t k = 0; k < e.records.size(); ++k)
        one_by_one.push_back({e.trial_id, e.index, {e.records[k]}, e.last && k + 1 == e.records.size()});
    auto b = feed(single, one_by_one, 0, one_by_one.size());
    CHECK(a == b);
    CHECK_FALSE(a.empty());  // the workload does stop trials
  }
}

TEST_CASE("scheduler.early_stop: a restarted scheduler makes the same decisions from the stored history") {
  for (const char* type : {"hyperband", "asha", "median"}) {
    const std::string type_name = type;
    CAPTURE(type_name);
    nlohmann::json et = {{"type", type}};
    if (std::string(type) == "hyperband") et["min_iter"] = 3;
    if (std::string(type) == "asha") et["min_resource"] = 2, et["reduction_factor"] = 2;
    if (std::string(type) == "median") et["n_startup_trials"] = 3;
    const auto events = workload(11, 12, 30);
    EarlyStopper uninterrupted(rule(et), "loss");
    const auto all = feed(uninterrupted, events, 0, events.size());
    REQUIRE_FALSE(all.empty());
    for (size_t cut : {events.size() / 4, events.size() / 2, events.size() * 3 / 4}) {
      CAPTURE(cut);
      EarlyStopper before(rule(et), "loss");
      std::map<int64_t, int64_t> stop_steps;
      auto first = feed(before, events, 0, cut, &stop_steps);
      // The restart: a new stopper from what the store holds at the cut.
      EarlyStopper after(rule(et), "loss");
      after.load(stored(std::vector<Event>(events.begin(), events.begin() + static_cast<long>(cut)), before, stop_steps));
      auto second = feed(after, events, cut, events.size());
      first.insert(first.end(), second.begin(), second.end());
      std::string got, want;
      for (const auto& x : first) got += x + " ";
      for (const auto& x : all) want += x + " ";
      CHECK(got == want);
    }
  }
}

// The same through the real store: a SweepRunner whose batches are stored by
// the Writer (as the broker stores them), replaced mid-sweep by a new one
// that recovers from the file, decides as the first would have.
TEST_CASE("scheduler.early_stop: a SweepRunner recovered from the store decides as an uninterrupted one") {
  const std::string spec = R"({"method": "grid", "metric": {"name": "loss", "goal": "minimize"},
      "early_terminate": {"type": "hyperband", "min_iter": 3}, "command": ["true"],
      "parameters": {"i": {"values": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}}})";
  const auto events = workload(5, 12, 30);
  // Runs the sweep's events through runners on a fresh database, replacing
  // the runner by a recovered one after `cut` events (none when cut >= size).
  auto run = [&](size_t cut) {
    swept::store::testing::TempDb db;
    FakeClock clock;
    auto w = store::Writer::open(db.path);
    REQUIRE(w.ok());
    auto runner = std::make_unique<SweepRunner>(**w, clock);
    REQUIRE((*w)->begin().ok());
    auto sub = runner->submit(spec);
    REQUIRE(sub.ok());
    std::map<int64_t, int64_t> id_of;  // index -> trial id
    std::map<int64_t, int> attempt_seq;
    std::vector<std::string> out;
    for (size_t i = 0; i < events.size(); ++i) {
      if (i == cut) {
        REQUIRE((*w)->commit().ok());
        runner = std::make_unique<SweepRunner>(**w, clock);
        REQUIRE(runner->recover().ok());
        REQUIRE((*w)->begin().ok());
      }
      const Event& e = events[i];
      while (!id_of.count(e.index)) {
        auto next = runner->take_next(sub->sweep_id);
        REQUIRE(next.ok());
        REQUIRE(next->has_value());
        id_of[(*next)->index] = (*next)->trial_id;
        REQUIRE((*w)->start_attempt((*next)->trial_id, 1, "a", {}, 0, 1).ok());
      }
      const int64_t id = id_of[e.index];
      protocol::Metrics m{id, 1, ++attempt_seq[id], e.records, "", 0};
      auto stored_ok = (*w)->add_metrics(m, std::string("loss"));
      REQUIRE(stored_ok.ok());
      auto v = runner->observe_metrics(sub->sweep_id, id, e.records);
      REQUIRE(v.ok());
      if (*v) out.push_back(std::to_string(e.index) + "@" + std::to_string((*v)->step));
      if (e.last) {
        REQUIRE((*w)->set_trial_state(id, TrialState::kCompleted, 0, "exit code 0", 2).ok());
        REQUIRE(runner->on_event(TrialEnded{id, sub->sweep_id, TrialState::kCompleted, true}).ok());
      }
    }
    REQUIRE((*w)->commit().ok());
    // Every decision is on record with its reason.
    CHECK(store::testing::query_int(db.path, "SELECT COUNT(*) FROM trials WHERE stop_rule='hyperband' AND "
                                             "stop_reason LIKE 'hyperband: band%stop'") ==
          static_cast<int64_t>(out.size()));
    return out;
  };
  const auto all = run(events.size());
  REQUIRE_FALSE(all.empty());
  for (size_t cut : {events.size() / 3, events.size() / 2, events.size() * 2 / 3}) {
    CAPTURE(cut);
    CHECK(run(cut) == all);
  }
}
