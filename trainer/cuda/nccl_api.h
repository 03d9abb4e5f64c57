// NCCL, opened at run time with dlopen("libnccl.so.2").
//
// Why: NCCL is needed only when replicas span several GPUs. Linking it would
// make every swept-train (the CPU path included) fail to start where libnccl is
// absent; loading it on first use turns that into a clear error instead.
// nccl.h is included for its types only; no NCCL symbol is linked.
// Thread safety: nccl() may be called from any thread (loading happens once).
#pragma once

#include <nccl.h>

#include <string>

#include "common/status.h"

namespace swept::cuda {

// The NCCL entry points swept uses.
struct NcclApi {
  ncclResult_t (*get_version)(int*);
  ncclResult_t (*comm_init_all)(ncclComm_t*, int, const int*);
  ncclResult_t (*get_unique_id)(ncclUniqueId*);
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*comm_destroy)(ncclComm_t);
  ncclResult_t (*comm_abort)(ncclComm_t);
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*group_start)();
  ncclResult_t (*group_end)();
  const char* (*get_error_string)(ncclResult_t);
};

// Loads libnccl.so.2 (or SWEPT_NCCL_LIBRARY when set) once. Errors: kMissingDependency (exit 8)
// naming the library and dlerror()'s reason, with what to install.
Result<const NcclApi*> nccl();

// "libnccl.so.2" (an emulated build: its stand-in's path).
std::string default_nccl_soname();

// The loading itself, without process-wide state (for tests).
Status load_nccl_from(const std::string& path, NcclApi* api);

// NCCL's text for `err` if NCCL is loaded, else a generic one.
const char* nccl_error_string(ncclResult_t err);

}  // namespace swept::cuda
