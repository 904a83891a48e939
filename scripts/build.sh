#!/usr/bin/env bash
# Builds the native tree (build/native) and the wasm tree (build/wasm).
# Usage: scripts/build.sh [native|wasm|all|module]   (default all; module: only the Embind module, for npm pack)
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
if [ "$what" = wasm ] || [ "$what" = all ]; then
  if [ ! -f build/wasm/CMakeCache.txt ]; then
    # emscripten.cmake sets the node that runs the wasm32 tests (emcmake's default fails on Node 20).
    emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  cmake --build build/wasm -j"$jobs"
  # The module's files are what the npm package and the page load: dist/wasm/node (CommonJS, for
  # node's worker_threads) and dist/wasm/web (ES module, for browser module Workers).
  mkdir -p dist/wasm/node dist/wasm/web
  cp build/wasm/tessera.js build/wasm/tessera.wasm build/wasm/tessera.worker.js dist/wasm/node/
  cp build/wasm/web/tessera.js build/wasm/web/tessera.wasm build/wasm/web/tessera.worker.js dist/wasm/web/
  # The generated pthread worker is CommonJS; the package is ESM.
  echo '{"type":"commonjs"}' > dist/wasm/node/package.json
  echo '{"type":"commonjs"}' > dist/wasm/web/package.json
fi
if [ "$what" = module ]; then
  # Only the two Embind module targets, in their own tree (no tests, no benchmarks): scripts/prepack.sh.
  [ -f build/module/CMakeCache.txt ] || emcmake cmake -S . -B build/module -DCMAKE_BUILD_TYPE=Release \
    -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF >/dev/null
  cmake --build build/module -j"$jobs" --target tessera_module tessera_module_web
  mkdir -p dist/wasm/node dist/wasm/web
  cp build/module/tessera.js build/module/tessera.wasm build/module/tessera.worker.js dist/wasm/node/
  cp build/module/web/tessera.js build/module/web/tessera.wasm build/module/web/tessera.worker.js dist/wasm/web/
  echo '{"type":"commonjs"}' | tee dist/wasm/node/package.json > dist/wasm/web/package.json
fi
