// Which float kernels the CPU backend runs, chosen from the CPU's features
// (CPUID), never from its model name.
//
// Why not OpenBLAS's own choice: OpenBLAS 0.3.21 (DYNAMIC_ARCH) picks its
// kernels from the CPU's vendor, family and model. A VM that presents a
// generic "Intel(R) Xeon(R) Processor" gets the SSE3 "Prescott" kernels
// (SGEMM 5x slower), and a CPU newer than the library (AMD family 26) gets
// "Haswell" AVX2 kernels on a core with AVX-512. So every float product goes
// to oneDNN's sgemm, which JIT-compiles for the instruction sets the CPU
// reports (trainer/README.md has the measurements behind the choice); the
// elementwise loops (kernels_simd.cpp) run the clone for the same level.
// OpenBLAS stays for the double products of the gradient checks.
//
// The user keeps control: oneDNN honours ONEDNN_MAX_CPU_ISA (e.g. AVX2), and
// the loops follow the level it leaves. Nothing here sets any environment.
//
// Thread safety: kernel_choice() is computed once (thread-safe static);
// sgemm() may be called from any number of threads at once.
#pragma once

#include <string>

namespace swept::trainer::cpu {

// The instruction-set levels of the elementwise loops: x86-64 (SSE2),
// x86-64-v3 (AVX2, FMA), x86-64-v4 (AVX-512 F/BW/DQ/VL).
enum class SimdLevel { kBaseline, kAvx2, kAvx512 };
const char* simd_level_name(SimdLevel level);  // "x86-64", "x86-64-v3", "x86-64-v4"

struct KernelChoice {
  std::string gemm;          // e.g. "oneDNN 2.6.3 convolutions + sgemm avx512_core"
  SimdLevel loops = SimdLevel::kBaseline;
  std::string features;      // the CPU's relevant features, e.g. "avx2 fma avx512f avx512bw avx512dq avx512vl"
  std::string cap;           // "ONEDNN_MAX_CPU_ISA=AVX2" when the user capped the level, else empty
  // One line for --version and the first log line, e.g.
  // "oneDNN 2.6.3 convolutions + sgemm avx512_core + loops x86-64-v4 (CPU features avx2 fma avx512f ...)".
  std::string description() const;
};

// The choice for this process: oneDNN's effective ISA (the CPU's features,
// capped by ONEDNN_MAX_CPU_ISA if set) and the loop level it allows.
const KernelChoice& kernel_choice();

// The loop level actually in use (kernel_choice().loops unless a test set
// another). set_simd_level_for_testing: the in-process tests run the float
// loops at each level the CPU supports; returns false (and changes nothing)
// when the CPU lacks `level`.
SimdLevel simd_level();
bool set_simd_level_for_testing(SimdLevel level);
bool cpu_supports(SimdLevel level);

// C[M][N] = alpha · op(A) · op(B) + beta · C, row-major, on the calling thread
// only (oneDNN's own OpenMP threads are kept at 1: the backend's pool splits
// the work).
void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc);

}  // namespace swept::trainer::cpu
