// copy_checkpoint on real files: a tree copied byte for byte into a new
// directory that appears only once verified; what it refuses, and why.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/checkpoint_copy.h"
#include "common/testing/temp_dir.h"

namespace swept::agent {
namespace {

namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("a checkpoint tree is copied whole into a new directory, counted, with no .incoming left") {
  testing::TempDir dir;
  REQUIRE(!dir.path().empty());
  const std::string big(3 << 20, 'x');  // more than one copy block
  write_file(dir / "from/model.bin", big);
  write_file(dir / "from/opt/state.json", "{\"step\": 100}");
  fs::create_directories(dir / "from/empty");
  auto stats = copy_checkpoint(dir / "from", dir / "to");
  REQUIRE(stats.ok());
  CHECK(stats->files == 2);
  CHECK(stats->bytes == static_cast<int64_t>(big.size()) + 13);
  CHECK(read_file(dir / "to/model.bin") == big);
  CHECK(read_file(dir / "to/opt/state.json") == "{\"step\": 100}");
  CHECK(fs::is_directory(dir / "to/empty"));
  CHECK(!fs::exists(dir / "to.incoming"));
  // The source is left as it was.
  CHECK(read_file(dir / "from/opt/state.json") == "{\"step\": 100}");
}

TEST_CASE("a leftover .incoming of an interrupted copy is replaced, never used") {
  testing::TempDir dir;
  write_file(dir / "from/a", "new");
  write_file(dir / "to.incoming/stale", "half a copy");
  REQUIRE(copy_checkpoint(dir / "from", dir / "to").ok());
  CHECK(!fs::exists(dir / "to/stale"));
  CHECK(read_file(dir / "to/a") == "new");
}

TEST_CASE("refusals: no source, an existing destination, a link in the checkpoint") {
  testing::TempDir dir;
  auto missing = copy_checkpoint(dir / "nowhere", dir / "to");
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("no checkpoint directory") != std::string::npos);

  write_file(dir / "from/a", "1");
  fs::create_directories(dir / "taken");
  auto taken = copy_checkpoint(dir / "from", dir / "taken");
  REQUIRE(!taken.ok());
  CHECK(taken.status().code() == StatusCode::kFailedPrecondition);

  fs::create_symlink(dir / "from/a", dir / "from/link");
  auto linked = copy_checkpoint(dir / "from", dir / "to");
  REQUIRE(!linked.ok());
  CHECK(linked.status().code() == StatusCode::kInvalidArgument);
  CHECK(linked.status().message().find("not a regular file") != std::string::npos);
  // Nothing half-made is left for a trial to start on.
  CHECK(!fs::exists(dir / "to"));
  CHECK(!fs::exists(dir / "to.incoming"));
}

TEST_CASE("pruning keeps the two segments named and whatever is not a segment folder") {
  testing::TempDir dir;
  for (const char* name : {"1/ckpt", "2/ckpt", "3/ckpt", "5/ckpt", "5.incoming/ckpt", "notes/x"})
    write_file(dir / ("segments/" + std::string(name)), "x");
  auto removed = prune_segments(dir / "segments", 3, 5);
  REQUIRE(removed.ok());
  CHECK(*removed == 2);
  CHECK(!fs::exists(dir / "segments/1"));
  CHECK(!fs::exists(dir / "segments/2"));
  CHECK(read_file(dir / "segments/3/ckpt") == "x");
  CHECK(fs::exists(dir / "segments/5"));
  CHECK(fs::exists(dir / "segments/5.incoming"));
  CHECK(fs::exists(dir / "segments/notes"));
  CHECK(prune_segments(dir / "nothing-here", 1, 2).status().code() == StatusCode::kUnavailable);
}

}  // namespace
}  // namespace swept::agent
