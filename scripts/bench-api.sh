#!/usr/bin/env bash
# API load benchmark (loopback only, bounded in time): builds the demo chain on a local Anvil,
# indexes it, serves it with `ots-indexer serve`, and measures ots2_getERC20TransferCount and
# one 25-transaction ots2_getERC20TransferList page at 1 and 32 concurrent clients.
# Arguments: SECONDS per measurement (default 3) and ROUNDS (default 5); each figure is the median
# over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-3}
ROUNDS=${2:-5}
ANVIL_PORT=${ANVIL_PORT:-18745}
API_ADDR=${API_ADDR:-127.0.0.1:18746}
NODE="http://127.0.0.1:${ANVIL_PORT}"
DATADIR=$(mktemp -d)

bash testbed/setup.sh
cargo build --release --locked --bin ots-indexer --example demo_chain --example bench_api

./testbed/node_modules/.bin/anvil --port "$ANVIL_PORT" --host 127.0.0.1 --accounts 30 \
  --no-mining --order fifo --timestamp 1700000000 --silent &
ANVIL=$!
SERVER=
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  kill "$ANVIL" 2>/dev/null || true
  wait "$ANVIL" 2>/dev/null || true
  rm -rf "$DATADIR"
}
trap cleanup EXIT
for _ in $(seq 1 100); do
  curl -sf -H 'content-type: application/json' \
    --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "$NODE" >/dev/null && break
  sleep 0.1
done
./target/release/examples/demo_chain "$NODE" >/dev/null
./target/release/ots-indexer sync --exit-at-head --rpc-url "$NODE" --datadir "$DATADIR" --log warn
./target/release/ots-indexer serve --rpc-url "$NODE" --datadir "$DATADIR" --http-addr "$API_ADDR" --log warn &
SERVER=$!
for _ in $(seq 1 100); do
  curl -sf -H 'content-type: application/json' \
    --data '{"jsonrpc":"2.0","id":1,"method":"ots_getApiLevel","params":[]}' "http://$API_ADDR" >/dev/null && break
  sleep 0.1
done
# The demo's busiest account (its deployer).
ADDRESS=0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266
COUNT=$(curl -s -H 'content-type: application/json' \
  --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ots2_getERC20TransferCount\",\"params\":[\"$ADDRESS\"]}" "http://$API_ADDR")
echo "address $ADDRESS: $COUNT" >&2
./target/release/examples/bench_api "$API_ADDR" "$ADDRESS" "$SECONDS_EACH" "$ROUNDS"
