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
