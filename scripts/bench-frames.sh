#!/usr/bin/env bash
# What call frames cost a catch-up on Hardhat's node, which has no call tracer: starts it on a
# loopback port, generates a chain, and indexes it without frames and with frames rebuilt from
# struct logs, interleaved. Loopback only; it stops by itself.
# Arguments: BLOCKS TXS_PER_BLOCK RUNS (defaults 20 50 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash testbed/setup.sh
cargo build --release --locked --example bench_frames
PORT=${HARDHAT_PORT:-18745}
(cd testbed/hardhat && HARDHAT_DISABLE_TELEMETRY_PROMPT=true exec ../node_modules/.bin/hardhat node \
  --hostname 127.0.0.1 --port "$PORT" >/dev/null) &
NODE=$!
trap 'kill "$NODE" 2>/dev/null || true; wait "$NODE" 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  curl -sf -H 'content-type: application/json' \
    --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "http://127.0.0.1:$PORT" >/dev/null && break
  sleep 0.2
done
./target/release/examples/bench_frames "http://127.0.0.1:$PORT" "${1:-20}" "${2:-50}" "${3:-3}" none structlog
