// The state CHECKs follow common/states.h (state_checks.h): a new file is
// created with them filled, schema.sql itself lists no state, a state added
// to a table is taken into the CHECK of an existing file at the next open
// (rows, indexes and references kept), and opening a current file rebuilds
// nothing.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/states.h"
#include "store/schema.h"
#include "store/sqlite.h"
#include "store/state_checks.h"
#include "store/test_support.h"
#include "store/writer.h"

using namespace swept::store;
using swept::store::testing::dump;
using swept::store::testing::query_int;
using swept::store::testing::state_probe_error;
using swept::store::testing::TempDb;

namespace {

const std::string kV3 = std::string(SWEPT_SOURCE_DIR) + "/store/testdata/swept-v3.db";

// Runs sync_state_checks(columns) in its own transaction on a read-write
// connection to `path`, committing when it succeeds.
swept::Result<int> sync(const std::string& path, const std::vector<StateColumn>& columns) {
  auto conn = Connection::open(path, Connection::Mode::kReadWrite, 5000);
  if (!conn.ok()) return conn.status();
  SWEPT_RETURN_IF_ERROR((*conn)->exec("BEGIN IMMEDIATE"));
  auto n = sync_state_checks(**conn, columns);
  if (!n.ok()) {
    (void)(*conn)->exec("ROLLBACK");
    return n;
  }
  SWEPT_RETURN_IF_ERROR((*conn)->exec("COMMIT"));
  return n;
}

// The text of every table, index and reference of the file: what a rebuild
// must give back.
std::string schema_of(const std::string& path) {
  return dump(path, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name");
}

// `sql` without its -- comments (the essay may quote the empty list).
std::string code_of(const std::string& sql) {
  std::string out;
  size_t i = 0;
  while (i < sql.size()) {
    size_t dash = sql.find("--", i);
    out += sql.substr(i, dash - i);
    if (dash == std::string::npos) break;
    i = sql.find('\n', dash);
  }
  return out;
}

}  // namespace

TEST_CASE("store: schema.sql spells no state name, the SQL a new file gets lists every one") {
  const std::string file = code_of(kSchemaSql);
  const std::string filled = code_of(schema_sql());
  REQUIRE(file.find("CHECK (state IN ())") != std::string::npos);
  CHECK(filled.find("CHECK (state IN ())") == std::string::npos);
  for (const StateColumn& c : state_columns()) {
    CAPTURE(c.table);
    CHECK(filled.find(state_check_clause(c.names)) != std::string::npos);
    for (std::string_view n : c.names) {
      CAPTURE(n);
      std::string quoted(1, '\'');
      quoted += n;
      quoted += '\'';
      CHECK(file.find(quoted) == std::string::npos);
    }
  }
}

TEST_CASE("store: a new database's state columns take every name of common/states.h and nothing else") {
  TempDb t;
  {
    auto w = Writer::open(t.path);
    REQUIRE(w.ok());
  }
  // Straight from common/states.h, not from state_columns(): a state added to
  // a table that the database does not take fails here.
  for (const auto& s : swept::kTrialStates) CHECK(state_probe_error(t.path, "trials", std::string(s.name)) == "");
  for (std::string_view n : swept::kSweepStateNames) CHECK(state_probe_error(t.path, "sweeps", std::string(n)) == "");
  for (std::string_view n : swept::kAgentStateNames) CHECK(state_probe_error(t.path, "agents", std::string(n)) == "");
  for (const char* table : {"trials", "sweeps", "agents"}) {
    CAPTURE(table);
    CHECK(state_probe_error(t.path, table, "no-such-state").find("CHECK") != std::string::npos);
  }
  // Created right: nothing left to rebuild.
  const std::string before = schema_of(t.path);
  auto n = sync(t.path, state_columns());
  REQUIRE(n.ok());
  CHECK(*n == 0);
  CHECK(schema_of(t.path) == before);
}

TEST_CASE("store: a state added to a table is taken into an existing file's CHECK, rows, indexes and references kept") {
  TempDb t;
  std::filesystem::copy_file(kV3, t.path);
  {
    auto w = Writer::open(t.path);
    REQUIRE(w.ok());
  }
  const std::vector<std::string> tables = {
      "SELECT * FROM trials ORDER BY id", "SELECT * FROM sweeps ORDER BY id", "SELECT * FROM agents ORDER BY name",
      "SELECT * FROM agent_gpus ORDER BY agent, idx", "SELECT * FROM attempts ORDER BY trial_id, attempt",
      "SELECT * FROM metrics ORDER BY trial_id, name, step"};
  std::vector<std::string> rows;
  for (const auto& sql : tables) rows.push_back(dump(t.path, sql));
  const std::string indexes = dump(t.path, "SELECT name, tbl_name, sql FROM sqlite_master WHERE type='index' ORDER BY name");
  const std::string references =
      dump(t.path, "SELECT m.name, f.\"table\", f.\"from\", f.\"to\" FROM sqlite_master m, "
                   "pragma_foreign_key_list(m.name) f WHERE m.type='table' ORDER BY m.name, f.id");
  REQUIRE(!references.empty());

  // As if each table of common/states.h had gained a state.
  std::vector<StateColumn> grown = state_columns();
  for (StateColumn& c : grown) c.names.push_back("paused");
  auto n = sync(t.path, grown);
  REQUIRE(n.ok());
  CHECK(*n == 3);
  for (const char* table : {"trials", "sweeps", "agents"}) {
    CAPTURE(table);
    CHECK(state_probe_error(t.path, table, "paused") == "");
    CHECK(state_probe_error(t.path, table, "no-such-state").find("CHECK") != std::string::npos);
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    CAPTURE(tables[i]);
    CHECK(dump(t.path, tables[i]) == rows[i]);
  }
  CHECK(dump(t.path, "SELECT name, tbl_name, sql FROM sqlite_master WHERE type='index' ORDER BY name") == indexes);
  CHECK(dump(t.path, "SELECT m.name, f.\"table\", f.\"from\", f.\"to\" FROM sqlite_master m, "
                     "pragma_foreign_key_list(m.name) f WHERE m.type='table' ORDER BY m.name, f.id") == references);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM pragma_foreign_key_check") == 0);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM pragma_integrity_check WHERE integrity_check <> 'ok'") == 0);

  // Asking again changes nothing.
  const std::string grown_schema = schema_of(t.path);
  n = sync(t.path, grown);
  REQUIRE(n.ok());
  CHECK(*n == 0);
  CHECK(schema_of(t.path) == grown_schema);

  // The writer puts the real tables back at its next open (a state removed
  // from common/states.h: only for this test, no row holds it).
  {
    auto w = Writer::open(t.path);
    REQUIRE(w.ok());
  }
  for (const char* table : {"trials", "sweeps", "agents"}) {
    CAPTURE(table);
    CHECK(state_probe_error(t.path, table, "paused").find("CHECK") != std::string::npos);
  }
  for (size_t i = 0; i < tables.size(); ++i) CHECK(dump(t.path, tables[i]) == rows[i]);
  n = sync(t.path, state_columns());
  REQUIRE(n.ok());
  CHECK(*n == 0);
}

TEST_CASE("store: a file without a state table or its CHECK is refused and left as it was") {
  TempDb t;
  {
    auto w = Writer::open(t.path);
    REQUIRE(w.ok());
  }
  const std::string before = schema_of(t.path);
  auto n = sync(t.path, {{"nosuch", {"x"}}});
  REQUIRE_FALSE(n.ok());
  CHECK(n.status().message().find("no nosuch table") != std::string::npos);
  // meta has no state column: refused, not half-rebuilt.
  n = sync(t.path, {{"sweeps", {"x"}}, {"meta", {"x"}}});
  REQUIRE_FALSE(n.ok());
  CHECK(n.status().message().find("the meta table has no state CHECK") != std::string::npos);
  CHECK(schema_of(t.path) == before);
}
