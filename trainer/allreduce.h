// AllReduce: how synchronous data-parallel replicas average their gradients
// (the tutorials' "towers with averaged gradients"). One interface, two
// implementations: in-process over threads for CPU replicas (allreduce.cpp),
// NCCL for GPU replicas (trainer/cuda/, declared below).
//
// Contract of a collective call: every rank 0..world_size()-1 makes the SAME
// sequence of all_reduce_mean calls (same counts, same order), each from its
// own thread, passing `count` floats in its own Backend's memory. When the call
// returns (for a device backend: in that backend's stream order), every rank's
// buffer holds the element-wise mean over ranks, and the result is
// bit-identical on every rank, so identical optimizer steps keep the replicas'
// weights identical.
// A call may be made per layer as soon as that layer's gradients exist (NCCL
// then overlaps communication with the rest of the backward pass), or once
// for the whole flat gradient buffer.
//
// Thread safety: all_reduce_mean is called concurrently by the ranks (one
// thread each); abort() may be called from any thread at any time.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "common/status.h"
#include "trainer/backend.h"

namespace swept::trainer {

class AllReduce {
 public:
  virtual ~AllReduce() = default;
  virtual int world_size() const = 0;
  // Collective mean in place; see above. After abort(), returns that Status
  // to every waiting and later caller instead of blocking.
  virtual Status all_reduce_mean(int rank, float* data, size_t count) = 0;
  // Releases every rank blocked in all_reduce_mean with `why` (a replica
  // failed), so that no thread waits forever.
  virtual void abort(const Status& why) = 0;
};

// The other processes of a multi-process run (WORLD_SIZE > 1), as the
// trainer needs them: host-memory collectives that every process calls in
// the same order, each returning the same bits on every process. Implemented
// over Gloo in trainer/dist/process_group.h. Errors: kIoError when a peer is
// gone or a collective outlasts the timeout (the run then exits 1).
// Thread safety: one thread at a time.
class CrossProcess {
 public:
  virtual ~CrossProcess() = default;
  virtual int size() const = 0;  // processes (WORLD_SIZE)
  virtual int rank() const = 0;  // this one (RANK)
  // Element-wise sum over processes, in place.
  virtual Status sum(float* data, size_t count) = 0;
  // out[p * count + i] = process p's in[i], for every p (out: size() * count).
  virtual Status all_gather(const float* in, size_t count, float* out) = 0;
  // Rank 0's `bytes` on every process (others pass any size, get rank 0's).
  virtual Status broadcast(std::vector<char>& bytes) = 0;
};

// In-process all-reduce for CPU replicas (buffers in host memory). Sums in
// rank order 0, 1, ..., N-1 (deterministic), each rank reducing one slice,
// then every rank copies the whole result. With `across` (not owned; it must
// outlive the all-reduce), each call then sums that local result over the
// processes with across->sum (called by rank 0 alone, while the other local
// ranks wait) and divides by every replica of every process: the mean over
// world_size() x across->size() replicas.
std::unique_ptr<AllReduce> make_cpu_allreduce(int world_size, CrossProcess* across = nullptr);

#if defined(SWEPT_HAVE_CUDA)
// NCCL all-reduce over the given CUDA backends (rank i = replicas[i]; several
// may share one device). With `across` (more than one process; not owned,
// must outlive it): one NCCL communicator over every replica of every
// process, its unique id shared through across->broadcast; each replica then
// needs a GPU of its own. Errors: kUnavailable when NCCL cannot start,
// kInvalidArgument for a placement NCCL refuses.
Result<std::unique_ptr<AllReduce>> make_nccl_allreduce(const std::vector<Backend*>& replicas,
                                                       CrossProcess* across = nullptr);
#endif

}  // namespace swept::trainer
