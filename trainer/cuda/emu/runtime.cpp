// The CUDA runtime stand-in of the emulated build: the subset of the CUDA
// runtime API trainer/cuda uses, on the host (the model is in emu.h). The
// functions are the ones cuda_runtime_api.h declares, defined here with the
// same C linkage, so the backend's sources compile and link unchanged.
//
// Emulated devices: SWEPT_CUDA_EMU_DEVICES of them (default 2), each with
// SWEPT_CUDA_EMU_MEMORY_MIB of memory (default 16384), sm_90. CUDA_VISIBLE_DEVICES
// is honoured as the driver does: a list of ordinals, cut at the first invalid
// one; set and empty, no device (cudaErrorNoDevice).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "trainer/cuda/emu/emu.h"

namespace swept::cuda::emu {
namespace {

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;

struct Graph {
  std::vector<Work> nodes;
};

struct Stream {
  bool nonblocking = false;
  int device = 0;
  Graph* capture = nullptr;       // being captured into
  bool capture_invalid = false;   // an unsupported call happened during capture
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
};

struct Event {
  std::atomic<bool> pending{false};  // recorded on the legacy stream, not run yet
};

std::mutex g_mu;  // guards the legacy queue, allocations and the capture count
std::deque<Work> g_legacy;
std::map<void*, std::pair<int, size_t>> g_allocations;  // pointer -> (device, bytes)
std::vector<size_t> g_in_use(64, 0);
int g_capturing_global = 0;         // streams captured in global mode (any thread's unsafe call fails)
thread_local int t_capturing = 0;   // streams this thread captures in thread-local mode

bool capture_forbids_unsafe_calls() { return t_capturing > 0 || g_capturing_global > 0; }

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::atoi(v);
}

int physical_devices() { return env_int("SWEPT_CUDA_EMU_DEVICES", 2); }
size_t device_memory() { return size_t(env_int("SWEPT_CUDA_EMU_MEMORY_MIB", 16384)) << 20; }

int visible_devices() {
  const int physical = physical_devices();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible) return physical;
  std::stringstream ss(visible);
  std::string item;
  int count = 0;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long d = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || d < 0 || d >= physical) break;
    ++count;
  }
  return count;
}

bool is_legacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }

void flush_legacy() {
  for (;;) {
    Work w;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (g_legacy.empty()) return;
      w = std::move(g_legacy.front());
      g_legacy.pop_front();
    }
    w();
  }
}

cudaError_t fail(cudaError_t err) { return set_last_error(err); }

}  // namespace

cudaError_t set_last_error(cudaError_t err) {
  if (err != cudaSuccess) t_last_error = err;
  return err;
}

int current_device() { return t_device; }

size_t device_bytes_in_use(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_in_use[size_t(device)];
}

cudaError_t enqueue(cudaStream_t stream, Work work) {
  if (is_legacy(stream)) {
    std::lock_guard<std::mutex> lock(g_mu);
    // Stream 0 synchronizes with every blocking stream, a capturing one too:
    // in global or thread-local capture mode that is an error and ends it.
    if (capture_forbids_unsafe_calls()) return fail(cudaErrorStreamCaptureImplicit);
    g_legacy.push_back(std::move(work));
    return cudaSuccess;
  }
  if (stream == cudaStreamPerThread) return fail(cudaErrorInvalidResourceHandle);  // unused by swept
  auto* s = reinterpret_cast<Stream*>(stream);
  if (s->capture) {
    if (s->capture_invalid) return fail(cudaErrorStreamCaptureInvalidated);
    s->capture->nodes.push_back(std::move(work));
    return cudaSuccess;
  }
  if (!s->nonblocking) flush_legacy();  // a blocking stream waits for stream 0
  work();
  return cudaSuccess;
}

}  // namespace swept::cuda::emu

using namespace swept::cuda::emu;

namespace {
Stream* as_stream(cudaStream_t s) { return reinterpret_cast<Stream*>(s); }
// A call that is not allowed while `s` (or, for legacy, any stream) is captured.
bool invalidates_capture(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy) return false;
  Stream* st = as_stream(s);
  if (!st->capture) return false;
  st->capture_invalid = true;
  return true;
}
}  // namespace

extern "C" {

const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureWrongThread: return "attempt to terminate a thread-local capture sequence from another thread";
    default: return "CUDA emulation error";
  }
}

const char* cudaGetErrorName(cudaError_t err) { return cudaGetErrorString(err); }

cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
  *count = visible_devices();
  if (*count == 0) return fail(cudaErrorNoDevice);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= visible_devices()) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "CUDA emulation on the host CPU");
  prop->totalGlobalMem = device_memory();
  prop->major = 9;
  prop->minor = 0;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= visible_devices()) return fail(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  flush_legacy();
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  *ptr = nullptr;
  if (visible_devices() == 0) return fail(cudaErrorNoDevice);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    // cudaMalloc is not permitted while this process captures a stream in
    // global or thread-local mode.
    if (capture_forbids_unsafe_calls()) return fail(cudaErrorStreamCaptureUnsupported);
    if (g_in_use[size_t(t_device)] + bytes > device_memory()) return fail(cudaErrorMemoryAllocation);
  }
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p) return fail(cudaErrorMemoryAllocation);
  // Fresh device memory is not zero on a GPU: poison it, so a missing or
  // late zero-fill shows.
  std::memset(p, 0xA5, bytes);
  std::lock_guard<std::mutex> lock(g_mu);
  g_allocations[p] = {t_device, bytes};
  g_in_use[size_t(t_device)] += bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  flush_legacy();  // cudaFree synchronizes the device
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocations.find(ptr);
  if (it == g_allocations.end()) return fail(cudaErrorInvalidValue);
  g_in_use[size_t(it->second.first)] -= it->second.second;
  g_allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  *ptr = std::malloc(bytes ? bytes : 1);
  return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void* ptr) {
  flush_legacy();
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  *total_bytes = device_memory();
  *free_bytes = *total_bytes - g_in_use[size_t(t_device)];
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  // The legacy default stream: runs at the next synchronizing call (emu.h).
  return enqueue(nullptr, [=] { std::memset(ptr, value, bytes); });
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  return enqueue(stream, [=] { std::memset(ptr, value, bytes); });
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  return enqueue(stream, [=] { std::memcpy(dst, src, bytes); });
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  flush_legacy();
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  auto* s = new Stream();
  s->nonblocking = (flags & cudaStreamNonBlocking) != 0;
  s->device = t_device;
  *stream = reinterpret_cast<cudaStream_t>(s);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (is_legacy(stream)) return fail(cudaErrorInvalidResourceHandle);
  delete as_stream(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (invalidates_capture(stream)) return fail(cudaErrorStreamCaptureUnsupported);
  // The stream's own work has run; stream 0's delayed work runs now, after it.
  flush_legacy();
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  auto* e = reinterpret_cast<Event*>(event);
  // Work already run is complete; an event still pending on stream 0 is the
  // one case where waiting means running stream 0's queue first.
  return enqueue(stream, [e] {
    if (e->pending.load()) flush_legacy();
  });
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = reinterpret_cast<cudaEvent_t>(new Event());
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<Event*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  auto* e = reinterpret_cast<Event*>(event);
  if (is_legacy(stream)) {
    e->pending.store(true);
    return enqueue(stream, [e] { e->pending.store(false); });
  }
  return enqueue(stream, [] {});
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  auto* e = reinterpret_cast<Event*>(event);
  if (e->pending.load()) flush_legacy();
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (is_legacy(stream)) return fail(cudaErrorStreamCaptureUnsupported);
  Stream* s = as_stream(stream);
  if (s->capture) return fail(cudaErrorIllegalState);
  s->capture = new Graph();
  s->capture_invalid = false;
  s->mode = mode;
  if (mode == cudaStreamCaptureModeThreadLocal) ++t_capturing;
  if (mode == cudaStreamCaptureModeGlobal) {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_capturing_global;
  }
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  *graph = nullptr;
  if (is_legacy(stream)) return fail(cudaErrorIllegalState);
  Stream* s = as_stream(stream);
  if (!s->capture) return fail(cudaErrorIllegalState);
  std::unique_ptr<Graph> g(s->capture);
  s->capture = nullptr;
  if (s->mode == cudaStreamCaptureModeThreadLocal) --t_capturing;
  if (s->mode == cudaStreamCaptureModeGlobal) {
    std::lock_guard<std::mutex> lock(g_mu);
    --g_capturing_global;
  }
  if (s->capture_invalid) return fail(cudaErrorStreamCaptureInvalidated);
  *graph = reinterpret_cast<cudaGraph_t>(g.release());
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  *status = (!is_legacy(stream) && as_stream(stream)->capture) ? cudaStreamCaptureStatusActive
                                                               : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!graph) return fail(cudaErrorInvalidValue);
  *exec = reinterpret_cast<cudaGraphExec_t>(new Graph(*reinterpret_cast<Graph*>(graph)));
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete reinterpret_cast<Graph*>(graph);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete reinterpret_cast<Graph*>(exec);
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return fail(cudaErrorInvalidValue);
  const auto* g = reinterpret_cast<const Graph*>(exec);
  // One unit of work: a graph launch is itself captured as one node.
  return enqueue(stream, [g] {
    for (const Work& w : g->nodes) w();
  });
}

}  // extern "C"
