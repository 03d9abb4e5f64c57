// ResponseCache over a real SQLite file in WAL mode, written by a second
// connection as the scheduler would: answers are reused until a commit, never
// after one, and not at all while there is no database.
#include "web/response_cache.h"

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>

#include "common/testing/temp_dir.h"

namespace {

// The writer: a plain connection that commits one row per call.
class Writer {
 public:
  explicit Writer(const std::string& path) {
    REQUIRE(sqlite3_open(path.c_str(), &db_) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db_, "PRAGMA journal_mode=WAL; CREATE TABLE t (x INTEGER)", nullptr, nullptr, nullptr) ==
            SQLITE_OK);
  }
  ~Writer() { sqlite3_close(db_); }
  void commit_row() { REQUIRE(sqlite3_exec(db_, "INSERT INTO t VALUES (1)", nullptr, nullptr, nullptr) == SQLITE_OK); }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace

TEST_CASE("response cache: an answer is reused until the database changes, then computed again") {
  swept::testing::TempDir dir;
  const std::string path = dir / "swept.db";
  Writer writer(path);
  swept::web::ResponseCache cache(path);
  int computed = 0;
  auto compute = [&]() -> swept::Result<std::string> { return "answer " + std::to_string(++computed); };

  CHECK(*cache.get("/api/sweeps", compute) == "answer 1");
  CHECK(*cache.get("/api/sweeps", compute) == "answer 1");  // no commit since: reused
  CHECK(*cache.get("/api/sweeps/1", compute) == "answer 2");  // another key
  writer.commit_row();
  CHECK(*cache.get("/api/sweeps", compute) == "answer 3");  // a commit: computed again
  CHECK(*cache.get("/api/sweeps", compute) == "answer 3");
  CHECK(cache.stats().hits == 2);
  CHECK(cache.stats().computed == 3);

  // Failures are returned and not kept.
  int failed = 0;
  auto failing = [&]() -> swept::Result<std::string> {
    ++failed;
    return swept::Status::NotFound("no sweep 9");
  };
  CHECK_FALSE(cache.get("/api/sweeps/9", failing).ok());
  CHECK_FALSE(cache.get("/api/sweeps/9", failing).ok());
  CHECK(failed == 2);
}

TEST_CASE("response cache: requests for an answer being computed wait for it instead of computing it again") {
  swept::testing::TempDir dir;
  const std::string path = dir / "swept.db";
  Writer writer(path);
  swept::web::ResponseCache cache(path);
  std::atomic<int> computed{0};
  std::promise<void> started, release;
  auto released = release.get_future().share();
  auto slow = [&]() -> swept::Result<std::string> {
    if (++computed == 1) {
      started.set_value();
      released.wait();
    }
    return std::string("body");
  };
  auto first = std::async(std::launch::async, [&] { return *cache.get("k", slow); });
  started.get_future().wait();  // the first request is inside compute
  auto second = std::async(std::launch::async, [&] { return *cache.get("k", slow); });
  release.set_value();
  CHECK(first.get() == "body");
  CHECK(second.get() == "body");
  CHECK(computed == 1);
}

TEST_CASE("response cache: without a database every answer is computed") {
  swept::testing::TempDir dir;
  swept::web::ResponseCache cache(dir / "not-yet.db");
  int computed = 0;
  auto compute = [&]() -> swept::Result<std::string> { return std::to_string(++computed); };
  CHECK(*cache.get("k", compute) == "1");
  CHECK(*cache.get("k", compute) == "2");
  // Once the scheduler has created it, answers are kept.
  Writer writer(dir / "not-yet.db");
  CHECK(*cache.get("k", compute) == "3");
  CHECK(*cache.get("k", compute) == "3");
}
