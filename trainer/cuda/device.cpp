// GPU discovery and --device parsing (device.h).
#include "trainer/cuda/device.h"

#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <cstdlib>

#include "trainer/cuda/check.h"

namespace swept::cuda {

std::string DeviceInfo::label() const {
  return "cuda:" + std::to_string(index) + " (" + name + ")";
}

Result<std::vector<DeviceInfo>> visible_devices() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string visible_note = visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : "";
  if (err == cudaErrorInsufficientDriver) {
    return Status::Unavailable(
        "no CUDA GPU is usable: no NVIDIA driver was found (or it is older than this build's CUDA "
        "runtime " + std::to_string(CUDART_VERSION / 1000) + "." +
        std::to_string(CUDART_VERSION % 1000 / 10) + "); use --device=cpu, or install the driver");
  }
  if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
    return Status::Unavailable("no CUDA GPU is visible" + visible_note +
                                      "; use --device=cpu, or run where a GPU is visible");
  }
  if (err != cudaSuccess) {
    return Status::Unavailable(std::string("cannot list CUDA GPUs: ") +
                                      cudaGetErrorString(err) + visible_note +
                                      "; use --device=cpu");
  }
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    cudaCheck(cudaGetDeviceProperties(&prop, i));
    DeviceInfo d;
    d.index = i;
    d.name = prop.name;
    d.total_bytes = prop.totalGlobalMem;
    d.sm_major = prop.major;
    d.sm_minor = prop.minor;
    devices.push_back(std::move(d));
  }
  return devices;
}

Result<std::vector<DeviceInfo>> devices_for(const std::string& device_flag) {
  std::optional<int> wanted;
  if (device_flag != "cuda") {
    const std::string prefix = "cuda:";
    std::string rest = device_flag.rfind(prefix, 0) == 0 ? device_flag.substr(prefix.size()) : "";
    char* end = nullptr;
    long k = rest.empty() ? -1 : std::strtol(rest.c_str(), &end, 10);
    if (rest.empty() || *end != '\0' || k < 0 || k > 1024) {
      return Status::InvalidArgument("--device=" + device_flag +
                                     ": expected cpu, cuda (every visible GPU) or cuda:K (K >= 0)");
    }
    wanted = static_cast<int>(k);
  }
  auto all = visible_devices();
  if (!all.ok()) return all.status().WithContext("--device=" + device_flag);
  if (!wanted) return all;
  if (*wanted >= static_cast<int>(all->size())) {
    return Status::NotFound(
        "--device=" + device_flag + ": only " + std::to_string(all->size()) +
        " GPU(s) visible (cuda:0 to cuda:" + std::to_string(all->size() - 1) +
        "); pick one of those or --device=cuda");
  }
  return std::vector<DeviceInfo>{(*all)[*wanted]};
}

Result<std::vector<int>> place_replicas(const std::vector<DeviceInfo>& devices, int replicas) {
  const int gpus = static_cast<int>(devices.size());
  if (replicas < 1 || gpus < 1 || (gpus > 1 && replicas % gpus != 0)) {
    return Status::InvalidArgument(
        "--replicas=" + std::to_string(replicas) + " on " + std::to_string(gpus) +
        " GPUs: give one replica per GPU, a multiple of the GPU count, or use --device=cuda:K "
        "to put every replica on one GPU");
  }
  std::vector<int> placement;
  const int per_gpu = replicas / gpus;
  for (int r = 0; r < replicas; ++r) placement.push_back(devices[r / per_gpu].index);
  return placement;
}

std::string build_description() {
  const size_t cudnn_version = cudnnGetVersion();  // a library call that needs no driver
  return "CUDA backend built (CUDA runtime " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string(CUDART_VERSION % 1000 / 10) + ", cuDNN " +
         std::to_string(cudnn_version / 10000) + "." + std::to_string(cudnn_version / 100 % 100) +
         "." + std::to_string(cudnn_version % 100) + ", cuBLAS " +
         std::to_string(CUBLAS_VER_MAJOR) + "." + std::to_string(CUBLAS_VER_MINOR) +
         ", NCCL loaded on demand; architectures " SWEPT_CUDA_ARCHS ")";
}

}  // namespace swept::cuda
