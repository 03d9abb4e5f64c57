// Tests of --gpus parsing and of GPU discovery without a driver.
#include "agent/gpu_inventory.h"

#include <doctest/doctest.h>

#include <map>
#include <memory>

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

namespace {
// An environment for the tests: name -> value.
std::function<const char*(const char*)> env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}
std::vector<int> indices(const std::vector<Gpu>& gpus) {
  std::vector<int> out;
  for (const Gpu& g : gpus) out.push_back(g.index);
  return out;
}
}  // namespace

TEST_CASE("agent gpu inventory: Slurm's step GPUs win over the job's and CUDA_VISIBLE_DEVICES, none set is no allocation") {
  CHECK(!gpu_allocation(env({})).has_value());
  CHECK(*gpu_allocation(env({{"CUDA_VISIBLE_DEVICES", "1,3"}})) == std::vector<std::string>{"1", "3"});
  CHECK(*gpu_allocation(env({{"SLURM_JOB_GPUS", "0,1,2,3"}, {"CUDA_VISIBLE_DEVICES", "0,1"}})) ==
        std::vector<std::string>{"0", "1", "2", "3"});
  CHECK(*gpu_allocation(env({{"SLURM_STEP_GPUS", "2, 3"}, {"SLURM_JOB_GPUS", "0,1,2,3"}})) ==
        std::vector<std::string>{"2", "3"});
  CHECK(gpu_allocation(env({{"CUDA_VISIBLE_DEVICES", ""}}))->empty());  // allocated: no GPU
}

TEST_CASE("agent gpu inventory: the allocation intersected with what NVML sees, without NVML, GPUs of unknown memory") {
  std::vector<Gpu> seen{{0, "GPU-aaa", "H100", 80ull << 30}, {1, "GPU-bbb", "H100", 80ull << 30},
                        {2, "GPU-ccc", "H100", 80ull << 30}, {3, "GPU-ddd", "H100", 80ull << 30}};
  CHECK(indices(*restrict_to_allocation(seen, {"1", "3"})) == std::vector<int>{1, 3});
  CHECK(indices(*restrict_to_allocation(seen, {"GPU-ccc"})) == std::vector<int>{2});
  CHECK(restrict_to_allocation(seen, {}).value().empty());
  auto missing = restrict_to_allocation(seen, {"1", "7"});
  CHECK(missing.status().code() == swept::StatusCode::kInvalidArgument);
  CHECK(missing.status().message().find("\"7\"") != std::string::npos);

  auto fake = restrict_to_allocation({}, {"2", "3"});  // Slurm's fake gres, no driver
  REQUIRE(fake.ok());
  CHECK(indices(*fake) == std::vector<int>{2, 3});
  CHECK((*fake)[0].total_memory_bytes == 0);
  CHECK(describe_gpus(*fake).find("memory unknown") != std::string::npos);
  CHECK(!restrict_to_allocation({}, {"GPU-aaa"}).ok());  // a UUID nothing can vouch for
}

TEST_CASE("agent gpu inventory: CPU slots follow the affinity mask and SLURM_CPUS_PER_TASK") {
  int all = default_cpu_slots(env({}));
  CHECK(all >= 1);
  CHECK(default_cpu_slots(env({{"SLURM_CPUS_PER_TASK", "1"}})) == 1);
  CHECK(default_cpu_slots(env({{"SLURM_CPUS_PER_TASK", "100000"}})) == all);  // never above what it may use
  CHECK(default_cpu_slots(env({{"SLURM_CPUS_PER_TASK", "junk"}})) == all);
}
