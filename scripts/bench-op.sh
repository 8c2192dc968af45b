#!/usr/bin/env bash
# The OP Stack's busiest addresses: builds a chain on `anvil --optimism` whose every block begins
# with an L1 attributes deposit to the L1Block predeploy (default 20,000 blocks of 5
# transactions), indexes it, and prints the median time of the depositor's, the predeploy's, a
# hub's and a near-genesis address's pages (newest, new, oldest) and summaries over HTTP.
# Arguments: BLOCKS TXS_PER_BLOCK ROUNDS (defaults 20000 5 21).
set -euo pipefail
cd "$(dirname "$0")/.."
bash testbed/setup.sh
cargo build --release --locked --example bench_op
./target/release/examples/bench_op "$@"
