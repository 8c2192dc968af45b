#!/usr/bin/env bash
# Index write-path benchmark: generates a chain of ERC20 Transfer logs in memory and prints the
# batch writer's logs/s, bytes per indexed id and peak RSS next to a plain sorted MDBX insert.
# Arguments: LOGS ADDRESSES LOGS_PER_BLOCK BLOCKS_PER_BATCH (defaults 5000000 200000 500 1000: 1000 blocks per transaction is `run`'s --batch-blocks default).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --example bench_index
./target/release/examples/bench_index "$@"
