#include "trainer/cpu/onednn_conv.h"

#include <omp.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace swept::trainer::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

struct Primitives {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;
  memory::desc x_nchw, w_oihw;
  memory::desc y_user;  // the caller's y and dy: NCHW, or nChw16c for the blocked primitives
  memory::desc bias;
};

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

void keep_openmp_single_threaded() {
  thread_local const bool once = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)once;
}

// blocked: y and dy in nChw16c (Conv2dShape::blocked_out), the bias inside
// the primitives (forward: argument; backward weights: diff_bias) and a ReLU
// as a forward post-op. Otherwise NCHW at the edges, bias and activation
// left to the caller.
std::unique_ptr<Primitives> create(const Conv2dShape& s, bool blocked, Activation act) {
  const auto f32 = memory::data_type::f32;
  const memory::dims x{s.batch, s.in_channels, s.height, s.width};
  const memory::dims w{s.out_channels, s.in_channels, s.kernel_h, s.kernel_w};
  const memory::dims y{s.batch, s.out_channels, s.out_height(), s.out_width()};
  const memory::dims strides{1, 1}, pad{s.pad_h, s.pad_w};
  const memory::desc x_any(x, f32, Tag::any), w_any(w, f32, Tag::any);
  const memory::desc y_fmt(y, f32, blocked ? Tag::nChw16c : Tag::any), b_desc({s.out_channels}, f32, Tag::x);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // one per call: safe from several threads
  dnnl::primitive_attr fwd_attr;  // not a copy of attr: dnnl handles share their object
  fwd_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (blocked && act == Activation::kRelu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    fwd_attr.set_post_ops(ops);
  }
  auto& engine = cpu_engine();
  const auto fwd_desc =
      blocked ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                                x_any, w_any, b_desc, y_fmt, strides, pad, pad)
              : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                                x_any, w_any, y_fmt, strides, pad, pad);
  dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, fwd_attr, engine);
  // The backward primitives take a forward without post-ops as their hint
  // (oneDNN 2.6 finds no implementation for a hint with a ReLU post-op).
  const dnnl::convolution_forward::primitive_desc hint_pd =
      blocked && act == Activation::kRelu ? dnnl::convolution_forward::primitive_desc(fwd_desc, attr, engine) : fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, x_any, w_any, y_fmt, strides, pad,
                                            pad),
      attr, engine, hint_pd);
  const auto bwd_weights_desc =
      blocked ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, x_any, w_any, b_desc,
                                                         y_fmt, strides, pad, pad)
              : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, x_any, w_any, y_fmt,
                                                         strides, pad, pad);
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd(bwd_weights_desc, attr, engine, hint_pd);
  auto p = std::make_unique<Primitives>(Primitives{fwd_pd, bwd_data_pd, bwd_weights_pd,
                                                   dnnl::convolution_forward(fwd_pd),
                                                   dnnl::convolution_backward_data(bwd_data_pd),
                                                   dnnl::convolution_backward_weights(bwd_weights_pd),
                                                   memory::desc(x, f32, Tag::nchw), memory::desc(w, f32, Tag::oihw),
                                                   blocked ? y_fmt : memory::desc(y, f32, Tag::nchw), b_desc});
  return p;
}

// The primitives for this shape (and sub-batch), created once; null when
// oneDNN cannot make them.
const Primitives* primitives(const Conv2dShape& s, bool blocked = false, Activation act = Activation::kNone) {
  using Key = std::tuple<int, int, int, int, int, int, int, int, int, bool, int>;
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<Primitives>> cache;
  const Key key{s.batch,    s.in_channels, s.height, s.width, s.out_channels, s.kernel_h,
                s.kernel_w, s.pad_h,       s.pad_w,  blocked, blocked ? static_cast<int>(act) : 0};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    std::unique_ptr<Primitives> p;
    try {
      p = create(s, blocked, act);
    } catch (const dnnl::error&) {
      p = nullptr;  // no implementation for this shape: the caller's GEMM path
    }
    it = cache.emplace(key, std::move(p)).first;
  }
  return it->second.get();
}

// Per-thread buffers for the blocked copies and the scratchpads, kept from
// call to call: fresh ones would cost a page fault per 4 KB every step
// (measured: conv2's backward on 128 samples 32 ms instead of 23).
class Buffers {
 public:
  memory get(int slot, const memory::desc& d) {
    auto& b = slots_[slot];
    const size_t bytes = d.get_size();
    if (b.size < bytes) {
      b.data.reset(static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
      b.size = bytes;
    }
    return memory(d, cpu_engine(), b.data.get());
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<char, Free> data;
    size_t size = 0;
  };
  Slot slots_[8];
};

thread_local Buffers buffers;
enum Slot { kX, kW, kY, kScratch, kDy, kDw, kDx, kW2 };

memory scratchpad(const memory::desc& d) { return buffers.get(kScratch, d); }

// `user` in the primitive's layout `want`: the same memory when the layouts
// agree, else a reordered copy.
memory as_layout(dnnl::stream& stream, const memory& user, const memory::desc& want, int slot) {
  if (user.get_desc() == want) return user;
  memory m = buffers.get(slot, want);
  dnnl::reorder(user, m).execute(stream, const_cast<memory&>(user), m);
  return m;
}

memory user_memory(const memory::desc& d, const float* p) {
  return memory(d, cpu_engine(), const_cast<float*>(p));
}


// The forward pass with p's primitives: x NCHW, y in p->y_user's layout; the
// bias added by the primitive when b is given.
bool run_forward(const Primitives* p, const float* x, const float* w, const float* b, float* y) {
  if (p == nullptr) return false;
  try {
    dnnl::stream stream(cpu_engine());
    memory ux = user_memory(p->x_nchw, x), uw = user_memory(p->w_oihw, w), uy = user_memory(p->y_user, y);
    memory bx = as_layout(stream, ux, p->fwd_pd.src_desc(), kX), bw = as_layout(stream, uw, p->fwd_pd.weights_desc(), kW);
    const bool y_blocked = p->fwd_pd.dst_desc() != p->y_user;
    memory by = y_blocked ? buffers.get(kY, p->fwd_pd.dst_desc()) : uy;
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, bx},
                                         {DNNL_ARG_WEIGHTS, bw},
                                         {DNNL_ARG_DST, by},
                                         {DNNL_ARG_SCRATCHPAD, scratchpad(p->fwd_pd.scratchpad_desc())}};
    if (b != nullptr) args.emplace(DNNL_ARG_BIAS, user_memory(p->bias, b));
    p->fwd.execute(stream, args);
    if (y_blocked) dnnl::reorder(by, uy).execute(stream, by, uy);
    stream.wait();
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

// The backward pass: dy in p->y_user's layout; dw (and db when given, by the
// primitive) overwritten; dx NCHW when not null.
bool run_backward(const Primitives* p, const float* x, const float* w, const float* dy, float* dx, float* dw,
                  float* db) {
  if (p == nullptr) return false;
  try {
    dnnl::stream stream(cpu_engine());
    memory ux = user_memory(p->x_nchw, x), udy = user_memory(p->y_user, dy), udw = user_memory(p->w_oihw, dw);
    const auto& wpd = p->bwd_weights_pd;
    memory bx = as_layout(stream, ux, wpd.src_desc(), kX), bdy = as_layout(stream, udy, wpd.diff_dst_desc(), kDy);
    const bool dw_blocked = wpd.diff_weights_desc() != p->w_oihw;
    memory bdw = dw_blocked ? buffers.get(kDw, wpd.diff_weights_desc()) : udw;
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, bx},
                                         {DNNL_ARG_DIFF_DST, bdy},
                                         {DNNL_ARG_DIFF_WEIGHTS, bdw},
                                         {DNNL_ARG_SCRATCHPAD, scratchpad(wpd.scratchpad_desc())}};
    if (db != nullptr) args.emplace(DNNL_ARG_DIFF_BIAS, user_memory(p->bias, db));
    p->bwd_weights.execute(stream, args);
    if (dw_blocked) dnnl::reorder(bdw, udw).execute(stream, bdw, udw);
    if (dx != nullptr) {
      const auto& dpd = p->bwd_data_pd;
      memory udx = user_memory(p->x_nchw, dx), uw = user_memory(p->w_oihw, w);
      memory bdy2 = dpd.diff_dst_desc() == bdy.get_desc() ? bdy : as_layout(stream, udy, dpd.diff_dst_desc(), kY);
      memory bw = as_layout(stream, uw, dpd.weights_desc(), kW2);
      const bool dx_blocked = dpd.diff_src_desc() != p->x_nchw;
      memory bdx = dx_blocked ? buffers.get(kDx, dpd.diff_src_desc()) : udx;
      p->bwd_data.execute(stream, {{DNNL_ARG_DIFF_DST, bdy2},
                                   {DNNL_ARG_WEIGHTS, bw},
                                   {DNNL_ARG_DIFF_SRC, bdx},
                                   {DNNL_ARG_SCRATCHPAD, scratchpad(dpd.scratchpad_desc())}});
      if (dx_blocked) dnnl::reorder(bdx, udx).execute(stream, bdx, udx);
    }
    stream.wait();
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

}  // namespace

bool onednn_conv_forward(const Conv2dShape& s, const float* x, const float* w, float* y) {
  keep_openmp_single_threaded();  // before creating: oneDNN sizes its primitives' thread count then
  return run_forward(primitives(s), x, w, nullptr, y);
}

bool onednn_conv_backward(const Conv2dShape& s, const float* x, const float* w, const float* dy, float* dx,
                          float* dw) {
  keep_openmp_single_threaded();
  return run_backward(primitives(s), x, w, dy, dx, dw, nullptr);
}

bool onednn_conv_blocked_available(const Conv2dShape& s, Activation act) {
  if (act != Activation::kNone && act != Activation::kRelu) return false;
  if (s.out_channels % kOnednnChannelBlock != 0) return false;
  keep_openmp_single_threaded();
  for (int batch : {1, 16}) {
    Conv2dShape sub = s;
    sub.batch = batch;
    const Primitives* p = primitives(sub, true, act);
    if (p == nullptr) return false;
    // Only oneDNN's JIT convolutions: where the blocked layout is not theirs
    // (no AVX-512: 8-channel blocks) it would take a reference or GEMM-based
    // implementation, slower than the NCHW path with its reorders.
    for (const std::string impl : {p->fwd_pd.impl_info_str(), p->bwd_data_pd.impl_info_str(),
                                   p->bwd_weights_pd.impl_info_str()})
      if (impl.rfind("jit:", 0) != 0) return false;
  }
  return true;
}

bool onednn_conv_forward_blocked(const Conv2dShape& s, const float* x, const float* w, const float* b, Activation act,
                                 float* y) {
  keep_openmp_single_threaded();
  return run_forward(primitives(s, true, act), x, w, b, y);
}

bool onednn_conv_backward_blocked(const Conv2dShape& s, Activation act, const float* x, const float* w,
                                  const float* dy, float* dx, float* dw, float* db) {
  keep_openmp_single_threaded();
  return run_backward(primitives(s, true, act), x, w, dy, dx, dw, db);
}

}  // namespace swept::trainer::cpu
