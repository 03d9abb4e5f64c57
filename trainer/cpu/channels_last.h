// The channels-last layouts of the CPU backend's im2col convolutions
// (CpuOps, ops.h), for layers with several input channels. Each sample is
// first transposed into a zero-padded [H+2p][W+2p][C] block; a row of the
// (transposed) im2col matrix, colT[pixel][(ky, kx, c)], is then kh
// contiguous copies of kw·C values (160 for 5×5×32) instead of kh·kw·C
// scattered ones, and its adjoint is as many contiguous additions. Weights
// are reordered to [out][(ky, kx, c)] once per call, to match.
//
// Templated on the scalar type like CpuOps (float for training, double for
// the gradient checks). Pure functions over caller-owned memory: safe to
// call from several threads on disjoint outputs.
#pragma once

#include <algorithm>
#include <cstddef>

#include "trainer/backend.h"

namespace swept::trainer::cpu {

// Sizes of one sample's padded block (hp × wp × C) and of its colT[S][K].
struct PaddedGeometry {
  explicit PaddedGeometry(const Conv2dShape& s)
      : hp(s.height + 2 * s.pad_h), wp(s.width + 2 * s.pad_w), ho(s.out_height()), wo(s.out_width()),
        spatial(ho * wo), k(s.in_channels * s.kernel_h * s.kernel_w), row(s.kernel_w * s.in_channels),
        in_size(static_cast<size_t>(s.in_channels) * s.height * s.width),
        out_size(static_cast<size_t>(s.out_channels) * spatial) {}
  int hp, wp, ho, wo, spatial, k, row;
  size_t in_size, out_size;
};

// w[o][c][ky][kx] → wr[o][(ky·kw + kx)·C + c]
template <typename T>
void reorder_weights(const Conv2dShape& s, const T* w, T* wr) {
  const int taps = s.kernel_h * s.kernel_w;
  for (int o = 0; o < s.out_channels; ++o)
    for (int c = 0; c < s.in_channels; ++c)
      for (int t = 0; t < taps; ++t)
        wr[(static_cast<size_t>(o) * taps + t) * s.in_channels + c] =
            w[(static_cast<size_t>(o) * s.in_channels + c) * taps + t];
}
template <typename T>
void unorder_weights(const Conv2dShape& s, const T* wr, T* w) {
  const int taps = s.kernel_h * s.kernel_w;
  for (int o = 0; o < s.out_channels; ++o)
    for (int c = 0; c < s.in_channels; ++c)
      for (int t = 0; t < taps; ++t)
        w[(static_cast<size_t>(o) * s.in_channels + c) * taps + t] =
            wr[(static_cast<size_t>(o) * taps + t) * s.in_channels + c];
}

// x_n[C][H][W] → padded[H+2p][W+2p][C] (borders zero), then colT[S][K].
template <typename T>
void unfold_channels_last(const Conv2dShape& s, const PaddedGeometry& g, const T* x_n, T* padded, T* col) {
  const int C = s.in_channels;
  std::fill(padded, padded + static_cast<size_t>(g.hp) * g.wp * C, T(0));
  for (int c = 0; c < C; ++c)
    for (int iy = 0; iy < s.height; ++iy) {
      const T* src = x_n + (static_cast<size_t>(c) * s.height + iy) * s.width;
      T* dst = padded + (static_cast<size_t>(iy + s.pad_h) * g.wp + s.pad_w) * C + c;
      for (int ix = 0; ix < s.width; ++ix) dst[static_cast<size_t>(ix) * C] = src[ix];
    }
  for (int oy = 0; oy < g.ho; ++oy)
    for (int ox = 0; ox < g.wo; ++ox) {
      T* dst = col + static_cast<size_t>(oy * g.wo + ox) * g.k;
      for (int ky = 0; ky < s.kernel_h; ++ky)
        std::copy_n(padded + (static_cast<size_t>(oy + ky) * g.wp + ox) * C, g.row, dst + ky * g.row);
    }
}

// The adjoint of unfold_channels_last: dcolT[S][K] → dx_n[C][H][W].
template <typename T>
void fold_channels_last(const Conv2dShape& s, const PaddedGeometry& g, const T* dcol, T* padded, T* dx_n) {
  const int C = s.in_channels;
  std::fill(padded, padded + static_cast<size_t>(g.hp) * g.wp * C, T(0));
  for (int oy = 0; oy < g.ho; ++oy)
    for (int ox = 0; ox < g.wo; ++ox) {
      const T* src = dcol + static_cast<size_t>(oy * g.wo + ox) * g.k;
      for (int ky = 0; ky < s.kernel_h; ++ky) {
        T* dst = padded + (static_cast<size_t>(oy + ky) * g.wp + ox) * C;
        const T* from = src + ky * g.row;
        for (int i = 0; i < g.row; ++i) dst[i] += from[i];
      }
    }
  for (int c = 0; c < C; ++c)
    for (int iy = 0; iy < s.height; ++iy) {
      T* dst = dx_n + (static_cast<size_t>(c) * s.height + iy) * s.width;
      const T* src = padded + (static_cast<size_t>(iy + s.pad_h) * g.wp + s.pad_w) * C + c;
      for (int ix = 0; ix < s.width; ++ix) dst[ix] = src[static_cast<size_t>(ix) * C];
    }
}

}  // namespace swept::trainer::cpu
