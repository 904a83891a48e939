# Fails when a file of src/ includes a header of a higher layer (or of a sibling layer of the same rank). The layers,
# lowest first; a layer may include its own headers and those of any lower rank. Run as a test:
# cmake -D SRC_DIR=<src> -P this.
cmake_minimum_required(VERSION 3.20)

# rank: layers
set(TESSERA_LAYERS
  "0:common"
  "1:phase;1:background;1:inversion;1:quality;1:sim;1:registry;1:contrast"
  "2:engine"
  "3:networks"
  "4:pipeline"
  "5:session")

if(NOT DEFINED SRC_DIR OR NOT IS_DIRECTORY "${SRC_DIR}")
  message(FATAL_ERROR "check_layers.cmake: -D SRC_DIR=<src> is required")
endif()
set(known "")
# Flatten "rank:layer" pairs.
set(pairs "")
foreach(entry IN LISTS TESSERA_LAYERS)
  list(APPEND pairs ${entry})
endforeach()
foreach(pair IN LISTS pairs)
  string(REPLACE ":" ";" rl "${pair}")
  list(GET rl 0 rank)
  list(GET rl 1 layer)
  set(RANK_${layer} ${rank})
  list(APPEND known ${layer})
endforeach()

set(problems "")
set(count 0)
file(GLOB_RECURSE files "${SRC_DIR}/*.h" "${SRC_DIR}/*.cpp")
foreach(file IN LISTS files)
  file(RELATIVE_PATH rel "${SRC_DIR}" "${file}")
  if(rel MATCHES "^include/tessera/([^/]+)/")
    set(layer "${CMAKE_MATCH_1}")
  elseif(rel MATCHES "^([^/]+)/")
    set(layer "${CMAKE_MATCH_1}")
  else()
    string(APPEND problems "  ${rel}: not in a layer folder (${known})\n")
    continue()
  endif()
  if(NOT DEFINED RANK_${layer})
    string(APPEND problems "  ${rel}: layer '${layer}' is not one of ${known} (add it to cmake/check_layers.cmake)\n")
    continue()
  endif()
  math(EXPR count "${count} + 1")
  file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS includes)
    if(line MATCHES "#[ \t]*include[ \t]*\"(tessera/)?([^/\"]+)/[^\"]+\"")
      set(target "${CMAKE_MATCH_2}")
      if(target STREQUAL layer OR NOT DEFINED RANK_${target})
        continue()
      endif()
      if(NOT RANK_${target} LESS RANK_${layer})
        string(APPEND problems "  ${rel} (${layer}, rank ${RANK_${layer}}): ${line} (${target}, rank ${RANK_${target}})\n")
      endif()
    endif()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "Includes that point to a higher or sibling layer (move the declaration they need down, or the "
                      "file up):\n${problems}")
endif()
message(STATUS "${count} files of src/ include only their own layer and lower ones")
