// Loading cuBLAS and cuDNN with dlopen: see cuda_libraries.h for why.
#include "trainer/cuda/cuda_libraries.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

namespace swept::cuda {
namespace {

#define SWEPT_STRINGIFY_(x) #x
#define SWEPT_STRINGIFY(x) SWEPT_STRINGIFY_(x)  // after macro expansion: cublasCreate -> "cublasCreate_v2"

CublasApi g_cublas;
CudnnApi g_cudnn;
Status g_status = Status::Internal("CUDA libraries not loaded yet");
std::atomic<bool> g_loaded{false};
std::once_flag g_once;

void* open_library(const std::string& path, const char* what, const char* install_hint,
                   const char* env_name, Status* error) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    *error = Status::MissingDependency(std::string(what) + " is needed for --device=cuda but " + path +
                                 " could not be loaded (" + (why ? why : "unknown reason") + "); " +
                                 install_hint + ", add its folder to LD_LIBRARY_PATH (or set " +
                                 env_name + "), or use --device=cpu");
  }
  return lib;
}

template <typename Fn>
void bind(void* lib, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!out) missing += std::string(missing.empty() ? "" : ", ") + name;
}

std::string from_env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

void load() {
  g_status = load_cuda_libraries_from(
      from_env("SWEPT_CUBLAS_LIBRARY", default_cublas_soname()),
      from_env("SWEPT_CUDNN_LIBRARY", default_cudnn_soname()), &g_cublas, &g_cudnn);
  if (g_status.ok()) g_loaded.store(true, std::memory_order_release);
}

}  // namespace

#if defined(SWEPT_CUDA_EMULATED)
// The emulated build's stand-ins (emu/), by their build-tree paths.
std::string default_cublas_soname() { return SWEPT_EMU_CUBLAS_LIBRARY; }
std::string default_cudnn_soname() { return SWEPT_EMU_CUDNN_LIBRARY; }
#else
std::string default_cublas_soname() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }
std::string default_cudnn_soname() { return "libcudnn.so." + std::to_string(CUDNN_MAJOR); }
#endif

Status load_cuda_libraries_from(const std::string& cublas_path, const std::string& cudnn_path,
                                CublasApi* cublas, CudnnApi* cudnn) {
  Status error;
  // Handles are kept for the life of the process (never dlclose'd): the
  // function pointers point into them.
  void* blas = open_library(cublas_path, "cuBLAS " SWEPT_STRINGIFY(CUBLAS_VER_MAJOR),
                            "install cuBLAS " SWEPT_STRINGIFY(CUBLAS_VER_MAJOR) " (the CUDA toolkit's libcublas)",
                            "SWEPT_CUBLAS_LIBRARY", &error);
  if (!blas) return error;
  void* dnn = open_library(cudnn_path, "cuDNN " SWEPT_STRINGIFY(CUDNN_MAJOR),
                           "install cuDNN " SWEPT_STRINGIFY(CUDNN_MAJOR) " for CUDA " SWEPT_STRINGIFY(CUBLAS_VER_MAJOR),
                           "SWEPT_CUDNN_LIBRARY", &error);
  if (!dnn) return error;
  std::string missing;
#define SWEPT_BIND_CUBLAS(name) bind(blas, SWEPT_STRINGIFY(name), cublas->name, missing);
#define SWEPT_BIND_CUDNN(name) bind(dnn, SWEPT_STRINGIFY(name), cudnn->name, missing);
  SWEPT_CUBLAS_FUNCTIONS(SWEPT_BIND_CUBLAS)
  SWEPT_CUDNN_FUNCTIONS(SWEPT_BIND_CUDNN)
#undef SWEPT_BIND_CUBLAS
#undef SWEPT_BIND_CUDNN
  if (!missing.empty()) {
    return Status::MissingDependency(cublas_path + " / " + cudnn_path + " lack " + missing +
                               ": install cuBLAS " SWEPT_STRINGIFY(CUBLAS_VER_MAJOR) " and cuDNN " +
                               std::to_string(CUDNN_MAJOR) + ".x");
  }
  const size_t version = cudnn->cudnnGetVersion();
  if (version / 10000 != CUDNN_MAJOR) {
    return Status::MissingDependency(cudnn_path + " is cuDNN " + std::to_string(version) + ", cuDNN " +
                               std::to_string(CUDNN_MAJOR) + ".x is needed");
  }
  // libcudnn.so.9 is a shim that loads its sub-libraries on first use; a
  // missing one would otherwise surface at the first convolution as an
  // internal error. The version checks load them now.
  const struct {
    decltype(cudnn->cudnnOpsVersionCheck) check;
    const char* library;
  } sublibraries[] = {{cudnn->cudnnGraphVersionCheck, "libcudnn_graph.so.9"},
                      {cudnn->cudnnOpsVersionCheck, "libcudnn_ops.so.9"},
                      {cudnn->cudnnCnnVersionCheck, "libcudnn_cnn.so.9"}};
  for (const auto& sub : sublibraries) {
    const cudnnStatus_t st = sub.check();
    if (st != CUDNN_STATUS_SUCCESS) {
      return Status::MissingDependency(
          std::string("cuDNN 9 is needed for --device=cuda but its sub-library ") + sub.library +
          " could not be loaded beside " + cudnn_path + " (" + cudnn->cudnnGetErrorString(st) +
          "); install the complete cuDNN 9 for CUDA " SWEPT_STRINGIFY(CUBLAS_VER_MAJOR) " (all libcudnn*.so.9 of one version in one "
          "folder), add that folder to LD_LIBRARY_PATH, or use --device=cpu");
    }
  }
  return Status::Ok();
}

Status load_cuda_libraries() {
  std::call_once(g_once, load);
  return g_status;
}

const CublasApi& cublas_api() { return g_cublas; }
const CudnnApi& cudnn_api() { return g_cudnn; }
bool cuda_libraries_loaded() { return g_loaded.load(std::memory_order_acquire); }

}  // namespace swept::cuda
