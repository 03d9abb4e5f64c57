// GPU discovery and --device parsing (device.h).
#include "trainer/cuda/device.h"

#include <cuda_runtime_api.h>

#include <cstdlib>

#include "trainer/backend.h"
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

}  // namespace swept::cuda

namespace swept::trainer {

std::string cuda_build_description() {
#if defined(SWEPT_CUDA_EMULATED)
  return "CUDA (emulated): the CUDA backend's own code on the host CPU, for tests; no GPU or driver is used";
#else
  return "CUDA " + std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
         " runtime linked statically, needs NVIDIA driver " + std::to_string(SWEPT_CUDA_DRIVER_MIN) + " or newer";
#endif
}

}  // namespace swept::trainer
