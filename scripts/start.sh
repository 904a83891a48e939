#!/usr/bin/env bash
# npm start: installs what is missing, builds the browser wasm module if missing, serves the page.
# Usage: scripts/start.sh [--port N] [--host H]     (or PORT=N npm start)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
if [ ! -f dist/wasm/web/tessera.js ] || [ ! -f dist/wasm/web/tessera.wasm ]; then
  echo "start: building the browser wasm module (dist/wasm/web/)"
  scripts/build.sh wasm
fi
if [ ! -f web/models/demo-unet.onnx ]; then
  echo "start: note: web/models/demo-unet.onnx is missing, so 'Try the demo' will report it"
fi
exec node scripts/serve.js "$@"
