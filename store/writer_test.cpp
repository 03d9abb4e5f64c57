// Tests of the store on real SQLite files: schema version and migration from
// version 1, idempotent metric batches, bounded log tails, queries, read-only
// opening, refusal of foreign or newer files.
#include "store/fault_vfs.h"
#include "store/reader.h"
#include "store/sqlite.h"
#include "store/state_checks.h"
#include "store/test_support.h"
#include "store/writer.h"

#include <doctest/doctest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

using namespace swept::store;
using swept::protocol::Metrics;

namespace {

// A fresh temporary database path, removed (with its WAL files) at scope end.
using testing::TempDb;
using testing::query_int;

swept::SweepRow sweep(const char* goal = "minimize") {
  swept::SweepRow s;
  s.name = "test";
  s.method = "grid";
  s.metric_name = "loss";
  s.metric_goal = goal;
  s.spec = "{}";
  s.state = swept::SweepState::kRunning;
  s.total_trials = 3;
  s.created_at = 100;
  return s;
}

Metrics batch(int64_t trial, int attempt, int64_t seq, std::vector<swept::protocol::MetricRecord> records,
              std::string log = "") {
  Metrics m;
  m.trial_id = trial;
  m.attempt = attempt;
  m.seq = seq;
  m.records = std::move(records);
  m.log = std::move(log);
  return m;
}

}  // namespace

TEST_CASE("a new database gets the schema, WAL and the current version") {
  TempDb t;
  auto store = Writer::open(t.path);
  REQUIRE(store.ok());
  CHECK((*store)->schema_version() == kSchemaVersion);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM meta WHERE key='schema_version' AND value='" + std::to_string(kSchemaVersion) + "'") == 1);
  sqlite3* db = nullptr;
  sqlite3_open(t.path.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) == "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
  // Opening again is a no-op.
  store->reset();
  auto again = Writer::open(t.path);
  REQUIRE(again.ok());
  CHECK((*again)->schema_version() == kSchemaVersion);
}

TEST_CASE("a version-1 database is migrated, keeping its rows") {
  TempDb t;
  {
    sqlite3* db = nullptr;
    sqlite3_open(t.path.c_str(), &db);
    // What a version-1 scheduler wrote: schema.sql (its state lists filled,
    // as version 1 wrote them) and its version.
    REQUIRE(sqlite3_exec(db, swept::store::schema_sql().c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
                         "INSERT INTO meta VALUES('schema_version','1');"
                         "INSERT INTO sweeps(id,name,method,spec,state,created_at) VALUES(1,'old','grid','{}','running',1);"
                         "INSERT INTO trials(id,sweep_id,idx,params,command,state,attempts,created_at) "
                         "VALUES(1,1,0,'{}','[]','running',1,1);"
                         "INSERT INTO attempts(trial_id,attempt,agent,state,started_at) VALUES(1,1,'a','running',1);",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = Writer::open(t.path);
  REQUIRE(store.ok());
  CHECK((*store)->schema_version() == kSchemaVersion);
  // v5: agents.quarantine, NULL for every agent there was.
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM pragma_table_info('agents') WHERE name='quarantine'") == 1);
  // v6: agents.containment (NULL: the agent's REGISTER named no mode).
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM pragma_table_info('agents') WHERE name='containment'") == 1);
  auto seq = (*store)->metrics_seq(1, 1);
  REQUIRE(seq.ok());
  CHECK(*seq == 0);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM trials") == 1);
}

TEST_CASE("files that are not swept databases, or newer ones, are refused") {
  TempDb t;
  {
    FILE* f = fopen(t.path.c_str(), "w");
    fputs("this is not sqlite at all, just text that is long enough to look like a header..............", f);
    fclose(f);
  }
  auto bad = Writer::open(t.path);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find(t.path) != std::string::npos);

  TempDb n;
  {
    sqlite3* db = nullptr;
    sqlite3_open(n.path.c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES('schema_version','99');",
                 nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  auto newer = Writer::open(n.path);
  REQUIRE_FALSE(newer.ok());
  CHECK(newer.status().code() == swept::StatusCode::kCorruption);
  CHECK(newer.status().message().find("newer") != std::string::npos);

  auto missing = open_reader("/tmp/definitely-not-here-swept.db");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == swept::StatusCode::kNotFound);
}

TEST_CASE("metric batches are idempotent: re-sent batches and repeated steps never duplicate rows") {
  TempDb t;
  auto opened = Writer::open(t.path);
  REQUIRE(opened.ok());
  Writer& s = **opened;
  REQUIRE(s.begin().ok());
  auto sid = s.insert_sweep(sweep());
  REQUIRE(sid.ok());
  auto tid = s.insert_trial(*sid, 0, R"({"lr":0.1})", R"(["x"])", 101);
  REQUIRE(tid.ok());
  REQUIRE(s.start_attempt(*tid, 1, "a", {}, 0, 102).ok());
  auto first = s.add_metrics(batch(*tid, 1, 1, {{0, "loss", 2.0}, {1, "loss", 1.5}, {1, "acc", 0.5}}, "hello\n"), "loss");
  REQUIRE(first.ok());
  CHECK(*first);
  // The same batch again (a re-send after a reconnect) is skipped.
  auto again = s.add_metrics(batch(*tid, 1, 1, {{0, "loss", 2.0}, {1, "loss", 1.5}, {1, "acc", 0.5}}, "hello\n"), "loss");
  REQUIRE(again.ok());
  CHECK_FALSE(*again);
  // A later batch repeating step 1 (a resumed trainer) overwrites.
  REQUIRE(*s.add_metrics(batch(*tid, 1, 2, {{1, "loss", 1.25}, {0, "loss", 9.0}}), "loss"));
  REQUIRE(s.commit().ok());

  CHECK(query_int(t.path, "SELECT COUNT(*) FROM metrics") == 3);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM metrics WHERE name='loss' AND step=1 AND value=1.25") == 1);
  // trial_latest follows the highest step, not the last line: step 0 came later but is older.
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM trial_latest WHERE name='loss' AND step=1 AND value=1.25") == 1);
  // metric_value is the last value reported under the sweep's metric.
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM trials WHERE metric_value=9.0") == 1);
  CHECK(*s.metrics_seq(*tid, 1) == 2);
  CHECK(*trial_log_tail(s.connection(), *tid) == "hello\n");
}

TEST_CASE("the log tail is bounded to its last 64 KiB") {
  TempDb t;
  auto opened = Writer::open(t.path);
  REQUIRE(opened.ok());
  Writer& s = **opened;
  auto sid = s.insert_sweep(sweep());
  auto tid = s.insert_trial(*sid, 0, "{}", "[]", 1);
  REQUIRE(tid.ok());
  for (int i = 0; i < 40; ++i) REQUIRE(s.append_log(*tid, std::string(4000, 'a' + (i % 26))).ok());
  auto tail = trial_log_tail(s.connection(), *tid);
  REQUIRE(tail.ok());
  CHECK(tail->size() == kLogTailBytes);
  CHECK(tail->back() == 'a' + (39 % 26));
}

TEST_CASE("queries: summaries with counts and best, trial rows, agents") {
  TempDb t;
  auto opened = Writer::open(t.path);
  REQUIRE(opened.ok());
  Writer& s = **opened;
  REQUIRE(s.begin().ok());
  auto sid = *s.insert_sweep(sweep("maximize"));
  int64_t ids[3];
  for (int i = 0; i < 3; ++i) ids[i] = *s.insert_trial(sid, i, "{\"i\":" + std::to_string(i) + "}", "[\"run\"]", 1);
  REQUIRE(s.upsert_agent("a", "host-a", 2, {{0, "GPU-0", "Fake", 1 << 30}}, 5).ok());
  REQUIRE(s.start_attempt(ids[0], 1, "a", {0}, 0, 10).ok());
  REQUIRE(s.confirm_started(ids[0], 1, R"({"CUDA_VISIBLE_DEVICES":"0"})", 11).ok());
  REQUIRE(*s.add_metrics(batch(ids[0], 1, 1, {{5, "loss", 0.8}}), "loss"));
  REQUIRE(s.end_attempt(ids[0], 1, swept::TrialState::kCompleted, 0, "exit code 0", 12).ok());
  REQUIRE(s.set_trial_state(ids[0], swept::TrialState::kCompleted, 0, "exit code 0", 12).ok());
  REQUIRE(s.start_attempt(ids[1], 1, "a", {}, 0, 13).ok());
  REQUIRE(*s.add_metrics(batch(ids[1], 1, 1, {{5, "loss", 0.9}}), "loss"));
  REQUIRE(s.commit().ok());

  auto sums = sweep_summaries(s.connection(), sid);
  REQUIRE(sums.ok());
  REQUIRE(sums->size() == 1);
  const auto& sum = sums->front();
  CHECK(sum.counts[swept::TrialState::kCompleted] == 1);
  CHECK(sum.counts[swept::TrialState::kRunning] == 1);
  CHECK(sum.counts[swept::TrialState::kQueued] == 1);
  // Best is among completed trials only: 0.8, though a running one shows 0.9.
  REQUIRE(sum.best);
  CHECK(sum.best->trial_id == ids[0]);
  CHECK(sum.best->value == doctest::Approx(0.8));
  CHECK(sum.best->params["i"] == 0);
  CHECK_FALSE(sweep_summaries(s.connection(), sid + 100).ok());

  auto rows = trial_rows(s.connection(), sid);
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 3);
  CHECK((*rows)[0].state == swept::TrialState::kCompleted);
  CHECK((*rows)[0].gpus == std::vector<int>{0});
  CHECK((*rows)[0].latest.at("loss") == doctest::Approx(0.8));
  CHECK((*rows)[0].command == std::vector<std::string>{"run"});
  CHECK((*rows)[2].state == swept::TrialState::kQueued);

  auto agents = list_agents(s.connection());
  REQUIRE(agents.ok());
  REQUIRE(agents->size() == 1);
  CHECK((*agents)[0].gpus.size() == 1);
  CHECK((*agents)[0].running.size() == 1);
  CHECK((*agents)[0].running[0].trial_id == ids[1]);

  // A read-only connection sees the same, and cannot write.
  auto ro = open_reader(t.path);
  REQUIRE(ro.ok());
  CHECK(sweep_summaries(**ro, std::nullopt)->size() == 1);
  CHECK_FALSE((*ro)->exec("UPDATE sweeps SET state='completed'").ok());
}

TEST_CASE("recovery reads unfinished trials and running sweeps back") {
  TempDb t;
  int64_t sid = 0, tid = 0;
  {
    auto opened = Writer::open(t.path);
    REQUIRE(opened.ok());
    Writer& s = **opened;
    sid = *s.insert_sweep(sweep());
    tid = *s.insert_trial(sid, 0, "{}", "[]", 1);
    s.insert_trial(sid, 1, "{}", "[]", 1);
    REQUIRE(s.start_attempt(tid, 1, "a", {1, 2}, 0, 2).ok());
  }
  auto opened = Writer::open(t.path);
  REQUIRE(opened.ok());
  Writer& s = **opened;
  auto sweeps = s.sweeps_in_state(swept::SweepState::kRunning);
  REQUIRE(sweeps.ok());
  REQUIRE(sweeps->size() == 1);
  CHECK(sweeps->front().next_index == 2);
  auto running = s.trials_in_state(sid, swept::TrialState::kRunning);
  REQUIRE(running.ok());
  REQUIRE(running->size() == 1);
  CHECK(running->front().agent == "a");
  CHECK(running->front().gpus == std::vector<int>{1, 2});
  CHECK_FALSE(running->front().started_at);
  CHECK(s.trials_in_state(sid, swept::TrialState::kQueued)->size() == 1);
}

TEST_CASE("store: a commit that fails on disk rolls back the whole transaction and says so, and what waited for it is dropped") {
  auto& fault = swept::store::testing::FaultVfs::install();
  TempDb t;
  WriterOptions o;
  o.vfs = swept::store::testing::FaultVfs::kName;
  auto opened = Writer::open(t.path, o);
  REQUIRE(opened.ok());
  Writer& s = **opened;
  REQUIRE(s.begin().ok());
  auto sid = s.insert_sweep(sweep());
  REQUIRE(sid.ok());
  REQUIRE(s.commit().ok());

  // What waits for a commit is done after one, never after a rollback.
  int said = 0;
  s.after_commit([&] { ++said; });
  CHECK(said == 1);  // no transaction open: at once
  REQUIRE(s.begin().ok());
  REQUIRE(s.insert_trial(*sid, 0, "{}", "[]", 1).ok());
  s.after_commit([&] { said += 10; });
  CHECK(said == 1);
  fault.fail_wal_writes(1000000);
  swept::Status c = s.commit();
  fault.fail_wal_writes(0);
  REQUIRE_FALSE(c.ok());
  CHECK(c.code() == swept::StatusCode::kIoError);
  CHECK(c.message().find("commit failed") != std::string::npos);
  CHECK_FALSE(s.in_transaction());
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM trials") == 0);
  CHECK(query_int(t.path, "SELECT next_index FROM sweeps") == 0);

  CHECK(said == 1);  // dropped with the transaction

  // The writer carries on once the disk does.
  REQUIRE(s.begin().ok());
  REQUIRE(s.insert_trial(*sid, 0, "{}", "[]", 1).ok());
  s.after_commit([&] { said += 100; });
  CHECK(said == 1);
  REQUIRE(s.commit().ok());
  CHECK(said == 101);
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM trials") == 1);
}

TEST_CASE("store: v3: a trial's suggestion is stored, the search history is in completion order with pending trials") {
  TempDb t;
  auto store = Writer::open(t.path);
  REQUIRE(store.ok());
  Writer& w = **store;
  swept::SweepRow s;
  s.name = "b";
  s.method = "tpe";
  s.spec = "{}";
  s.state = swept::SweepState::kRunning;
  s.created_at = 1;
  auto sweep = w.insert_sweep(s);
  REQUIRE(sweep.ok());
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = w.insert_trial(*sweep, i, "{\"x\":" + std::to_string(i) + "}", "[]", 1);
    REQUIRE(id.ok());
    ids.push_back(*id);
  }
  REQUIRE(w.set_trial_suggestion(ids[0], "{\"method\":\"tpe\",\"mode\":\"startup\"}").ok());
  for (int64_t id : ids) REQUIRE(w.start_attempt(id, 1, "a", {}, 0, 1).ok());
  // Trial 2 ends first (completed, value 0.5), then trial 0 fails; 1 and 3 still run.
  Metrics m;
  m.trial_id = ids[2];
  m.attempt = 1;
  m.seq = 1;
  m.records.push_back({0, "loss", 0.5});
  REQUIRE(w.add_metrics(m, std::string("loss")).ok());
  REQUIRE(w.set_trial_state(ids[2], swept::TrialState::kCompleted, 0, std::nullopt, 5.0).ok());
  REQUIRE(w.set_trial_state(ids[0], swept::TrialState::kFailed, 1, std::string("exit code 1"), 6.0).ok());
  auto h = w.search_history(*sweep);
  REQUIRE(h.ok());
  REQUIRE(h->finished.size() == 2);
  CHECK(h->finished[0].first == nlohmann::json{{"x", 2}});
  REQUIRE(h->finished[0].second.has_value());
  CHECK(*h->finished[0].second == 0.5);
  CHECK(h->finished[1].first == nlohmann::json{{"x", 0}});
  CHECK(!h->finished[1].second.has_value());
  CHECK(h->pending == std::vector<nlohmann::json>{{{"x", 1}}, {{"x", 3}}});
  CHECK(query_int(t.path, "SELECT COUNT(*) FROM trials WHERE suggestion IS NOT NULL") == 1);
}

TEST_CASE("writer: trial records come decoded, and a row that does not decode is Corruption naming it") {
  TempDb t;
  auto store = Writer::open(t.path);
  REQUIRE(store.ok());
  Writer& w = **store;
  const int64_t sid = *w.insert_sweep(sweep());
  const int64_t good = *w.insert_trial(sid, 0, R"({"opt":{"lr":0.1}})", R"(["train","--lr=0.1"])", 1);
  auto rec = w.trial_record(good);
  REQUIRE(rec.ok());
  CHECK(rec->params == nlohmann::json{{"opt", {{"lr", 0.1}}}});
  CHECK(rec->command == std::vector<std::string>{"train", "--lr=0.1"});
  CHECK(rec->nodes.empty());
  // A multi-node attempt's nodes come with the record (the lifecycle's
  // reconciliation reads them to never adopt one node of a gang alone).
  const std::vector<swept::TrialNode> nodes = {{"a", {0}}, {"b", {1}}};
  REQUIRE(w.start_attempt(good, 1, "a", {0}, 0, 1.0, nodes, nullptr).ok());
  auto gang = w.trial_record(good);
  REQUIRE(gang.ok());
  CHECK(gang->nodes == nodes);

  // Rows swept never writes, put there by raw SQL: each read is refused
  // with the trial and the column named, never given a guessed value.
  struct Bad {
    const char* params;
    const char* command;
    const char* column;
  };
  const Bad bad[] = {{"not json", R"(["x"])", "trials.params"},
                     {"[1,2]", R"(["x"])", "trials.params"},
                     {"{}", "not json", "trials.command"},
                     {"{}", R"({"argv":["x"]})", "trials.command"},
                     {"{}", R"(["x", 3])", "trials.command"}};
  int64_t index = 1;
  for (const Bad& b : bad) {
    CAPTURE(b.params);
    CAPTURE(b.command);
    const int64_t id = *w.insert_trial(sid, index++, "{}", "[]", 1);
    auto put = w.connection().prepare("UPDATE trials SET params = ?, command = ? WHERE id = ?");
    REQUIRE(put.ok());
    put->bind(1, b.params).bind(2, b.command).bind(3, id);
    REQUIRE(put->run().ok());
    auto one = w.trial_record(id);
    REQUIRE_FALSE(one.ok());
    CHECK(one.status().code() == swept::StatusCode::kCorruption);
    CHECK(one.status().message().find("trial " + std::to_string(id)) != std::string::npos);
    CHECK(one.status().message().find(b.column) != std::string::npos);
    auto queued = w.trials_in_state(sid, swept::TrialState::kQueued);
    REQUIRE_FALSE(queued.ok());
    CHECK(queued.status().code() == swept::StatusCode::kCorruption);
    // Put right again, so that the next case is the only bad row.
    REQUIRE(w.connection().exec("UPDATE trials SET params = '{}', command = '[]'").ok());
  }
  REQUIRE(w.trials_in_state(sid, swept::TrialState::kQueued).ok());
}

TEST_CASE("writer: search_history decodes params, and a row that does not decode is Corruption naming it") {
  TempDb t;
  auto store = Writer::open(t.path);
  REQUIRE(store.ok());
  Writer& w = **store;
  const int64_t sid = *w.insert_sweep(sweep());
  const int64_t done = *w.insert_trial(sid, 0, R"({"x":1})", "[]", 1);
  const int64_t running = *w.insert_trial(sid, 1, R"({"x":2})", "[]", 1);
  REQUIRE(w.set_trial_state(done, swept::TrialState::kCompleted, 0, std::nullopt, 5.0).ok());
  REQUIRE(w.start_attempt(running, 1, "a", {}, 0, 1).ok());
  REQUIRE(w.search_history(sid).ok());

  for (const int64_t bad : {done, running}) {
    CAPTURE(bad);
    auto put = w.connection().prepare("UPDATE trials SET params = 'not json' WHERE id = ?");
    REQUIRE(put.ok());
    put->bind(1, bad);
    REQUIRE(put->run().ok());
    auto h = w.search_history(sid);
    REQUIRE_FALSE(h.ok());
    CHECK(h.status().code() == swept::StatusCode::kCorruption);
    CHECK(h.status().message().find("trial " + std::to_string(bad)) != std::string::npos);
    CHECK(h.status().message().find("trials.params") != std::string::npos);
    REQUIRE(w.connection().exec("UPDATE trials SET params = '{}'").ok());
  }
}

TEST_CASE("writer: an imported trial (issue 28) is stored final and unrun, read back, learned from, and counted apart") {
  TempDb t;
  auto store = Writer::open(t.path);
  REQUIRE(store.ok());
  Writer& w = **store;
  auto id = w.insert_sweep(sweep());
  REQUIRE(id.ok());
  auto below = w.insert_imported_trial(*id, -1, R"({"x":1})", "loss", 0.25, "sweep 7, trial 3", 50);
  auto at_point = w.insert_imported_trial(*id, 2, R"({"x":3})", "loss", 0.5, "runs.csv, row 4", 50);
  REQUIRE(below.ok());
  REQUIRE(at_point.ok());
  auto own = w.insert_trial(*id, 0, R"({"x":2})", "[]", 60);
  REQUIRE(own.ok());
  // Only grid points (index >= 0) are indices the sweep steps over; next_index is the sweep's own.
  auto points = w.imported_indices(*id);
  REQUIRE(points.ok());
  CHECK(*points == std::vector<int64_t>{2});
  CHECK(query_int(t.path, "SELECT next_index FROM sweeps") == 1);
  REQUIRE(w.raise_next_index(*id, 3).ok());
  REQUIRE(w.raise_next_index(*id, 2).ok());  // never lowered
  CHECK(query_int(t.path, "SELECT next_index FROM sweeps") == 3);

  auto rows = trial_rows(w.connection(), *id);
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 3);
  const swept::TrialRow& r = rows->front();
  CHECK(r.index == -1);
  CHECK(r.state == swept::TrialState::kImported);
  CHECK(r.attempts == 0);
  CHECK(r.command.empty());
  CHECK(r.reason == "imported from sweep 7, trial 3");
  CHECK(r.metric_value == 0.25);
  CHECK(r.latest.at("loss") == 0.25);
  CHECK(r.ended_at == 50);
  // The searchers learn from both, first; the own trial is queued, so neither finished nor pending.
  auto h = w.search_history(*id);
  REQUIRE(h.ok());
  REQUIRE(h->finished.size() == 2);
  CHECK(h->finished[0].second == 0.25);
  CHECK(h->finished[1].second == 0.5);
  CHECK(h->pending.empty());
  // Counted apart from completed trials, and best among them.
  auto sums = sweep_summaries(w.connection(), *id);
  REQUIRE(sums.ok());
  CHECK(sums->front().counts[swept::TrialState::kImported] == 2);
  CHECK(sums->front().counts[swept::TrialState::kCompleted] == 0);
  REQUIRE(sums->front().best);
  CHECK(sums->front().best->trial_id == *below);
}
