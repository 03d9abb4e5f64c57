// The NCCL stand-in across processes (nccl_emu_net.cpp): what
// ncclGetUniqueId and ncclCommInitRank give a communicator whose ranks live
// in several processes. One process (the one that made the unique id) runs a
// root thread; every rank connects to it over loopback TCP, sends its buffer
// each collective, and gets back the element-wise sum or mean, computed by
// the root in rank order (the in-process clique's arithmetic, so both give
// the same bits). The emulation covers one host only: its GPUs are host
// memory, so there is no second host to emulate.
//
// Thread safety: a Link is used by one thread at a time (NCCL's rule for a
// communicator); close() may be called from the thread that owns it.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>

namespace swept::cuda::emu::net {

struct Link;

// Starts a root listening on loopback and writes its address into *id.
// false when no socket could be opened.
bool make_unique_id(ncclUniqueId* id);

// Rank `rank` of `nranks` joins the root named by `id`; nullptr when `id`
// is not one of ours or the root cannot be reached.
std::shared_ptr<Link> join(const ncclUniqueId& id, int nranks, int rank);

// The collective, run on the rank's stream. A root or peer that went away
// ends the process with a message and exit code 1: on a GPU the collective
// would wait for ever (NCCL's ncclRemoteError, seen only by polling).
void all_reduce(Link& link, const float* send, float* recv, size_t count, bool average);

// Closes the rank's connection (ncclCommDestroy, ncclCommAbort); the root then
// closes every rank's, so their pending collectives end.
void close(Link& link);

}  // namespace swept::cuda::emu::net
