#!/usr/bin/env bash
# Random reorgs of depth 1-64 while the indexer follows a local Anvil, over HTTP and over ws://,
# with the server's caches warm: after each reorg the pages of the parties it touched are
# compared with the node's chain, and `check` runs at the end. Prints the follow time after each
# reorg and, per transport, the median and the max.
#
#   scripts/reorg-soak.sh [ROUNDS]     (default 1000 per transport)
set -euo pipefail
cd "$(dirname "$0")/.."
bash testbed/setup.sh
OTS_SOAK_ROUNDS=${1:-1000} cargo test --release --locked --test reorg_soak -- --nocapture --test-threads 1
