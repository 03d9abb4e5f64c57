// make_nccl_allreduce (trainer/allreduce.h): gradient averaging for CUDA replicas.
//
// Two implementations behind the one AllReduce interface:
//  - NcclAllReduce: one replica per GPU. ncclAllReduce with ncclAvg on each
//    replica's stream, called from its own thread; NCCL computes each element
//    once and broadcasts it, so every rank gets the same bits. Enqueued in
//    stream order, so a call per layer overlaps the rest of the backward pass.
//  - SameDeviceAllReduce: several replicas on one GPU (NCCL refuses duplicate
//    devices). Each rank records "ready" on its stream; after a host barrier
//    every rank's stream waits for all others, rank r averages slice r of the
//    count elements across all ranks' buffers (summed in rank order, then
//    divided: identical bits everywhere), records "done"; after a second
//    barrier each stream waits for every "done". Two barriers per call make
//    reusing the per-rank events safe (see the comments in all_reduce_mean).
//    At most kMaxRanksPerDevice replicas share a GPU.
//  - Across processes (a CrossProcess given), NcclAllReduce again, over one
//    communicator of every replica of every process: process 0 makes the
//    unique id (ncclGetUniqueId), the processes share it with a broadcast
//    over Gloo (the rendezvous), and each process opens its replicas' ranks
//    (process p, replica r: rank p x replicas + r) with ncclCommInitRank in
//    one group. ncclAvg then averages over all of them.
// Mixed placements (2 GPUs × 2 replicas) are refused with a clear error
// (kInvalidArgument: the --replicas value does not fit the GPU count).
// abort() wakes every rank waiting at a barrier and aborts NCCL communicators
// (never one a rank is inside of: see NcclAllReduce), so a failed replica
// never leaves the others hanging.
#include <algorithm>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <set>
#include <vector>

#include "trainer/allreduce.h"
#include "trainer/cuda/check.h"
#include "trainer/cuda/cuda_backend.h"
#include "trainer/cuda/kernels.h"
#include "trainer/cuda/nccl_api.h"

namespace swept::cuda {
namespace {

// A reusable barrier for `parties` threads that abort() can break.
class Barrier {
 public:
  explicit Barrier(int parties) : parties_(parties) {}
  Status wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!aborted_.ok()) return aborted_;
    const uint64_t gen = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return Status::Ok();
    }
    cv_.wait(lock, [&] { return generation_ != gen || !aborted_.ok(); });
    return generation_ != gen ? Status::Ok() : aborted_;
  }
  void abort(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.ok()) aborted_ = why.ok() ? Status::Internal("all-reduce aborted") : why;
    cv_.notify_all();
  }

 private:
  const int parties_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  Status aborted_;
};

// A single replica: nothing to average.
class SingleAllReduce final : public trainer::AllReduce {
 public:
  int world_size() const override { return 1; }
  Status all_reduce_mean(int, float*, size_t) override { return Status::Ok(); }
  void abort(const Status&) override {}
};

class SameDeviceAllReduce final : public trainer::AllReduce {
 public:
  static Result<std::unique_ptr<SameDeviceAllReduce>> Create(std::vector<CudaBackend*> ranks) {
    std::unique_ptr<SameDeviceAllReduce> ar(new SameDeviceAllReduce(std::move(ranks)));
    const int n = ar->world_size();
    if (n > kMaxRanksPerDevice) {
      return Status::InvalidArgument("at most " + std::to_string(kMaxRanksPerDevice) +
                                     " replicas can share one GPU, not " + std::to_string(n));
    }
    cudaCheck(cudaSetDevice(ar->ranks_[0]->device()));
    ar->ready_.resize(n);
    ar->done_.resize(n);
    ar->pointers_.resize(n);
    for (int r = 0; r < n; ++r) {
      cudaCheck(cudaEventCreateWithFlags(&ar->ready_[r], cudaEventDisableTiming));
      cudaCheck(cudaEventCreateWithFlags(&ar->done_[r], cudaEventDisableTiming));
    }
    return ar;
  }
  ~SameDeviceAllReduce() override {
    cudaCheckLog(cudaSetDevice(ranks_[0]->device()));
    for (auto* s : {&ready_, &done_})
      for (cudaEvent_t e : *s)
        if (e) cudaCheckLog(cudaEventDestroy(e));
  }

  int world_size() const override { return static_cast<int>(ranks_.size()); }

  Status all_reduce_mean(int rank, float* data, size_t count) override {
    const int n = world_size();
    if (rank < 0 || rank >= n) return Status::InvalidArgument("all_reduce_mean: rank out of range");
    CudaBackend* me = ranks_[rank];
    cudaCheck(cudaSetDevice(me->device()));
    cudaStream_t stream = me->stream();
    pointers_[rank] = data;
    cudaCheck(cudaEventRecord(ready_[rank], stream));
    // Barrier A: every rank has published its pointer and recorded "ready".
    // No rank can record "ready" again before all have passed barrier B of
    // this call, by which time every wait on it below has been enqueued.
    SWEPT_RETURN_IF_ERROR(barrier_a_.wait());
    for (int q = 0; q < n; ++q)
      if (q != rank) cudaCheck(cudaStreamWaitEvent(stream, ready_[q], 0));
    // Every rank's pointer goes to the kernel by value: no device table to keep.
    RankPointers table{};
    for (int q = 0; q < n; ++q) table.buffers[q] = pointers_[q];
    const size_t per_rank = (count + n - 1) / n;
    const size_t begin = std::min(count, per_rank * rank);
    const size_t end = std::min(count, begin + per_rank);
    SWEPT_RETURN_IF_ERROR(launch_mean_across_buffers(table, n, begin, end, stream));
    cudaCheck(cudaEventRecord(done_[rank], stream));
    // Barrier B: every slice is enqueued and "done" recorded. A rank records
    // "ready"/"done" or rewrites pointers_[rank] in the next call only after
    // every rank has passed this barrier, i.e. after their waits above were
    // enqueued and their tables built, so events and pointers are safely reused.
    SWEPT_RETURN_IF_ERROR(barrier_b_.wait());
    for (int q = 0; q < n; ++q)
      if (q != rank) cudaCheck(cudaStreamWaitEvent(stream, done_[q], 0));
    return Status::Ok();
  }

  void abort(const Status& why) override {
    barrier_a_.abort(why);
    barrier_b_.abort(why);
  }

 private:
  explicit SameDeviceAllReduce(std::vector<CudaBackend*> ranks)
      : ranks_(std::move(ranks)),
        barrier_a_(static_cast<int>(ranks_.size())),
        barrier_b_(static_cast<int>(ranks_.size())) {}

  std::vector<CudaBackend*> ranks_;
  std::vector<cudaEvent_t> ready_, done_;
  std::vector<float*> pointers_;  // rank r writes only pointers_[r]
  Barrier barrier_a_, barrier_b_;
};

// NCCL communicators are not thread-safe: a communicator may be used by one
// thread at a time, and ncclCommAbort must not race a call on the same
// communicator. So abort() aborts, under mu_, only the communicators no rank
// is inside of; a rank inside ncclAllReduce aborts its own communicator when
// the call returns (NCCL's host calls only enqueue work, so they return; it
// is the enqueued kernels that wait for peers, and aborting the communicator
// ends them). comms_, in_call_ and the abort state are guarded by mu_.
class NcclAllReduce final : public trainer::AllReduce {
 public:
  static Result<std::unique_ptr<NcclAllReduce>> Create(std::vector<CudaBackend*> ranks) {
    auto api = nccl();
    if (!api.ok()) return api.status();
    std::unique_ptr<NcclAllReduce> ar(new NcclAllReduce(*api, std::move(ranks)));
    std::vector<int> devices;
    for (CudaBackend* b : ar->ranks_) devices.push_back(b->device());
    ar->comms_.resize(devices.size());
    ar->in_call_.assign(devices.size(), false);
    ncclResult_t err = ar->api_->comm_init_all(ar->comms_.data(), static_cast<int>(devices.size()),
                                               devices.data());
    if (err != ncclSuccess) {
      ar->comms_.clear();
      return Status::Unavailable(
          nccl_status(err, "ncclCommInitAll(comms, n, devices)", __FILE__, __LINE__).message() +
          ": NCCL could not connect the GPUs");
    }
    return ar;
  }
  // One communicator over every replica of every process (see the top).
  static Result<std::unique_ptr<NcclAllReduce>> CreateAcross(std::vector<CudaBackend*> ranks,
                                                             trainer::CrossProcess& across) {
    auto api = nccl();
    if (!api.ok()) return api.status();
    std::unique_ptr<NcclAllReduce> ar(new NcclAllReduce(*api, std::move(ranks)));
    const int local = ar->world_size(), total = local * across.size();
    std::vector<char> id(sizeof(ncclUniqueId));
    ncclUniqueId unique{};
    if (across.rank() == 0) {
      ncclResult_t err = ar->api_->get_unique_id(&unique);
      if (err != ncclSuccess)
        return Status::Unavailable(nccl_status(err, "ncclGetUniqueId(&id)", __FILE__, __LINE__).message());
      std::memcpy(id.data(), &unique, sizeof unique);
    }
    SWEPT_RETURN_IF_ERROR(across.broadcast(id));
    if (id.size() != sizeof unique) return Status::Internal("the NCCL unique id arrived with the wrong size");
    std::memcpy(&unique, id.data(), sizeof unique);
    ar->comms_.resize(local);
    ar->in_call_.assign(local, false);
    // Each ncclCommInitRank waits for the others: one group for this
    // process's ranks, so that one thread can open them all.
    ncclResult_t err = local > 1 ? ar->api_->group_start() : ncclSuccess;
    for (int r = 0; r < local && err == ncclSuccess; ++r) {
      cudaCheck(cudaSetDevice(ar->ranks_[r]->device()));
      err = ar->api_->comm_init_rank(&ar->comms_[r], total, unique, across.rank() * local + r);
    }
    if (local > 1) {
      const ncclResult_t end = ar->api_->group_end();
      if (err == ncclSuccess) err = end;
    }
    if (err != ncclSuccess) {
      ar->comms_.clear();
      return Status::Unavailable(
          nccl_status(err, "ncclCommInitRank(comm, nranks, id, rank)", __FILE__, __LINE__).message() +
          ": NCCL could not connect the GPUs of the " + std::to_string(across.size()) +
          " processes (NCCL_SOCKET_IFNAME names the interface; each rank needs a GPU of its own)");
    }
    return ar;
  }
  ~NcclAllReduce() override {
    // No rank is inside a call any more (the trainer joined its threads).
    for (ncclComm_t c : comms_) {
      if (c) ncclCheckLog(api_->comm_destroy(c));
    }
  }

  int world_size() const override { return static_cast<int>(ranks_.size()); }

  Status all_reduce_mean(int rank, float* data, size_t count) override {
    if (rank < 0 || rank >= world_size()) return Status::InvalidArgument("all_reduce_mean: rank out of range");
    ncclComm_t comm = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!abort_status_.ok()) return abort_status_;
      comm = comms_[rank];
      in_call_[rank] = true;
    }
    cudaError_t dev = cudaSetDevice(ranks_[rank]->device());
    ncclResult_t err = dev == cudaSuccess
                           ? api_->all_reduce(data, data, count, ncclFloat, ncclAvg, comm, ranks_[rank]->stream())
                           : ncclSuccess;
    std::lock_guard<std::mutex> lock(mu_);
    in_call_[rank] = false;
    if (!abort_status_.ok()) {
      abort_comm_locked(rank);  // abort() skipped it while this rank was inside
      return abort_status_;
    }
    if (dev != cudaSuccess) return cuda_status(dev, "cudaSetDevice(device)", __FILE__, __LINE__);
    return nccl_status(err, "ncclAllReduce(data, data, count, ncclFloat, ncclAvg, comm, stream)", __FILE__,
                       __LINE__);
  }

  void abort(const Status& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!abort_status_.ok()) return;
    abort_status_ = why.ok() ? Status::Internal("all-reduce aborted") : why;
    for (int r = 0; r < world_size(); ++r) {
      if (!in_call_[r]) abort_comm_locked(r);  // frees its kernels waiting for the failed peer
    }
  }

 private:
  NcclAllReduce(const NcclApi* api, std::vector<CudaBackend*> ranks)
      : api_(api), ranks_(std::move(ranks)) {}
  void abort_comm_locked(int rank) {
    if (!comms_[rank]) return;
    ncclCheckLog(api_->comm_abort(comms_[rank]));
    comms_[rank] = nullptr;
  }
  const NcclApi* api_;
  std::vector<CudaBackend*> ranks_;
  std::mutex mu_;
  std::vector<ncclComm_t> comms_;  // guarded by mu_; null once aborted
  std::vector<bool> in_call_;      // guarded by mu_: rank r is inside ncclAllReduce
  Status abort_status_;            // guarded by mu_
};

}  // namespace
}  // namespace swept::cuda

namespace swept::trainer {

Result<std::unique_ptr<AllReduce>> make_nccl_allreduce(const std::vector<Backend*>& replicas, CrossProcess* across) {
  using cuda::CudaBackend;
  if (replicas.empty()) return Status::InvalidArgument("make_nccl_allreduce: no replicas");
  std::vector<CudaBackend*> ranks;
  std::set<int> devices;
  for (Backend* b : replicas) {
    auto* cb = dynamic_cast<CudaBackend*>(b);
    if (!cb) return Status::InvalidArgument("make_nccl_allreduce: every replica must be a CUDA backend");
    ranks.push_back(cb);
    devices.insert(cb->device());
  }
  if (across != nullptr && across->size() > 1) {
    if (devices.size() != ranks.size())
      return Status::InvalidArgument(std::to_string(ranks.size()) + " replicas on " + std::to_string(devices.size()) +
                                     " GPUs in a run across processes: NCCL needs a GPU for each replica (lower "
                                     "--replicas, or start fewer processes per host)");
    auto ar = cuda::NcclAllReduce::CreateAcross(std::move(ranks), *across);
    if (!ar.ok()) return ar.status();
    return std::unique_ptr<AllReduce>(std::move(*ar));
  }
  if (ranks.size() == 1) return std::unique_ptr<AllReduce>(new cuda::SingleAllReduce());
  if (devices.size() == 1) {
    // The same-GPU all-reduce meets at host barriers, which a captured graph
    // cannot replay: these replicas run eagerly. NCCL collectives (one GPU
    // per replica, below) are captured with the rest of the step.
    for (CudaBackend* b : ranks) b->set_graphs_allowed(false);
    auto ar = cuda::SameDeviceAllReduce::Create(std::move(ranks));
    if (!ar.ok()) return ar.status();
    return std::unique_ptr<AllReduce>(std::move(*ar));
  }
  if (devices.size() == ranks.size()) {
    auto ar = cuda::NcclAllReduce::Create(std::move(ranks));
    if (!ar.ok()) return ar.status();
    return std::unique_ptr<AllReduce>(std::move(*ar));
  }
  // A placement the user chose (--replicas against the GPU count): bad usage.
  return Status::InvalidArgument(std::to_string(ranks.size()) + " replicas on " +
                             std::to_string(devices.size()) +
                             " GPUs: give each replica a GPU of its own (--replicas equal to the "
                             "number of GPUs) or put them all on one (--device=cuda:K)");
}

}  // namespace swept::trainer
