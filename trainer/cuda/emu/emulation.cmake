# -DSWEPT_CUDA=EMULATED: trainer/cuda's own sources built for the host CPU, so
# the CUDA backend and its whole GPU test suite run where there is no GPU (CI).
# Included by trainer/cuda/CMakeLists.txt; what is emulated, and how that
# differs from a GPU, is in trainer/cuda/README.md.
#
# Needs the CUDA runtime, cuBLAS, cuDNN 9 and NCCL headers (types and
# declarations only), the real libcudnn.so.9 (its descriptor functions run
# without a GPU and are used as they are), OpenBLAS and Boost.Context.
# Builds:
#   swept_cudart_emu  (shared) the CUDA runtime subset, streams, events, graphs
#                     and the grid engine; swept-train links it in place of
#                     the static CUDA runtime
#   swept_cublas_emu, swept_cudnn_emu, swept_nccl_emu  (shared) the stand-ins,
#                     opened by dlopen exactly like the real libraries; they
#                     are the default paths of an emulated build, and
#                     SWEPT_CUBLAS_LIBRARY / SWEPT_CUDNN_LIBRARY /
#                     SWEPT_NCCL_LIBRARY still override them.
# SWEPT_CUDA_EMU_THREADS=ON runs a block's CUDA threads as OS threads instead
# of fibers (for ThreadSanitizer: scripts/test-cuda-tsan.sh).
option(SWEPT_CUDA_EMU_THREADS "CUDA emulation: a block's threads as OS threads (for TSan)" OFF)
# A sanitizer for trainer/cuda, its emulation and its GPU tests only (e.g.
# thread): the CPU backend's ifunc resolvers (target_clones) run before the
# sanitizer's runtime is up and cannot be instrumented, so SWEPT_SANITIZE,
# which instruments everything, is not usable for this.
set(SWEPT_CUDA_EMU_SANITIZE "" CACHE STRING "Sanitizer for trainer/cuda and its emulation only, e.g. thread")
function(swept_cuda_emu_sanitize target)
  if(SWEPT_CUDA_EMU_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${SWEPT_CUDA_EMU_SANITIZE} -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${SWEPT_CUDA_EMU_SANITIZE})
  endif()
endfunction()

find_path(SWEPT_CUDA_INCLUDE_DIR cuda_runtime_api.h
  HINTS ${CUDAToolkit_ROOT} ENV CUDAToolkit_ROOT ENV CUDA_PATH ENV CUDA_HOME
  PATH_SUFFIXES include PATHS /usr/local/cuda/include /usr/local/cuda)
find_path(SWEPT_CUDNN_INCLUDE_DIR cudnn.h HINTS ${SWEPT_CUDA_INCLUDE_DIR} ENV CUDNN_PATH PATH_SUFFIXES include)
find_library(SWEPT_CUDNN_SO cudnn HINTS ${SWEPT_CUDA_INCLUDE_DIR}/../lib64 ENV CUDNN_PATH PATH_SUFFIXES lib64 lib
  PATHS /usr/local/cuda/lib64)
find_path(SWEPT_NCCL_INCLUDE_DIR nccl.h HINTS ${SWEPT_CUDA_INCLUDE_DIR} ENV NCCL_HOME PATH_SUFFIXES include)
find_path(SWEPT_BOOST_CONTEXT_INCLUDE boost/context/fiber.hpp)
find_library(SWEPT_BOOST_CONTEXT_LIB boost_context)
foreach(need SWEPT_CUDA_INCLUDE_DIR SWEPT_CUDNN_INCLUDE_DIR SWEPT_CUDNN_SO SWEPT_NCCL_INCLUDE_DIR
             SWEPT_BOOST_CONTEXT_INCLUDE SWEPT_BOOST_CONTEXT_LIB)
  if(NOT ${need})
    message(FATAL_ERROR "SWEPT_CUDA=EMULATED needs ${need}: install the CUDA toolkit's headers with cuDNN 9 "
                        "and NCCL (or set CUDAToolkit_ROOT), and libboost-context-dev (scripts/install-deps.sh)")
  endif()
endforeach()
file(STRINGS "${SWEPT_CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_major REGEX "define CUDNN_MAJOR")
if(NOT _cudnn_major MATCHES "CUDNN_MAJOR +9")
  message(FATAL_ERROR "SWEPT_CUDA=EMULATED needs cuDNN 9, found '${_cudnn_major}'")
endif()
get_filename_component(_real_cudnn "${SWEPT_CUDNN_SO}" REALPATH)
message(STATUS "swept: CUDA backend EMULATED on the host (headers ${SWEPT_CUDA_INCLUDE_DIR}, descriptors from ${_real_cudnn})")

set(_emu ${CMAKE_CURRENT_SOURCE_DIR}/emu)
add_library(swept_cudart_emu SHARED ${_emu}/runtime.cpp ${_emu}/grid.cpp)
target_include_directories(swept_cudart_emu PUBLIC ${CMAKE_SOURCE_DIR} ${SWEPT_CUDA_INCLUDE_DIR})
target_link_libraries(swept_cudart_emu PRIVATE ${SWEPT_BOOST_CONTEXT_LIB} Threads::Threads)
if(SWEPT_CUDA_EMU_THREADS)
  target_compile_definitions(swept_cudart_emu PUBLIC SWEPT_CUDA_EMU_THREADS=1)
endif()
swept_cuda_emu_sanitize(swept_cudart_emu)

foreach(lib cublas cudnn nccl)
  add_library(swept_${lib}_emu MODULE ${_emu}/${lib}_emu.cpp)
  target_include_directories(swept_${lib}_emu PRIVATE ${SWEPT_CUDNN_INCLUDE_DIR} ${SWEPT_NCCL_INCLUDE_DIR})
  target_link_libraries(swept_${lib}_emu PRIVATE swept_cudart_emu)
  swept_cuda_emu_sanitize(swept_${lib}_emu)
endforeach()
target_link_libraries(swept_cublas_emu PRIVATE PkgConfig::OPENBLAS)
target_link_libraries(swept_cudnn_emu PRIVATE PkgConfig::OPENBLAS ${CMAKE_DL_LIBS})
target_compile_definitions(swept_cudnn_emu PRIVATE SWEPT_REAL_CUDNN="${_real_cudnn}")
target_sources(swept_nccl_emu PRIVATE ${_emu}/nccl_emu_net.cpp)  # communicators across processes

set(SWEPT_CUDA_RUNTIME swept_cudart_emu)

# Applied to swept_trainer_cuda once it exists: kernels.cu as host C++, and
# the stand-ins as the libraries' default paths.
function(swept_cuda_emulate target)
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/kernels.cu PROPERTIES LANGUAGE CXX)
  target_compile_definitions(${target} PUBLIC SWEPT_CUDA_EMULATED=1
    SWEPT_EMU_CUBLAS_LIBRARY="$<TARGET_FILE:swept_cublas_emu>"
    SWEPT_EMU_CUDNN_LIBRARY="$<TARGET_FILE:swept_cudnn_emu>"
    SWEPT_EMU_NCCL_LIBRARY="$<TARGET_FILE:swept_nccl_emu>")
  add_dependencies(${target} swept_cublas_emu swept_cudnn_emu swept_nccl_emu)
  swept_cuda_emu_sanitize(${target})
endfunction()
