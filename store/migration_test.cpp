// Migration tests on database files written by earlier swept releases:
// testdata/swept-0.1.0.db is what swept 0.1.0 (the release before store/)
// wrote for `swept run examples/script-sweep.json` (14 completed trials of a
// grid). A copy of it opens for writing, is upgraded in place, reads back
// through the read model exactly as that release reported it, and takes new
// writes.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <sqlite3.h>

#include "store/reader.h"
#include "store/test_support.h"
#include "store/writer.h"

using namespace swept::store;
using swept::store::testing::query_int;
using swept::store::testing::TempDb;

namespace {

const std::string kRelease010 = std::string(SWEPT_SOURCE_DIR) + "/store/testdata/swept-0.1.0.db";

}  // namespace

TEST_CASE("store: a database written by swept 0.1.0 opens, is upgraded in place and keeps its rows") {
  TempDb t;
  std::filesystem::copy_file(kRelease010, t.path);
  CHECK(query_int(t.path, "SELECT value FROM meta WHERE key='schema_version'") == 2);

  auto writer = Writer::open(t.path);
  REQUIRE(writer.ok());
  CHECK((*writer)->schema_version() == kSchemaVersion);
  CHECK(query_int(t.path, "SELECT value FROM meta WHERE key='schema_version'") == kSchemaVersion);

  // What swept 0.1.0 printed at the end of that run: 14 completed, best
  // trial 9 with loss 0 (lr=0.5, target=-2).
  auto sums = sweep_summaries((*writer)->connection(), std::nullopt);
  REQUIRE(sums.ok());
  REQUIRE(sums->size() == 1);
  const auto& s = sums->front();
  CHECK(s.name == "quadratic-python");
  CHECK(s.state == swept::SweepState::kCompleted);
  CHECK(s.counts[swept::TrialState::kCompleted] == 14);
  CHECK(s.counts.done() == 14);
  REQUIRE(s.best_trial_id);
  CHECK(*s.best_trial_id == 9);
  CHECK(*s.best_value == doctest::Approx(0.0));
  CHECK(s.best_params["lr"] == doctest::Approx(0.5));

  auto rows = trial_rows((*writer)->connection(), s.id);
  REQUIRE(rows.ok());
  CHECK(rows->size() == 14);
  CHECK(rows->front().latest.count("loss") == 1);

  // The upgraded file takes writes: a new sweep and trial.
  REQUIRE((*writer)->begin().ok());
  SweepRecord r;
  r.name = "after-upgrade";
  r.method = "grid";
  r.spec = "{}";
  r.state = swept::SweepState::kRunning;
  r.created_at = 1;
  auto sid = (*writer)->insert_sweep(r);
  REQUIRE(sid.ok());
  REQUIRE((*writer)->insert_trial(*sid, 0, "{}", "[]", 1).ok());
  REQUIRE((*writer)->commit().ok());
  writer->reset();

  // A read-only reader of the upgraded file sees both sweeps.
  auto reader = open_reader(t.path);
  REQUIRE(reader.ok());
  auto all = sweep_summaries(**reader, std::nullopt);
  REQUIRE(all.ok());
  CHECK(all->size() == 2);
}

namespace {

const std::string kV3 = std::string(SWEPT_SOURCE_DIR) + "/store/testdata/swept-v3.db";

// Every row of `sql`'s result as text, one line per row: for comparing a
// table before and after an upgrade.
std::string dump(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::string out;
  while (sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      const unsigned char* v = sqlite3_column_text(st, c);
      out += v ? reinterpret_cast<const char*>(v) : "NULL";
      out += '|';
    }
    out += '\n';
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

std::string exec_error(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  char* err = nullptr;
  sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string out = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  return out;
}

}  // namespace

// testdata/swept-v3.db: what the code of commit 137d382 (schema v3) wrote for
// two `swept run`s: a grid sweep with early_terminate (2 completed, 2 failed
// trials, its metrics and attempts) and a tpe sweep (3 completed, each with
// its suggestion).
TEST_CASE("store: a schema v3 database is upgraded to v4 in place, nothing lost, the state CHECK from common/states.h") {
  TempDb t;
  std::filesystem::copy_file(kV3, t.path);
  REQUIRE(query_int(t.path, "SELECT value FROM meta WHERE key='schema_version'") == 3);
  const std::string v3_trial_cols =
      "id, sweep_id, idx, params, command, state, attempts, agent, gpus, gpu_fraction, env, exit_code, reason, "
      "metric_value, created_at, started_at, ended_at, suggestion";
  const std::vector<std::string> tables = {
      "SELECT " + v3_trial_cols + " FROM trials ORDER BY id", "SELECT * FROM sweeps ORDER BY id",
      "SELECT * FROM attempts ORDER BY trial_id, attempt", "SELECT * FROM metrics ORDER BY trial_id, name, step",
      "SELECT * FROM trial_latest ORDER BY trial_id, name", "SELECT * FROM trial_logs ORDER BY trial_id",
      // agents: the v3 columns (v5 adds quarantine)
      "SELECT name, host, state, slots, registered_at, last_seen FROM agents ORDER BY name"};
  std::vector<std::string> before;
  for (const auto& sql : tables) before.push_back(dump(t.path, sql));
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM trials") == 7);
  // v3 refuses the new state.
  CHECK(exec_error(t.path, "UPDATE trials SET state='early_stopped' WHERE id=1").find("CHECK") != std::string::npos);

  {
    auto writer = Writer::open(t.path);
    REQUIRE(writer.ok());
    CHECK((*writer)->schema_version() == kSchemaVersion);
  }
  CHECK(query_int(t.path, "SELECT value FROM meta WHERE key='schema_version'") == kSchemaVersion);
  for (size_t i = 0; i < tables.size(); ++i) {
    CAPTURE(tables[i]);
    CHECK(dump(t.path, tables[i]) == before[i]);
  }
  // The indexes and the foreign key came through the rebuild.
  CHECK(dump(t.path, "SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='trials' AND sql IS NOT NULL "
                     "ORDER BY name") == "trials_by_state|\ntrials_by_sweep_metric|\ntrials_by_sweep_state|\n");
  CHECK(dump(t.path, "SELECT \"table\", \"from\", \"to\" FROM pragma_foreign_key_list('trials')") == "sweeps|sweep_id|id|\n");
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM pragma_foreign_key_check") == 0);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM pragma_integrity_check WHERE integrity_check <> 'ok'") == 0);
  // UNIQUE (sweep_id, idx) still holds.
  CHECK(exec_error(t.path, "INSERT INTO trials(sweep_id, idx, params, command, state, created_at) "
                           "VALUES(1, 0, '{}', '[]', 'queued', 1)")
            .find("UNIQUE") != std::string::npos);
  // Every state of the one table is accepted, nothing else.
  for (const auto& s : swept::kTrialStates) {
    CAPTURE(s.name);
    CHECK(exec_error(t.path, "UPDATE trials SET state='" + std::string(s.name) + "' WHERE id=1").empty());
  }
  CHECK(exec_error(t.path, "UPDATE trials SET state='early-stopped' WHERE id=1").find("CHECK") != std::string::npos);
  CHECK(exec_error(t.path, "UPDATE trials SET state='completed' WHERE id=1").empty());

  // The read model reads the upgraded file as before; reopening changes nothing.
  const std::string schema = dump(t.path, "SELECT sql FROM sqlite_master ORDER BY name");
  auto again = Writer::open(t.path);
  REQUIRE(again.ok());
  CHECK(dump(t.path, "SELECT sql FROM sqlite_master ORDER BY name") == schema);
  auto sums = sweep_summaries((*again)->connection(), std::nullopt);
  REQUIRE(sums.ok());
  REQUIRE(sums->size() == 2);
  CHECK(sums->front().counts[swept::TrialState::kCompleted] == 2);
  CHECK(sums->front().counts[swept::TrialState::kFailed] == 2);
  // The new columns take a decision.
  Writer::StopDecision d;
  d.rule = "hyperband";
  d.at = 2;
  d.step = 2;
  d.value = 1.5;
  d.reason = "hyperband: band 2";
  REQUIRE((*again)->record_stop_decision(3, d).ok());
  auto curves = (*again)->metric_curves(1, "loss");
  REQUIRE(curves.ok());
  REQUIRE(curves->size() == 4);
  CHECK(curves->front().points.size() == 3);  // trial 1: steps 1..3 of loss
  CHECK((*curves)[2].stop_decided);
  CHECK((*curves)[2].stop_step == 2);
}
