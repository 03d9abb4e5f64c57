// Tests of ExitJournal (agent/exit_journal.h) on its own, with real files:
// what one agent records is what the next one finds, acknowledged exits
// excepted, and a line cut short by a death is skipped.
#include "agent/exit_journal.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/test_util.h"

using namespace swept::agent;
namespace pr = swept::protocol;
using swept::agent::testing::TempDir;

namespace {

constexpr double kNow = 1763762200.0;  // wall seconds, as the agent's clock gives them

pr::TrialExited exit_of(int64_t trial, int attempt, int code, int64_t last_seq) {
  pr::TrialExited e;
  e.trial_id = trial;
  e.attempt = attempt;
  e.cause = pr::ExitCause::kExited;
  e.exit_code = code;
  e.reason = "exit code " + std::to_string(code);
  e.ended_at = 1763762100.25;
  e.last_seq = last_seq;
  return e;
}

pr::Metrics batch(int64_t trial, int64_t seq, double value) {
  pr::Metrics m;
  m.trial_id = trial;
  m.attempt = 1;
  m.seq = seq;
  m.records = {{seq, "loss", value}};
  m.log = "line one\nline two\n";  // newlines stay inside one journal line
  return m;
}

}  // namespace

TEST_CASE("exit journal: the next agent of the name finds the unacknowledged exits with their batches, in order") {
  TempDir dir;
  {
    std::vector<PendingExit> none;
    ExitJournal j = ExitJournal::open(dir.path(), "host-1", kNow, &none);
    CHECK(none.empty());
    j.record(exit_of(7, 1, 0, 2), {batch(7, 1, 0.5), batch(7, 2, 0.25)}, kNow + 40);
    j.record(exit_of(8, 2, 3, 0), {}, kNow + 40);
    j.record(exit_of(9, 1, 0, 0), {}, kNow + 40);
    j.acknowledged(8, 2);
    CHECK(j.pending() == 2);
  }  // the agent goes (or dies: the file is the same)
  std::vector<PendingExit> left;
  ExitJournal again = ExitJournal::open(dir.path(), "host-1", kNow + 1, &left);
  REQUIRE(left.size() == 2);
  CHECK(left[0].exit == exit_of(7, 1, 0, 2));
  REQUIRE(left[0].unacked.size() == 2);
  CHECK(left[0].unacked[1] == batch(7, 2, 0.25));
  CHECK(left[1].exit.trial_id == 9);
  CHECK(left[1].unacked.empty());
  CHECK(again.pending() == 2);
  // Another agent's name has its own journal.
  std::vector<PendingExit> other;
  ExitJournal elsewhere = ExitJournal::open(dir.path(), "host-2", kNow + 1, &other);
  CHECK(other.empty());
  // Acknowledged by the scheduler of the new agent: nothing left for a third.
  again.acknowledged(7, 1);
  again.acknowledged(9, 1);
  again.acknowledged(9, 1);  // twice changes nothing
  std::vector<PendingExit> third;
  ExitJournal::open(dir.path(), "host-1", kNow + 2, &third);
  CHECK(third.empty());
}

TEST_CASE("exit journal: a line cut short by the agent's death is skipped, the rest is read") {
  TempDir dir;
  {
    std::vector<PendingExit> none;
    ExitJournal j = ExitJournal::open(dir.path(), "a", kNow, &none);
    j.record(exit_of(1, 1, 0, 0), {}, kNow + 40);
  }
  { std::ofstream(dir.path() + "/.swept-exits-a", std::ios::app) << "TRIAL_EXITED {\"trial_id\": 2, \"att"; }
  std::vector<PendingExit> left;
  ExitJournal::open(dir.path(), "a", kNow + 1, &left);
  REQUIRE(left.size() == 1);
  CHECK(left[0].exit.trial_id == 1);
}

TEST_CASE("exit journal: a work directory it cannot write in keeps nothing, and says so without failing") {
  std::vector<PendingExit> left;
  ExitJournal j = ExitJournal::open("/nonexistent/swept-work", "a", kNow, &left);
  CHECK(left.empty());
  j.record(exit_of(1, 1, 0, 0), {}, kNow + 40);  // no effect, no crash
  CHECK(j.pending() == 0);
}

// Past its bound the scheduler has requeued the trial, or the journal meets
// another scheduler's database: the exit is not reported, and not kept.
TEST_CASE("exit journal: an exit past its keep_until is not reported, and dropped from the file") {
  TempDir dir;
  {
    std::vector<PendingExit> none;
    ExitJournal j = ExitJournal::open(dir.path(), "a", kNow, &none);
    j.record(exit_of(1, 1, 0, 0), {}, kNow + 40);
    j.record(exit_of(2, 1, 0, 0), {}, kNow + 80);
  }
  std::vector<PendingExit> left;
  ExitJournal::open(dir.path(), "a", kNow + 60, &left);
  REQUIRE(left.size() == 1);
  CHECK(left[0].exit.trial_id == 2);
  CHECK(left[0].keep_until == doctest::Approx(kNow + 80));
  std::vector<PendingExit> later;
  ExitJournal::open(dir.path(), "a", kNow + 61, &later);
  REQUIRE(later.size() == 1);  // the rewrite kept the bound
  std::vector<PendingExit> none;
  ExitJournal::open(dir.path(), "a", kNow + 81, &none);
  CHECK(none.empty());
}
