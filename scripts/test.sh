#!/usr/bin/env bash
# npm test: installs what is missing, builds what is missing, runs every test suite:
# the GoogleTest suite natively (beside the set-up), then the JavaScript suites with the wasm32 GoogleTest beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's seconds, so a slow run says where its time went.
start=$SECONDS
phase() { echo "== [$((SECONDS - start)) s] $*"; }
phase "set-up of the native build (apt packages when missing)"
scripts/bootstrap.sh --native "$@"
# The native build and its GoogleTest run while the rest is installed (on a fresh machine apt downloads and unpacks for
# about 1.5 minutes, mostly waiting on the network and the disk); their output is shown when they are done.
native_log=$(mktemp)
# GoogleTest runs as two processes of whole suites (build/<tree>/gtest-shards, registered beside ctest's entry per test
# or suite), the checks of the source tree once.
( scripts/build.sh native && ctest --test-dir build/native -L source-check --output-on-failure \
  && ctest --test-dir build/native/gtest-shards -j2 --output-on-failure ) >"$native_log" 2>&1 &
native_pid=$!
trap 'kill "$native_pid" 2>/dev/null || true; rm -f "$native_log"' EXIT
# The wasm module (dist/wasm, what the JavaScript suites load) builds beside the rest of the set-up too (chromium,
# snakemake and the npm packages: mostly downloads and unpacking), once Emscripten is there; the wasm32 GoogleTest
# binary builds after it, beside the JavaScript suites.
phase "set-up of the wasm build (Emscripten and node when missing), the native build and GoogleTest beside it"
scripts/bootstrap.sh --wasm "$@"
wasm_build_log=$(mktemp)
scripts/build.sh wasm-module >"$wasm_build_log" 2>&1 &
wasm_build_pid=$!
trap 'kill "$native_pid" "$wasm_build_pid" 2>/dev/null || true; rm -f "$native_log" "$wasm_build_log"' EXIT
phase "set-up (chromium, snakemake and npm packages when missing), both builds beside it"
scripts/bootstrap.sh --browser --cohort "$@"
# Each background job's log is shown when it is done; a failure fails npm test with the log.
finish() { # name pid log
  local rc=0
  wait "$2" || rc=$?
  tail -n 4 "$3"
  if [ "$rc" != 0 ]; then
    cat "$3"
    echo "npm test: $1 failed (exit $rc): its log is above" >&2
    exit "$rc"
  fi
}
phase "build of the wasm module (started after Emscripten's set-up)"
finish "the wasm module's build" "$wasm_build_pid" "$wasm_build_log"

# The wasm32 GoogleTest binary builds and runs, two processes of whole suites (each boots node and its thread pool),
# from here on: beside the end of the native job (its last link and its GoogleTest leave a core idle for about half a
# minute), then beside the JavaScript suites; the two cores are busy throughout, so this adds its CPU time and nothing
# else. The compile runs at the normal priority: niced, it waited on the suites and then ran alone after them (a fresh
# clone took 701 s so, 683 s without).
phase "GoogleTest, wasm32 under node, built and run beside the rest (its log follows the JavaScript suites)"
wasm_log=$(mktemp)
( scripts/build.sh wasm-tests && ctest --test-dir build/wasm/gtest-shards -j2 --output-on-failure ) >"$wasm_log" 2>&1 &
wasm_pid=$!
trap 'kill "$native_pid" "$wasm_pid" 2>/dev/null || true; rm -f "$native_log" "$wasm_build_log" "$wasm_log"' EXIT
phase "native build and GoogleTest (started with the set-up)"
finish "the native build or its GoogleTest" "$native_pid" "$native_log"

shopt -s nullglob globstar
# The longest files first, longest to shortest as measured (each 0.5-3 minutes), so that none of them is left running
# alone at the end; the rest after them.
slow=(web/page.test.js bindings/js/cli.test.js bindings/js/fidelity.test.js web/page-classical.test.js bindings/js/index.test.js
      bindings/js/bundle.test.js cohort/cohort.test.js web/dicom-fieldmaps.test.js cohort/cohort-pipeline.test.js
      cohort/cohort-reach.test.js web/viewer.test.js web/dicom.test.js bindings/js/demo.test.js web/webgpu.test.js
      bindings/js/cli-plan.test.js bindings/js/cli-phase.test.js bindings/js/pipeline.test.js bindings/js/cli-interrupt.test.js
      bindings/js/methods.test.js bindings/js/crop.test.js scripts/quantize.test.js bindings/js/silent-inputs.test.js)
js_tests=()
for f in "${slow[@]}"; do [ -f "$f" ] && js_tests+=("$f"); done
for f in bindings/**/*.test.js web/**/*.test.js scripts/**/*.test.js tests/**/*.test.js cohort/**/*.test.js; do
  [[ " ${slow[*]} " == *" $f "* ]] || js_tests+=("$f")
done
js_rc=0
if [ ${#js_tests[@]} -gt 0 ]; then
  # Three files at a time: many wait on Chromium, child processes and workers rather than compute (node's default on
  # 2 cores is one at a time). With the wasm32 GoogleTest beside them both cores stay busy: two and three at a time took
  # the same wall time (429 and 428 s, builds warm), as had three and four on an earlier commit (531 and 530 s).
  # TESSERA_TEST_CONCURRENCY sets another.
  phase "JavaScript (node --test, ${TESSERA_TEST_CONCURRENCY:-3} files at a time)"
  # In the order above (node --test would sort them by path), with each file's wall time beside the TAP output.
  times=$(mktemp)
  node scripts/run-js-tests.js --concurrency "${TESSERA_TEST_CONCURRENCY:-3}" --times "$times" "${js_tests[@]}" || js_rc=$?
  phase "JavaScript: the longest files (start, end, seconds)"
  sort -k3 -rn "$times" | head -n 12
  rm -f "$times"
fi
phase "GoogleTest, wasm32 under node (its build and run): its log"
wasm_rc=0
wait "$wasm_pid" || wasm_rc=$?
if [ "$wasm_rc" != 0 ]; then cat "$wasm_log"; else tail -n 3 "$wasm_log"; fi
if [ "$js_rc" != 0 ] || [ "$wasm_rc" != 0 ]; then
  echo "npm test: failed (JavaScript exit $js_rc, GoogleTest wasm32 exit $wasm_rc)" >&2
  exit 1
fi
phase "done"
