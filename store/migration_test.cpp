// Migration tests on database files written by earlier swept releases:
// testdata/swept-0.1.0.db is what swept 0.1.0 (the release before store/)
// wrote for `swept run examples/script-sweep.json` (14 completed trials of a
// grid). A copy of it opens for writing, is upgraded in place, reads back
// through the read model exactly as that release reported it, and takes new
// writes.
#include <doctest/doctest.h>

#include <filesystem>

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
