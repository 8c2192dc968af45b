#!/usr/bin/env bash
# The first deep holder page a server answers after blocks commit beside it, end to end.
#
# Usage: scripts/holder-page-after-blocks.sh DATADIR RECORDING [BIN] [BLOCKS] [POSITION]
#
# DATADIR: a database synced from RECORDING (as scripts/bench-scale.sh leaves them), copied
# first, never written. The copy is unwound BLOCKS blocks (default 20), `ots-indexer serve` runs
# on it, the busiest token's `ots2_getTokenHolders` page at POSITION (default 50,000) is read
# by curl, the BLOCKS blocks are synced back from RECORDING beside the server (the incremental
# path, so the reorg window keeps them), and the same page is read again. Prints the times.
set -euo pipefail
datadir=$1
recording=$2
bin=${3:-target/release/ots-indexer}
blocks=${4:-20}
position=${5:-50000}
port=8611
copy=$(mktemp -d)
trap 'kill "${server:-0}" 2>/dev/null || true; rm -rf "$copy"' EXIT
cp -r "$datadir"/. "$copy"
tip=$("$bin" status --datadir "$copy" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["indexedBlock"])')
token=$(cargo run -q --release --example bench_holder_page -- "$copy" busiest 0 0 | sed -n 's/^busiest token \(0x[0-9a-fA-F]*\).*/\1/p')
"$bin" unwind --datadir "$copy" --to $((tip - blocks)) --log warn >/dev/null
"$bin" serve --datadir "$copy" --http-addr 127.0.0.1:$port --log warn >/dev/null 2>&1 &
server=$!
for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:$port && break; sleep 0.1; done
page() {
  curl -s -o /dev/null -w '%{time_total}' -X POST -H 'content-type: application/json' \
    --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ots2_getTokenHolders\",\"params\":[\"$token\",$1,25]}" \
    http://127.0.0.1:$port
}
echo "token $token, position $position, $blocks blocks"
echo "before: first $(page "$position") s, again $(page "$position") s"
"$bin" sync --datadir "$copy" --source "$recording" --exit-at-head --write-path incremental --log warn >/dev/null
echo "after the blocks: first $(page "$position") s, again $(page "$position") s"
