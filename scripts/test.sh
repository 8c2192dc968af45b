#!/usr/bin/env bash
# Runs every check CI runs: installs the test bed, then formatting, lints and all tests
# (unit tests, real MDBX on disk, and integration tests against a real Anvil node).
set -euo pipefail
cd "$(dirname "$0")/.."

# A CI run builds once from a clean clone: incremental state would only take disk
# (3 GB for the test binaries) that a CI machine may not have.
if [ "${CI:-}" = "true" ]; then
    export CARGO_INCREMENTAL=0
fi

started=$(date +%s)
bash testbed/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --all-targets --locked
# What the run cost: the figures CI's time and disk limits are measured against.
echo "test.sh: $(( $(date +%s) - started )) s; target/ holds $(du -sh target 2>/dev/null | cut -f1)" >&2
