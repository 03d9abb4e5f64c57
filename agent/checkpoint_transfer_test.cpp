// serve_pull and CheckpointFetch on real files, with the messages passed by
// hand as the scheduler would relay them (through the codec, so that what is
// tested is what crosses the wire): a tree moved whole, a damaged part
// refused, a holder that lost the segment, duplicates after a resend, and
// the pulls the holder refuses.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/checkpoint_transfer.h"
#include "common/testing/temp_dir.h"

namespace swept::agent {
namespace {

namespace fs = std::filesystem;
namespace pr = protocol;

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Through encode and decode, as every hop does.
template <typename T>
T over_the_wire(const T& m) {
  pr::Decoded d = pr::decode(pr::encode(m));
  REQUIRE(d.ok());
  return std::get<T>(*d.message);
}

// Segment 2 of trial 7 of sweep 3 on the holder; trial 9 attempt 4 pulls it.
pr::CheckpointPull first_pull() { return pr::CheckpointPull{9, 4, 0, 7, 2, "", 0}; }

// Runs a fetch to its end against the holder at `root`; `tamper` may change
// each part on its way. Returns how it ended.
Status run_fetch(CheckpointFetch& fetch, const std::string& root, int* parts = nullptr,
                 void (*tamper)(pr::CheckpointPart&) = nullptr) {
  for (int turn = 0; turn < 1000 && !fetch.done(); ++turn) {
    pr::CheckpointPull relayed = over_the_wire(fetch.pull());
    relayed.sweep_id = 3;  // the scheduler says which sweep the segment is of
    pr::CheckpointPart part = over_the_wire(serve_pull(root, relayed));
    if (tamper) tamper(part);
    if (parts) ++*parts;
    auto moved = fetch.take(part);
    if (!moved.ok()) return moved.status();
    if (!*moved) return Status::Internal("a part answering the outstanding pull was ignored");
  }
  return fetch.done() ? Status::Ok() : Status::Internal("no end after 1000 parts");
}

TEST_CASE("a segment's checkpoint is pulled whole, file by file, and appears only once verified") {
  testing::TempDir dir;
  const fs::path held = segment_dir(dir / "holder", 3, 7, 2);
  const std::string big(static_cast<size_t>(pr::kCheckpointPartBytes) * 2 + 12345, 'w');  // three parts
  write_file(held / "model.bin", big);
  write_file(held / "opt/state.json", "{\"step\": 100}");
  write_file(held / "empty", "");
  CheckpointFetch fetch(first_pull(), dir / "to");
  int parts = 0;
  Status ended = run_fetch(fetch, dir / "holder", &parts);
  REQUIRE_MESSAGE(ended.ok(), ended.ToString());
  CHECK(parts == 1 + 3 + 1);  // the manifest, model.bin in three, state.json; the empty file needs none
  CHECK(fetch.stats().files == 3);
  CHECK(fetch.stats().bytes == static_cast<int64_t>(big.size()) + 13);
  CHECK(read_file(dir / "to/model.bin") == big);
  CHECK(read_file(dir / "to/opt/state.json") == "{\"step\": 100}");
  CHECK(fs::is_regular_file(dir / "to/empty"));
  CHECK(!fs::exists(dir / "to.incoming"));
}

TEST_CASE("a part whose bytes differ from the manifest's CRC is refused and nothing is left") {
  testing::TempDir dir;
  write_file(segment_dir(dir / "holder", 3, 7, 2) + "/ckpt", "theta = [0.9, 0.9]");
  CheckpointFetch fetch(first_pull(), dir / "to");
  Status ended = run_fetch(fetch, dir / "holder", nullptr, [](pr::CheckpointPart& p) {
    if (!p.data.empty()) p.data[0] ^= 1;  // one bit flipped on the way
  });
  CHECK(ended.code() == StatusCode::kCorruption);
  CHECK(ended.message().find("ckpt") != std::string::npos);
  CHECK(!fs::exists(dir / "to"));
  CHECK(!fs::exists(dir / "to.incoming"));
}

TEST_CASE("a holder without the segment answers why, and the fetch ends with it") {
  testing::TempDir dir;
  fs::create_directories(dir / "holder");
  CheckpointFetch fetch(first_pull(), dir / "to");
  Status ended = run_fetch(fetch, dir / "holder");
  CHECK(ended.code() == StatusCode::kUnavailable);
  CHECK(ended.message().find("the checkpoint of trial 7 segment 2 is not on its agent any more") != std::string::npos);
  CHECK(!fs::exists(dir / "to"));
}

TEST_CASE("a part answering an earlier pull (a resend's duplicate) is ignored") {
  testing::TempDir dir;
  write_file(segment_dir(dir / "holder", 3, 7, 2) + "/ckpt", "abc");
  CheckpointFetch fetch(first_pull(), dir / "to");
  pr::CheckpointPull p = fetch.pull();
  p.sweep_id = 3;
  const pr::CheckpointPart manifest = serve_pull(dir / "holder", p);
  REQUIRE(fetch.take(manifest).value());
  CHECK(fetch.pull().path == "ckpt");
  CHECK(!fetch.take(manifest).value());  // the same manifest again: nothing changes
  pr::CheckpointPart other = manifest;
  other.trial_id = 10;  // another fetch's
  CHECK(!fetch.take(other).value());
  REQUIRE(run_fetch(fetch, dir / "holder").ok());
  CHECK(read_file(dir / "to/ckpt") == "abc");
}

TEST_CASE("the holder sends only plain files from inside the segment's folder") {
  testing::TempDir dir;
  const fs::path held = segment_dir(dir / "holder", 3, 7, 2);
  write_file(dir / "secret", "not a checkpoint");
  write_file(held / "ckpt", "abc");
  fs::create_directory_symlink(dir.path(), held / "up");
  pr::CheckpointPull p{9, 4, 3, 7, 2, "up/secret", 0};
  CHECK(serve_pull(dir / "holder", p).error.find("is a link") != std::string::npos);
  p.path = "";
  CHECK(serve_pull(dir / "holder", p).error.find("not a regular file") != std::string::npos);  // the manifest too
  fs::remove(held / "up");
  p.path = "ckpt";
  p.offset = 4;
  CHECK(serve_pull(dir / "holder", p).error.find("past the end") != std::string::npos);
  p.sweep_id = 0;
  CHECK(serve_pull(dir / "holder", p).error.find("names no sweep") != std::string::npos);
}

}  // namespace
}  // namespace swept::agent
