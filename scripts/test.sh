#!/usr/bin/env bash
# npm test: installs what is missing, builds what is missing, runs every test suite:
# the GoogleTest suite natively and as wasm32 under node, then the JavaScript suites.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's seconds, so a slow run says where its time went.
start=$SECONDS
phase() { echo "== [$((SECONDS - start)) s] $*"; }
phase "set-up (apt and npm packages when missing)"
scripts/bootstrap.sh --browser --cohort "$@"
phase "build (native and wasm32)"
scripts/build.sh all

# One ctest entry per test natively, per suite in wasm32 (each boots node); two at a time is faster.
phase "GoogleTest, native"
ctest --test-dir build/native -j2 --output-on-failure
phase "GoogleTest, wasm32 under node"
ctest --test-dir build/wasm -j2 --output-on-failure

shopt -s nullglob globstar
js_tests=(bindings/**/*.test.js web/**/*.test.js scripts/**/*.test.js tests/**/*.test.js cohort/**/*.test.js)
if [ ${#js_tests[@]} -gt 0 ]; then
  # Two files at a time: many wait on Chromium, child processes and workers rather than compute (node's default on
  # 2 cores is one at a time). Every suite passes at this concurrency with the host loaded (load 7–8).
  phase "JavaScript (node --test, 2 files at a time)"
  node --test --test-force-exit --test-concurrency=2 "${js_tests[@]}"
fi
phase "done"
