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

# Linker settings common to test binaries and the browser/worker module.
# emmalloc: dlmalloc fails single allocations over 2 GiB.
set(TESSERA_WASM_MEMORY_FLAGS
  -sALLOW_MEMORY_GROWTH=1
  -sMAXIMUM_MEMORY=4GB
  -sMALLOC=emmalloc
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
    -sWASM_BIGINT=0)
endfunction()

# The generated JS is CommonJS while the npm package is "type": "module": mark the build tree.
file(WRITE ${CMAKE_BINARY_DIR}/package.json "{\"type\":\"commonjs\"}\n")
