#!/usr/bin/env bash
# npm start: installs what is missing, builds the browser wasm module if missing, serves the page.
# Usage: scripts/start.sh [--port N] [--host H]     (or PORT=N npm start)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
# Incremental: builds what is missing or out of date (everything on a fresh machine, a few minutes).
echo "start: building the wasm modules (dist/wasm/)"
scripts/build.sh wasm >/dev/null
if [ ! -f web/models/demo-unet.onnx ]; then
  echo "start: note: web/models/demo-unet.onnx is missing, so 'Try the demo' will report it"
fi
exec node scripts/serve.js "$@"
