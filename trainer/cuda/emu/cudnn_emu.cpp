// The cuDNN stand-in of the emulated build (libswept_cudnn_emu.so, opened by
// cuda_libraries.cpp in place of libcudnn.so.9).
//
//  - Descriptors are the real cuDNN's: every descriptor call is forwarded to
//    the real libcudnn.so.9 (SWEPT_REAL_CUDNN), which needs no GPU for them,
//    so a shape or parameter the real library refuses is refused here too;
//    the computations read the shapes back with cuDNN's own getters.
//  - Convolution (forward, backward data, backward filter) and max pooling
//    (forward, backward) are computed from their documented definitions on
//    the handle's stream (im2col over the caller's workspace, then OpenBLAS).
//  - The algorithm heuristics return a fixed list that exercises the
//    caller's choice: a TF32 (tensor-op) entry, a CUDNN_DEFAULT_MATH entry
//    (which permits TF32 on A100 and later), a non-deterministic one, one
//    whose workspace fits no budget, then a deterministic FMA-math one, and
//    an unsupported one. An (algorithm, math type) pair the heuristics did
//    not offer is CUDNN_STATUS_NOT_SUPPORTED at the workspace query and at the
//    call, and a workspace smaller than the pair's is CUDNN_STATUS_BAD_PARAM.
//  - SWEPT_CUDNN_EMU_MISSING=cnn|ops|graph plays a cuDNN install without that
//    sub-library: its version check and its functions fail with
//    CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED, as the real shim's lazy loading does.
#include <cblas.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "trainer/cuda/emu/emu.h"

namespace {

#define SWEPT_REAL_CUDNN_FUNCTIONS(X)      \
  X(cudnnGetVersion)                       \
  X(cudnnGetErrorString)                   \
  X(cudnnGraphVersionCheck)                \
  X(cudnnOpsVersionCheck)                  \
  X(cudnnCnnVersionCheck)                  \
  X(cudnnCreateTensorDescriptor)           \
  X(cudnnDestroyTensorDescriptor)          \
  X(cudnnSetTensor4dDescriptor)            \
  X(cudnnGetTensor4dDescriptor)            \
  X(cudnnCreateFilterDescriptor)           \
  X(cudnnDestroyFilterDescriptor)          \
  X(cudnnSetFilter4dDescriptor)            \
  X(cudnnGetFilter4dDescriptor)            \
  X(cudnnCreateConvolutionDescriptor)      \
  X(cudnnDestroyConvolutionDescriptor)     \
  X(cudnnSetConvolution2dDescriptor)       \
  X(cudnnGetConvolution2dDescriptor)       \
  X(cudnnSetConvolutionMathType)           \
  X(cudnnGetConvolutionMathType)           \
  X(cudnnGetConvolution2dForwardOutputDim) \
  X(cudnnCreatePoolingDescriptor)          \
  X(cudnnDestroyPoolingDescriptor)         \
  X(cudnnSetPooling2dDescriptor)           \
  X(cudnnGetPooling2dDescriptor)

struct Real {
#define SWEPT_MEMBER(name) decltype(&::name) name = nullptr;
  SWEPT_REAL_CUDNN_FUNCTIONS(SWEPT_MEMBER)
#undef SWEPT_MEMBER
};

const Real& real() {
  static const Real r = [] {
    Real out;
    void* lib = dlopen(SWEPT_REAL_CUDNN, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      std::fprintf(stderr, "cuDNN emulation: cannot open the real cuDNN %s: %s\n", SWEPT_REAL_CUDNN, dlerror());
      std::abort();
    }
#define SWEPT_BIND(name)                                                   \
  out.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));      \
  if (!out.name) {                                                         \
    std::fprintf(stderr, "cuDNN emulation: %s lacks %s\n", SWEPT_REAL_CUDNN, #name); \
    std::abort();                                                          \
  }
    SWEPT_REAL_CUDNN_FUNCTIONS(SWEPT_BIND)
#undef SWEPT_BIND
    return out;
  }();
  return r;
}

bool missing(const char* sub) {
  const char* v = std::getenv("SWEPT_CUDNN_EMU_MISSING");
  return v && std::strcmp(v, sub) == 0;
}

struct Handle {
  cudaStream_t stream = nullptr;  // cuDNN's default: the legacy stream
};
Handle* as_handle(cudnnHandle_t h) { return reinterpret_cast<Handle*>(h); }

// ---- shapes read back from the real descriptors ----

struct Tensor {
  int n = 0, c = 0, h = 0, w = 0;
};

cudnnStatus_t read(cudnnTensorDescriptor_t d, Tensor* t) {
  cudnnDataType_t type;
  int ns, cs, hs, ws;
  cudnnStatus_t st = real().cudnnGetTensor4dDescriptor(d, &type, &t->n, &t->c, &t->h, &t->w, &ns, &cs, &hs, &ws);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  // The emulation computes packed NCHW float tensors, the layout swept uses.
  if (type != CUDNN_DATA_FLOAT || ws != 1 || hs != t->w || cs != t->h * t->w || ns != t->c * t->h * t->w)
    return CUDNN_STATUS_NOT_SUPPORTED;
  return CUDNN_STATUS_SUCCESS;
}

struct Conv {
  Tensor x, y;
  int k = 0, c = 0, r = 0, s = 0;
  int pad_h = 0, pad_w = 0, u = 1, v = 1, dil_h = 1, dil_w = 1;
  bool flip = false;  // CUDNN_CONVOLUTION flips the filter; CROSS_CORRELATION does not
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t col_floats() const { return size_t(c) * r * s * y.h * y.w; }
};

cudnnStatus_t read(cudnnTensorDescriptor_t xd, cudnnFilterDescriptor_t wd, cudnnConvolutionDescriptor_t cd,
                   cudnnTensorDescriptor_t yd, Conv* cv) {
  if (missing("cnn")) return CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED;
  cudnnStatus_t st = read(xd, &cv->x);
  if (st == CUDNN_STATUS_SUCCESS) st = read(yd, &cv->y);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  cudnnDataType_t type, compute;
  cudnnTensorFormat_t format;
  st = real().cudnnGetFilter4dDescriptor(wd, &type, &format, &cv->k, &cv->c, &cv->r, &cv->s);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (type != CUDNN_DATA_FLOAT || format != CUDNN_TENSOR_NCHW) return CUDNN_STATUS_NOT_SUPPORTED;
  cudnnConvolutionMode_t mode;
  st = real().cudnnGetConvolution2dDescriptor(cd, &cv->pad_h, &cv->pad_w, &cv->u, &cv->v, &cv->dil_h, &cv->dil_w,
                                              &mode, &compute);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  cv->flip = mode == CUDNN_CONVOLUTION;
  st = real().cudnnGetConvolutionMathType(cd, &cv->math);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  // The shapes must agree as cuDNN's output-dimension formula says.
  auto out = [](int in, int pad, int filter, int dil, int stride) {
    return (in + 2 * pad - ((filter - 1) * dil + 1)) / stride + 1;
  };
  if (cv->x.c != cv->c || cv->y.c != cv->k || cv->y.n != cv->x.n ||
      cv->y.h != out(cv->x.h, cv->pad_h, cv->r, cv->dil_h, cv->u) ||
      cv->y.w != out(cv->x.w, cv->pad_w, cv->s, cv->dil_w, cv->v))
    return CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}

// ---- the heuristics' list ----

struct Entry {
  int algo;
  cudnnMathType_t math;
  cudnnStatus_t status;
  cudnnDeterminism_t determinism;
  bool huge;  // a workspace no budget holds
};

// Per pass: tensor-op, default math, non-deterministic, huge, the usable one, unsupported.
std::vector<Entry> entries(int pass) {
  static const int algos[3][6] = {
      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
       CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
       CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD},
      {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
       CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
       CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD},
      {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED}};
  const int* a = algos[pass];
  return {{a[0], CUDNN_TENSOR_OP_MATH, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, false},
          {a[1], CUDNN_DEFAULT_MATH, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, false},
          {a[2], CUDNN_FMA_MATH, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC, false},
          {a[3], CUDNN_FMA_MATH, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, true},
          {a[4], CUDNN_FMA_MATH, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, false},
          {a[5], CUDNN_FMA_MATH, CUDNN_STATUS_NOT_SUPPORTED, CUDNN_DETERMINISTIC, false}};
}

size_t entry_bytes(const Entry& e, const Conv& cv) {
  return e.huge ? (size_t(1) << 40) : cv.col_floats() * sizeof(float);
}

template <typename Perf, typename Algo>
cudnnStatus_t heuristics(int pass, const Conv& cv, int requested, int* returned, Perf* out) {
  auto list = entries(pass);
  int n = std::min<int>(requested, static_cast<int>(list.size()));
  for (int i = 0; i < n; ++i) {
    out[i] = Perf{};
    out[i].algo = static_cast<Algo>(list[i].algo);
    out[i].status = list[i].status;
    out[i].time = 0.1f * float(i + 1);
    out[i].memory = entry_bytes(list[i], cv);
    out[i].determinism = list[i].determinism;
    out[i].mathType = list[i].math;
  }
  *returned = n;
  return CUDNN_STATUS_SUCCESS;
}

// The workspace of (algorithm, the descriptor's math type) if the heuristics offer that pair.
cudnnStatus_t pair_bytes(int pass, int algo, const Conv& cv, size_t* bytes) {
  for (const Entry& e : entries(pass)) {
    if (e.algo == algo && e.math == cv.math && e.status == CUDNN_STATUS_SUCCESS) {
      *bytes = entry_bytes(e, cv);
      return CUDNN_STATUS_SUCCESS;
    }
  }
  return CUDNN_STATUS_NOT_SUPPORTED;
}

cudnnStatus_t check_call(int pass, int algo, const Conv& cv, const void* workspace, size_t workspace_bytes) {
  size_t need = 0;
  cudnnStatus_t st = pair_bytes(pass, algo, cv, &need);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (workspace_bytes < need || (need > 0 && !workspace)) return CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}

// ---- the definitions ----

// col[(c·R + r)·S + s][p·Q + q] = x[c][p·u - pad_h + r'·dil_h][q·v - pad_w + s'·dil_w]
// (0 outside), r' = R-1-r when the filter is flipped.
void im2col(const Conv& cv, const float* x, float* col) {
  const int P = cv.y.h, Q = cv.y.w;
  for (int c = 0; c < cv.c; ++c)
    for (int r = 0; r < cv.r; ++r)
      for (int s = 0; s < cv.s; ++s) {
        const int rr = cv.flip ? cv.r - 1 - r : r, ss = cv.flip ? cv.s - 1 - s : s;
        float* row = col + (size_t(c * cv.r + r) * cv.s + s) * P * Q;
        for (int p = 0; p < P; ++p) {
          const int h = p * cv.u - cv.pad_h + rr * cv.dil_h;
          for (int q = 0; q < Q; ++q) {
            const int w = q * cv.v - cv.pad_w + ss * cv.dil_w;
            row[p * Q + q] = (h >= 0 && h < cv.x.h && w >= 0 && w < cv.x.w)
                                 ? x[(size_t(c) * cv.x.h + h) * cv.x.w + w]
                                 : 0.f;
          }
        }
      }
}

// The adjoint of im2col: dx[c][h][w] += every col entry that im2col read from it.
void col2im(const Conv& cv, const float* col, float* dx) {
  const int P = cv.y.h, Q = cv.y.w;
  for (int c = 0; c < cv.c; ++c)
    for (int r = 0; r < cv.r; ++r)
      for (int s = 0; s < cv.s; ++s) {
        const int rr = cv.flip ? cv.r - 1 - r : r, ss = cv.flip ? cv.s - 1 - s : s;
        const float* row = col + (size_t(c * cv.r + r) * cv.s + s) * P * Q;
        for (int p = 0; p < P; ++p) {
          const int h = p * cv.u - cv.pad_h + rr * cv.dil_h;
          if (h < 0 || h >= cv.x.h) continue;
          for (int q = 0; q < Q; ++q) {
            const int w = q * cv.v - cv.pad_w + ss * cv.dil_w;
            if (w >= 0 && w < cv.x.w) dx[(size_t(c) * cv.x.h + h) * cv.x.w + w] += row[p * Q + q];
          }
        }
      }
}

// out = alpha·result + beta·out (beta 0: out's old values, NaN included, are ignored).
void blend(float alpha, const float* result, float beta, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = alpha * result[i] + (beta == 0.f ? 0.f : beta * out[i]);
}

cudnnStatus_t enqueue(cudnnHandle_t handle, swept::cuda::emu::Work work) {
  if (!handle) return CUDNN_STATUS_BAD_PARAM;
  return swept::cuda::emu::enqueue(as_handle(handle)->stream, std::move(work)) == cudaSuccess
             ? CUDNN_STATUS_SUCCESS
             : CUDNN_STATUS_EXECUTION_FAILED;
}

struct Pool {
  Tensor x, y;
  int wh = 0, ww = 0, ph = 0, pw = 0, sh = 1, sw = 1;
};

cudnnStatus_t read(cudnnPoolingDescriptor_t pd, cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t yd, Pool* p) {
  if (missing("ops")) return CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED;
  cudnnPoolingMode_t mode;
  cudnnNanPropagation_t nan;
  cudnnStatus_t st = real().cudnnGetPooling2dDescriptor(pd, &mode, &nan, &p->wh, &p->ww, &p->ph, &p->pw, &p->sh, &p->sw);
  if (st == CUDNN_STATUS_SUCCESS) st = read(xd, &p->x);
  if (st == CUDNN_STATUS_SUCCESS) st = read(yd, &p->y);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (mode != CUDNN_POOLING_MAX && mode != CUDNN_POOLING_MAX_DETERMINISTIC) return CUDNN_STATUS_NOT_SUPPORTED;
  if (p->x.n != p->y.n || p->x.c != p->y.c) return CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}

// The first position of the window of output (plane, i, j) holding its maximum.
size_t window_argmax(const Pool& p, const float* plane, int i, int j) {
  size_t best = SIZE_MAX;
  for (int a = 0; a < p.wh; ++a)
    for (int b = 0; b < p.ww; ++b) {
      const int h = i * p.sh - p.ph + a, w = j * p.sw - p.pw + b;
      if (h < 0 || h >= p.x.h || w < 0 || w >= p.x.w) continue;
      const size_t at = size_t(h) * p.x.w + w;
      if (best == SIZE_MAX || plane[at] > plane[best]) best = at;
    }
  return best;
}

}  // namespace

extern "C" {

// ---- forwarded to the real cuDNN ----

size_t cudnnGetVersion(void) { return real().cudnnGetVersion(); }
const char* cudnnGetErrorString(cudnnStatus_t status) { return real().cudnnGetErrorString(status); }
cudnnStatus_t cudnnGraphVersionCheck(void) {
  return missing("graph") ? CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED : real().cudnnGraphVersionCheck();
}
cudnnStatus_t cudnnOpsVersionCheck(void) {
  return missing("ops") ? CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED : real().cudnnOpsVersionCheck();
}
cudnnStatus_t cudnnCnnVersionCheck(void) {
  return missing("cnn") ? CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED : real().cudnnCnnVersionCheck();
}
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) { return real().cudnnCreateTensorDescriptor(d); }
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) { return real().cudnnDestroyTensorDescriptor(d); }
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n,
                                         int c, int h, int w) {
  return real().cudnnSetTensor4dDescriptor(d, f, t, n, c, h, w);
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) { return real().cudnnCreateFilterDescriptor(d); }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) { return real().cudnnDestroyFilterDescriptor(d); }
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k,
                                         int c, int h, int w) {
  return real().cudnnSetFilter4dDescriptor(d, t, f, k, c, h, w);
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  return real().cudnnCreateConvolutionDescriptor(d);
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  return real().cudnnDestroyConvolutionDescriptor(d);
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dil_h, int dil_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  return real().cudnnSetConvolution2dDescriptor(d, pad_h, pad_w, u, v, dil_h, dil_w, mode, compute);
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math) {
  return real().cudnnSetConvolutionMathType(d, math);
}
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t cd,
                                                    const cudnnTensorDescriptor_t xd,
                                                    const cudnnFilterDescriptor_t wd, int* n, int* c, int* h,
                                                    int* w) {
  return real().cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, n, c, h, w);
}
cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t* d) { return real().cudnnCreatePoolingDescriptor(d); }
cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d) { return real().cudnnDestroyPoolingDescriptor(d); }
cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t nan, int wh, int ww, int ph, int pw, int sh,
                                          int sw) {
  return real().cudnnSetPooling2dDescriptor(d, mode, nan, wh, ww, ph, pw, sh, sw);
}

// ---- the handle ----

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  if (!handle) return CUDNN_STATUS_BAD_PARAM;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return CUDNN_STATUS_NOT_INITIALIZED;
  *handle = reinterpret_cast<cudnnHandle_t>(new Handle());
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete as_handle(handle);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUDNN_STATUS_BAD_PARAM;
  as_handle(handle)->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

// ---- convolution: heuristics and workspaces ----

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t, int* count) {
  *count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  return missing("cnn") ? CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED : CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t, int* count) {
  *count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  return missing("cnn") ? CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED : CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t, int* count) {
  *count = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  return missing("cnn") ? CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED : CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t xd,
                                                     const cudnnFilterDescriptor_t wd,
                                                     const cudnnConvolutionDescriptor_t cd,
                                                     const cudnnTensorDescriptor_t yd, int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf) {
  Conv cv;
  cudnnStatus_t st = read(xd, wd, cd, yd, &cv);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return heuristics<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(0, cv, requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t, const cudnnFilterDescriptor_t wd,
                                                          const cudnnTensorDescriptor_t dyd,
                                                          const cudnnConvolutionDescriptor_t cd,
                                                          const cudnnTensorDescriptor_t dxd, int requested,
                                                          int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  Conv cv;
  cudnnStatus_t st = read(dxd, wd, cd, dyd, &cv);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return heuristics<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(1, cv, requested, returned,
                                                                                      perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t xd,
                                                            const cudnnTensorDescriptor_t dyd,
                                                            const cudnnConvolutionDescriptor_t cd,
                                                            const cudnnFilterDescriptor_t dwd, int requested,
                                                            int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  Conv cv;
  cudnnStatus_t st = read(xd, dwd, cd, dyd, &cv);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return heuristics<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(2, cv, requested,
                                                                                          returned, perf);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t, const cudnnTensorDescriptor_t xd,
                                                      const cudnnFilterDescriptor_t wd,
                                                      const cudnnConvolutionDescriptor_t cd,
                                                      const cudnnTensorDescriptor_t yd,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
  Conv cv;
  cudnnStatus_t st = read(xd, wd, cd, yd, &cv);
  return st != CUDNN_STATUS_SUCCESS ? st : pair_bytes(0, algo, cv, bytes);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t, const cudnnFilterDescriptor_t wd,
                                                           const cudnnTensorDescriptor_t dyd,
                                                           const cudnnConvolutionDescriptor_t cd,
                                                           const cudnnTensorDescriptor_t dxd,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
  Conv cv;
  cudnnStatus_t st = read(dxd, wd, cd, dyd, &cv);
  return st != CUDNN_STATUS_SUCCESS ? st : pair_bytes(1, algo, cv, bytes);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t, const cudnnTensorDescriptor_t xd,
                                                             const cudnnTensorDescriptor_t dyd,
                                                             const cudnnConvolutionDescriptor_t cd,
                                                             const cudnnFilterDescriptor_t dwd,
                                                             cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
  Conv cv;
  cudnnStatus_t st = read(xd, dwd, cd, dyd, &cv);
  return st != CUDNN_STATUS_SUCCESS ? st : pair_bytes(2, algo, cv, bytes);
}

// ---- convolution: the three passes ----

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xd,
                                      const void* x, const cudnnFilterDescriptor_t wd, const void* w,
                                      const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo,
                                      void* workspace, size_t workspace_bytes, const void* beta,
                                      const cudnnTensorDescriptor_t yd, void* y) {
  Conv cv;
  cudnnStatus_t st = read(xd, wd, cd, yd, &cv);
  if (st == CUDNN_STATUS_SUCCESS) st = check_call(0, algo, cv, workspace, workspace_bytes);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  auto* col = static_cast<float*>(workspace);
  auto* X = static_cast<const float*>(x);
  auto* W = static_cast<const float*>(w);
  auto* Y = static_cast<float*>(y);
  return enqueue(handle, [=] {
    const int PQ = cv.y.h * cv.y.w, CRS = cv.c * cv.r * cv.s;
    std::vector<float> out(size_t(cv.k) * PQ);
    for (int n = 0; n < cv.x.n; ++n) {
      im2col(cv, X + size_t(n) * cv.x.c * cv.x.h * cv.x.w, col);
      // out[K][PQ] = W[K][CRS] · col[CRS][PQ]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cv.k, PQ, CRS, 1.f, W, CRS, col, PQ, 0.f, out.data(),
                  PQ);
      blend(al, out.data(), be, Y + size_t(n) * cv.k * PQ, out.size());
    }
  });
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t wd, const void* w,
                                           const cudnnTensorDescriptor_t dyd, const void* dy,
                                           const cudnnConvolutionDescriptor_t cd,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workspace,
                                           size_t workspace_bytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxd, void* dx) {
  Conv cv;
  cudnnStatus_t st = read(dxd, wd, cd, dyd, &cv);
  if (st == CUDNN_STATUS_SUCCESS) st = check_call(1, algo, cv, workspace, workspace_bytes);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  auto* col = static_cast<float*>(workspace);
  auto* W = static_cast<const float*>(w);
  auto* DY = static_cast<const float*>(dy);
  auto* DX = static_cast<float*>(dx);
  return enqueue(handle, [=] {
    const int PQ = cv.y.h * cv.y.w, CRS = cv.c * cv.r * cv.s;
    const size_t image = size_t(cv.x.c) * cv.x.h * cv.x.w;
    std::vector<float> grad(image);
    for (int n = 0; n < cv.x.n; ++n) {
      // col[CRS][PQ] = Wᵀ[CRS][K] · dy[K][PQ], then scattered back onto the image.
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CRS, PQ, cv.k, 1.f, W, CRS,
                  DY + size_t(n) * cv.k * PQ, PQ, 0.f, col, PQ);
      std::fill(grad.begin(), grad.end(), 0.f);
      col2im(cv, col, grad.data());
      blend(al, grad.data(), be, DX + size_t(n) * image, image);
    }
  });
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t xd, const void* x,
                                             const cudnnTensorDescriptor_t dyd, const void* dy,
                                             const cudnnConvolutionDescriptor_t cd,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* workspace,
                                             size_t workspace_bytes, const void* beta,
                                             const cudnnFilterDescriptor_t dwd, void* dw) {
  Conv cv;
  cudnnStatus_t st = read(xd, dwd, cd, dyd, &cv);
  if (st == CUDNN_STATUS_SUCCESS) st = check_call(2, algo, cv, workspace, workspace_bytes);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  auto* col = static_cast<float*>(workspace);
  auto* X = static_cast<const float*>(x);
  auto* DY = static_cast<const float*>(dy);
  auto* DW = static_cast<float*>(dw);
  return enqueue(handle, [=] {
    const int PQ = cv.y.h * cv.y.w, CRS = cv.c * cv.r * cv.s;
    std::vector<float> grad(size_t(cv.k) * CRS);
    for (int n = 0; n < cv.x.n; ++n) {
      im2col(cv, X + size_t(n) * cv.x.c * cv.x.h * cv.x.w, col);
      // grad[K][CRS] += dy[K][PQ] · colᵀ[PQ][CRS]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cv.k, CRS, PQ, 1.f, DY + size_t(n) * cv.k * PQ, PQ, col,
                  PQ, n == 0 ? 0.f : 1.f, grad.data(), CRS);
    }
    blend(al, grad.data(), be, DW, grad.size());
  });
}

// ---- max pooling ----

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t pd, const void* alpha,
                                  const cudnnTensorDescriptor_t xd, const void* x, const void* beta,
                                  const cudnnTensorDescriptor_t yd, void* y) {
  Pool p;
  cudnnStatus_t st = read(pd, xd, yd, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  auto* X = static_cast<const float*>(x);
  auto* Y = static_cast<float*>(y);
  return enqueue(handle, [=] {
    const size_t planes = size_t(p.x.n) * p.x.c, in = size_t(p.x.h) * p.x.w, out = size_t(p.y.h) * p.y.w;
    std::vector<float> result(out);
    for (size_t pl = 0; pl < planes; ++pl) {
      for (int i = 0; i < p.y.h; ++i)
        for (int j = 0; j < p.y.w; ++j) {
          size_t at = window_argmax(p, X + pl * in, i, j);
          result[size_t(i) * p.y.w + j] = at == SIZE_MAX ? 0.f : X[pl * in + at];
        }
      blend(al, result.data(), be, Y + pl * out, out);
    }
  });
}

cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t pd, const void* alpha,
                                   const cudnnTensorDescriptor_t yd, const void*, const cudnnTensorDescriptor_t,
                                   const void* dy, const cudnnTensorDescriptor_t xd, const void* x,
                                   const void* beta, const cudnnTensorDescriptor_t, void* dx) {
  Pool p;
  cudnnStatus_t st = read(pd, xd, yd, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  auto* X = static_cast<const float*>(x);
  auto* DY = static_cast<const float*>(dy);
  auto* DX = static_cast<float*>(dx);
  return enqueue(handle, [=] {
    const size_t planes = size_t(p.x.n) * p.x.c, in = size_t(p.x.h) * p.x.w, out = size_t(p.y.h) * p.y.w;
    std::vector<float> grad(in);
    for (size_t pl = 0; pl < planes; ++pl) {
      std::fill(grad.begin(), grad.end(), 0.f);
      for (int i = 0; i < p.y.h; ++i)
        for (int j = 0; j < p.y.w; ++j) {
          size_t at = window_argmax(p, X + pl * in, i, j);  // the deterministic mode's one position
          if (at != SIZE_MAX) grad[at] += DY[pl * out + size_t(i) * p.y.w + j];
        }
      blend(al, grad.data(), be, DX + pl * in, in);
    }
  });
}

}  // extern "C"
