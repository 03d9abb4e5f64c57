// The kernel choice (see kernel_choice.h). The features come from GCC's
// __builtin_cpu_supports (CPUID, plus XGETBV for whether the OS saves the
// AVX and AVX-512 registers); the GEMM level is whatever oneDNN says it will
// dispatch to, so the name printed is the code that runs.
#include "trainer/cpu/kernel_choice.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <cstdlib>

namespace swept::trainer::cpu {
namespace {

bool isa_includes(dnnl_cpu_isa_t isa, dnnl_cpu_isa_t level) {
  return (static_cast<unsigned>(isa) & static_cast<unsigned>(level)) == static_cast<unsigned>(level);
}

// oneDNN's names (dnnl_types.h), most specific first.
std::string isa_name(dnnl_cpu_isa_t isa) {
  const struct {
    dnnl_cpu_isa_t isa;
    const char* name;
  } names[] = {{dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
               {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
               {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
               {dnnl_cpu_isa_avx512_core, "avx512_core"},
               {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
               {dnnl_cpu_isa_avx2, "avx2"},
               {dnnl_cpu_isa_avx, "avx"},
               {dnnl_cpu_isa_sse41, "sse41"}};
  for (const auto& n : names)
    if (isa_includes(isa, n.isa)) return n.name;
  return "reference C++ (no SSE4.1)";
}

std::string feature_list() {
  std::string out;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const auto add = [&](bool present, const char* name) {
    if (!present) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(__builtin_cpu_supports("sse4.1"), "sse4.1");
  add(__builtin_cpu_supports("avx"), "avx");
  add(__builtin_cpu_supports("avx2"), "avx2");
  add(__builtin_cpu_supports("fma"), "fma");
  add(__builtin_cpu_supports("avx512f"), "avx512f");
  add(__builtin_cpu_supports("avx512bw"), "avx512bw");
  add(__builtin_cpu_supports("avx512dq"), "avx512dq");
  add(__builtin_cpu_supports("avx512vl"), "avx512vl");
#endif
  return out.empty() ? "none beyond the baseline" : out;
}

std::string user_cap() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::string(name) + "=" + v;
  }
  return "";
}

KernelChoice choose() {
  KernelChoice c;
  const dnnl_version_t* v = dnnl_version();
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  c.gemm = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
           " convolutions + sgemm " + isa_name(isa);
  if (isa_includes(isa, dnnl_cpu_isa_avx512_core) && cpu_supports(SimdLevel::kAvx512)) {
    c.loops = SimdLevel::kAvx512;
  } else if (isa_includes(isa, dnnl_cpu_isa_avx2) && cpu_supports(SimdLevel::kAvx2)) {
    c.loops = SimdLevel::kAvx2;
  }
  c.features = feature_list();
  c.cap = user_cap();
  return c;
}

// -1: not chosen yet (kernel_choice() decides); else a SimdLevel.
std::atomic<int> g_level{-1};

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512: return "x86-64-v4";
    case SimdLevel::kAvx2: return "x86-64-v3";
    case SimdLevel::kBaseline: break;
  }
  return "x86-64";
}

std::string KernelChoice::description() const {
  std::string text = gemm + " + loops " + simd_level_name(loops) + " (CPU features " + features;
  if (!cap.empty()) text += "; capped by " + cap;
  return text + ")";
}

const KernelChoice& kernel_choice() {
  static const KernelChoice choice = choose();
  return choice;
}

bool cpu_supports(SimdLevel level) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  switch (level) {
    case SimdLevel::kAvx512: return __builtin_cpu_supports("x86-64-v4");
    case SimdLevel::kAvx2: return __builtin_cpu_supports("x86-64-v3");
    case SimdLevel::kBaseline: return true;
  }
  return false;
#else
  return level == SimdLevel::kBaseline;
#endif
}

SimdLevel simd_level() {
  int level = g_level.load(std::memory_order_relaxed);
  if (level < 0) {
    level = static_cast<int>(kernel_choice().loops);
    int expected = -1;
    if (!g_level.compare_exchange_strong(expected, level)) level = expected;
  }
  return static_cast<SimdLevel>(level);
}

bool set_simd_level_for_testing(SimdLevel level) {
  if (!cpu_supports(level)) return false;
  g_level.store(static_cast<int>(level));
  return true;
}

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc) {
  // oneDNN (Debian's build runs on OpenMP) would otherwise start a team of
  // one thread per core for every calling thread. The setting is per thread.
  thread_local const bool single_threaded = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)single_threaded;
  const dnnl_status_t s = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta,
                                     c, ldc);
  if (s == dnnl_success) return;
  // oneDNN refuses only arguments it considers invalid (none of ours are);
  // OpenBLAS computes the same product rather than leaving C unwritten.
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace swept::trainer::cpu
