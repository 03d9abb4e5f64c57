// Helpers for the CUDA backend's tests: skipping without a GPU, and running
// one operation on the CPU backend (the reference) and the CUDA backend alike.
//
// Skipping: a test that needs a GPU calls require_gpu() first; where no GPU is
// usable it prints why and ends the process with kSkipReturnCode, which CTest
// reports as "Skipped" (SKIP_RETURN_CODE in trainer/cuda/CMakeLists.txt), never
// as passed. Each TEST_CASE runs as its own process under CTest.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "trainer/backend.h"
#include "trainer/data.h"

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

// ---- small MNIST-format data sets and child processes, for the run-level tests ----

// `count` 28×28 images whose label is visible in them (a bright band whose row
// depends on the label, plus noise), so a few steps lower the loss.
inline trainer::LabeledImages synthetic_images(size_t count, uint32_t seed) {
  trainer::LabeledImages out;
  std::mt19937 rng(seed);
  out.images.resize(count * trainer::kImageSize);
  out.labels.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(rng() % trainer::kClasses);
    out.labels[i] = label;
    for (int p = 0; p < trainer::kImageSize; ++p) {
      const int row = p / trainer::kImageSide;
      const bool band = row >= 2 + 2 * label && row < 4 + 2 * label;
      out.images[i * trainer::kImageSize + p] =
          static_cast<uint8_t>(band ? 200 + rng() % 56 : rng() % 60);
    }
  }
  return out;
}

inline trainer::MnistData synthetic_mnist(size_t train, size_t test) {
  return trainer::MnistData{synthetic_images(train, 1), synthetic_images(test, 2)};
}

// Writes `data` as the four IDX files of an MNIST folder.
inline void write_idx_folder(const std::filesystem::path& dir, const trainer::MnistData& data) {
  std::filesystem::create_directories(dir);
  auto be32 = [](std::ofstream& f, uint32_t v) {
    const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    f.write(b, 4);
  };
  auto images = [&](const char* name, const trainer::LabeledImages& set) {
    std::ofstream f(dir / name, std::ios::binary);
    be32(f, 0x00000803);
    be32(f, static_cast<uint32_t>(set.count()));
    be32(f, trainer::kImageSide);
    be32(f, trainer::kImageSide);
    f.write(reinterpret_cast<const char*>(set.images.data()), std::streamsize(set.images.size()));
  };
  auto labels = [&](const char* name, const trainer::LabeledImages& set) {
    std::ofstream f(dir / name, std::ios::binary);
    be32(f, 0x00000801);
    be32(f, static_cast<uint32_t>(set.count()));
    for (int32_t l : set.labels) f.put(static_cast<char>(l));
  };
  images(trainer::kTrainImages, data.train);
  labels(trainer::kTrainLabels, data.train);
  images(trainer::kTestImages, data.test);
  labels(trainer::kTestLabels, data.test);
}

struct ProcessResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs `command` through /bin/sh (the test's own fixed strings) and collects
// its exit code, stdout and stderr (via files in `scratch`).
inline ProcessResult run_process(const std::string& command, const std::filesystem::path& scratch) {
  const auto out_path = scratch / "stdout.txt", err_path = scratch / "stderr.txt";
  const std::string full = command + " >" + out_path.string() + " 2>" + err_path.string();
  const int status = std::system(full.c_str());
  ProcessResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

// A fresh folder under the build tree for one test.
// SWEPT_TEST_SCRATCH moves it (for test binaries carried to another machine).
inline std::filesystem::path scratch_dir(const std::string& name) {
  const char* root = std::getenv("SWEPT_TEST_SCRATCH");
  auto dir = (root && *root ? std::filesystem::path(root) : std::filesystem::path(SWEPT_BINARY_DIR) / "test-scratch") /
             "trainer_cuda" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The swept-train under test: this build's, or SWEPT_TRAIN_BIN when set.
inline std::string swept_train() {
  const char* bin = std::getenv("SWEPT_TRAIN_BIN");
  return bin && *bin ? std::string(bin) : std::string(SWEPT_BINARY_DIR) + "/bin/swept-train";
}

}  // namespace swept::cuda::testing
