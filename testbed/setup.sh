#!/usr/bin/env bash
# Installs the test bed (Anvil, Hardhat's node, solc-js, OpenZeppelin and an Etherscan client from the
# npm registry and one from PyPI; a
# pinned geth built with Go from its module proxy) and compiles the test contracts. Safe to run
# again: it does nothing when everything is already in place.
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

# The Python Etherscan client of the client-library tests, in a virtual environment of its own.
if [ ! -x .venv/bin/python ] || [ requirements.txt -nt .venv/installed ]; then
  echo "testbed: installing the Python packages" >&2
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
  touch .venv/installed
fi

newest_source=$(ls -t contracts/*.sol compile.js | head -n 1)
if [ ! -f build/artifacts.json ] || [ "$newest_source" -nt build/artifacts.json ]; then
  echo "testbed: compiling contracts" >&2
  node compile.js >&2
fi

# geth, built from its Go module at a pinned version into bin/ (rebuilt only when the pin
# changes): about 6 minutes with a cold Go cache, seconds with a warm one.
GETH_VERSION=1.17.10
built=$( [ -x bin/geth ] && bin/geth version 2>/dev/null || true )
if ! grep -q "^Version: ${GETH_VERSION}-stable" <<<"$built"; then
  command -v go >/dev/null || { echo "testbed: Go is needed to build geth (go install)" >&2; exit 1; }
  echo "testbed: building geth v${GETH_VERSION}" >&2
  GOBIN="$PWD/bin" go install "github.com/ethereum/go-ethereum/cmd/geth@v${GETH_VERSION}"
  # CI builds once on a clean machine: Go's build cache (0.7 GB) is of no further use there.
  if [ "${CI:-}" = "true" ]; then go clean -cache; fi
fi
