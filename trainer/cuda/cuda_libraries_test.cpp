// Loading cuBLAS, cuDNN and NCCL at run time (cuda_libraries.h, nccl_api.h):
// no GPU or driver is needed to open them, so these run everywhere the CUDA
// backend is built (CI and this machine have the libraries installed).
#include <doctest/doctest.h>

#include "trainer/cuda/check.h"
#include "trainer/cuda/cuda_libraries.h"
#include "trainer/cuda/nccl_api.h"

namespace swept::cuda {
namespace {

TEST_CASE("trainer/cuda: cuda libraries: the installed cuBLAS and cuDNN load and every function is bound") {
  CublasApi blas;
  CudnnApi dnn;
  Status s = load_cuda_libraries_from(default_cublas_soname(), default_cudnn_soname(), &blas, &dnn);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK((blas.cublasSgemm != nullptr));
  CHECK((dnn.cudnnConvolutionBackwardFilter != nullptr));
  CHECK(dnn.cudnnGetVersion() / 10000 == CUDNN_MAJOR);
  CHECK(std::string(dnn.cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)).size() > 0);
}

TEST_CASE("trainer/cuda: cuda libraries: a missing cuDNN or cuBLAS is kMissingDependency naming it and the fix") {
  CublasApi blas;
  CudnnApi dnn;
  Status s = load_cuda_libraries_from(default_cublas_soname(), "/nonexistent/libcudnn.so.9", &blas, &dnn);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kMissingDependency);
  CHECK(s.message().find("cuDNN 9 is needed for --device=cuda but /nonexistent/libcudnn.so.9") == 0);
  CHECK(s.message().find("LD_LIBRARY_PATH") != std::string::npos);
  CHECK(s.message().find("--device=cpu") != std::string::npos);

  s = load_cuda_libraries_from("libcublas-not-here.so", default_cudnn_soname(), &blas, &dnn);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("libcublas-not-here.so could not be loaded") != std::string::npos);
}

TEST_CASE("trainer/cuda: cuda libraries: a library without the needed functions is refused, naming them") {
  CublasApi blas;
  CudnnApi dnn;
  // libm is a real shared library with none of cuDNN's functions.
  Status s = load_cuda_libraries_from(default_cublas_soname(), "libm.so.6", &blas, &dnn);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kMissingDependency);
  CHECK(s.message().find("cudnnConvolutionForward") != std::string::npos);
}

TEST_CASE("trainer/cuda: nccl: the installed NCCL loads, and a missing one is kMissingDependency naming it") {
  NcclApi api{};
  Status s = load_nccl_from("libnccl.so.2", &api);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  int version = 0;
  CHECK(api.get_version(&version) == ncclSuccess);
  CHECK(version >= 20000);

  NcclApi none{};
  s = load_nccl_from("/nonexistent/libnccl.so.2", &none);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kMissingDependency);
  CHECK(s.message().find("NCCL is needed for replicas on several GPUs") == 0);
}

TEST_CASE("trainer/cuda: cuDNN 9 statuses map to the out-of-memory and missing-library exits") {
  CHECK(cudnn_status(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, "c", "f", 1).code() ==
        StatusCode::kResourceExhausted);
  for (cudnnStatus_t st : {CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED, CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH,
                           CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE}) {
    CAPTURE(static_cast<int>(st));
    Status s = cudnn_status(st, "cudnnConvolutionForward(...)", "trainer/cuda/dnn.cpp", 7);
    CHECK(s.code() == StatusCode::kMissingDependency);
    CHECK(s.message().find("libcudnn_cnn") != std::string::npos);
  }
  CHECK(cudnn_status(CUDNN_STATUS_BAD_PARAM, "c", "f", 1).code() == StatusCode::kInternal);
}

}  // namespace
}  // namespace swept::cuda
