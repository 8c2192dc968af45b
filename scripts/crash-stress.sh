#!/usr/bin/env bash
# The kill -9 test with many more rounds than CI runs (default 200): every round kills the
# indexer at a random moment of catch-up while a `serve` process reads, and checks the database.
set -euo pipefail
cd "$(dirname "$0")/.."
bash testbed/setup.sh
OTS_CRASH_ROUNDS=${1:-200} cargo test --locked --test crash -- --nocapture
