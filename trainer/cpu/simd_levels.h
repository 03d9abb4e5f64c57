// What the float kernels compiled once per instruction-set level share
// (kernels_simd.cpp, conv_direct.cpp, pool_blocked.cpp): the dispatch to the
// level kernel_choice.h chose, and GCC vector types of 16 floats with their
// unaligned loads and stores.
//
// A file that uses SWEPT_DISPATCH defines its versions in namespaces
// `baseline` and, where SWEPT_HAVE_LEVELS is set, `v3` (target x86-64-v3) and
// `v4` (target x86-64-v4). The vector helpers carry no target of their own
// and are always inlined, so each level's caller compiles them with its own
// instructions (16 floats: one AVX-512 register, two AVX or four SSE ones).
// A file that passes these types between its own helpers silences GCC's
// -Wpsabi note (the ABI of a 64-byte vector differs without AVX-512) for
// itself: they never cross a file.
#pragma once

#include <cstring>

#include "trainer/cpu/kernel_choice.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SWEPT_HAVE_LEVELS 1
// Runs `name` of the level in use.
#define SWEPT_DISPATCH(name, ...)                          \
  switch (simd_level()) {                                  \
    case SimdLevel::kAvx512: return v4::name(__VA_ARGS__); \
    case SimdLevel::kAvx2: return v3::name(__VA_ARGS__);   \
    case SimdLevel::kBaseline: break;                      \
  }                                                        \
  return baseline::name(__VA_ARGS__)
#else
#define SWEPT_DISPATCH(name, ...) return baseline::name(__VA_ARGS__)
#endif

// (These two are inlined into each caller: no vector crosses a call.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace swept::trainer::cpu::simd {

typedef float v16 __attribute__((vector_size(64)));
typedef int v16i __attribute__((vector_size(64)));

__attribute__((always_inline)) inline v16 load16(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
__attribute__((always_inline)) inline void store16(float* p, v16 v) { std::memcpy(p, &v, sizeof v); }

}  // namespace swept::trainer::cpu::simd

#pragma GCC diagnostic pop
