// GPU inventory: which GPUs this host offers to trials.
//
// `--gpus` takes a spec: "auto" asks NVML (loaded at run time with dlopen, so
// an agent runs on hosts without a driver and then simply offers no GPUs),
// "none" offers none, and "fake:N[xMEMORY]" pretends there are N GPUs of
// MEMORY each (default 80GiB), for tests and for simulating a cluster on one
// machine. Indices are NVML's, which are PCI bus order; the launcher sets
// CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA inside a trial numbers them alike.
// Thread safety: pure functions, except list_nvml_gpus (serialised inside).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace swept::agent {

struct Gpu {
  int index = 0;                 // what CUDA_VISIBLE_DEVICES names
  std::string uuid;              // "GPU-…" (NVML) or "fake-gpu-<index>"
  std::string name;              // e.g. "NVIDIA H100 80GB HBM3"
  uint64_t total_memory_bytes = 0;
};

struct GpuSpec {
  enum class Kind { kAuto, kNone, kFake };
  Kind kind = Kind::kAuto;
  int fake_count = 0;                 // kFake only
  uint64_t fake_memory_bytes = 0;     // kFake only
};

inline constexpr uint64_t kDefaultFakeGpuMemoryBytes = 80ull << 30;  // 80 GiB
inline constexpr int kMaxFakeGpus = 1024;

// "512MiB", "80GiB", "1.5TiB", "4096KiB" -> bytes. Units (case-sensitive, the
// IEC binary ones): KiB, MiB, GiB, TiB. InvalidArgument otherwise.
Result<uint64_t> parse_memory_size(std::string_view text);

// Parses a --gpus value. InvalidArgument says what is wrong and shows the
// accepted forms.
Result<GpuSpec> parse_gpu_spec(std::string_view text);

// The GPUs NVML reports. Unavailable when libnvidia-ml.so.1 cannot be loaded
// or NVML does not initialise (no driver); the message says which.
Result<std::vector<Gpu>> list_nvml_gpus();

// The GPUs a spec stands for. kAuto falls back to no GPUs (logging why) when
// NVML is unavailable; errors only from NVML failing midway.
Result<std::vector<Gpu>> discover_gpus(const GpuSpec& spec);

// The GPUs a cluster manager gave this process, from the environment:
// SLURM_STEP_GPUS, else SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES (first one
// set wins; each a comma-separated list of indices or GPU UUIDs). nullopt
// when none is set: no allocation, every GPU is offered. An empty value is
// an allocation of no GPUs. `getenv` is injected for tests.
std::optional<std::vector<std::string>> gpu_allocation(const std::function<const char*(const char*)>& getenv);

// `--gpus auto` under an allocation: the GPUs NVML saw (`seen`), kept when
// their index or UUID is allocated. When NVML saw none (no driver: Slurm's
// fake gres devices in tests), each allocated index becomes a GPU of
// unknown memory (0 bytes), named so in the log. An allocated UUID NVML did
// not see, or a value that is neither an index nor a UUID, is an
// InvalidArgument naming the variable's value.
Result<std::vector<Gpu>> restrict_to_allocation(const std::vector<Gpu>& seen, const std::vector<std::string>& allocated);

// How many trials without GPUs may run at once when --slots is 0: the CPUs
// this process may run on (sched_getaffinity: Slurm, taskset and container
// cpusets all show there), capped by SLURM_CPUS_PER_TASK when set.
int default_cpu_slots(const std::function<const char*(const char*)>& getenv);

// "4 GPUs: 0 NVIDIA H100 (80.0 GiB), ..." for the start-up log.
std::string describe_gpus(const std::vector<Gpu>& gpus);

}  // namespace swept::agent
