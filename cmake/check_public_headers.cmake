# Fails when a public header (src/include/tessera/<layer>/*.h) includes anything of the project other than
# another public header ("tessera/<layer>/x.h"): the internal headers (src/<layer>/*.h) are not installed with
# the public ones and must stay out of the public API. Run as a test: cmake -D HEADER_DIR=... -P this.
cmake_minimum_required(VERSION 3.20)

if(NOT DEFINED HEADER_DIR OR NOT IS_DIRECTORY "${HEADER_DIR}")
  message(FATAL_ERROR "check_public_headers.cmake: -D HEADER_DIR=<src/include/tessera> is required")
endif()
file(GLOB headers "${HEADER_DIR}/*/*.h")
if(NOT headers)
  message(FATAL_ERROR "No public header in ${HEADER_DIR}")
endif()
set(problems "")
foreach(header IN LISTS headers)
  file(STRINGS "${header}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*(\"|<internal/)")
  foreach(line IN LISTS includes)
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"tessera/[^\"/]+/[^\"/]+\\.h\"")
      get_filename_component(name "${header}" NAME)
      string(APPEND problems "  ${name}: ${line}\n")
    endif()
  endforeach()
endforeach()
list(LENGTH headers count)
if(problems)
  message(FATAL_ERROR "Public headers include non-public headers (move the declaration they need into a "
                      "public header, or the including header beside its sources in src/<layer>/):\n${problems}")
endif()
message(STATUS "${count} public headers include only public headers")
