#!/usr/bin/env bash
# Builds the native tree (build/native) and the wasm tree (build/wasm).
# Usage: scripts/build.sh [native|wasm|all|module|wasm-module|wasm-tests]   (default all; module: only the Embind module,
# for npm pack; wasm-module then wasm-tests is wasm in two steps: the module into dist/wasm first, so the JavaScript tests
# can start while the wasm32 GoogleTest binary and bench build in the same tree)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
jobs=$(nproc 2>/dev/null || echo 2)
# Every emcc/em++ call, including the links ninja/make runs, needs Debian's node modules.
export NODE_PATH=/usr/share/nodejs

if [ "$what" = native ] || [ "$what" = all ]; then
  [ -f build/native/CMakeCache.txt ] || cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build/native -j"$jobs"
fi
# The module's files are what the npm package and the page load: dist/wasm/node (CommonJS, for node's worker_threads)
# and dist/wasm/web (ES module, for browser module Workers), copied from the tree $1.
copy_module() {
  mkdir -p dist/wasm/node dist/wasm/web
  cp "$1"/tessera.js "$1"/tessera.wasm "$1"/tessera.worker.js dist/wasm/node/
  cp "$1"/web/tessera.js "$1"/web/tessera.wasm "$1"/web/tessera.worker.js dist/wasm/web/
  # The generated pthread worker is CommonJS; the package is ESM.
  echo '{"type":"commonjs"}' | tee dist/wasm/node/package.json > dist/wasm/web/package.json
}
configure_wasm() {
  if [ ! -f build/wasm/CMakeCache.txt ]; then
    # emscripten.cmake sets the node that runs the wasm32 tests (emcmake's default fails on Node 20).
    emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
}
if [ "$what" = wasm ] || [ "$what" = all ]; then
  configure_wasm
  cmake --build build/wasm -j"$jobs"
  copy_module build/wasm
fi
if [ "$what" = wasm-module ]; then
  configure_wasm
  cmake --build build/wasm -j"$jobs" --target tessera_module tessera_module_web
  copy_module build/wasm
fi
if [ "$what" = wasm-tests ]; then
  # Everything of the wasm tree but the module (dist/wasm is left as it is: tests may be loading it).
  configure_wasm
  targets=(tessera_tests)
  listed=$(cmake --build build/wasm --target help)
  if [[ $listed == *" tessera_engine_bench"* ]]; then targets+=(tessera_engine_bench); fi
  cmake --build build/wasm -j"$jobs" --target "${targets[@]}"
fi
if [ "$what" = module ]; then
  # Only the two Embind module targets (scripts/prepack.sh): in the wasm tree when one is configured (its objects are
  # reused: one wasm build), else in their own tree without tests or benchmarks. TESSERA_MODULE_BUILD_DIR names
  # another configured wasm tree to build them in (the pack test reuses the checkout's build/wasm that way).
  tree=${TESSERA_MODULE_BUILD_DIR:-}
  if [ -z "$tree" ]; then
    if [ -f build/wasm/CMakeCache.txt ]; then tree=build/wasm; else tree=build/module; fi
  fi
  if [ ! -f "$tree/CMakeCache.txt" ]; then
    [ -z "${TESSERA_MODULE_BUILD_DIR:-}" ] || { echo "build.sh: TESSERA_MODULE_BUILD_DIR=$tree is not a configured CMake tree (no CMakeCache.txt): unset it or run scripts/build.sh wasm there first" >&2; exit 1; }
    emcmake cmake -S . -B "$tree" -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF >/dev/null
  fi
  cmake --build "$tree" -j"$jobs" --target tessera_module tessera_module_web
  copy_module "$tree"
fi
