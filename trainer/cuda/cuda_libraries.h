// cuBLAS and cuDNN, opened at run time with dlopen (as nccl_api.h does NCCL).
//
// Why: swept-train must start, and train on the CPU, on machines without
// these libraries (or with other major versions of them, e.g. a PyTorch
// wheel's); and when --device=cuda needs them and they are missing, the
// trainer must say which library, why, and what to install (exit 8) rather
// than die in the dynamic loader before main(). With the CUDA runtime linked
// statically, swept-train has no CUDA shared-library dependency at all.
//
// The headers are included for types and declarations only. Each table member
// has the type of the header's declaration (decltype), so calls are
// type-checked exactly as direct calls would be: `cudnn_api().cudnnCreate(&h)`.
// Thread safety: load_cuda_libraries() may be called from any thread (it loads
// once); the tables are immutable after a successful load.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <string>

#include "common/status.h"

namespace swept::cuda {

#define SWEPT_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate)                 \
  X(cublasDestroy)                \
  X(cublasSetStream)              \
  X(cublasSetWorkspace)           \
  X(cublasSetMathMode)            \
  X(cublasSgemm)                  \
  X(cublasGetStatusString)

#define SWEPT_CUDNN_FUNCTIONS(X)                   \
  X(cudnnGetVersion)                               \
  X(cudnnGraphVersionCheck)                        \
  X(cudnnOpsVersionCheck)                          \
  X(cudnnCnnVersionCheck)                          \
  X(cudnnGetErrorString)                           \
  X(cudnnCreate)                                   \
  X(cudnnDestroy)                                  \
  X(cudnnSetStream)                                \
  X(cudnnCreateTensorDescriptor)                   \
  X(cudnnDestroyTensorDescriptor)                  \
  X(cudnnSetTensor4dDescriptor)                    \
  X(cudnnCreateFilterDescriptor)                   \
  X(cudnnDestroyFilterDescriptor)                  \
  X(cudnnSetFilter4dDescriptor)                    \
  X(cudnnCreateConvolutionDescriptor)              \
  X(cudnnDestroyConvolutionDescriptor)             \
  X(cudnnSetConvolution2dDescriptor)               \
  X(cudnnSetConvolutionMathType)                   \
  X(cudnnGetConvolution2dForwardOutputDim)         \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount)   \
  X(cudnnGetConvolutionForwardAlgorithm_v7)        \
  X(cudnnGetConvolutionForwardWorkspaceSize)       \
  X(cudnnConvolutionForward)                       \
  X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount) \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)   \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize)  \
  X(cudnnConvolutionBackwardData)                  \
  X(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount) \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize) \
  X(cudnnConvolutionBackwardFilter)                \
  X(cudnnCreatePoolingDescriptor)                  \
  X(cudnnDestroyPoolingDescriptor)                 \
  X(cudnnSetPooling2dDescriptor)                   \
  X(cudnnPoolingForward)                           \
  X(cudnnPoolingBackward)

#define SWEPT_DECLARE_MEMBER(name) decltype(&::name) name = nullptr;

struct CublasApi {
  SWEPT_CUBLAS_FUNCTIONS(SWEPT_DECLARE_MEMBER)
};

struct CudnnApi {
  SWEPT_CUDNN_FUNCTIONS(SWEPT_DECLARE_MEMBER)
};

#undef SWEPT_DECLARE_MEMBER

// Loads libcublas.so.<major> and libcudnn.so.9 (or the paths in
// SWEPT_CUBLAS_LIBRARY / SWEPT_CUDNN_LIBRARY) once, and has cuDNN load and
// check its sub-libraries now (cudnn{Graph,Ops,Cnn}VersionCheck), instead of
// lazily at the first convolution. Errors: kMissingDependency (exit 8) naming
// the library or sub-library, the reason and what to install.
Status load_cuda_libraries();

// The loading itself, without the process-wide state (for tests): opens the two
// libraries at these paths (sonames or files) and fills the tables.
Status load_cuda_libraries_from(const std::string& cublas_path, const std::string& cudnn_path,
                                CublasApi* cublas, CudnnApi* cudnn);
std::string default_cublas_soname();  // "libcublas.so.13"
std::string default_cudnn_soname();   // "libcudnn.so.9"

// The tables; only valid after load_cuda_libraries() returned ok.
const CublasApi& cublas_api();
const CudnnApi& cudnn_api();

// Whether the libraries are loaded (check.cpp uses their error strings if so).
bool cuda_libraries_loaded();

}  // namespace swept::cuda
