#!/usr/bin/env bash
# Pending pool benchmark: memory of the pool at its bound (allocator-counted beside the pool's
# own estimate), insert rate and one address page. No node needed. Arguments: MAX ROUNDS
# (defaults 10000 5); prints one JSON line.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --example bench_pending
./target/release/examples/bench_pending "$@"
