// The data a run trains on: an MNIST-format folder (MNIST or Fashion-MNIST:
// four IDX files of 28×28 images and labels 0-9), the validation split carved
// from the end of the training set, and the per-epoch order of the training
// samples, a pure function of (seed, epoch) so runs and resumes reproduce it.
// Errors: InvalidArgument naming the file and the fix (the trainer exits 2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace swept::trainer {

inline constexpr int kImageSide = 28;
inline constexpr int kImageSize = kImageSide * kImageSide;
inline constexpr int kClasses = 10;

struct LabeledImages {
  std::vector<uint8_t> images;  // count × kImageSize bytes
  std::vector<int32_t> labels;  // count values in [0, kClasses)
  size_t count() const { return labels.size(); }
};

struct MnistData {
  LabeledImages train;  // training and validation samples, in file order
  LabeledImages test;
};

// File names inside the data folder.
inline constexpr const char* kTrainImages = "train-images-idx3-ubyte";
inline constexpr const char* kTrainLabels = "train-labels-idx1-ubyte";
inline constexpr const char* kTestImages = "t10k-images-idx3-ubyte";
inline constexpr const char* kTestLabels = "t10k-labels-idx1-ubyte";

// Loads and checks the four files of `dir` (28×28 images, as many labels as
// images, every label below 10).
Result<MnistData> load_mnist(const std::string& dir);

// The validation split: the last floor(count · val_fraction) training samples
// are the validation set, the rest the training set.
struct Split {
  size_t train_count = 0;  // samples [0, train_count) train
  size_t val_count = 0;    // samples [train_count, train_count + val_count) validate
};
Split split_validation(size_t count, double val_fraction);

// The order in which epoch `epoch` visits training samples 0..train_count-1:
// a Fisher-Yates shuffle driven by a generator seeded from (seed, epoch).
// Identical on every platform (no std:: distributions involved).
std::vector<int32_t> epoch_order(size_t train_count, uint64_t seed, int64_t epoch);

}  // namespace swept::trainer
