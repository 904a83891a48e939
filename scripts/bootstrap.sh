#!/usr/bin/env bash
# Installs what Tessera needs to build and test, when it is missing.
# As root on Debian it installs the Debian packages itself; otherwise it prints the
# exact command to run. Then it installs the npm packages when node_modules is stale.
# Usage: scripts/bootstrap.sh [--browser] [--cohort] [--native | --wasm]
#   --browser also needs Debian chromium, --cohort snakemake; --native only what the native build and its tests need
#   (no emscripten, node or npm packages); --wasm what both builds need (no npm packages, no chromium or snakemake).
set -euo pipefail
cd "$(dirname "$0")/.."

want_browser=0
want_cohort=0
native_only=0
builds_only=0
for a in "$@"; do
  [ "$a" = "--wasm" ] && builds_only=1
  [ "$a" = "--browser" ] && want_browser=1
  [ "$a" = "--cohort" ] && want_cohort=1
  [ "$a" = "--native" ] && native_only=1
done

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v g++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
[ -f /usr/src/googletest/CMakeLists.txt ] || missing+=(googletest libgtest-dev)
[ -f /usr/include/eigen3/Eigen/Core ] || missing+=(libeigen3-dev)
if [ "$native_only" = 0 ]; then
  command -v em++ >/dev/null || missing+=(emscripten)
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  if [ "$want_browser" = 1 ] && [ "$builds_only" = 0 ]; then
    [ -x /usr/bin/chromium ] || missing+=(chromium)
  fi
  # The cohort workflow (cohort/Snakefile) and its test run on Debian's Snakemake 7.
  if [ "$want_cohort" = 1 ] && [ "$builds_only" = 0 ]; then
    command -v snakemake >/dev/null || missing+=(snakemake)
  fi
fi

# npm packages: due when node_modules is missing or older than the manifest (installed last, or beside apt below).
npm_due=0
if [ "$native_only" = 0 ] && [ "$builds_only" = 0 ]; then
  if [ ! -d node_modules ] || [ package.json -nt node_modules/.package-lock.json ] \
     || { [ -f package-lock.json ] && [ package-lock.json -nt node_modules/.package-lock.json ]; }; then
    npm_due=1
  fi
fi
npm_install() {
  echo "bootstrap: installing npm packages"
  npm install --no-audit --no-fund --loglevel=error
}

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    # The npm packages download beside apt's (neither needs the other) when npm is already there.
    npm_pid=
    if [ "$npm_due" = 1 ] && command -v npm >/dev/null; then
      npm_install &
      npm_pid=$!
      npm_due=0
    fi
    echo "bootstrap: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # The package lists once per set-up: npm test calls this script three times, and lists fetched in the last hour
    # are kept.
    if ! find /var/lib/apt/lists -maxdepth 1 -type f -name '*_Packages*' -mmin -60 2>/dev/null | grep -q .; then
      apt-get update -qq
    fi
    # Without the recommended packages (snakemake's cloud clients, imagemagick, printing, ...): 284 of the 402
    # packages a fresh machine installed with them, and nothing here uses them.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ -n "$npm_pid" ]; then wait "$npm_pid"; fi
  else
    echo "bootstrap: missing Debian packages: ${missing[*]}" >&2
    echo "bootstrap: run as root:  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

if [ "$npm_due" = 1 ]; then npm_install; fi
