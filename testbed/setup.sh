#!/usr/bin/env bash
# Installs the test bed (Anvil, solc-js, OpenZeppelin from the npm registry) and compiles the
# test contracts. Safe to run again: it does nothing when everything is already in place.
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -x node_modules/.bin/anvil ] || [ ! -x node_modules/.bin/hardhat ] || [ package.json -nt node_modules/.package-lock.json ]; then
  echo "testbed: installing npm packages" >&2
  if [ -f package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error
  else
    npm install --no-audit --no-fund --loglevel=error
  fi
fi

newest_source=$(ls -t contracts/*.sol compile.js | head -n 1)
if [ ! -f build/artifacts.json ] || [ "$newest_source" -nt build/artifacts.json ]; then
  echo "testbed: compiling contracts" >&2
  node compile.js >&2
fi
