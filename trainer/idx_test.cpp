// The IDX reader and the MNIST loader on good files and on every kind of
// broken file: each must be an InvalidArgument naming the file.
#include "trainer/idx.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "trainer/data.h"
#include "trainer/test_util.h"

using namespace swept::trainer;

TEST_CASE("trainer: parse_idx reads a well-formed file") {
  const auto bytes = idx_bytes({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = parse_idx("m.idx", bytes, 2);
  REQUIRE(r.ok());
  CHECK(r->dims == std::vector<uint32_t>{2, 3});
  CHECK(r->data == std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("trainer: parse_idx rejects broken files with a message naming the file and the problem") {
  auto good = idx_bytes({2, 3}, {1, 2, 3, 4, 5, 6});
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    int rank;
    const char* expect;
  };
  const std::vector<uint8_t> truncated(good.begin(), good.end() - 1);
  auto trailing = good;
  trailing.push_back(0);
  auto bad_magic = good;
  bad_magic[0] = 7;
  auto bad_type = good;
  bad_type[2] = 0x0D;
  std::vector<uint8_t> gzip = {0x1f, 0x8b, 8, 0, 0, 0};
  auto zero_dim = idx_bytes({0, 3}, {});
  const Case cases[] = {
      {"empty", {}, 2, "shorter than"},
      {"truncated", truncated, 2, "truncated"},
      {"trailing", trailing, 2, "bytes follow"},
      {"bad magic", bad_magic, 2, "magic"},
      {"bad type", bad_type, 2, "0x0d"},
      {"gzip", gzip, 2, "gzip"},
      {"wrong rank", good, 3, "dimensions, expected 3"},
      {"header cut", {0, 0, 8, 2, 0, 0}, 2, "header"},
      {"zero dimension", zero_dim, 2, "is 0"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto r = parse_idx("/some/file-idx", c.bytes, c.rank);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == swept::StatusCode::kInvalidArgument);
    CHECK(r.status().message().find("/some/file-idx") != std::string::npos);
    CHECK(r.status().message().find(c.expect) != std::string::npos);
  }
}

TEST_CASE("trainer: read_idx names a missing file and says what to do") {
  auto r = read_idx("/nonexistent/train-images-idx3-ubyte", 3);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("/nonexistent/train-images-idx3-ubyte") != std::string::npos);
  CHECK(r.status().message().find("--data") != std::string::npos);
  // How to fetch MNIST, both where swept is installed and in its source.
  CHECK(r.status().message().find("swept-fetch-mnist DIR") != std::string::npos);
  CHECK(r.status().message().find("scripts/fetch-mnist.sh DIR") != std::string::npos);
}

TEST_CASE("trainer: load_mnist loads a generated data set and checks the files against each other") {
  TempDir dir("idx");
  write_mnist_like(dir.path(), 50, 20, 1);
  auto data = load_mnist(dir.path());
  REQUIRE(data.ok());
  CHECK(data->train.count() == 50);
  CHECK(data->test.count() == 20);
  CHECK(data->train.images.size() == 50u * 784);

  SUBCASE("labels and images disagree in count") {
    write_file(dir.path() + "/" + kTrainLabels, idx_bytes({49}, std::vector<uint8_t>(49, 1)));
    auto r = load_mnist(dir.path());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("do not belong together") != std::string::npos);
  }
  SUBCASE("a label outside 0-9") {
    std::vector<uint8_t> labels(50, 1);
    labels[17] = 10;
    write_file(dir.path() + "/" + kTrainLabels, idx_bytes({50}, labels));
    auto r = load_mnist(dir.path());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("index 17") != std::string::npos);
  }
  SUBCASE("images that are not 28x28") {
    write_file(dir.path() + "/" + kTestImages, idx_bytes({20, 27, 28}, std::vector<uint8_t>(20 * 27 * 28)));
    auto r = load_mnist(dir.path());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(kTestImages) != std::string::npos);
    CHECK(r.status().message().find("28x28") != std::string::npos);
  }
}

TEST_CASE("trainer: split and epoch order") {
  Split s = split_validation(60000, 1.0 / 12.0);
  CHECK(s.train_count == 55000);
  CHECK(s.val_count == 5000);
  CHECK(split_validation(100, 0).val_count == 0);
  auto a = epoch_order(1000, 3, 0), b = epoch_order(1000, 3, 0), c = epoch_order(1000, 3, 1);
  CHECK(a == b);
  CHECK(a != c);
  std::vector<int32_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) REQUIRE(sorted[i] == i);
}
