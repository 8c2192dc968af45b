#!/usr/bin/env bash
# Sync benchmark: starts a local Anvil, generates a chain, and prints fetch speed, indexing speed
# from the node (and their ratio) and indexing speed from a recording. Loopback only; it stops
# by itself. Arguments: BLOCKS TXS_PER_BLOCK CONCURRENCY RUNS (defaults 200 50 16 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash testbed/setup.sh
cargo build --release --locked --example bench_sync
PORT=${ANVIL_PORT:-18645}
./testbed/node_modules/.bin/anvil --port "$PORT" --host 127.0.0.1 --accounts 30 --no-mining \
  --order fifo --timestamp 1700000000 --silent --gas-limit 300000000 &
ANVIL=$!
trap 'kill "$ANVIL" 2>/dev/null || true; wait "$ANVIL" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  curl -sf -H 'content-type: application/json' \
    --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "http://127.0.0.1:$PORT" >/dev/null && break
  sleep 0.1
done
./target/release/examples/bench_sync "http://127.0.0.1:$PORT" "$@"
