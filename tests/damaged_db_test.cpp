// A damaged database (issue 26, item 3) through the commands a user runs:
// the scheduler, the dashboard and a --db reader each refuse it at once with
// exit 2 and the way to recover it, and write nothing into it.
#include <doctest/doctest.h>

#include <string>

#include "store/test_support.h"
#include "tests/harness.h"

using namespace swept::itest;

TEST_CASE("a damaged database: swept scheduler, swept web and swept status --db refuse it with exit 2") {
  TempDir dir;
  const std::string db = dir / "swept.db";
  swept::store::testing::make_database(db);
  const int64_t pages = swept::store::testing::query_int(db, "PRAGMA page_count");
  REQUIRE(pages > 20);
  swept::store::testing::damage_pages(db, static_cast<int>(pages / 2), static_cast<int>(pages / 2) + 1);

  std::string out;
  int rc = run_command({kSwept, "scheduler", "--bind", "tcp://127.0.0.1:*", "--db", db}, dir / "scheduler.log", &out,
                       30);
  CHECK(rc == 2);
  CHECK(out.find("is damaged") != std::string::npos);
  CHECK(out.find(".recover") != std::string::npos);

  rc = run_command({kSwept, "web", "--db", db, "--listen", "127.0.0.1:0"}, dir / "web.log", &out, 30);
  CHECK(rc == 2);
  CHECK(out.find("is damaged") != std::string::npos);

  rc = run_command({kSwept, "status", "--db", db}, dir / "status.log", &out, 30);
  CHECK(rc == 2);
  CHECK(out.find("is damaged") != std::string::npos);
}
