#!/usr/bin/env bash
# Sync benchmark: starts a local Anvil (or geth --dev with BENCH_NODE=geth), generates a chain,
# and prints fetch speed, indexing speed from the node (and their ratio) and indexing speed
# from a recording. Loopback only; it stops by itself.
# Arguments: BLOCKS TXS_PER_BLOCK CONCURRENCY RUNS (defaults 200 50 16 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash testbed/setup.sh
cargo build --release --locked --example bench_sync
# BENCH_NODE=geth runs it against geth --dev (the test bed's pinned build) instead of Anvil.
NODE=${BENCH_NODE:-anvil}
PORT=${ANVIL_PORT:-18645}
if [ "$NODE" = geth ]; then
  GETH_DATA=$(mktemp -d)
  ./testbed/bin/geth --dev --dev.period 0 --datadir "$GETH_DATA" --gcmode archive \
    --state.scheme hash --nodiscover --maxpeers 0 \
    --http --http.addr 127.0.0.1 --http.port "$PORT" --http.api eth,net,web3,debug,txpool \
    --authrpc.port 0 --port 0 --verbosity 1 &
  NODE_PID=$!
  trap 'kill "$NODE_PID" 2>/dev/null || true; wait "$NODE_PID" 2>/dev/null || true; rm -rf "$GETH_DATA"' EXIT
else
  ./testbed/node_modules/.bin/anvil --port "$PORT" --host 127.0.0.1 --accounts 30 --no-mining \
    --order fifo --timestamp 1700000000 --silent --gas-limit 300000000 &
  NODE_PID=$!
  trap 'kill "$NODE_PID" 2>/dev/null || true; wait "$NODE_PID" 2>/dev/null || true' EXIT
fi
export BENCH_NODE=$NODE
for _ in $(seq 1 100); do
  curl -sf -H 'content-type: application/json' \
    --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "http://127.0.0.1:$PORT" >/dev/null && break
  sleep 0.1
done
./target/release/examples/bench_sync "http://127.0.0.1:$PORT" "$@"
