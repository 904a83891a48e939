#!/usr/bin/env bash
# npm test: installs what is missing, builds what is missing, runs every test suite:
# the GoogleTest suite natively and as wasm32 under node, then the JavaScript suites.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --browser "$@"
scripts/build.sh all

echo "== GoogleTest, native"
ctest --test-dir build/native --output-on-failure
echo "== GoogleTest, wasm32 under node"
NODE_PATH=/usr/share/nodejs ctest --test-dir build/wasm --output-on-failure

shopt -s nullglob globstar
js_tests=(bindings/**/*.test.js web/**/*.test.js scripts/**/*.test.js tests/**/*.test.js)
if [ ${#js_tests[@]} -gt 0 ]; then
  echo "== JavaScript (node --test)"
  node --test --test-force-exit "${js_tests[@]}"
fi
