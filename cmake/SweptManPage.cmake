# Writes a man page (troff, section 1) from a program's own --help, so that
# the page and the program cannot disagree. Run at install time by
# SweptInstall.cmake:
#   cmake -DPROGRAM=path/to/swept -DNAME=swept -DOUT=man/swept.1 -P SweptManPage.cmake
# For a program whose --help has a "commands:" block (swept), each command's
# own --help becomes a subsection. The help text is kept as it is printed
# (.nf), escaped so troff shows it verbatim. Fails (non-zero) when the
# program cannot print its help: an install must not ship an empty page.
foreach(v PROGRAM NAME OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "SweptManPage.cmake: -D${v}=... is required")
  endif()
endforeach()

# help(OUTVAR ARGS...): PROGRAM ARGS... --help's stdout, or a fatal error.
function(help outvar)
  execute_process(COMMAND ${PROGRAM} ${ARGN} --help
    OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR text STREQUAL "")
    message(FATAL_ERROR "SweptManPage.cmake: `${PROGRAM} ${ARGN} --help` failed (${rc}): ${err}")
  endif()
  set(${outvar} "${text}" PARENT_SCOPE)
endfunction()

# verbatim(OUTVAR TEXT): TEXT as troff that prints it unchanged.
function(verbatim outvar text)
  string(REPLACE "\\" "\\e" text "${text}")
  # A line starting with . or ' would be a request: \& before it makes it text.
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${outvar} ".nf\n${text}\n.fi\n" PARENT_SCOPE)
endfunction()

execute_process(COMMAND ${PROGRAM} --version OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX REPLACE "\n.*" "" version "${version}")
help(main)
# The one-line summary: the first line of --help after "NAME: " or "NAME VERSION: ".
string(REGEX REPLACE "\n.*" "" first "${main}")
string(REGEX REPLACE "^[^:]*: *" "" summary "${first}")
string(TOUPPER "${NAME}" upper)

verbatim(body "${main}")
set(page ".TH ${upper} 1 \"\" \"${version}\" \"User Commands\"\n.SH NAME\n${NAME} \\- ${summary}\n")
string(APPEND page ".SH DESCRIPTION\n${body}")

# swept's commands: the lines "  NAME  description" after "commands:".
if(main MATCHES "\ncommands:\n(.*)")
  string(REGEX MATCHALL "\n  [a-z][a-z-]*" names "\n${CMAKE_MATCH_1}")
  string(APPEND page ".SH COMMANDS\n")
  foreach(n IN LISTS names)
    string(STRIP "${n}" n)
    help(text ${n})
    verbatim(body "${text}")
    string(APPEND page ".SS \"${NAME} ${n}\"\n${body}")
  endforeach()
endif()
string(APPEND page ".SH SEE ALSO\n")
if(NAME STREQUAL "swept")
  string(APPEND page "swept-train(1); ")
else()
  string(APPEND page "swept(1); ")
endif()
string(APPEND page "README.md and docs/ in /usr/share/doc/swept (docs/exit-codes.md: every exit code).\n")
file(WRITE "${OUT}" "${page}")
