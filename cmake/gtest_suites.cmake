# Registers one CTest entry per GoogleTest suite of a test binary (run as a script, cmake -P, after
# every link of the binary). Each entry runs the binary with --gtest_filter=<Suite>.*, so ctest -R,
# -j, --rerun-failed and per-entry timeouts work while each entry starts the process only once.
# Used for wasm32, where every process start boots node; natively gtest_discover_tests registers
# test by test.
#
# -D TEST_EXECUTABLE=<binary>      the test binary
# -D TEST_EXECUTOR=<cmd;args>      what runs it (the crosscompiling emulator), may be empty
# -D TEST_WORKING_DIR=<dir>        working directory of the listing and of every entry
# -D TEST_TIMEOUT=<seconds>        TIMEOUT property of every entry
# -D CTEST_FILE=<file>             the file written: add_test/set_tests_properties lines
cmake_minimum_required(VERSION 3.20)

foreach(var TEST_EXECUTABLE TEST_WORKING_DIR TEST_TIMEOUT CTEST_FILE)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "gtest_suites.cmake: -D ${var}=... is required")
  endif()
endforeach()

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
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.( |$)")
    list(APPEND suites "${CMAKE_MATCH_1}")
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
set(script "")
foreach(suite IN LISTS suites)
  quote_arg("${suite}" name)
  quote_arg("--gtest_filter=${suite}.*" filter)
  string(APPEND script "add_test(${name}${command} ${filter} --gtest_color=no)\n")
  string(APPEND script "set_tests_properties(${name} PROPERTIES TIMEOUT ${TEST_TIMEOUT} WORKING_DIRECTORY ${workdir})\n")
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
