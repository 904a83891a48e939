#!/usr/bin/env bash
# Builds the native tree (build/native) and the wasm tree (build/wasm).
# Usage: scripts/build.sh [native|wasm|all]   (default all)
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
    emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release \
      "-DCMAKE_CROSSCOMPILING_EMULATOR=/usr/bin/node;--no-experimental-fetch" >/dev/null
  fi
  cmake --build build/wasm -j"$jobs"
  # The module's files are what the npm package and the page load.
  if [ -f build/wasm/tessera.js ]; then
    mkdir -p dist/wasm
    cp build/wasm/tessera.js build/wasm/tessera.wasm dist/wasm/
    [ -f build/wasm/tessera.worker.js ] && cp build/wasm/tessera.worker.js dist/wasm/
    # The generated worker is CommonJS; the package is ESM.
    echo '{"type":"commonjs"}' > dist/wasm/package.json
  fi
fi
