#!/usr/bin/env bash
# ots_ address-page benchmark: builds a generated chain (default 100,000 transactions) on a local
# Anvil, indexes it, and prints the median time of ots_getTransactionBySenderAndNonce and
# ots_searchTransactionsBefore over HTTP, Anvil's own against ours, for a near-genesis address and
# for the busiest one, plus the appearance index's bytes per appearance.
# Arguments: TRANSACTIONS TXS_PER_BLOCK ANVIL_ROUNDS OUR_ROUNDS (defaults 100000 200 3 21).
set -euo pipefail
cd "$(dirname "$0")/.."
bash testbed/setup.sh
cargo build --release --locked --example bench_ots
./target/release/examples/bench_ots "$@"
