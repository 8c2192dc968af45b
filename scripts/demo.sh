#!/usr/bin/env bash
# One command from a fresh clone to a served index: installs the test bed (Anvil, solc-js,
# OpenZeppelin from npm), starts a local Anvil, deploys demo tokens and sends transfers, then
# runs `ots-indexer run` against it and serves the API until Ctrl-C.
#
# Environment: ANVIL_PORT (8545), API_ADDR (127.0.0.1:8546), DATADIR (data/demo).
set -euo pipefail
cd "$(dirname "$0")/.."

ANVIL_PORT=${ANVIL_PORT:-8545}
API_ADDR=${API_ADDR:-127.0.0.1:8546}
DATADIR=${DATADIR:-data/demo}
NODE="http://127.0.0.1:${ANVIL_PORT}"

bash testbed/setup.sh
echo "demo: building (release; the first build takes a few minutes)" >&2
cargo build --release --locked --bin ots-indexer --example demo_chain

# Each demo starts a new chain, so it gets a new index.
rm -rf "$DATADIR"
mkdir -p "$(dirname "$DATADIR")"

./testbed/node_modules/.bin/anvil --port "$ANVIL_PORT" --host 127.0.0.1 --accounts 30 \
  --no-mining --order fifo --timestamp 1700000000 --silent &
ANVIL=$!
trap 'kill "$ANVIL" 2>/dev/null || true; wait "$ANVIL" 2>/dev/null || true' EXIT

for _ in $(seq 1 100); do
  if curl -sf -H 'content-type: application/json' \
      --data '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "$NODE" >/dev/null; then
    break
  fi
  sleep 0.1
done

./target/release/examples/demo_chain "$NODE"

API="http://${API_ADDR}"
cat <<EOT

ots-indexer is starting at ${API} (node ${NODE}, data in ${DATADIR}). Try, in another terminal:

  curl -s -H 'content-type: application/json' --data '{"jsonrpc":"2.0","id":1,"method":"ots2_getERC20Count","params":[]}' ${API}
  curl -s -H 'content-type: application/json' --data '{"jsonrpc":"2.0","id":1,"method":"ots2_getERC20List","params":[0,10]}' ${API}
  curl -s -H 'content-type: application/json' --data '{"jsonrpc":"2.0","id":1,"method":"ots2_getERC20TransferCount","params":["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"]}' ${API}
  curl -s -H 'content-type: application/json' --data '{"jsonrpc":"2.0","id":1,"method":"ots2_getERC20TransferList","params":["0x70997970C51812dc3A010C7d01b50e0d17dc79C8",0,2]}' ${API}

The same port serves Etherscan's HTTP API (docs/etherscan.md):

  curl -s '${API}/api?module=token&action=tokenholderlist&contractaddress=0x5FbDB2315678afecb367f032d93F642f64180aa3&page=1&offset=5'
  curl -s '${API}/v2/api?chainid=31337&module=account&action=balance&address=0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266'

Open the Otterscan explorer on this chain (Docker; then browse http://localhost:5100):

  docker run --rm -p 5100:80 --name otterscan -d --env OTTERSCAN_CONFIG='{"erigonURL":"${API}","experimental":true}' otterscan/otterscan:latest

(docs/operations.md, "Opening the Otterscan explorer", says what each setting does.)

Ctrl-C stops the indexer and the node.

EOT
./target/release/ots-indexer run --rpc-url "$NODE" --datadir "$DATADIR" --http-addr "$API_ADDR"
