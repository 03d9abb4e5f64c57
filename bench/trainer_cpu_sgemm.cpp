// Measures this machine's single-precision GEMM rate, the yardstick (the
// "roofline") of bench/trainer_cpu.sh's share of the SGEMM rate, through
// OpenBLAS (with the core it picks for itself) and through oneDNN (the
// kernels swept-train uses, chosen by CPU features).
// Usage: trainer_cpu_sgemm openblas|onednn THREADS [N]  → one JSON line
//   {"library": L, "kernel": K, "threads": T, "n": N, "gflops": G}  (best of 10 timed N×N×N products).
// Built and run by bench/trainer_cpu.sh; not part of the CMake build.
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);

int main(int argc, char** argv) {
  const std::string library = argc > 1 ? argv[1] : "openblas";
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const int n = argc > 3 ? std::atoi(argv[3]) : 2048;
  if (library != "openblas" && library != "onednn") {
    std::fprintf(stderr, "usage: trainer_cpu_sgemm openblas|onednn THREADS [N]\n");
    return 2;
  }
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  double best = 1e30;
  for (int rep = 0; rep < 12; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    if (library == "openblas") {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                  c.data(), n);
    } else {
      dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep >= 2) best = std::min(best, s);  // the first two warm up caches, threads and the JIT
  }
  std::string kernel = openblas_get_corename();
  if (library == "onednn") {
    const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    kernel = (isa & 0x27u) == 0x27u ? "avx512_core" : (isa & 0x7u) == 0x7u ? "avx2" : (isa & 0x3u) == 0x3u ? "avx" : "sse41";
  }
  std::printf("{\"library\": \"%s\", \"kernel\": \"%s\", \"threads\": %d, \"n\": %d, \"gflops\": %.1f}\n",
              library.c_str(), kernel.c_str(), threads, n, 2.0 * n * n * n / best / 1e9);
  return 0;
}
