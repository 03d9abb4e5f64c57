// GPU inventory: --gpus parsing, fake GPUs, and NVML loaded with dlopen.
//
// No NVML header is installed on build machines, so the handful of entry
// points used are declared here with the signatures of NVML's public API
// (nvml.h). The library is opened once per call and closed again: discovery
// runs once at agent start, so there is nothing to cache.
#include "agent/gpu_inventory.h"

#include <dlfcn.h>
#include <sched.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "common/log.h"

namespace swept::agent {
namespace {

// --- NVML's ABI, as much of it as we use ---------------------------------
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {  // nvmlMemory_t (v1): field order matters
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned kNvmlUuidBufferSize = 96;  // >= NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kNvmlNameBufferSize = 96;  // >= NVML_DEVICE_NAME_V2_BUFFER_SIZE

struct NvmlApi {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*device_count)(unsigned*) = nullptr;
  NvmlReturn (*handle_by_index)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*memory_info)(NvmlDevice, NvmlMemory*) = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
};

// Closes the dlopen handle on every path out.
struct LibraryHandle {
  void* handle = nullptr;
  ~LibraryHandle() {
    if (handle) dlclose(handle);
  }
};

template <typename Fn>
bool load_symbol(void* lib, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  return out != nullptr;
}

std::string nvml_error(const NvmlApi& api, const char* call, NvmlReturn rc) {
  std::string what = api.error_string ? api.error_string(rc) : "error";
  return std::string("NVML ") + call + " failed: " + what + " (code " + std::to_string(rc) + ")";
}

// NVML_CHECK: one check macro for NVML calls, naming the failing call and line.
#define NVML_CHECK(api, call_expr, call_name)                                              \
  do {                                                                                     \
    NvmlReturn _rc = (call_expr);                                                          \
    if (_rc != kNvmlSuccess)                                                               \
      return Status::Unavailable(nvml_error(api, call_name, _rc) + " at " __FILE__ ":" +   \
                                 std::to_string(__LINE__));                                \
  } while (0)

std::mutex g_nvml_mutex;  // NVML init/shutdown pairs from two threads must not interleave

std::string format_gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

}  // namespace

Result<uint64_t> parse_memory_size(std::string_view text) {
  static constexpr struct {
    const char* suffix;
    uint64_t scale;
  } kUnits[] = {{"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40}};
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("memory size '" + std::string(text) + "': " + why +
                                   "; write a number and a unit, e.g. 80GiB, 512MiB (units: KiB, MiB, GiB, TiB)");
  };
  for (const auto& unit : kUnits) {
    std::string_view suffix(unit.suffix);
    if (text.size() <= suffix.size() || text.substr(text.size() - suffix.size()) != suffix) continue;
    std::string_view number = text.substr(0, text.size() - suffix.size());
    double value = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || end != number.data() + number.size()) return bad("not a number before the unit");
    if (!std::isfinite(value) || value <= 0) return bad("must be more than 0");
    double bytes = value * static_cast<double>(unit.scale);
    if (bytes >= 18e18) return bad("too large");
    return static_cast<uint64_t>(bytes);
  }
  return bad("missing or unknown unit");
}

Result<GpuSpec> parse_gpu_spec(std::string_view text) {
  const std::string forms = "use auto, none, fake:N or fake:NxMEMORY (e.g. fake:4x80GiB)";
  GpuSpec spec;
  if (text == "auto") return spec;
  if (text == "none") {
    spec.kind = GpuSpec::Kind::kNone;
    return spec;
  }
  constexpr std::string_view kFake = "fake:";
  if (text.substr(0, kFake.size()) != kFake) {
    return Status::InvalidArgument("--gpus '" + std::string(text) + "' is not a GPU spec; " + forms);
  }
  std::string_view rest = text.substr(kFake.size());
  std::string_view count_text = rest;
  std::string_view memory_text;
  size_t x = rest.find('x');
  if (x != std::string_view::npos) {
    count_text = rest.substr(0, x);
    memory_text = rest.substr(x + 1);
  }
  int count = 0;
  auto [end, ec] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
  if (count_text.empty() || ec != std::errc() || end != count_text.data() + count_text.size() || count < 1 ||
      count > kMaxFakeGpus) {
    return Status::InvalidArgument("--gpus '" + std::string(text) + "': the GPU count must be a whole number from 1 to " +
                                   std::to_string(kMaxFakeGpus) + "; " + forms);
  }
  spec.kind = GpuSpec::Kind::kFake;
  spec.fake_count = count;
  spec.fake_memory_bytes = kDefaultFakeGpuMemoryBytes;
  if (x != std::string_view::npos) {
    auto memory = parse_memory_size(memory_text);
    if (!memory.ok()) return memory.status().WithContext("--gpus '" + std::string(text) + "'");
    spec.fake_memory_bytes = *memory;
  }
  return spec;
}

Result<std::vector<Gpu>> list_nvml_gpus() {
  std::lock_guard<std::mutex> lock(g_nvml_mutex);
  LibraryHandle lib;
  lib.handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib.handle) {
    const char* why = dlerror();
    return Status::Unavailable(std::string("cannot load libnvidia-ml.so.1 (no NVIDIA driver?): ") +
                               (why ? why : "unknown reason"));
  }
  NvmlApi api;
  load_symbol(lib.handle, "nvmlErrorString", api.error_string);
  if (!load_symbol(lib.handle, "nvmlInit_v2", api.init) || !load_symbol(lib.handle, "nvmlShutdown", api.shutdown) ||
      !load_symbol(lib.handle, "nvmlDeviceGetCount_v2", api.device_count) ||
      !load_symbol(lib.handle, "nvmlDeviceGetHandleByIndex_v2", api.handle_by_index) ||
      !load_symbol(lib.handle, "nvmlDeviceGetUUID", api.uuid) ||
      !load_symbol(lib.handle, "nvmlDeviceGetName", api.name) ||
      !load_symbol(lib.handle, "nvmlDeviceGetMemoryInfo", api.memory_info)) {
    return Status::Unavailable("libnvidia-ml.so.1 lacks an NVML entry point swept needs (driver too old?)");
  }
  NVML_CHECK(api, api.init(), "nvmlInit_v2");
  // From here on NVML is initialised: shut it down on every path.
  auto body = [&]() -> Result<std::vector<Gpu>> {
    unsigned count = 0;
    NVML_CHECK(api, api.device_count(&count), "nvmlDeviceGetCount_v2");
    std::vector<Gpu> gpus;
    for (unsigned i = 0; i < count; ++i) {
      NvmlDevice device = nullptr;
      NVML_CHECK(api, api.handle_by_index(i, &device), "nvmlDeviceGetHandleByIndex_v2");
      char uuid[kNvmlUuidBufferSize] = {};
      char name[kNvmlNameBufferSize] = {};
      NvmlMemory memory{};
      NVML_CHECK(api, api.uuid(device, uuid, sizeof uuid), "nvmlDeviceGetUUID");
      NVML_CHECK(api, api.name(device, name, sizeof name), "nvmlDeviceGetName");
      NVML_CHECK(api, api.memory_info(device, &memory), "nvmlDeviceGetMemoryInfo");
      gpus.push_back(Gpu{static_cast<int>(i), uuid, name, memory.total});
    }
    return gpus;
  };
  auto result = body();
  api.shutdown();
  return result;
}

Result<std::vector<Gpu>> discover_gpus(const GpuSpec& spec) {
  switch (spec.kind) {
    case GpuSpec::Kind::kNone:
      return std::vector<Gpu>{};
    case GpuSpec::Kind::kFake: {
      std::vector<Gpu> gpus;
      for (int i = 0; i < spec.fake_count; ++i) {
        gpus.push_back(Gpu{i, "fake-gpu-" + std::to_string(i), "Fake GPU", spec.fake_memory_bytes});
      }
      return gpus;
    }
    case GpuSpec::Kind::kAuto: {
      auto gpus = list_nvml_gpus();
      if (!gpus.ok()) {
        log::info("no GPUs offered: " + gpus.status().message());
        return std::vector<Gpu>{};
      }
      return gpus;
    }
  }
  return Status::Internal("unknown GPU spec kind");
}

std::optional<std::vector<std::string>> gpu_allocation(const std::function<const char*(const char*)>& getenv) {
  for (const char* var : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"}) {
    const char* value = getenv(var);
    if (!value) continue;
    std::vector<std::string> out;
    std::string text = value, item;
    for (size_t start = 0; start <= text.size();) {
      size_t end = text.find(',', start);
      if (end == std::string::npos) end = text.size();
      item = text.substr(start, end - start);
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (!item.empty()) out.push_back(item);
      start = end + 1;
    }
    return out;
  }
  return std::nullopt;
}

Result<std::vector<Gpu>> restrict_to_allocation(const std::vector<Gpu>& seen, const std::vector<std::string>& allocated) {
  std::vector<Gpu> out;
  for (const std::string& a : allocated) {
    bool is_index = !a.empty() && a.size() < 6 && a.find_first_not_of("0123456789") == std::string::npos;
    const Gpu* match = nullptr;
    for (const Gpu& g : seen)
      if ((is_index && g.index == std::stoi(a)) || g.uuid == a) match = &g;
    if (match) {
      bool dup = false;
      for (const Gpu& g : out) dup = dup || g.index == match->index;
      if (!dup) out.push_back(*match);
      continue;
    }
    if (!seen.empty() || !is_index)
      return Status::InvalidArgument("the allocated GPU \"" + a + "\" (SLURM_STEP_GPUS, SLURM_JOB_GPUS or "
                                     "CUDA_VISIBLE_DEVICES) is not among the GPUs NVML sees on this host; "
                                     "check the job's gres, or pass --gpus explicitly");
    int index = std::stoi(a);
    bool dup = false;
    for (const Gpu& g : out) dup = dup || g.index == index;
    if (!dup) out.push_back(Gpu{index, "allocated-gpu-" + a, "allocated GPU (memory unknown)", 0});
  }
  return out;
}

int default_cpu_slots(const std::function<const char*(const char*)>& getenv) {
  int cpus = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* per_task = getenv("SLURM_CPUS_PER_TASK")) {
    int n = std::atoi(per_task);
    if (n > 0 && n < cpus) cpus = n;
  }
  return std::max(1, cpus);
}

std::string describe_gpus(const std::vector<Gpu>& gpus) {
  if (gpus.empty()) return "no GPUs";
  std::string out = std::to_string(gpus.size()) + (gpus.size() == 1 ? " GPU: " : " GPUs: ");
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(gpus[i].index) + " " + gpus[i].name + (gpus[i].total_memory_bytes ? " (" + format_gib(gpus[i].total_memory_bytes) + ")" : "");
  }
  return out;
}

}  // namespace swept::agent
