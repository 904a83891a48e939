# Every Emscripten setting of Tessera lives in this file.
# Included by CMakeLists.txt when the toolchain is Emscripten (emcmake cmake ...).
#
# Everything in the wasm build is compiled and linked with -pthread -fexceptions:
# lld silently accepts objects built without -pthread, so consistency is enforced here.
# -fwasm-exceptions is broken with pthreads in Emscripten 3.1.6; C++ exceptions are
# turned into JS Errors by the bindings.

set(TESSERA_WASM_COMPILE_FLAGS -pthread -fexceptions -msimd128)
add_compile_options(${TESSERA_WASM_COMPILE_FLAGS})
add_link_options(-pthread -fexceptions)

# ctest and the test registration run the wasm32 test binaries under node. emcmake passes
# CMAKE_CROSSCOMPILING_EMULATOR=node;--experimental-wasm-threads, an option Node 20 rejects ("bad
# option"), and node's global fetch cannot load the .wasm from a file path: Tessera sets its own
# (another node: -DTESSERA_NODE_EMULATOR="/path/to/node;--no-experimental-fetch").
find_program(TESSERA_NODE NAMES node nodejs)
if(NOT TESSERA_NODE)
  message(FATAL_ERROR "node not found: the wasm32 tests run under node (apt-get install -y nodejs)")
endif()
set(TESSERA_NODE_EMULATOR "${TESSERA_NODE};--no-experimental-fetch" CACHE STRING
    "Command that runs a wasm32 test binary (node and its options)")
set(CMAKE_CROSSCOMPILING_EMULATOR "${TESSERA_NODE_EMULATOR}")

# Linker settings common to test binaries and the browser/worker module.
# emmalloc: dlmalloc fails single allocations over 2 GiB.
# DEFAULT_PTHREAD_STACK_SIZE: each thread's stack, allocated from the heap (TESSERA_PTHREAD_STACK_BYTES, CMakeLists.txt,
# is also what the plans count).
set(TESSERA_WASM_MEMORY_FLAGS
  -sALLOW_MEMORY_GROWTH=1
  -sMAXIMUM_MEMORY=4GB
  -sMALLOC=emmalloc
  -sDEFAULT_PTHREAD_STACK_SIZE=${TESSERA_PTHREAD_STACK_BYTES}
  -Wno-pthreads-mem-growth)

# A GoogleTest (or other) binary that runs under node and exits when main returns.
function(tessera_wasm_test_binary target)
  target_link_options(${target} PRIVATE
    ${TESSERA_WASM_MEMORY_FLAGS}
    -sEXIT_RUNTIME=1
    -sPTHREAD_POOL_SIZE=8
    -sPTHREAD_POOL_SIZE_STRICT=2
    -sNODERAWFS=1)
endfunction()

# Registers one CTest entry per GoogleTest suite of a wasm test binary (Suite, run with
# --gtest_filter=Suite.*), listed by cmake/gtest_suites.cmake after every link. Each entry boots node and
# the 8-Worker pthread pool (≈1 s of CPU): one entry per test would do that 91 times instead of 15.
# TIMEOUT <seconds>: each entry's TIMEOUT property.
function(tessera_wasm_gtest_suites target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TIMEOUT" "")
  if(NOT arg_TIMEOUT)
    message(FATAL_ERROR "tessera_wasm_gtest_suites(${target}): TIMEOUT <seconds> is required")
  endif()
  set(tests_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    BYPRODUCTS "${tests_file}"
    COMMAND "${CMAKE_COMMAND}"
            -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
            -D "TEST_EXECUTOR=${CMAKE_CROSSCOMPILING_EMULATOR}"
            -D "TEST_WORKING_DIR=${CMAKE_CURRENT_BINARY_DIR}"
            -D "TEST_TIMEOUT=${arg_TIMEOUT}"
            -D "CTEST_FILE=${tests_file}"
            -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/cmake/gtest_suites.cmake"
    VERBATIM)
  # Before the first build ctest shows one failing NOT_BUILT entry instead of silently running nothing.
  file(WRITE "${include_file}"
    "if(EXISTS \"${tests_file}\")\n"
    "  include(\"${tests_file}\")\n"
    "else()\n"
    "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()

# The Embind module loaded by the dedicated worker (browser) or worker_thread (node).
# MODULARIZE with a factory: works in node, on a page and in workers; the pthread
# pool size is a run-time option (Module.pthreadPoolSize), and STRICT=2 turns
# "more threads than the pool" into std::system_error instead of a deadlock.
function(tessera_wasm_module target)
  target_link_options(${target} PRIVATE
    ${TESSERA_WASM_MEMORY_FLAGS}
    -lembind
    -sMODULARIZE=1
    -sEXPORT_NAME=createTesseraModule
    -sENVIRONMENT=web,worker,node
    "-sPTHREAD_POOL_SIZE=Module[\"pthreadPoolSize\"]||2"
    -sPTHREAD_POOL_SIZE_STRICT=2
    -sWASM_BIGINT=0
    # wasm-opt at -O2, not the build type's -O3 (the objects are compiled at -O3 either way): the classical methods run
    # as fast (128×128×96, 2 threads: TV, RTS, iLSQR, NDI and MEDI 25.3–25.6 s in all at -O2, 26.2 s at -O3; χ the
    # same), the .wasm is 3 % larger, and each of the module's two links takes 16 CPU-s instead of 30.
    -O2)
  # The two flavours' wasm-opt runs are the same (same objects and flags, the same bytes out): the second link takes the
  # first's output (cmake/wasm-opt-cache/wasm-opt).
  set_property(TARGET ${target} PROPERTY RULE_LAUNCH_LINK
               "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/cmake/wasm-opt-cache/link-with-cache ${CMAKE_BINARY_DIR}/wasm-opt-cache")
endfunction()

# The generated JS is CommonJS while the npm package is "type": "module": mark the build tree.
file(WRITE ${CMAKE_BINARY_DIR}/package.json "{\"type\":\"commonjs\"}\n")
