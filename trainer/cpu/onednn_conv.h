// oneDNN's own convolution primitives (forward, backward data, backward
// weights) for the CPU backend's float convolutions with several input
// channels. oneDNN JITs them for the CPU's features (the ISA of
// kernel_choice(), capped by ONEDNN_MAX_CPU_ISA like its sgemm) and picks
// blocked layouts itself (format_tag::any); these functions take and return
// the backend's NCHW/OIHW tensors and reorder at their edges.
//
// Each call runs on the calling thread only (oneDNN's OpenMP team kept at 1,
// as for sgemm): CpuOps splits the batch over its own pool, so results
// depend on the thread count only, and one oneDNN primitive per (shape,
// sub-batch) is deterministic. Primitives are cached per shape; calls from
// several threads at once are safe (each brings its own scratchpad).
//
// Each returns false, writing nothing, when oneDNN has no implementation or
// fails: the caller then runs its im2col + GEMM path.
#pragma once

#include "trainer/backend.h"

namespace swept::trainer::cpu {

// y[n][o][S] = conv(x, w), no bias, no activation (the caller adds them).
bool onednn_conv_forward(const Conv2dShape& s, const float* x, const float* w, float* y);
// dw = the weight gradient of the s.batch samples (overwritten); dx, when not
// null, = the input gradient (overwritten). dy is the gradient at the
// convolution's output (the activation's derivative already applied).
bool onednn_conv_backward(const Conv2dShape& s, const float* x, const float* w, const float* dy, float* dx,
                          float* dw);

// The channel-blocked output (Conv2dShape::blocked_out): y and dy in
// nChw16c, i.e. per sample [C/16][H][W][16], so a sub-batch is a slice of the
// whole batch's tensor; x, w, dx stay NCHW/OIHW. The bias and a ReLU are
// applied inside the forward primitive, the bias gradient computed by the
// backward-weights primitive.
constexpr int kOnednnChannelBlock = 16;
// Whether oneDNN runs this convolution (batch ignored) with its JIT kernels in
// that layout (AVX-512); act must be kNone or kRelu.
bool onednn_conv_blocked_available(const Conv2dShape& s, Activation act);
// y = act(conv(x, w) + b) in nChw16c.
bool onednn_conv_forward_blocked(const Conv2dShape& s, const float* x, const float* w, const float* b, Activation act,
                                 float* y);
// dw, db overwritten; dx (NCHW) when not null; dy in nChw16c with the
// activation's backward already applied. act: the forward's (it selects the
// cached primitives).
bool onednn_conv_backward_blocked(const Conv2dShape& s, Activation act, const float* x, const float* w,
                                  const float* dy, float* dx, float* dw, float* db);

}  // namespace swept::trainer::cpu
