# What makes a fresh build of swept quick enough for the README's first
# command (issue 27; measured in docs/benchmarks.md, "Building swept").
# ninja's .ninja_log after a clean build of `swept` and `swept-train` showed
# where the time goes: the CUDA backend (kernels.cu alone ~20 s of nvcc, plus
# nvcc's probing at configure time) on machines that have no GPU to run it,
# and, in every cli/, scheduler/, agent/ and web/ unit, parsing the same
# third-party headers again (with -fsyntax-only a typical cli/cmd_*.cpp costs
# 80% of its full compile: Boost.Program_options, nlohmann/json, cppzmq,
# cpp-httplib and the standard library, ~190k lines a unit).
#
# Included by the top-level CMakeLists.txt in two halves: swept_speed_setup()
# before the folders (it must set the launcher before any target exists, and
# decide SWEPT_CUDA=AUTO before trainer/cuda reads it), swept_speed_pch() after
# them (it adds precompiled headers to targets the folders defined).

# swept_speed_setup(): ccache when installed, and CUDA=AUTO only with a GPU.
macro(swept_speed_setup)
  # ccache: a rebuild after `git pull` or a second checkout costs only what
  # changed. Off with -DSWEPT_CCACHE=OFF (the timings of a fresh machine in
  # docs/benchmarks.md are taken so). A launcher given on the command line is
  # kept as is, only taught about precompiled headers (below).
  option(SWEPT_CCACHE "Compile through ccache when it is installed" ON)
  if(SWEPT_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
    find_program(SWEPT_CCACHE_PROGRAM ccache)
    if(SWEPT_CCACHE_PROGRAM)
      set(CMAKE_CXX_COMPILER_LAUNCHER ${SWEPT_CCACHE_PROGRAM})
      set(CMAKE_C_COMPILER_LAUNCHER ${SWEPT_CCACHE_PROGRAM})
      message(STATUS "swept: compiling through ${SWEPT_CCACHE_PROGRAM} (-DSWEPT_CCACHE=OFF to stop)")
    endif()
  endif()
  # ccache caches a unit that uses a precompiled header only when told that
  # the header's macros and __TIME__ may be trusted (its manual, "Precompiled
  # headers"); without it every such unit is a miss, silently.
  foreach(_lang C CXX)
    if(CMAKE_${_lang}_COMPILER_LAUNCHER MATCHES "ccache$" AND NOT CMAKE_${_lang}_COMPILER_LAUNCHER MATCHES "SLOPPINESS")
      set(CMAKE_${_lang}_COMPILER_LAUNCHER
        ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros ${CMAKE_${_lang}_COMPILER_LAUNCHER})
    endif()
  endforeach()

  # SWEPT_CUDA=AUTO builds the CUDA backend where it can run: nvcc alone (a
  # CI image, a login node) no longer costs every build the kernels. A GPU is
  # what the NVIDIA driver shows: /dev/nvidia0.. or /proc/driver/nvidia/gpus/*.
  # -DSWEPT_CUDA=ON builds it anyway (a build host without GPUs); EMULATED is
  # the CUDA tests' host build (test.sh's build-emu/).
  if(SWEPT_CUDA STREQUAL "AUTO")
    file(GLOB _swept_gpus /dev/nvidia[0-9]* /proc/driver/nvidia/gpus/*)
    if(NOT _swept_gpus)
      message(STATUS "swept: no NVIDIA GPU on this machine: CUDA backend not built "
                     "(SWEPT_CUDA=AUTO; -DSWEPT_CUDA=ON builds it anyway)")
      set(SWEPT_CUDA OFF)  # a normal variable: the cache keeps AUTO for the next configure
    endif()
  endif()
endmacro()

# swept_pch(TARGET HEADER...): HEADER... precompiled once for TARGET's C++
# units (each unit still includes what it uses: -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON
# builds without, as the sanitizer and fuzz scripts may).
function(swept_pch target)
  if(NOT TARGET ${target})
    return()
  endif()
  set(_headers)
  foreach(h IN LISTS ARGN)
    list(APPEND _headers "$<$<COMPILE_LANGUAGE:CXX>:${h}>")
  endforeach()
  target_precompile_headers(${target} PRIVATE ${_headers})
endfunction()

# swept_speed_pch(): the precompiled headers, per target, of the third-party
# headers its units include most (counted with `ninja -t deps`), plus the
# standard headers nearly every unit includes.
function(swept_speed_pch)
  set(std <string> <vector> <optional> <memory> <map> <algorithm> <functional> <iostream> <sstream> <chrono>)
  swept_pch(swept_common ${std} <nlohmann/json.hpp>)
  swept_pch(swept_sweeps ${std} <nlohmann/json.hpp>)
  swept_pch(swept_store ${std} <nlohmann/json.hpp>)
  swept_pch(swept_scheduler ${std} <nlohmann/json.hpp> <zmq.hpp>)
  swept_pch(swept_agent ${std} <nlohmann/json.hpp> <zmq.hpp>)
  swept_pch(swept_web ${std} <nlohmann/json.hpp> <httplib.h>)
  swept_pch(swept ${std} <nlohmann/json.hpp> <zmq.hpp> <boost/program_options.hpp>)
endfunction()

# swept_pkg_config_stable(TARGET): CMake 3.25's FindPkgConfig makes a
# module's "-isystem DIR" cflag an include directory of its imported target on
# the first configure of a build folder, and a compile option on every later
# one (read back from its cache). libzmq's cflags have one (mit-krb5), so the
# second configure changed the command line of every unit using ZeroMQ and
# ninja recompiled them: test.sh after demo.sh recompiled 29 of swept's units
# for nothing. This moves such pairs to the include directories, as the first
# configure has them, on every configure.
function(swept_pkg_config_stable target)
  get_target_property(opts ${target} INTERFACE_COMPILE_OPTIONS)
  if(NOT opts)
    return()
  endif()
  set(kept)
  set(dirs)
  set(next_is_dir FALSE)
  foreach(o IN LISTS opts)
    if(next_is_dir)
      list(APPEND dirs "${o}")
      set(next_is_dir FALSE)
    elseif(o STREQUAL "-isystem")
      set(next_is_dir TRUE)
    elseif(o MATCHES "^-isystem(.+)$")
      list(APPEND dirs "${CMAKE_MATCH_1}")
    else()
      list(APPEND kept "${o}")
    endif()
  endforeach()
  set_property(TARGET ${target} PROPERTY INTERFACE_COMPILE_OPTIONS "${kept}")
  set_property(TARGET ${target} APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${dirs}")
endfunction()
