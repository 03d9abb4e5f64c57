# swept_add_tests(NAME SOURCES a_test.cpp ... LIBS lib ...)
# Builds one doctest executable from the *_test.cpp files beside the code and
# registers each TEST_CASE with CTest, so the summary counts cases, not binaries.
function(swept_add_tests name)
  if(NOT SWEPT_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${CMAKE_SOURCE_DIR}/cmake/doctest_main.cpp ${T_SOURCES})
  target_link_libraries(${name} PRIVATE doctest::doctest ${T_LIBS})
  target_compile_definitions(${name} PRIVATE
    SWEPT_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    SWEPT_BINARY_DIR="${CMAKE_BINARY_DIR}")
  set(props)
  if(T_LABELS)
    set(props PROPERTIES LABELS "${T_LABELS}")
  endif()
  doctest_discover_tests(${name} ${props})
endfunction()

# swept_add_fuzzer(TARGET LIB SOURCE TEST ARGS...)
# With -DSWEPT_FUZZ=ON (clang): builds the libFuzzer harness TARGET from
# SOURCE against LIB, with coverage feedback inside LIB too. With tests on:
# registers TEST, a bounded run of TARGET through scripts/fuzz.sh in one
# shared clang build (BUILD/fuzz); ARGS are its seed folders and flags.
function(swept_add_fuzzer target lib source test)
  if(SWEPT_FUZZ)
    if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      message(FATAL_ERROR "SWEPT_FUZZ=ON needs clang (libFuzzer): configure with CXX=clang++")
    endif()
    target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
    add_executable(${target} ${source})
    target_link_libraries(${target} PRIVATE ${lib})
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(${target} PRIVATE -fsanitize=fuzzer,address,undefined)
  endif()
  if(SWEPT_TESTS)
    find_program(SWEPT_CLANGXX clang++)
    if(SWEPT_CLANGXX)
      add_test(NAME ${test}
        COMMAND ${CMAKE_SOURCE_DIR}/scripts/fuzz.sh ${target} ${CMAKE_BINARY_DIR}/fuzz 30 ${ARGN})
      # One clang build serves both fuzzers: their runs must not configure it at once.
      set_tests_properties(${test} PROPERTIES TIMEOUT 900 LABELS fuzz RESOURCE_LOCK swept_fuzz_build)
    endif()
  endif()
endfunction()
