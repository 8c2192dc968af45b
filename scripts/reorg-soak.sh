#!/usr/bin/env bash
# Random reorgs of depth 1-64 while the indexer follows a local node, over HTTP and over ws://,
# with the server's caches warm: after each reorg the pages of the parties it touched are
# compared with the node's chain, and `check` runs at the end. On Anvil (`anvil_reorg`) and on
# geth (`debug_setHead`, then a new fork sealed on top). Prints the follow time after each reorg
# and, per node and transport, the median and the max.
#
#   scripts/reorg-soak.sh [ROUNDS] [anvil|geth]     (default 1000 rounds per node and transport, both nodes)
set -euo pipefail
cd "$(dirname "$0")/.."
bash testbed/setup.sh
OTS_SOAK_ROUNDS=${1:-1000} cargo test --release --locked --test it "reorg_soak::random_reorgs_on_${2:-}" -- --nocapture --test-threads 1
