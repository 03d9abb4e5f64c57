// Loading NCCL with dlopen: see nccl_api.h for why.
#include "trainer/cuda/nccl_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace swept::cuda {
namespace {

NcclApi g_api{};
Status g_load_status = Status::Internal("NCCL not loaded yet");
std::once_flag g_once;

template <typename Fn>
bool bind(void* lib, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!out) missing += std::string(missing.empty() ? "" : ", ") + name;
  return out != nullptr;
}

void load() {
  const char* override_path = std::getenv("SWEPT_NCCL_LIBRARY");
  g_load_status = load_nccl_from((override_path && *override_path) ? override_path : default_nccl_soname(), &g_api);
}

}  // namespace

#if defined(SWEPT_CUDA_EMULATED)
std::string default_nccl_soname() { return SWEPT_EMU_NCCL_LIBRARY; }  // the stand-in (emu/)
#else
std::string default_nccl_soname() { return "libnccl.so.2"; }
#endif

Result<const NcclApi*> nccl() {
  std::call_once(g_once, load);
  if (!g_load_status.ok()) return g_load_status;
  return &g_api;
}

Status load_nccl_from(const std::string& path, NcclApi* api) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept for the process's life
  if (!lib) {
    const char* why = dlerror();
    return Status::MissingDependency(
        "NCCL is needed for replicas on several GPUs but " + path + " could not be loaded (" +
        (why ? why : "unknown reason") +
        "); install NCCL 2 (libnccl2) or add its folder to LD_LIBRARY_PATH (or set "
        "SWEPT_NCCL_LIBRARY), or train on one GPU (--device=cuda:K)");
  }
  std::string missing;
  bind(lib, "ncclGetVersion", api->get_version, missing);
  bind(lib, "ncclCommInitAll", api->comm_init_all, missing);
  bind(lib, "ncclGetUniqueId", api->get_unique_id, missing);
  bind(lib, "ncclCommInitRank", api->comm_init_rank, missing);
  bind(lib, "ncclCommDestroy", api->comm_destroy, missing);
  bind(lib, "ncclCommAbort", api->comm_abort, missing);
  bind(lib, "ncclAllReduce", api->all_reduce, missing);
  bind(lib, "ncclGroupStart", api->group_start, missing);
  bind(lib, "ncclGroupEnd", api->group_end, missing);
  bind(lib, "ncclGetErrorString", api->get_error_string, missing);
  if (!missing.empty()) return Status::MissingDependency(path + " lacks " + missing + ": install NCCL 2.x");
  return Status::Ok();
}

const char* nccl_error_string(ncclResult_t err) {
  if (g_api.get_error_string) return g_api.get_error_string(err);
  return "NCCL error";
}

}  // namespace swept::cuda
