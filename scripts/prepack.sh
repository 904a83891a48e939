#!/usr/bin/env bash
# npm pack / npm publish (the "prepack" script): the tarball must hold the wasm module, so build it
# (scripts/build.sh module: the two Embind targets only) when dist/wasm is missing or older than its sources.
set -euo pipefail
cd "$(dirname "$0")/.."

stale() {
  local f
  for f in dist/wasm/{node,web}/{tessera.js,tessera.wasm,tessera.worker.js,package.json}; do
    [ -f "$f" ] || { echo "prepack: $f is missing" >&2; return 0; }
  done
  local newer
  newer=$(find src bindings/wasm CMakeLists.txt emscripten.cmake -type f -newer dist/wasm/web/tessera.wasm -print -quit)
  [ -n "$newer" ] && { echo "prepack: $newer is newer than dist/wasm" >&2; return 0; }
  newer=$(find src bindings/wasm CMakeLists.txt emscripten.cmake -type f -newer dist/wasm/node/tessera.wasm -print -quit)
  [ -n "$newer" ] && { echo "prepack: $newer is newer than dist/wasm" >&2; return 0; }
  return 1
}

if stale; then
  if ! command -v emcmake >/dev/null || ! command -v cmake >/dev/null; then
    echo "prepack: building the wasm module needs Emscripten and CMake: run scripts/bootstrap.sh (or apt-get install -y emscripten cmake libeigen3-dev), then npm pack again" >&2
    exit 1
  fi
  echo "prepack: building the wasm module (scripts/build.sh module)" >&2
  start=$SECONDS
  scripts/build.sh module >&2
  echo "prepack: wasm module built in $((SECONDS - start)) s" >&2
fi
