// Early termination acted on, end to end (issue 16): `swept run` on a sweep
// of tests/curve_trial.sh, one clearly good learning curve (run first) and
// clearly worse ones that print slowly, with early_terminate hyperband or
// median. Checked in SQLite: the worse trials end early_stopped (never
// failed, never retried), their metrics kept, each decision recorded with its
// rule and reason; the good one completes; the sweep completes; `swept
// status` and `swept trials` show them as early-stopped. One slot, so the
// order (good first) and hence every decision is fixed; the worse trials
// print for 10 s, so the test does not depend on how fast the stop arrives.
// The hyperband run is then retried: plainly (nothing requeued) and with
// --early-stopped, by a scheduler started afresh on the same file.
#include "tests/harness.h"

using namespace swept::itest;

namespace {

const std::string kCurveTrial = kTestsDir + "/curve_trial.sh";

std::string sweep(const std::string& early_terminate) {
  return R"({"name": "stop-losers", "method": "grid", "metric": {"name": "loss", "goal": "minimize"},
             "early_terminate": )" + early_terminate + R"(,
             "command": [")" + kCurveTrial + R"(", "${args}"],
             "parameters": {"floor": {"values": [0.1, 5, 6, 7]}, "steps": {"value": 40}}})";
}

void check_run(const std::string& early_terminate, const std::string& rule, int64_t at, bool retry) {
  TempDir dir;
  const std::string db = dir / "swept.db";  // where Scheduler(dir) looks
  write_file(dir / "sweep.json", sweep(early_terminate));
  std::string out;
  int rc = run_command({kSwept, "run", dir / "sweep.json", "--db", db, "--slots", "1", "--workdir", dir / "w",
                        "--dashboard", "off", "--progress", "off"},
                       dir / "run.log", &out, 120);
  REQUIRE_MESSAGE(rc == 0, out);
  CHECK(db_int(db, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1);
  // The good curve completed all 40 steps; the three worse ones were stopped.
  CHECK(db_text(db, "SELECT state FROM trials WHERE idx=0") == "completed");
  CHECK(db_int(db, "SELECT COUNT(*) FROM metrics m JOIN trials t ON t.id=m.trial_id WHERE t.idx=0") == 40);
  CHECK_MESSAGE(db_int(db, "SELECT COUNT(*) FROM trials WHERE idx>0 AND state='early_stopped'") == 3, out);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state IN ('failed','lost','stopped')") == 0);
  // Their metrics stay (at least up to the value they were judged at), and
  // they stopped well before their 40 steps.
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials t WHERE state='early_stopped' AND (SELECT COUNT(*) FROM metrics m "
                   "WHERE m.trial_id=t.id AND m.name='loss' AND m.step <= t.stop_step) <> t.stop_step") == 0);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials t WHERE state='early_stopped' AND (SELECT MAX(step) FROM metrics m "
                   "WHERE m.trial_id=t.id) >= 40") == 0);
  // The decision and its reason, on each stopped trial.
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='early_stopped' AND stop_rule='" + rule +
                       "' AND stop_at=" + std::to_string(at) + " AND stop_value > stop_threshold AND stop_reason LIKE '" +
                       rule + ":%stop' AND stop_decided_at IS NOT NULL AND reason LIKE 'early-stopped: " + rule + ":%'") == 3);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state <> 'early_stopped' AND stop_rule IS NOT NULL") == 0);
  // Never retried: one attempt each, recorded as early_stopped.
  CHECK(db_int(db, "SELECT COUNT(*) FROM attempts a JOIN trials t ON t.id=a.trial_id WHERE t.state='early_stopped' "
                   "AND a.attempt=1 AND a.state='early_stopped'") == 3);
  CHECK(db_int(db, "SELECT MAX(attempts) FROM trials") == 1);
  CHECK(out.find("3 early-stopped") != std::string::npos);

  // The CLI's views.
  rc = run_command({kSwept, "status", "1", "--db", db}, dir / "status.log", &out);
  CHECK_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(out.find("early-stopped 3") != std::string::npos, out);
  rc = run_command({kSwept, "trials", "1", "--db", db}, dir / "trials.log", &out);
  CHECK_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(out.find("early-stopped") != std::string::npos, out);
  CHECK_MESSAGE(out.find(rule + ": ") != std::string::npos, out);
  rc = run_command({kSwept, "trials", "1", "--db", db, "--state", "early-stopped"}, dir / "trials2.log", &out);
  CHECK_MESSAGE(rc == 0, out);
  CHECK(out.find("completed") == std::string::npos);
  if (!retry) return;

  // `swept retry` leaves early-stopped trials alone; --early-stopped takes
  // them back. A scheduler started on the file rebuilds the sweep's curves
  // from the store, and the rerun trials are judged (and stopped) again.
  Scheduler sched(dir);
  rc = run_command({kSwept, "retry", "1", "--scheduler", sched.endpoint}, dir / "retry.log", &out);
  CHECK_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(out.find("requeued 0 ") != std::string::npos, out);
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='early_stopped'") == 3);
  CHECK(db_int(db, "SELECT COUNT(*) FROM sweeps WHERE state='completed'") == 1);
  rc = run_command({kSwept, "retry", "1", "--early-stopped", "--scheduler", sched.endpoint}, dir / "retry2.log", &out);
  CHECK_MESSAGE(rc == 0, out);
  CHECK_MESSAGE(out.find("requeued 3 ") != std::string::npos, out);
  auto agent = start_agent(dir, sched.endpoint, "a1", "none", 1);
  REQUIRE_MESSAGE(eventually([&] { return sweep_done(db, 1); }, 90), sched.process->log());
  CHECK(db_int(db, "SELECT COUNT(*) FROM trials WHERE state='early_stopped' AND attempts=2 AND stop_rule='" + rule +
                       "'") == 3);
  CHECK(db_text(db, "SELECT state || ' ' || attempts FROM trials WHERE idx=0") == "completed 1");
}

}  // namespace

TEST_CASE("early termination: hyperband stops the worse trials at band 3, early_stopped with the decision recorded") {
  // Bands 3, 9, ...: at 3 iterations each worse trial's loss (5.33 and up)
  // is far above the best third's (the good trial's 0.43).
  check_run(R"({"type": "hyperband", "min_iter": 3, "eta": 3})", "hyperband", 3, true);
}

TEST_CASE("early termination: median stops the worse trials at their first step past warm-up") {
  check_run(R"({"type": "median", "n_startup_trials": 1, "n_warmup_steps": 2})", "median", 2, false);
}
