// The in-process all-reduce for CPU replicas (see allreduce.h). Each call is
// two barriers: at the first every rank has published its buffer; between
// them rank r owns slice r of EVERY buffer, sums it over ranks 0..N-1 in that
// order and writes the mean back into all of them (disjoint slices, so no
// locking of data); the second barrier makes the results visible before any
// rank goes on. The same arithmetic in the same order for every element gives
// bit-identical buffers on every rank.
//
// Across processes (a CrossProcess given) the slices hold the local SUM
// after the first pass; a barrier, then rank 0 sums buffer 0 over the
// processes (Gloo), a barrier, then each rank scales its slice of buffer 0
// by 1 / (all replicas) and copies it into every local buffer. With one
// replica per process that is (a + b) / 2, the very bits one process with
// two replicas computes.
#include "common/mutex.h"
#include "trainer/allreduce.h"

#include <algorithm>
#include <condition_variable>
#include <string>

namespace swept::trainer {
namespace {

class CpuAllReduce final : public AllReduce {
 public:
  CpuAllReduce(int world_size, CrossProcess* across)
      : world_size_(world_size),
        across_(across != nullptr && across->size() > 1 ? across : nullptr),
        buffers_(world_size, nullptr) {}

  int world_size() const override { return world_size_; }

  Status all_reduce_mean(int rank, float* data, size_t count) override {
    if (rank < 0 || rank >= world_size_)
      return Status::Internal("all_reduce_mean: rank " + std::to_string(rank) + " outside [0, " +
                              std::to_string(world_size_) + ")");
    if (world_size_ == 1 && across_ == nullptr) return Status::Ok();
    if (world_size_ == 1) return sum_across_processes(data, count);
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
    if (across_ == nullptr) {
      const float inv = 1.0f / static_cast<float>(world_size_);
      for (size_t i = begin; i < end; ++i) {
        float sum = buffers_[0][i];
        for (int r = 1; r < world_size_; ++r) sum += buffers_[r][i];
        const float mean = sum * inv;
        for (int r = 0; r < world_size_; ++r) buffers_[r][i] = mean;
      }
      return barrier();
    }
    for (size_t i = begin; i < end; ++i) {
      float sum = buffers_[0][i];
      for (int r = 1; r < world_size_; ++r) sum += buffers_[r][i];
      buffers_[0][i] = sum;
    }
    SWEPT_RETURN_IF_ERROR(barrier());
    if (rank == 0) {
      Status s = across_->sum(buffers_[0], count);
      if (!s.ok()) abort(s);
    }
    SWEPT_RETURN_IF_ERROR(barrier());
    const float inv = 1.0f / static_cast<float>(world_size_ * across_->size());
    for (size_t i = begin; i < end; ++i) {
      const float mean = buffers_[0][i] * inv;
      for (int r = 0; r < world_size_; ++r) buffers_[r][i] = mean;
    }
    return barrier();
  }

  // One local replica: no barriers, the process sum and the scaling.
  Status sum_across_processes(float* data, size_t count) {
    SWEPT_RETURN_IF_ERROR(across_->sum(data, count));
    const float inv = 1.0f / static_cast<float>(across_->size());
    for (size_t i = 0; i < count; ++i) data[i] *= inv;
    return Status::Ok();
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
  CrossProcess* const across_;  // null: this process alone
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

std::unique_ptr<AllReduce> make_cpu_allreduce(int world_size, CrossProcess* across) {
  return std::make_unique<CpuAllReduce>(std::max(1, world_size), across);
}

}  // namespace swept::trainer
