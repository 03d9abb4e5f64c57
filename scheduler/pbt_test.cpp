// method pbt through the lifecycle and the runner, joined by flow.h as the
// broker joins them, over a real SQLite file and a FakeClock: members stopped
// at their interval wait for the round, the bottom one resumes from a copy
// of the top one's segment with explored parameters, a member lost in
// mid-segment neither stalls the round nor spends a retry for its segments,
// and the lineage is stored.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/flow.h"
#include "scheduler/lifecycle.h"
#include "scheduler/sweep_runner.h"
#include "store/test_support.h"

using namespace swept;
using namespace swept::scheduler;
using namespace swept::protocol;

namespace {

// Population 4, a quantile of one member, lr doubled on explore, rounds at
// steps 10 and 20, done at 30; one retry for a lost segment.
const char* kSweep = R"({"method": "pbt", "metric": {"name": "q", "goal": "maximize"}, "seed": 5,
    "max_retries": 1, "command": ["/bin/echo", "${args}"],
    "parameters": {"lr": {"min": 0.01, "max": 0.1}},
    "pbt": {"population": 4, "interval": 10, "max_steps": 30, "resample_probability": 0, "perturb": [2],
            "hyperparam_mutations": {"lr": {"min": 0.001, "max": 1}}}})";

struct Pbt {
  store::testing::TempDb db;
  FakeClock clock;
  std::unique_ptr<store::Writer> store;
  std::unique_ptr<SweepRunner> runner;
  std::unique_ptr<TrialLifecycle> life;
  int64_t sweep = 0;
  int64_t seq = 0;
  std::map<int64_t, std::string> agent_of;  // where each member's current segment runs

  // `max_retries` replaces the sweep's 1.
  explicit Pbt(int max_retries = 1) {
    auto w = store::Writer::open(db.path);
    REQUIRE(w.ok());
    store = std::move(*w);
    runner = std::make_unique<SweepRunner>(*store, clock);
    life = std::make_unique<TrialLifecycle>(*store, clock);
    REQUIRE(store->begin().ok());
    std::string text = kSweep;
    const std::string one = "\"max_retries\": 1";
    text.replace(text.find(one), one.size(), "\"max_retries\": " + std::to_string(max_retries));
    auto r = runner->submit(text);
    REQUIRE(r.ok());
    sweep = r->sweep_id;
    pass();
  }
  void pass() { REQUIRE(pass_events(*life, *runner).ok()); }
  // Starts the sweep's next trial on `agent`, confirmed running; nullopt when it has none to start.
  std::optional<StartTrial> start(const std::string& agent = "a") {
    bool started = false;
    REQUIRE(start_next_trial(*life, *runner, sweep, agent, Placement{0, {}, 0.0, 1}, 0, &started).ok());
    pass();
    if (!started) return std::nullopt;
    auto mail = life->take_mail();
    REQUIRE(mail.size() == 1);
    auto* st = std::get_if<StartTrial>(&mail[0].message);
    REQUIRE(st != nullptr);
    // The environment the agent reports: the START_TRIAL's, and the attempt.
    std::map<std::string, std::string> env = st->env;
    env["SWEPT_ATTEMPT"] = std::to_string(st->attempt);
    REQUIRE(life->started(agent, TrialStarted{st->trial_id, st->attempt, 7, 1.0, "w", env}));
    agent_of[st->trial_id] = agent;
    return *st;
  }
  // The member reports q at `step`: true when the scheduler sent it STOP_TRIAL.
  bool report(const StartTrial& st, int64_t step, double q) {
    Metrics batch{st.trial_id, st.attempt, ++seq, {{step, "q", q}}, "", 0};
    auto r = life->metrics(agent_of[st.trial_id], batch);
    REQUIRE(r.ok());
    REQUIRE(judge_metrics(*life, *runner, *r, batch).ok());
    pass();
    auto mail = life->take_mail();
    return std::any_of(mail.begin(), mail.end(), [&](const AgentMail& m) {
      auto* stop = std::get_if<StopTrial>(&m.message);
      return stop && stop->trial_id == st.trial_id;
    });
  }
  // It saved and exited on the stop.
  void stopped(const StartTrial& st) {
    TrialExited e;
    e.trial_id = st.trial_id;
    e.attempt = st.attempt;
    e.cause = ExitCause::kStopped;
    e.ended_at = 2.0;
    REQUIRE(life->exited(agent_of[st.trial_id], e).ok());
    pass();
  }
  // It failed: its program exited 1, or (launch) its checkpoint could not be had.
  void failed(const StartTrial& st, bool launch = false) {
    TrialExited e;
    e.trial_id = st.trial_id;
    e.attempt = st.attempt;
    e.cause = launch ? ExitCause::kLaunchFailed : ExitCause::kExited;
    if (!launch) e.exit_code = 1;
    e.reason = launch ? "the checkpoint of trial 2 segment 1 from agent a could not be pulled: agent a is not connected"
                      : "exit code 1";
    e.ended_at = 2.0;
    REQUIRE(life->exited(agent_of[st.trial_id], e).ok());
    pass();
  }
  // The scheduler dies with what it committed (SIGKILL) and starts again on
  // the file: a new runner and lifecycle recover the sweep.
  void restart() {
    if (store->in_transaction()) REQUIRE(store->commit().ok());
    life.reset();
    runner.reset();
    store.reset();
    auto w = store::Writer::open(db.path);
    REQUIRE(w.ok());
    store = std::move(*w);
    runner = std::make_unique<SweepRunner>(*store, clock);
    life = std::make_unique<TrialLifecycle>(*store, clock);
    REQUIRE(store->begin().ok());
    REQUIRE(scheduler::recover(*life, *runner, 60000).ok());
    pass();
  }
  int64_t q(const std::string& sql) {
    if (store->in_transaction()) REQUIRE(store->commit().ok());
    return store::testing::query_int(db.path, sql);
  }
};

std::string arg_of(const StartTrial& st) { return st.argv.size() > 1 ? st.argv[1] : ""; }

}  // namespace

TEST_CASE("pbt: members wait at the interval, then the round copies the best member's segment into the worst's") {
  Pbt p;
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  REQUIRE(members.size() == 4);
  for (const StartTrial& st : members) {
    REQUIRE(st.checkpoint);  // each segment has its own directory, the first one empty
    CHECK(!st.checkpoint->from_trial_id);
    CHECK(st.attempt == 1);
  }
  const std::vector<double> q = {0.1, 0.9, 0.5, 0.4};  // member 0 is the worst, member 1 the best
  for (size_t i = 0; i < members.size(); ++i) {
    CHECK(!p.report(members[i], 5, q[i] / 2));
    CHECK(p.report(members[i], 10, q[i]));  // at the interval: stopped
    CHECK(!p.report(members[i], 11, q[i]));  // told once
  }
  // Three have saved and exited: they wait; nothing starts, the sweep is not complete.
  for (size_t i = 0; i < 3; ++i) p.stopped(members[i]);
  CHECK(!p.start());
  CHECK(p.q("SELECT COUNT(*) FROM trials WHERE state='queued'") == 3);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=1") == 0);
  p.stopped(members[3]);  // the last: the round runs
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=1") == 4);
  const std::string worst = std::to_string(members[0].trial_id);
  CHECK(p.q("SELECT donor_trial_id FROM pbt_lineage WHERE round=1 AND trial_id=" + worst) == members[1].trial_id);
  CHECK(p.q("SELECT donor_segment FROM pbt_lineage WHERE round=1 AND trial_id=" + worst) == 1);
  CHECK(p.q("SELECT from_step FROM pbt_lineage WHERE round=1 AND trial_id=" + worst) == 10);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=1 AND donor_trial_id IS NULL") == 3);
  // The worst member's stored parameters are the best's lr, doubled.
  const double best_lr = members[1].params["lr"].get<double>();
  CHECK(p.q("SELECT COUNT(*) FROM trials WHERE id=" + worst + " AND abs(json_extract(params, '$.lr') - " +
            std::to_string(best_lr * 2) + ") < 1e-6") == 1);  // to_string keeps 6 decimals

  // Segment 2: attempt 2 of each member, from its own segment 1, or the best's for the worst.
  std::map<int64_t, StartTrial> second;
  while (auto st = p.start()) second[st->trial_id] = *st;
  REQUIRE(second.size() == 4);
  for (const auto& [id, st] : second) {
    CHECK(st.attempt == 2);
    REQUIRE(st.checkpoint);
    CHECK(st.checkpoint->from_attempt == 1);
    CHECK(*st.checkpoint->from_trial_id == (id == members[0].trial_id ? members[1].trial_id : id));
  }
  CHECK(arg_of(second[members[0].trial_id]).find("--lr=") == 0);
  CHECK(second[members[0].trial_id].params["lr"].get<double>() == doctest::Approx(best_lr * 2));
  CHECK(second[members[2].trial_id].params == members[2].params);  // not in the bottom: unchanged
  // Segments ended at an interval are no retries: both attempts so far are `queued` in the history.
  CHECK(p.q("SELECT COUNT(*) FROM attempts WHERE state='queued'") == 4);
  CHECK(p.q("SELECT COUNT(*) FROM sweeps WHERE state='running'") == 1);
}

TEST_CASE("pbt: a member lost in mid-segment does not stall the round, reruns from its own segment, keeps its retry") {
  Pbt p;
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  REQUIRE(members.size() == 4);
  for (size_t i = 0; i < members.size(); ++i) {
    REQUIRE(p.report(members[i], 10, 0.1 * static_cast<double>(i + 1)));
    p.stopped(members[i]);
  }
  std::map<int64_t, StartTrial> second;
  while (auto st = p.start()) second[st->trial_id] = *st;
  REQUIRE(second.size() == 4);
  const int64_t lost = members[2].trial_id;
  // Member 2's host vanishes in segment 2 (max_retries 1: its two segments spent none of it).
  REQUIRE(p.life->lose(lost, "its agent went away").ok());
  p.pass();
  CHECK(p.q("SELECT COUNT(*) FROM trials WHERE state='queued' AND id=" + std::to_string(lost)) == 1);
  // The others reach round 2 and it runs without waiting for member 2.
  for (const auto& [id, st] : second) {
    if (id == lost) continue;
    REQUIRE(p.report(st, 20, 0.5));
    p.stopped(st);
  }
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2") == 3);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2 AND trial_id=" + std::to_string(lost)) == 0);
  // Member 2 reruns from its own segment 1 (its last complete one), as attempt 3.
  std::map<int64_t, StartTrial> third;
  while (auto st = p.start()) third[st->trial_id] = *st;
  REQUIRE(third.size() == 4);
  REQUIRE(third[lost].checkpoint);
  CHECK(*third[lost].checkpoint->from_trial_id == lost);
  CHECK(third[lost].checkpoint->from_attempt == 1);
  CHECK(third[lost].attempt == 3);
  // Everyone runs to max_steps: done, completed; the sweep completes.
  for (const auto& [id, st] : third) {
    CHECK(p.report(st, 30, 0.7));
    p.stopped(st);
  }
  CHECK(p.q("SELECT COUNT(*) FROM trials WHERE state='completed'") == 4);
  CHECK(p.q("SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1);
}

TEST_CASE("pbt: cancelling a sweep stops the members waiting for their round") {
  Pbt p;
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  REQUIRE(p.report(members[0], 10, 0.5));
  p.stopped(members[0]);  // waits for the round, queued in the store
  auto stopped = cancel_sweep(*p.life, *p.runner, p.sweep, "cancelled by the user");
  REQUIRE(stopped.ok());
  CHECK(*stopped == 4);  // the waiting one, and the three still running
  CHECK(p.q("SELECT COUNT(*) FROM trials WHERE state='queued'") == 0);
  CHECK(p.q("SELECT COUNT(*) FROM sweeps WHERE state='cancelled'") == 1);
}

TEST_CASE("pbt: a segment whose checkpoint another agent holds names that agent, so that it is pulled") {
  Pbt p;
  std::vector<StartTrial> members;
  for (const char* agent : {"a", "a", "b", "b"}) members.push_back(p.start(agent).value());
  const std::vector<double> q = {0.1, 0.9, 0.5, 0.4};  // member 0 the worst, member 1 (on a) the best
  for (size_t i = 0; i < members.size(); ++i) {
    REQUIRE(p.report(members[i], 10, q[i]));
    p.stopped(members[i]);
  }
  // Every second segment on b: members 0 and 1 start from segments that ran
  // on a; members 2 and 3 from their own, on b already.
  std::map<int64_t, StartTrial> second;
  while (auto st = p.start("b")) second[st->trial_id] = *st;
  REQUIRE(second.size() == 4);
  REQUIRE(second[members[0].trial_id].checkpoint);
  CHECK(*second[members[0].trial_id].checkpoint->from_trial_id == members[1].trial_id);
  CHECK(second[members[0].trial_id].checkpoint->from_agent == "a");
  CHECK(second[members[1].trial_id].checkpoint->from_agent == "a");
  CHECK(second[members[2].trial_id].checkpoint->from_agent.empty());
  CHECK(second[members[3].trial_id].checkpoint->from_agent.empty());
  // Through the codec, as the agent reads it.
  Decoded d = decode(encode(second[members[0].trial_id]));
  REQUIRE(d.ok());
  CHECK(std::get<StartTrial>(*d.message).checkpoint->from_agent == "a");
}

TEST_CASE("pbt: members are placed only on agents that run checkpoint segments") {
  AgentCapacity old_agent, new_agent;
  old_agent.name = "old";
  old_agent.total_slots = old_agent.free_slots = 4;
  new_agent = old_agent;
  new_agent.name = "new";
  new_agent.segments = true;
  Demand member;
  member.segments = true;
  CHECK(!place_trial({old_agent}, member));
  auto placed = place_trial({old_agent, new_agent}, member);
  REQUIRE(placed);
  CHECK(placed->agent == 1);
  CHECK(place_trial({old_agent}, Demand{}));  // other trials go anywhere
}

TEST_CASE("pbt: a failed member reruns from its own checkpoint while max_retries allows, then fails alone") {
  Pbt p;  // max_retries 1
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  REQUIRE(members.size() == 4);
  for (size_t i = 1; i < members.size(); ++i) {
    REQUIRE(p.report(members[i], 10, 0.1 * static_cast<double>(i)));
    p.stopped(members[i]);
  }
  // Member 0 fails before its interval: the round runs without it, and it reruns.
  p.failed(members[0]);
  const std::string failing = std::to_string(members[0].trial_id);
  CHECK(p.q("SELECT COUNT(*) FROM trials WHERE state='queued' AND id=" + failing) == 1);
  CHECK(p.q("SELECT COUNT(*) FROM attempts WHERE state='failed' AND trial_id=" + failing) == 1);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=1") == 3);
  std::map<int64_t, StartTrial> second;
  while (auto st = p.start()) second[st->trial_id] = *st;
  REQUIRE(second.size() == 4);
  REQUIRE(second[members[0].trial_id].checkpoint);
  CHECK(!second[members[0].trial_id].checkpoint->from_trial_id);  // no complete checkpoint yet: from the start
  CHECK(second[members[0].trial_id].attempt == 2);
  // It fails again: its one retry is spent, it ends failed, the others go on.
  p.failed(second[members[0].trial_id]);
  CHECK(p.q("SELECT state = 'failed' FROM trials WHERE id=" + failing) == 1);
  for (const auto& [id, st] : second) {
    if (id == members[0].trial_id) continue;
    REQUIRE(p.report(st, 20, 0.5));
    p.stopped(st);
  }
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2") == 3);
}

TEST_CASE("pbt: a member whose donor's checkpoint cannot be had resumes from its own, and its lineage says so") {
  Pbt p;
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  const std::vector<double> q = {0.1, 0.9, 0.5, 0.4};  // member 0 takes member 1's checkpoint
  for (size_t i = 0; i < members.size(); ++i) {
    REQUIRE(p.report(members[i], 10, q[i]));
    p.stopped(members[i]);
  }
  const std::string worst = std::to_string(members[0].trial_id);
  REQUIRE(p.q("SELECT donor_trial_id FROM pbt_lineage WHERE round=1 AND trial_id=" + worst) == members[1].trial_id);
  std::map<int64_t, StartTrial> second;
  while (auto st = p.start()) second[st->trial_id] = *st;
  REQUIRE(second.size() == 4);
  // The donor's host went away while the segment pulled its checkpoint.
  p.failed(second[members[0].trial_id], /*launch=*/true);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=1 AND donor_trial_id IS NULL AND trial_id=" + worst) == 1);
  CHECK(p.q("SELECT from_step FROM pbt_lineage WHERE round=1 AND trial_id=" + worst) == 10);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=1 AND trial_id=" + worst +
            " AND changes LIKE '%resumed from its own checkpoint%'") == 1);
  auto rerun = p.start();
  REQUIRE(rerun);
  CHECK(rerun->trial_id == members[0].trial_id);
  CHECK(rerun->attempt == 3);
  REQUIRE(rerun->checkpoint);
  CHECK(*rerun->checkpoint->from_trial_id == members[0].trial_id);  // its own segment 1
  CHECK(rerun->checkpoint->from_attempt == 1);
  CHECK(rerun->params == second[members[0].trial_id].params);  // the parameters the round gave it
}

TEST_CASE("pbt: a restarted scheduler rebuilds the population: waiting members wait, owed stops go out, rounds go on") {
  Pbt p;
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  for (size_t i = 0; i < members.size(); ++i) {
    REQUIRE(p.report(members[i], 10, 0.1 * static_cast<double>(i + 1)));
    p.stopped(members[i]);
  }
  std::vector<StartTrial> second;
  while (auto st = p.start()) second.push_back(*st);
  REQUIRE(second.size() == 4);
  // Round 2 being gathered: two members stopped and wait, one was told to
  // stop but has not exited, one still runs. Then the scheduler dies.
  for (size_t i = 0; i < 3; ++i) REQUIRE(p.report(second[i], 20, 0.2 * static_cast<double>(i + 1)));
  p.stopped(second[0]);
  p.stopped(second[1]);
  CHECK(!p.report(second[3], 15, 0.3));
  p.restart();
  // The two waiting members are not started again: they wait for round 2.
  CHECK(!p.start());
  // The agent comes back with the two it runs: the stop sent before the restart is owed again.
  std::vector<RunningTrial> running = {{second[2].trial_id, second[2].attempt, 7, 1.0},
                                       {second[3].trial_id, second[3].attempt, 8, 1.0}};
  auto rec = p.life->reconcile("a", running, {}, 0);
  REQUIRE(rec.ok());
  p.pass();
  REQUIRE(rec->stops.size() == 1);
  CHECK(rec->stops[0].trial_id == second[2].trial_id);
  p.stopped(second[2]);  // its segment's end, not the trial's: it waits too
  CHECK(p.q("SELECT COUNT(*) FROM trials WHERE state='queued'") == 3);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2") == 0);
  REQUIRE(p.report(second[3], 20, 0.9));  // the last one: round 2 runs with all four
  p.stopped(second[3]);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2") == 4);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2 AND donor_trial_id IS NOT NULL") == 1);
  std::map<int64_t, StartTrial> third;
  while (auto st = p.start()) third[st->trial_id] = *st;
  REQUIRE(third.size() == 4);
  for (const auto& [id, st] : third) {
    CHECK(st.attempt == 3);
    REQUIRE(st.checkpoint);
    CHECK(st.checkpoint->from_attempt == 2);  // the segments that ended at round 2's interval
  }
}

TEST_CASE("pbt: a member lost just after an exploit reruns from its donor's checkpoint with its new parameters") {
  Pbt p;
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  const std::vector<double> q = {0.1, 0.9, 0.5, 0.4};  // member 0 takes member 1's checkpoint
  for (size_t i = 0; i < members.size(); ++i) {
    REQUIRE(p.report(members[i], 10, q[i]));
    p.stopped(members[i]);
  }
  std::map<int64_t, StartTrial> second;
  while (auto st = p.start()) second[st->trial_id] = *st;
  const StartTrial exploited = second.at(members[0].trial_id);
  REQUIRE(*exploited.checkpoint->from_trial_id == members[1].trial_id);
  // Its host vanishes while the copy is under way (the segment never reported):
  // a host fault, not the checkpoint's, so the round's decision stands.
  REQUIRE(p.life->lose(members[0].trial_id, "its agent went away").ok());
  p.pass();
  const std::string worst = std::to_string(members[0].trial_id);
  CHECK(p.q("SELECT donor_trial_id FROM pbt_lineage WHERE round=1 AND trial_id=" + worst) == members[1].trial_id);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE trial_id=" + worst + " AND changes LIKE '%its own checkpoint%'") ==
        0);
  auto rerun = p.start();
  REQUIRE(rerun);
  CHECK(rerun->trial_id == members[0].trial_id);
  CHECK(rerun->attempt == 3);
  REQUIRE(rerun->checkpoint);
  CHECK(*rerun->checkpoint->from_trial_id == members[1].trial_id);  // the donor's segment 1, again
  CHECK(rerun->checkpoint->from_attempt == 1);
  CHECK(rerun->params == exploited.params);  // the explored parameters, not its old ones
  CHECK(rerun->argv == exploited.argv);
  // The others do not wait for it: round 2 runs once they reach it.
  for (const auto& [id, st] : second) {
    if (id == members[0].trial_id) continue;
    REQUIRE(p.report(st, 20, 0.5));
    p.stopped(st);
  }
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2") == 3);
}

TEST_CASE("pbt: a restarted scheduler keeps a member's exploit: lost after the restart, it reruns from the donor") {
  Pbt p(3);
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  const std::vector<double> q = {0.1, 0.9, 0.5, 0.4};  // member 0 takes member 1's checkpoint
  for (size_t i = 0; i < members.size(); ++i) {
    REQUIRE(p.report(members[i], 10, q[i]));
    p.stopped(members[i]);
  }
  std::map<int64_t, StartTrial> second;
  while (auto st = p.start()) second[st->trial_id] = *st;
  const StartTrial exploited = second.at(members[0].trial_id);
  // The scheduler dies while member 0 copies its donor's checkpoint, and its
  // host does not come back: the restarted scheduler loses the segment.
  p.restart();
  REQUIRE(p.life->lose(members[0].trial_id, "its agent did not come back").ok());
  p.pass();
  const std::string worst = std::to_string(members[0].trial_id);
  CHECK(p.q("SELECT donor_trial_id FROM pbt_lineage WHERE round=1 AND trial_id=" + worst) == members[1].trial_id);
  auto rerun = p.start();
  REQUIRE(rerun);
  CHECK(rerun->trial_id == members[0].trial_id);
  REQUIRE(rerun->checkpoint);
  CHECK(*rerun->checkpoint->from_trial_id == members[1].trial_id);
  CHECK(rerun->checkpoint->from_attempt == 1);
  CHECK(rerun->params == exploited.params);
  // Its donor's checkpoint cannot be had now: it falls back to its own, and the lineage says so.
  p.failed(*rerun, /*launch=*/true);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=1 AND donor_trial_id IS NULL AND trial_id=" + worst) == 1);
  CHECK(p.q("SELECT from_step FROM pbt_lineage WHERE round=1 AND trial_id=" + worst) == 10);
  auto own = p.start();
  REQUIRE(own);
  REQUIRE(own->checkpoint);
  CHECK(*own->checkpoint->from_trial_id == members[0].trial_id);
  CHECK(own->checkpoint->from_attempt == 1);
}

TEST_CASE("pbt: a member whose round ran while it was away goes on from its own new segment, after a restart too") {
  Pbt p;
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  const std::vector<double> q = {0.1, 0.9, 0.5, 0.4};  // member 0 takes member 1's checkpoint
  for (size_t i = 0; i < members.size(); ++i) {
    REQUIRE(p.report(members[i], 10, q[i]));
    p.stopped(members[i]);
  }
  std::map<int64_t, StartTrial> second;
  while (auto st = p.start()) second[st->trial_id] = *st;
  REQUIRE(p.life->lose(members[0].trial_id, "its agent went away").ok());
  p.pass();
  auto rerun = p.start();  // attempt 3, from the donor's segment 1
  REQUIRE(rerun);
  // It reaches round 2's interval and is told to stop; before it has saved,
  // the others reach it too and round 2 runs without it.
  REQUIRE(p.report(*rerun, 20, 0.3));
  for (const auto& [id, st] : second) {
    if (id == members[0].trial_id) continue;
    REQUIRE(p.report(st, 20, 0.5));
    p.stopped(st);
  }
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2 AND trial_id<>" + std::to_string(rerun->trial_id)) == 3);
  p.stopped(*rerun);  // its segment 3 is complete: it goes on from there, its lineage says so
  const std::string worst = std::to_string(members[0].trial_id);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2 AND donor_trial_id IS NULL AND from_step=20 AND trial_id=" +
            worst) == 1);
  // A restart before it starts again keeps that: its own segment 3, not the donor's segment 1.
  p.restart();
  std::map<int64_t, StartTrial> third;
  while (auto st = p.start()) third[st->trial_id] = *st;
  REQUIRE(third.count(members[0].trial_id) == 1);
  const StartTrial& next = third[members[0].trial_id];
  REQUIRE(next.checkpoint);
  CHECK(*next.checkpoint->from_trial_id == members[0].trial_id);
  CHECK(next.checkpoint->from_attempt == 3);
  CHECK(next.params == rerun->params);
}

TEST_CASE("pbt: a rerun whose round runs without it is still stopped at the step it was given, and goes on at once") {
  Pbt p;
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  for (size_t i = 0; i < members.size(); ++i) {
    REQUIRE(p.report(members[i], 10, 0.1 * static_cast<double>(i + 1)));
    p.stopped(members[i]);
  }
  std::map<int64_t, StartTrial> second;
  while (auto st = p.start()) second[st->trial_id] = *st;
  // Member 0's host goes away; its rerun starts at once, told to stop at round 2's step 20.
  const int64_t lost = members[0].trial_id;
  REQUIRE(p.life->lose(lost, "its agent went away").ok());
  p.pass();
  auto rerun = p.start();
  REQUIRE(rerun);
  CHECK(rerun->env.at("SWEPT_PBT_STOP_STEP") == "20");
  // The others reach 20 first: round 2 runs without the rerun (a lost member never stalls a round).
  for (const auto& [id, st] : second) {
    if (id == lost) continue;
    REQUIRE(p.report(st, 20, 0.5));
    p.stopped(st);
  }
  REQUIRE(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2") == 3);
  // The rerun saves at step 20 and waits there for its stop: it must get it,
  // though the population now aims at 30 (else it would wait for ever).
  CHECK(p.report(*rerun, 20, 0.2));
  p.stopped(*rerun);
  CHECK(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2 AND donor_trial_id IS NULL AND from_step=20 AND trial_id=" +
            std::to_string(lost)) == 1);
  // It goes on at once from the segment it just completed, toward round 3's step 30.
  auto next = p.start();
  REQUIRE(next);
  CHECK(next->trial_id == lost);
  REQUIRE(next->checkpoint);
  CHECK(*next->checkpoint->from_trial_id == lost);
  CHECK(next->checkpoint->from_attempt == rerun->attempt);
  CHECK(next->env.at("SWEPT_PBT_STOP_STEP") == "30");
}

TEST_CASE("pbt: after a restart, a running rerun whose round ran without it is still stopped at the step it was given") {
  Pbt p;
  std::vector<StartTrial> members;
  while (auto st = p.start()) members.push_back(*st);
  for (size_t i = 0; i < members.size(); ++i) {
    REQUIRE(p.report(members[i], 10, 0.1 * static_cast<double>(i + 1)));
    p.stopped(members[i]);
  }
  std::map<int64_t, StartTrial> second;
  while (auto st = p.start()) second[st->trial_id] = *st;
  const int64_t lost = members[0].trial_id;
  REQUIRE(p.life->lose(lost, "its agent went away").ok());
  p.pass();
  auto rerun = p.start();  // told to stop at 20
  REQUIRE(rerun);
  for (const auto& [id, st] : second) {
    if (id == lost) continue;
    REQUIRE(p.report(st, 20, 0.5));
    p.stopped(st);
  }
  REQUIRE(p.q("SELECT COUNT(*) FROM pbt_lineage WHERE round=2") == 3);
  // The scheduler dies once the rerun's start is written; the rebuilt
  // population gathers round 3 (step 30), but the rerun waits at 20.
  REQUIRE(p.life->write_starts(true).ok());
  p.restart();
  std::vector<RunningTrial> running = {{rerun->trial_id, rerun->attempt, 7, 1.0}};
  REQUIRE(p.life->reconcile("a", running, {}, 0).ok());
  p.pass();
  CHECK(p.report(*rerun, 20, 0.2));
  p.stopped(*rerun);
  // It goes on at once from that segment; the others wait in the queue as before.
  std::map<int64_t, StartTrial> third;
  while (auto st = p.start()) third[st->trial_id] = *st;
  REQUIRE(third.count(lost) == 1);
  REQUIRE(third[lost].checkpoint);
  CHECK(third[lost].checkpoint->from_attempt == rerun->attempt);
  CHECK(third[lost].env.at("SWEPT_PBT_STOP_STEP") == "30");
}
