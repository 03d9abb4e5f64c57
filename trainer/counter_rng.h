// Counter-based random numbers for dropout: a pure function of (seed, step,
// element), so every backend (CPU loops, CUDA kernels) draws the same mask,
// masks do not depend on the number of replicas, and resuming a run needs no
// generator state beyond the step. Usable from host and device code.
// The mixing function is SplitMix64's finalizer (Steele, Lea, Flood 2014),
// applied twice over the three inputs.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SWEPT_HOST_DEVICE __host__ __device__
#else
#define SWEPT_HOST_DEVICE
#endif

namespace swept::trainer {

SWEPT_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform float in [0, 1) with 24 random bits, for element `element` of the
// dropout draw at training step `step` of the run seeded `seed`.
SWEPT_HOST_DEVICE inline float dropout_uniform(uint64_t seed, uint64_t step, uint64_t element) {
  uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ull * (step + 1));
  h = mix64(h ^ (element * 0xD6E8FEB86659FD93ull + 0x632BE59BD9B4E019ull));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

}  // namespace swept::trainer
