# Registers CTest entries for the GoogleTest suites of a test binary (run as a script, cmake -P, after every link of
# the binary), from its --gtest_list_tests:
#  - CTEST_FILE: one entry per suite, run with --gtest_filter=<Suite>.*, so ctest -R, -j, --rerun-failed and per-entry
#    timeouts work while each entry starts the process only once. Used for wasm32, where every process start boots
#    node; natively gtest_discover_tests registers test by test.
#  - SHARDS_DIR: a CTest directory of SHARDS entries that together run every suite once, each entry a process with a
#    filter of whole suites (gtest's own sharding is set by environment variables, which a wasm32 binary under node
#    does not see). npm test runs these: one process start per shard instead of one per suite or test.
#
# -D TEST_EXECUTABLE=<binary>      the test binary
# -D TEST_EXECUTOR=<cmd;args>      what runs it (the crosscompiling emulator), may be empty
# -D TEST_WORKING_DIR=<dir>        working directory of the listing and of every entry
# -D TEST_TIMEOUT=<seconds>        TIMEOUT property of every entry
# -D CTEST_FILE=<file>             the per-suite entries: add_test/set_tests_properties lines (optional)
# -D SHARDS_DIR=<dir> -D SHARDS=<n>  the shard entries: <dir>/CTestTestfile.cmake (optional)
cmake_minimum_required(VERSION 3.20)

foreach(var TEST_EXECUTABLE TEST_WORKING_DIR TEST_TIMEOUT)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "gtest_suites.cmake: -D ${var}=... is required")
  endif()
endforeach()
if(NOT CTEST_FILE AND NOT SHARDS_DIR)
  message(FATAL_ERROR "gtest_suites.cmake: -D CTEST_FILE=... or -D SHARDS_DIR=... -D SHARDS=<n> is required")
endif()
if(SHARDS_DIR AND NOT SHARDS GREATER 0)
  message(FATAL_ERROR "gtest_suites.cmake: -D SHARDS_DIR needs -D SHARDS=<n> (a whole number >= 1), got '${SHARDS}'")
endif()

# One argument as CMake source: bracket-quoted unless it is plain.
function(quote_arg arg out)
  if(arg MATCHES "[^-./:a-zA-Z0-9_=]")
    set(${out} "[==[${arg}]==]" PARENT_SCOPE)
  else()
    set(${out} "${arg}" PARENT_SCOPE)
  endif()
endfunction()

execute_process(
  COMMAND ${TEST_EXECUTOR} "${TEST_EXECUTABLE}" --gtest_list_tests --gtest_color=no
  WORKING_DIRECTORY "${TEST_WORKING_DIR}"
  TIMEOUT 120
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE listing
  ERROR_VARIABLE errors)
if(NOT rc EQUAL 0)
  string(REPLACE ";" " " runner "${TEST_EXECUTOR}")
  message(FATAL_ERROR "Listing the GoogleTest suites failed (exit ${rc}): ${runner} ${TEST_EXECUTABLE} "
                      "--gtest_list_tests\n${listing}\n${errors}")
endif()

# --gtest_list_tests prints "Suite." (typed suites: "Suite.  # TypeParam = ...") then indented tests.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
set(suite "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.( |$)")
    set(suite "${CMAKE_MATCH_1}")
    list(APPEND suites "${suite}")
    if(NOT DEFINED tests_${suite})
      set(tests_${suite} 0)
    endif()
  elseif(suite AND line MATCHES "^  [^ ]")
    math(EXPR tests_${suite} "${tests_${suite}} + 1")  # each suite's test count: the shards' balance
  endif()
endforeach()
list(REMOVE_DUPLICATES suites)
if(NOT suites)
  message(FATAL_ERROR "No GoogleTest suite in ${TEST_EXECUTABLE} --gtest_list_tests:\n${listing}\n${errors}")
endif()

set(command "")
foreach(arg IN LISTS TEST_EXECUTOR ITEMS "${TEST_EXECUTABLE}")
  quote_arg("${arg}" quoted)
  string(APPEND command " ${quoted}")
endforeach()
quote_arg("${TEST_WORKING_DIR}" workdir)
if(CTEST_FILE)
  set(script "")
  foreach(suite IN LISTS suites)
    quote_arg("${suite}" name)
    quote_arg("--gtest_filter=${suite}.*" filter)
    string(APPEND script "add_test(${name}${command} ${filter} --gtest_color=no)\n")
    string(APPEND script "set_tests_properties(${name} PROPERTIES TIMEOUT ${TEST_TIMEOUT} WORKING_DIRECTORY ${workdir})\n")
  endforeach()
  file(WRITE "${CTEST_FILE}" "${script}")
endif()

if(SHARDS_DIR)
  # Whole suites to shards, the suite with the most tests first, each to the shard with the fewest tests so far.
  set(order "")
  foreach(suite IN LISTS suites)
    math(EXPR key "1000000 - ${tests_${suite}}")  # a fixed-width key: most tests first, then by name
    list(APPEND order "${key}:${suite}")
  endforeach()
  list(SORT order)
  math(EXPR last "${SHARDS} - 1")
  foreach(i RANGE ${last})
    set(load_${i} 0)
    set(filter_${i} "")
  endforeach()
  foreach(entry IN LISTS order)
    string(REGEX REPLACE "^[0-9]+:" "" suite "${entry}")
    set(best 0)
    foreach(i RANGE ${last})
      if(load_${i} LESS load_${best})
        set(best ${i})
      endif()
    endforeach()
    math(EXPR load_${best} "${load_${best}} + ${tests_${suite}}")
    if(filter_${best})
      string(APPEND filter_${best} ":")
    endif()
    string(APPEND filter_${best} "${suite}.*")
  endforeach()
  set(script "")
  foreach(i RANGE ${last})
    if(NOT filter_${i})
      continue()
    endif()
    math(EXPR shown "${i} + 1")
    quote_arg("--gtest_filter=${filter_${i}}" filter)
    string(APPEND script "add_test(shard_${shown}_of_${SHARDS}${command} ${filter} --gtest_brief=1 --gtest_color=no)\n")
    string(APPEND script "set_tests_properties(shard_${shown}_of_${SHARDS} PROPERTIES TIMEOUT ${TEST_TIMEOUT} WORKING_DIRECTORY ${workdir})\n")
  endforeach()
  file(MAKE_DIRECTORY "${SHARDS_DIR}")
  file(WRITE "${SHARDS_DIR}/CTestTestfile.cmake" "${script}")
endif()
