// The integrity check at open (integrity.h): a sound database opens; one with
// a damaged page is refused by the writer, the reader and the file check,
// with the recovery in the message; a check that runs out of time does not
// refuse a sound file.
#include "store/integrity.h"

#include <doctest/doctest.h>

#include <string>

#include "store/reader.h"
#include "store/test_support.h"
#include "store/writer.h"

using swept::store::testing::TempDb;

using swept::store::testing::damage_pages;
using swept::store::testing::make_database;

TEST_CASE("integrity: a sound database opens, and a check out of time does not refuse it") {
  TempDb db;
  make_database(db.path);
  CHECK(swept::store::check_database_file(db.path).ok());
  CHECK(swept::store::check_database_file(db.path, /*budget_ms=*/0).ok());
  CHECK(swept::store::Writer::open(db.path).ok());
  CHECK(swept::store::open_reader(db.path).ok());
  // A file that does not exist yet is the web server's to wait for.
  CHECK(swept::store::check_database_file(db.dir / "not-yet.db").ok());
}

TEST_CASE("integrity: a damaged page is refused at open by the writer, the reader and the file check") {
  TempDb db;
  make_database(db.path);
  const int64_t pages = swept::store::testing::query_int(db.path, "PRAGMA page_count");
  REQUIRE(pages > 20);
  damage_pages(db.path, static_cast<int>(pages / 2), static_cast<int>(pages / 2) + 1);
  auto writer = swept::store::Writer::open(db.path);
  REQUIRE_FALSE(writer.ok());
  CHECK(writer.status().code() == swept::StatusCode::kCorruption);
  CHECK(writer.status().message().find("is damaged") != std::string::npos);
  CHECK(writer.status().message().find(".recover") != std::string::npos);
  auto reader = swept::store::open_reader(db.path);
  REQUIRE_FALSE(reader.ok());
  CHECK(reader.status().code() == swept::StatusCode::kCorruption);
  swept::Status file = swept::store::check_database_file(db.path);
  CHECK(file.code() == swept::StatusCode::kCorruption);
  // Refused, not opened: nothing was written into it (no WAL left behind).
  const bool wrote = std::filesystem::exists(db.path + "-wal") && std::filesystem::file_size(db.path + "-wal") > 0;
  CHECK_FALSE(wrote);
}
