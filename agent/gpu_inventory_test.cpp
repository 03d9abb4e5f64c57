// Tests of --gpus parsing and of GPU discovery without a driver.
#include "agent/gpu_inventory.h"

#include <doctest/doctest.h>

using namespace swept::agent;

TEST_CASE("agent gpu inventory: memory sizes take IEC units") {
  CHECK(*parse_memory_size("80GiB") == (80ull << 30));
  CHECK(*parse_memory_size("512MiB") == (512ull << 20));
  CHECK(*parse_memory_size("4096KiB") == (4096ull << 10));
  CHECK(*parse_memory_size("1.5TiB") == (3ull << 39));
  for (const char* bad : {"", "80", "80GB", "GiB", "-1GiB", "0GiB", "abcGiB", "80 GiB", "80gib", "1e30TiB"}) {
    INFO(bad);
    auto r = parse_memory_size(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == swept::StatusCode::kInvalidArgument);
    CHECK(r.status().message().find("KiB, MiB, GiB, TiB") != std::string::npos);
  }
}

TEST_CASE("agent gpu inventory: auto, none and fake specs") {
  CHECK(parse_gpu_spec("auto")->kind == GpuSpec::Kind::kAuto);
  CHECK(parse_gpu_spec("none")->kind == GpuSpec::Kind::kNone);

  auto four = parse_gpu_spec("fake:4x80GiB");
  REQUIRE(four.ok());
  CHECK(four->kind == GpuSpec::Kind::kFake);
  CHECK(four->fake_count == 4);
  CHECK(four->fake_memory_bytes == (80ull << 30));

  auto two = parse_gpu_spec("fake:2");
  REQUIRE(two.ok());
  CHECK(two->fake_count == 2);
  CHECK(two->fake_memory_bytes == kDefaultFakeGpuMemoryBytes);

  auto small = parse_gpu_spec("fake:1x512MiB");
  REQUIRE(small.ok());
  CHECK(small->fake_memory_bytes == (512ull << 20));
}

TEST_CASE("agent gpu inventory: bad specs say what is wrong and what to write") {
  for (const char* bad : {"", "all", "fake", "fake:", "fake:0", "fake:-1", "fake:x80GiB", "fake:4x", "fake:4x80",
                          "fake:4x80GB", "fake:2000", "fake:4y80GiB", "FAKE:4"}) {
    INFO(bad);
    auto r = parse_gpu_spec(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == swept::StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(bad) != std::string::npos);
  }
  CHECK(parse_gpu_spec("all").status().message().find("fake:4x80GiB") != std::string::npos);
}

TEST_CASE("agent gpu inventory: fake GPUs are numbered from 0 with distinct uuids") {
  auto gpus = discover_gpus(*parse_gpu_spec("fake:3x16GiB"));
  REQUIRE(gpus.ok());
  REQUIRE(gpus->size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK((*gpus)[i].index == i);
    CHECK((*gpus)[i].total_memory_bytes == (16ull << 30));
  }
  CHECK((*gpus)[0].uuid != (*gpus)[1].uuid);
  CHECK(describe_gpus(*gpus).find("3 GPUs") == 0);
  CHECK(discover_gpus(*parse_gpu_spec("none"))->empty());
}

TEST_CASE("agent gpu inventory: auto agrees with NVML, and never fails without a driver") {
  auto nvml = list_nvml_gpus();
  auto gpus = discover_gpus(GpuSpec{});
  REQUIRE(gpus.ok());
  if (nvml.ok()) {
    // A host with a driver: auto is exactly what NVML reports.
    REQUIRE(gpus->size() == nvml->size());
    for (size_t i = 0; i < gpus->size(); ++i) {
      CHECK((*gpus)[i].uuid == (*nvml)[i].uuid);
      CHECK((*gpus)[i].total_memory_bytes > 0);
      CHECK_FALSE((*gpus)[i].name.empty());
    }
  } else {
    CHECK(nvml.status().code() == swept::StatusCode::kUnavailable);
    CHECK(gpus->empty());
  }
}
