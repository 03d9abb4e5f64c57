// Helpers for the trainer's tests: temporary folders, IDX files written on
// the fly (no downloads in unit tests), a small learnable MNIST-like data set.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "trainer/data.h"

namespace swept::trainer {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::string templ = (std::filesystem::temp_directory_path() / ("swept-trainer-" + tag + "-XXXXXX")).string();
    path_ = ::mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    out.push_back(static_cast<uint8_t>(d >> 24));
    out.push_back(static_cast<uint8_t>(d >> 16));
    out.push_back(static_cast<uint8_t>(d >> 8));
    out.push_back(static_cast<uint8_t>(d));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A learnable stand-in for MNIST: class k lights a bar at row 2k+4 plus noise.
inline void write_mnist_like(const std::string& dir, uint32_t train, uint32_t test, uint64_t seed) {
  std::mt19937_64 gen(seed);
  auto make = [&](uint32_t n, const char* images_name, const char* labels_name) {
    std::vector<uint8_t> images(static_cast<size_t>(n) * kImageSize), labels(n);
    for (uint32_t i = 0; i < n; ++i) {
      const int label = static_cast<int>(gen() % kClasses);
      labels[i] = static_cast<uint8_t>(label);
      uint8_t* img = images.data() + static_cast<size_t>(i) * kImageSize;
      for (int p = 0; p < kImageSize; ++p) img[p] = static_cast<uint8_t>(gen() % 60);
      const int row = 2 * label + 4;
      for (int x = 4; x < 24; ++x) img[row * kImageSide + x] = static_cast<uint8_t>(200 + gen() % 56);
    }
    write_file(dir + "/" + images_name, idx_bytes({n, 28, 28}, images));
    write_file(dir + "/" + labels_name, idx_bytes({n}, labels));
  };
  make(train, kTrainImages, kTrainLabels);
  make(test, kTestImages, kTestLabels);
}

}  // namespace swept::trainer
