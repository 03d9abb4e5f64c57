// The GPU memory budget's arithmetic, without a GPU.
#include "trainer/cuda/memory_budget.h"

#include <doctest/doctest.h>

namespace swept::cuda {
namespace {

constexpr uint64_t kGiB = 1024ull * kMiB;

TEST_CASE("trainer/cuda: memory budget: the cap is floor(fraction x total) and reservations stay under it") {
  MemoryBudget budget("cuda:0 (test)", 80 * kGiB, 0.4);
  CHECK(budget.cap_bytes() == static_cast<uint64_t>(0.4 * 80 * kGiB));
  REQUIRE(budget.reserve(30 * kGiB, "weights").ok());
  REQUIRE(budget.reserve(2 * kGiB, "activations").ok());
  CHECK(budget.in_use_bytes() == 32 * kGiB);
  Status s = budget.reserve(1 * kGiB, "the cuDNN convolution workspace");
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kResourceExhausted);
  // Says what needed how much, against which budget, and what to do.
  CHECK(s.message().find("needed 1024.0 MiB for the cuDNN convolution workspace") != std::string::npos);
  CHECK(s.message().find("32768.0 MiB already in use") != std::string::npos);
  CHECK(s.message().find("budget 32768.0 MiB (gpu_memory_fraction 0.4 of 81920.0 MiB on cuda:0 (test))") !=
        std::string::npos);
  CHECK(s.message().find("raise --gpu_memory_fraction") != std::string::npos);
  CHECK(budget.in_use_bytes() == 32 * kGiB);  // a failed reservation takes nothing
  budget.release(30 * kGiB);
  CHECK(budget.reserve(1 * kGiB, "x").ok());
  CHECK(budget.peak_bytes() == 32 * kGiB);
}

TEST_CASE("trainer/cuda: memory budget: exactly the cap fits, one byte more does not") {
  MemoryBudget budget("cuda:0", 1000, 0.5);
  CHECK(budget.cap_bytes() == 500);
  CHECK_FALSE(budget.reserve(501, "a").ok());
  CHECK(budget.reserve(500, "a").ok());
  CHECK_FALSE(budget.reserve(1, "b").ok());
}

TEST_CASE("trainer/cuda: memory budget: without a fraction the cap is the device's memory") {
  MemoryBudget budget("cuda:1", 16 * kGiB, std::nullopt);
  CHECK(budget.cap_bytes() == 16 * kGiB);
  Status s = budget.reserve(17 * kGiB, "the data set");
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("the device's 16384.0 MiB on cuda:1") != std::string::npos);
}

}  // namespace
}  // namespace swept::cuda
