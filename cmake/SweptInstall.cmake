# An installed swept, and its Debian package (issue 27).
#   cmake --install build --prefix /usr/local        the layout below, from a build's binaries
#   cpack --config build/CPackConfig.cmake -B out    out/swept_VERSION_amd64.deb (prefix /usr)
# Layout: bin/swept, bin/swept-train, bin/swept-fetch-mnist (scripts/fetch-mnist.sh,
# which swept-train's "no MNIST" message names); man pages made from each
# program's --help at install time (cmake/SweptManPage.cmake); bash completions
# that read the same --help when Tab is pressed (scripts/swept-completion.bash);
# README, docs/ and examples/ under share/doc/swept. The dashboard's files are
# compiled into `swept` (web/CMakeLists.txt), so nothing of it is installed.
# The package's Depends is scripts/install-deps.sh's runtime group, read here
# at configure time: one list, checked by CTest's deps.drift.
include(GNUInstallDirs)
# `install` and cpack's `preinstall` build nothing first (by default they build
# `all`: every test, fuzzer and benchmark): an install or a package needs only
# `cmake --build build --target swept swept-train`, and an install of binaries
# not built yet fails, naming the missing file.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)

install(TARGETS swept swept-train RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS ${CMAKE_SOURCE_DIR}/scripts/fetch-mnist.sh
  DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME swept-fetch-mnist)

set(SWEPT_DOC_DIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/swept)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${SWEPT_DOC_DIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${SWEPT_DOC_DIR}/docs FILES_MATCHING PATTERN "*.md")
install(DIRECTORY ${CMAKE_SOURCE_DIR}/examples/ DESTINATION ${SWEPT_DOC_DIR}/examples USE_SOURCE_PERMISSIONS)

# bash-completion loads completions/NAME when NAME is first completed: one
# file per program, the same text in both.
foreach(program swept swept-train)
  install(FILES ${CMAKE_SOURCE_DIR}/scripts/swept-completion.bash
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/bash-completion/completions RENAME ${program})
endforeach()

# Man pages: written at install time from the binaries just built (so that
# `cmake --build build --target swept swept-train` is all an install needs),
# into the build tree, then installed like any file.
set(SWEPT_MAN_DIR ${CMAKE_BINARY_DIR}/man)
foreach(program swept swept-train)
  install(CODE "execute_process(
      COMMAND \"${CMAKE_COMMAND}\" -DPROGRAM=$<TARGET_FILE:${program}> -DNAME=${program}
              -DOUT=${SWEPT_MAN_DIR}/${program}.1 -P \"${CMAKE_SOURCE_DIR}/cmake/SweptManPage.cmake\"
      COMMAND_ERROR_IS_FATAL ANY)")
  install(FILES ${SWEPT_MAN_DIR}/${program}.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endforeach()

# ---- the Debian package --------------------------------------------------------
execute_process(
  COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/install-deps.sh --list runtime
  OUTPUT_VARIABLE _runtime RESULT_VARIABLE _rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _rc EQUAL 0 OR _runtime STREQUAL "")
  message(FATAL_ERROR "scripts/install-deps.sh --list runtime failed (${_rc}): the package's Depends come from it")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/scripts/install-deps.sh)
string(REPLACE "\n" ", " SWEPT_DEB_DEPENDS "${_runtime}")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME swept)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "swept")
set(CPACK_PACKAGE_CONTACT "swept maintainers <swept@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "hyperparameter sweeps on GPU clusters: scheduler, agents, dashboard, trainer")
set(CPACK_PACKAGE_DESCRIPTION
  "swept expands a sweep file (the Weights & Biases format) into trials, runs them on whichever host has GPUs free, streams their metrics into SQLite and shows them on a live dashboard. Includes swept-train, an MNIST trainer.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # swept_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${SWEPT_DEB_DEPENDS}")
# swept-fetch-mnist downloads with curl; examples/script-sweep.json runs python3.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "curl, python3")
include(CPack)
