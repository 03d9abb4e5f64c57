// MNIST loading with cross-file checks, the validation split and the
// reproducible per-epoch order (see data.h).
#include "trainer/data.h"

#include <cmath>
#include <random>

#include "trainer/counter_rng.h"
#include "trainer/idx.h"

namespace swept::trainer {
namespace {

Result<LabeledImages> load_pair(const std::string& dir, const char* images_name, const char* labels_name) {
  const std::string images_path = dir + "/" + images_name;
  const std::string labels_path = dir + "/" + labels_name;
  Result<IdxArray> images = read_idx(images_path, 3);
  if (!images.ok()) return images.status();
  Result<IdxArray> labels = read_idx(labels_path, 1);
  if (!labels.ok()) return labels.status();
  if (images->dims[1] != kImageSide || images->dims[2] != kImageSide)
    return Status::InvalidArgument(images_path + ": images are " + std::to_string(images->dims[1]) + "x" +
                                   std::to_string(images->dims[2]) + ", the models take 28x28 (MNIST or "
                                   "Fashion-MNIST)");
  if (images->dims[0] != labels->dims[0])
    return Status::InvalidArgument(images_path + " holds " + std::to_string(images->dims[0]) + " images but " +
                                   labels_path + " holds " + std::to_string(labels->dims[0]) +
                                   " labels: the files do not belong together");
  LabeledImages out;
  out.images = std::move(images->data);
  out.labels.resize(labels->data.size());
  for (size_t i = 0; i < labels->data.size(); ++i) {
    if (labels->data[i] >= kClasses)
      return Status::InvalidArgument(labels_path + ": label " + std::to_string(labels->data[i]) + " at index " +
                                     std::to_string(i) + " is not a digit class 0-9");
    out.labels[i] = labels->data[i];
  }
  return out;
}

}  // namespace

Result<MnistData> load_mnist(const std::string& dir) {
  MnistData data;
  Result<LabeledImages> train = load_pair(dir, kTrainImages, kTrainLabels);
  if (!train.ok()) return train.status();
  Result<LabeledImages> test = load_pair(dir, kTestImages, kTestLabels);
  if (!test.ok()) return test.status();
  data.train = std::move(*train);
  data.test = std::move(*test);
  return data;
}

Split split_validation(size_t count, double val_fraction) {
  Split s;
  s.val_count = static_cast<size_t>(std::floor(static_cast<double>(count) * val_fraction));
  if (s.val_count >= count) s.val_count = count == 0 ? 0 : count - 1;
  s.train_count = count - s.val_count;
  return s;
}

std::vector<int32_t> epoch_order(size_t train_count, uint64_t seed, int64_t epoch) {
  std::vector<int32_t> order(train_count);
  for (size_t i = 0; i < train_count; ++i) order[i] = static_cast<int32_t>(i);
  std::mt19937_64 gen(mix64(seed ^ mix64(static_cast<uint64_t>(epoch) + 0x5EED)));
  for (size_t i = train_count; i > 1; --i) {
    // Unbiased j in [0, i) by rejection (Lemire-free, portable).
    const uint64_t bound = i;
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t r;
    do r = gen(); while (r >= limit);
    std::swap(order[i - 1], order[r % bound]);
  }
  return order;
}

}  // namespace swept::trainer
