// The NCCL stand-in of the emulated build (libswept_nccl_emu.so, opened by
// nccl_api.cpp in place of libnccl.so.2): ncclCommInitAll makes one
// communicator per emulated GPU; ncclAllReduce is enqueued on the caller's
// stream and, when it runs, meets the other ranks (each on its own thread)
// and averages (ncclAvg) or sums (ncclSum) their buffers: rank r reduces
// slice r in rank order, so every rank gets the same bits.
//
// NCCL's thread-safety rule is checked, not assumed: a communicator is used
// by one thread at a time, so ncclCommAbort or ncclCommDestroy on a
// communicator another thread is inside of ends the process with a message
// (on NCCL that is a use-after-free). ncclCommAbort wakes every rank of the
// clique waiting for the aborted one; their collectives end without a result.
//
// ncclGetUniqueId and ncclCommInitRank make communicators whose ranks may be
// in other processes (nccl_emu_net.h): their collectives go through a root
// over loopback TCP, with the same arithmetic as a clique's.
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "trainer/cuda/emu/emu.h"
#include "trainer/cuda/emu/nccl_emu_net.h"

namespace {

struct Clique {
  explicit Clique(int n) : ranks(n), send(n), recv(n) {}
  const int ranks;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  bool aborted = false;
  std::vector<const float*> send;
  std::vector<float*> recv;
  std::vector<float> result;
  int waiting = 0;  // ranks blocked at the meeting point (for tests)

  // A reusable barrier; false once the clique is aborted.
  bool meet(std::unique_lock<std::mutex>& lock) {
    if (aborted) return false;
    const uint64_t gen = generation;
    if (++arrived == ranks) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return true;
    }
    ++waiting;
    cv.wait(lock, [&] { return generation != gen || aborted; });
    --waiting;
    return generation != gen;
  }
};

struct Comm {
  std::shared_ptr<Clique> clique;  // ncclCommInitAll's, or
  std::shared_ptr<swept::cuda::emu::net::Link> link;  // ncclCommInitRank's
  int rank = 0;
  std::atomic<int> users{0};  // threads inside an NCCL call on this communicator
};

std::mutex g_cliques_mu;
std::vector<std::weak_ptr<Clique>> g_cliques;

void misuse(const char* what) {
  std::fprintf(stderr,
               "NCCL emulation: %s on a communicator that another thread is using (NCCL communicators are not "
               "thread-safe; on a GPU this is a use-after-free)\n",
               what);
  std::abort();
}

// Runs on rank `rank`'s stream: the collective itself.
void all_reduce(const std::shared_ptr<Clique>& c, int rank, const float* send, float* recv, size_t count,
                bool average) {
  std::unique_lock<std::mutex> lock(c->mu);
  c->send[size_t(rank)] = send;
  c->recv[size_t(rank)] = recv;
  if (c->result.size() < count) c->result.resize(count);
  if (!c->meet(lock)) return;
  const size_t per = (count + size_t(c->ranks) - 1) / size_t(c->ranks);
  const size_t begin = std::min(count, per * size_t(rank)), end = std::min(count, begin + per);
  std::vector<const float*> inputs = c->send;
  float* result = c->result.data();
  lock.unlock();
  for (size_t i = begin; i < end; ++i) {
    float sum = 0.f;
    for (const float* in : inputs) sum += in[i];
    result[i] = average ? sum / float(inputs.size()) : sum;
  }
  lock.lock();
  if (!c->meet(lock)) return;  // every slice is reduced
  lock.unlock();
  std::copy(result, result + count, recv);
  lock.lock();
  c->meet(lock);  // every rank has its copy: the result buffer may be reused
}

}  // namespace

extern "C" {

// For tests of the abort path: how many ranks of all live cliques are
// waiting at a collective for the others.
int swept_nccl_emu_waiting_total() {
  std::lock_guard<std::mutex> lock(g_cliques_mu);
  int total = 0;
  for (auto& weak : g_cliques) {
    if (auto c = weak.lock()) {
      std::lock_guard<std::mutex> clique_lock(c->mu);
      total += c->waiting;
    }
  }
  return total;
}

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    default: return "NCCL emulation error";
  }
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (!comms || ndev < 1) return ncclInvalidArgument;
  int visible = 0;
  if (cudaGetDeviceCount(&visible) != cudaSuccess) return ncclUnhandledCudaError;
  for (int i = 0; i < ndev; ++i) {
    const int d = devlist ? devlist[i] : i;
    if (d < 0 || d >= visible) return ncclInvalidArgument;
    for (int j = 0; j < i; ++j)
      if (devlist && devlist[j] == d) return ncclInvalidUsage;  // NCCL: one rank per GPU
  }
  auto clique = std::make_shared<Clique>(ndev);
  for (int i = 0; i < ndev; ++i) {
    auto* c = new Comm();
    c->clique = clique;
    c->rank = i;
    comms[i] = reinterpret_cast<ncclComm_t>(c);
  }
  std::lock_guard<std::mutex> lock(g_cliques_mu);
  g_cliques.push_back(clique);
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return ncclInvalidArgument;
  return swept::cuda::emu::net::make_unique_id(id) ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return ncclUnhandledCudaError;
  auto link = swept::cuda::emu::net::join(id, nranks, rank);
  if (!link) return ncclSystemError;
  auto* c = new Comm();
  c->link = std::move(link);
  c->rank = rank;
  *comm = reinterpret_cast<ncclComm_t>(c);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  auto* c = reinterpret_cast<Comm*>(comm);
  if (!c) return ncclInvalidArgument;
  if (c->users.load() != 0) misuse("ncclCommDestroy");
  if (c->link) swept::cuda::emu::net::close(*c->link);
  delete c;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  auto* c = reinterpret_cast<Comm*>(comm);
  if (!c) return ncclSuccess;
  if (c->users.load() != 0) misuse("ncclCommAbort");
  if (c->link) {
    swept::cuda::emu::net::close(*c->link);
  } else {
    std::lock_guard<std::mutex> lock(c->clique->mu);
    c->clique->aborted = true;
    c->clique->cv.notify_all();
  }
  delete c;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  auto* c = reinterpret_cast<Comm*>(comm);
  if (!c) return ncclInvalidArgument;
  if (type != ncclFloat32 || (op != ncclAvg && op != ncclSum)) return ncclInvalidArgument;
  c->users.fetch_add(1);
  if (c->link) {
    std::shared_ptr<swept::cuda::emu::net::Link> link = c->link;
    const auto* in = static_cast<const float*>(sendbuff);
    auto* out = static_cast<float*>(recvbuff);
    const bool avg = op == ncclAvg;
    cudaError_t e = swept::cuda::emu::enqueue(
        stream, [link, in, out, count, avg] { swept::cuda::emu::net::all_reduce(*link, in, out, count, avg); });
    c->users.fetch_sub(1);
    return e == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
  }
  std::shared_ptr<Clique> clique = c->clique;
  const int rank = c->rank;
  const auto* send = static_cast<const float*>(sendbuff);
  auto* recv = static_cast<float*>(recvbuff);
  const bool average = op == ncclAvg;
  cudaError_t err = swept::cuda::emu::enqueue(
      stream, [clique, rank, send, recv, count, average] { all_reduce(clique, rank, send, recv, count, average); });
  c->users.fetch_sub(1);
  return err == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

}  // extern "C"
