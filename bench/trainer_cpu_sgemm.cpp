// Measures this machine's single-precision GEMM rate through OpenBLAS, the
// yardstick for bench/trainer_cpu.sh's "share of the machine's SGEMM rate".
// Usage: trainer_cpu_sgemm THREADS [N]  → one JSON line
//   {"threads": T, "n": N, "gflops": G}  (best of 10 timed N×N×N products).
// Built and run by bench/trainer_cpu.sh; not part of the CMake build.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" void openblas_set_num_threads(int);

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int n = argc > 2 ? std::atoi(argv[2]) : 2048;
  openblas_set_num_threads(threads);
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  double best = 1e30;
  for (int rep = 0; rep < 12; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep >= 2) best = std::min(best, s);  // the first two warm up caches and threads
  }
  std::printf("{\"threads\": %d, \"n\": %d, \"gflops\": %.1f}\n", threads, n, 2.0 * n * n * n / best / 1e9);
  return 0;
}
