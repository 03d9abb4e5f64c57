// The in-process all-reduce for CPU replicas (see allreduce.h). Each call is
// two barriers: at the first every rank has published its buffer; between
// them rank r owns slice r of EVERY buffer, sums it over ranks 0..N-1 in that
// order and writes the mean back into all of them (disjoint slices, so no
// locking of data); the second barrier makes the results visible before any
// rank goes on. The same arithmetic in the same order for every element gives
// bit-identical buffers on every rank.
#include "common/mutex.h"
#include "trainer/allreduce.h"

#include <algorithm>
#include <condition_variable>
#include <string>

namespace swept::trainer {
namespace {

class CpuAllReduce final : public AllReduce {
 public:
  explicit CpuAllReduce(int world_size) : world_size_(world_size), buffers_(world_size, nullptr) {}

  int world_size() const override { return world_size_; }

  Status all_reduce_mean(int rank, float* data, size_t count) override {
    if (rank < 0 || rank >= world_size_)
      return Status::Internal("all_reduce_mean: rank " + std::to_string(rank) + " outside [0, " +
                              std::to_string(world_size_) + ")");
    if (world_size_ == 1) return Status::Ok();
    {
      MutexLock lock(mutex_);
      buffers_[rank] = data;
      if (arrived_ == 0) count_ = count;
      if (count != count_) {
        aborted_ = true;
        why_ = Status::Internal("all_reduce_mean: rank " + std::to_string(rank) + " passed " +
                                std::to_string(count) + " values, another rank " + std::to_string(count_));
        cv_.notify_all();
      }
    }
    SWEPT_RETURN_IF_ERROR(barrier());
    const size_t per = (count + world_size_ - 1) / world_size_;
    const size_t begin = std::min(count, per * rank), end = std::min(count, begin + per);
    const float inv = 1.0f / static_cast<float>(world_size_);
    for (size_t i = begin; i < end; ++i) {
      float sum = buffers_[0][i];
      for (int r = 1; r < world_size_; ++r) sum += buffers_[r][i];
      const float mean = sum * inv;
      for (int r = 0; r < world_size_; ++r) buffers_[r][i] = mean;
    }
    return barrier();
  }

  void abort(const Status& why) override {
    MutexLock lock(mutex_);
    if (!aborted_) {
      aborted_ = true;
      why_ = why;
    }
    cv_.notify_all();
  }

 private:
  // Waits until all ranks arrive (or abort). Generation-counted, reusable.
  Status barrier() {
    MutexLock lock(mutex_);
    if (aborted_) return why_;
    const uint64_t generation = generation_;
    if (++arrived_ == world_size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return Status::Ok();
    }
    while (!aborted_ && generation_ == generation) cv_.wait(lock);
    if (generation_ != generation) return Status::Ok();
    return why_;
  }

  const int world_size_;
  Mutex mutex_;
  std::condition_variable_any cv_;
  // Each rank writes its own slot under mutex_; every rank reads all slots
  // between the two barriers, which order those reads after the writes.
  std::vector<float*> buffers_;
  size_t count_ SWEPT_GUARDED_BY(mutex_) = 0;
  int arrived_ SWEPT_GUARDED_BY(mutex_) = 0;
  uint64_t generation_ SWEPT_GUARDED_BY(mutex_) = 0;
  bool aborted_ SWEPT_GUARDED_BY(mutex_) = false;
  Status why_ SWEPT_GUARDED_BY(mutex_);
};

}  // namespace

std::unique_ptr<AllReduce> make_cpu_allreduce(int world_size) {
  return std::make_unique<CpuAllReduce>(std::max(1, world_size));
}

}  // namespace swept::trainer
