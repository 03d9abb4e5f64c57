// Migration tests on database files written by earlier swept releases:
// testdata/swept-0.1.0.db is what swept 0.1.0 (the release before store/)
// wrote for `swept run examples/script-sweep.json` (14 completed trials of a
// grid). A copy of it opens for writing, is upgraded in place, reads back
// through the read model exactly as that release reported it, and takes new
// writes.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sqlite3.h>

#include "common/states.h"
#include "store/reader.h"
#include "store/rows.h"
#include "store/test_support.h"
#include "store/writer.h"

using namespace swept::store;
using swept::store::testing::dump;
using swept::store::testing::exec_error;
using swept::store::testing::query_int;
using swept::store::testing::state_probe_error;
using swept::store::testing::TempDb;

namespace {

// Every state column of the file at `path` takes every name of its table in
// common/states.h, and refuses a name that is none (nor a near miss).
void check_state_checks_follow_the_tables(const std::string& path) {
  const std::vector<std::pair<std::string, std::vector<std::string_view>>> tables = {
      {"trials", [] {
         std::vector<std::string_view> v;
         for (const auto& s : swept::kTrialStates) v.push_back(s.name);
         return v;
       }()},
      {"sweeps", {swept::kSweepStateNames.begin(), swept::kSweepStateNames.end()}},
      {"agents", {swept::kAgentStateNames.begin(), swept::kAgentStateNames.end()}},
  };
  for (const auto& entry : tables) {
    // Named, not a structured binding: CAPTURE's lambda cannot capture one in
    // C++17 (clang refuses; static.thread_safety parses with clang).
    const std::string& table = entry.first;
    for (std::string_view n : entry.second) {
      CAPTURE(table);
      CAPTURE(n);
      CHECK(state_probe_error(path, table, std::string(n)) == "");
    }
    CAPTURE(table);
    CHECK(state_probe_error(path, table, "no-such-state").find("CHECK") != std::string::npos);
    CHECK(state_probe_error(path, table, "early-stopped").find("CHECK") != std::string::npos);
  }
}

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
  REQUIRE(s.best);
  CHECK(s.best->trial_id == 9);
  CHECK(s.best->value == doctest::Approx(0.0));
  CHECK(s.best->params["lr"] == doctest::Approx(0.5));

  auto rows = trial_rows((*writer)->connection(), s.id);
  REQUIRE(rows.ok());
  CHECK(rows->size() == 14);
  CHECK(rows->front().latest.count("loss") == 1);

  // Every state CHECK is common/states.h's table.
  check_state_checks_follow_the_tables(t.path);

  // The upgraded file takes writes: a new sweep and trial.
  REQUIRE((*writer)->begin().ok());
  swept::SweepRow r;
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

}  // namespace

// testdata/swept-v3.db: what the code of commit 137d382 (schema v3) wrote for
// two `swept run`s: a grid sweep with early_terminate (2 completed, 2 failed
// trials, its metrics and attempts) and a tpe sweep (3 completed, each with
// its suggestion).
TEST_CASE("store: a schema v3 database is upgraded in place, nothing lost, every state CHECK from common/states.h") {
  TempDb t;
  std::filesystem::copy_file(kV3, t.path);
  REQUIRE(query_int(t.path, "SELECT value FROM meta WHERE key='schema_version'") == 3);
  const std::string v3_trial_cols =
      "id, sweep_id, idx, params, command, state, attempts, agent, gpus, gpu_fraction, env, exit_code, reason, "
      "metric_value, created_at, started_at, ended_at, suggestion";
  const std::vector<std::string> tables = {
      "SELECT " + v3_trial_cols + " FROM trials ORDER BY id", "SELECT * FROM sweeps ORDER BY id",
      "SELECT trial_id, attempt, agent, gpus, gpu_fraction, state, exit_code, reason, started_at, ended_at, "
      "metrics_seq FROM attempts ORDER BY trial_id, attempt",  // (v7 adds nodes) "SELECT * FROM metrics ORDER BY trial_id, name, step",
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
  CHECK(dump(t.path, "SELECT \"table\", \"from\", \"to\" FROM pragma_foreign_key_list('agent_gpus')") ==
        "agents|agent|name|\n");
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM pragma_foreign_key_check") == 0);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM pragma_integrity_check WHERE integrity_check <> 'ok'") == 0);
  // UNIQUE (sweep_id, idx) still holds.
  CHECK(exec_error(t.path, "INSERT INTO trials(sweep_id, idx, params, command, state, created_at) "
                           "VALUES(1, 0, '{}', '[]', 'queued', 1)")
            .find("UNIQUE") != std::string::npos);
  // Every state of the one table is accepted, nothing else; likewise for
  // sweeps and agents.
  for (const auto& s : swept::kTrialStates) {
    CAPTURE(s.name);
    CHECK(exec_error(t.path, "UPDATE trials SET state='" + std::string(s.name) + "' WHERE id=1").empty());
  }
  CHECK(exec_error(t.path, "UPDATE trials SET state='early-stopped' WHERE id=1").find("CHECK") != std::string::npos);
  CHECK(exec_error(t.path, "UPDATE trials SET state='completed' WHERE id=1").empty());
  check_state_checks_follow_the_tables(t.path);

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

// Schema v6 adds agents.containment. A v5 file is made from the v3 one (the
// v6 upgrade, then the column dropped and the version set back), as v5 code
// left it: its readers must not ask for the column, the upgrade adds it NULL
// for the agents there were (they said nothing), and a REGISTER's mode is
// stored from then on.
TEST_CASE("store: a schema v5 database reads without agents.containment, and is upgraded to keep it") {
  TempDb t;
  std::filesystem::copy_file(kV3, t.path);
  REQUIRE(Writer::open(t.path).ok());
  REQUIRE(exec_error(t.path, "ALTER TABLE agents DROP COLUMN containment; "
                             "ALTER TABLE trials DROP COLUMN nodes; ALTER TABLE attempts DROP COLUMN nodes; "
                             "ALTER TABLE attempts DROP COLUMN gang; "
                             "UPDATE meta SET value='5' WHERE key='schema_version'") == "");
  REQUIRE(query_int(t.path, "SELECT COUNT(*) FROM pragma_table_info('agents') WHERE name='containment'") == 0);
  {
    auto reader = open_reader(t.path);
    REQUIRE(reader.ok());
    auto agents = list_agents(**reader, std::nullopt);
    REQUIRE_MESSAGE(agents.ok(), agents.status().message());
    REQUIRE(agents->size() == 1);
    CHECK(agents->front().name == "local");
    CHECK_FALSE(agents->front().containment.has_value());
  }
  auto writer = Writer::open(t.path);
  REQUIRE(writer.ok());
  CHECK(query_int(t.path, "SELECT value FROM meta WHERE key='schema_version'") == kSchemaVersion);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM agents WHERE containment IS NULL") == 1);
  REQUIRE((*writer)->begin().ok());
  REQUIRE((*writer)->upsert_agent("local", "vm", 1, {}, 2, "cgroup").ok());
  REQUIRE((*writer)->upsert_agent("other", "vm2", 2, {}, 2).ok());  // an agent that says nothing
  REQUIRE((*writer)->commit().ok());
  auto agents = list_agents((*writer)->connection(), std::nullopt);
  REQUIRE(agents.ok());
  REQUIRE(agents->size() == 2);
  CHECK(agents->at(0).containment == std::optional<std::string>("cgroup"));
  CHECK_FALSE(agents->at(1).containment.has_value());
  // A later REGISTER that names another mode replaces it.
  REQUIRE((*writer)->begin().ok());
  REQUIRE((*writer)->upsert_agent("local", "vm", 1, {}, 3, "subreaper").ok());
  REQUIRE((*writer)->commit().ok());
  agents = list_agents((*writer)->connection(), std::nullopt);
  REQUIRE(agents.ok());
  CHECK(agents->at(0).containment == std::optional<std::string>("subreaper"));
}

// Schema 7 (issue 25): a v6 file (the v3 fixture upgraded, then the columns
// dropped and the version set back) gains trials.nodes and attempts.nodes,
// NULL for the trials it had; a multi-node attempt stores its nodes in both,
// and readers attach them to the row.
TEST_CASE("store: a schema v6 database is upgraded to keep a multi-node trial's nodes") {
  TempDb t;
  std::filesystem::copy_file(kV3, t.path);
  REQUIRE(Writer::open(t.path).ok());
  REQUIRE(exec_error(t.path, "ALTER TABLE trials DROP COLUMN nodes; ALTER TABLE attempts DROP COLUMN nodes; "
                             "ALTER TABLE attempts DROP COLUMN gang; "
                             "UPDATE meta SET value='6' WHERE key='schema_version'") == "");
  {
    auto reader = open_reader(t.path);
    REQUIRE(reader.ok());
    std::vector<swept::TrialRow> rows(1);
    rows[0].id = 1;
    REQUIRE(fill_nodes(**reader, rows).ok());  // a v6 file: nothing asked, nothing attached
    CHECK(rows[0].nodes.empty());
  }
  auto writer = Writer::open(t.path);
  REQUIRE(writer.ok());
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM trials WHERE nodes IS NULL") == 7);
  REQUIRE((*writer)->begin().ok());
  const std::vector<swept::TrialNode> nodes = {{"a", {0, 1}}, {"b", {2, 3}}};
  REQUIRE((*writer)->start_attempt(1, 2, "a", {0, 1}, 0, 5.0, nodes).ok());
  REQUIRE((*writer)->start_attempt(2, 2, "c", {}, 0, 5.0).ok());  // one node: NULL
  REQUIRE((*writer)->commit().ok());
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM attempts WHERE trial_id=1 AND attempt=2 AND nodes IS NOT NULL") == 1);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM trials WHERE id=2 AND nodes IS NULL") == 1);
  std::vector<swept::TrialRow> rows(2);
  rows[0].id = 1;
  rows[1].id = 2;
  REQUIRE(fill_nodes((*writer)->connection(), rows).ok());
  CHECK(rows[0].nodes == nodes);
  CHECK(rows[1].nodes.empty());
}

// Schema 8 (issue 29): a v7 file (the v3 fixture upgraded, then the table
// dropped and the version set back) gains pbt_lineage, where a member's
// rounds are kept (one row per member and round, a round's row replaced).
TEST_CASE("store: a schema v7 database is upgraded to keep pbt lineage") {
  TempDb t;
  std::filesystem::copy_file(kV3, t.path);
  REQUIRE(Writer::open(t.path).ok());
  REQUIRE(exec_error(t.path, "DROP TABLE pbt_lineage; ALTER TABLE attempts DROP COLUMN gang; "
                             "UPDATE meta SET value='7' WHERE key='schema_version'") == "");
  REQUIRE(query_int(t.path, "SELECT COUNT(*) FROM sqlite_master WHERE name='pbt_lineage'") == 0);
  auto writer = Writer::open(t.path);
  REQUIRE(writer.ok());
  CHECK(query_int(t.path, "SELECT value FROM meta WHERE key='schema_version'") == kSchemaVersion);
  REQUIRE((*writer)->begin().ok());
  Writer::LineageRow row;
  row.trial_id = 1;
  row.round = 1;
  row.from_step = 100;
  row.donor_trial_id = 2;
  row.donor_segment = 1;
  row.params_json = R"({"lr": 0.1})";
  REQUIRE((*writer)->record_lineage(row).ok());
  row.donor_trial_id = 3;  // the plan made again (a donor lost): the round's row is replaced
  REQUIRE((*writer)->record_lineage(row).ok());
  REQUIRE((*writer)->commit().ok());
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM pbt_lineage") == 1);
  CHECK(query_int(t.path, "SELECT donor_trial_id FROM pbt_lineage WHERE trial_id=1 AND round=1") == 3);
}

// Schema 9 (issue 30): a v8 file (the v3 fixture upgraded, then the column
// dropped and the version set back) gains attempts.gang, NULL for the
// attempts it had (read as not known); a multi-node attempt started now
// keeps its processes with their roles, nodes and ports, read back whole.
TEST_CASE("store: a schema v8 database is upgraded to keep a multi-node attempt's processes") {
  TempDb t;
  std::filesystem::copy_file(kV3, t.path);
  REQUIRE(Writer::open(t.path).ok());
  REQUIRE(exec_error(t.path, "ALTER TABLE attempts DROP COLUMN gang; UPDATE meta SET value='8' WHERE key='schema_version'") ==
          "");
  auto writer = Writer::open(t.path);
  REQUIRE(writer.ok());
  CHECK(query_int(t.path, "SELECT value FROM meta WHERE key='schema_version'") == kSchemaVersion);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM attempts WHERE gang IS NOT NULL") == 0);
  auto old = (*writer)->attempt_gang(1, 1);
  REQUIRE(old.ok());
  CHECK_FALSE(old->has_value());  // an attempt of an older release: not known
  swept::GangRecord gang;
  gang.worker_nodes = 2;
  gang.master_port = 29500;
  gang.processes = {{"worker", 0, 0, 29501}, {"worker", 1, 1, 29502}, {"ps", 0, 2, 29503}};
  gang.slots = {1, 1, 2};
  REQUIRE((*writer)->begin().ok());
  const std::vector<swept::TrialNode> nodes = {{"a", {}}, {"b", {}}, {"c", {}}};
  REQUIRE((*writer)->start_attempt(1, 2, "a", {}, 0, 5.0, nodes, &gang).ok());
  REQUIRE((*writer)->start_attempt(2, 2, "c", {}, 0, 5.0).ok());  // one node: NULL
  REQUIRE((*writer)->commit().ok());
  auto read = (*writer)->attempt_gang(1, 2);
  REQUIRE(read.ok());
  REQUIRE(read->has_value());
  CHECK(**read == gang);
  CHECK((*read)->has_servers());
  auto none = (*writer)->attempt_gang(2, 2);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  // A damaged cell reads as not known, never as a wrong layout.
  REQUIRE(exec_error(t.path, "UPDATE attempts SET gang='{\"processes\": 3}' WHERE trial_id=1 AND attempt=2") == "");
  auto damaged = (*writer)->attempt_gang(1, 2);
  REQUIRE(damaged.ok());
  CHECK_FALSE(damaged->has_value());
}
