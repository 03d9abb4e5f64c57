// Helpers for the CUDA backend's tests: skipping without a GPU, and running
// one operation on the CPU backend (the reference) and the CUDA backend alike.
//
// Skipping: a test that needs a GPU calls require_gpu() first; where no GPU is
// usable it prints why and ends the process with kSkipReturnCode, which CTest
// reports as "Skipped" (SKIP_RETURN_CODE in trainer/cuda/CMakeLists.txt), never
// as passed. Each TEST_CASE runs as its own process under CTest.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "trainer/backend.h"

namespace swept::cuda::testing {

constexpr int kSkipReturnCode = 77;

inline void require_gpu() {
  auto count = trainer::cuda_device_count();
  if (!count.ok()) {
    std::printf("SKIPPED: this test needs a CUDA GPU: %s\n", count.status().ToString().c_str());
    std::fflush(stdout);
    std::_Exit(kSkipReturnCode);
  }
}

// ||got - want|| / ||want|| (Euclidean norms), the relative error the issue bounds.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

inline std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// One tensor living on both backends, with the same contents at creation.
class Twin {
 public:
  Twin(trainer::Backend& cpu, trainer::Backend& gpu, size_t bytes) : cpu_(cpu), gpu_(gpu) {
    auto c = cpu.allocate(bytes);
    auto g = gpu.allocate(bytes);
    REQUIRE(c.ok());
    REQUIRE_MESSAGE(g.ok(), g.status().ToString());
    c_ = std::move(*c);
    g_ = std::move(*g);
  }
  template <typename T>
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() * sizeof(T) <= c_->bytes());
    REQUIRE(cpu_.copy_from_host(c_->data(), host.data(), host.size() * sizeof(T)).ok());
    REQUIRE(gpu_.copy_from_host(g_->data(), host.data(), host.size() * sizeof(T)).ok());
  }
  std::vector<float> cpu_values() const { return read(cpu_, *c_); }
  std::vector<float> gpu_values() const { return read(gpu_, *g_); }
  float* cpu() const { return c_->f32(); }
  float* gpu() const { return g_->f32(); }
  trainer::Buffer& cpu_buffer() const { return *c_; }
  trainer::Buffer& gpu_buffer() const { return *g_; }

 private:
  static std::vector<float> read(trainer::Backend& b, const trainer::Buffer& buf) {
    std::vector<float> out(buf.bytes() / sizeof(float));
    auto s = b.copy_to_host(out.data(), buf.data(), out.size() * sizeof(float));
    REQUIRE_MESSAGE(s.ok(), s.ToString());
    return out;
  }
  trainer::Backend& cpu_;
  trainer::Backend& gpu_;
  std::unique_ptr<trainer::Buffer> c_, g_;
};

}  // namespace swept::cuda::testing
