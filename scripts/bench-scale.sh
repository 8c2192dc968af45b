#!/usr/bin/env bash
# Mainnet-scale benchmark: generates a mainnet-shaped chain of SIZE transactions (default
# 21,000,000: about 51 M transfer logs) as a recording, then indexes it with the real binary and
# prints, in one run: end-to-end rates, the writer against two plain-MDBX yardsticks, bytes per
# transfer log and per appearance for every table (as written and compacted), RSS over the run,
# query latency at 1 and 32 clients, the index's part of list/search pages (Etherscan's deep
# pages of the busiest address after counting its lists from the recording, about a minute more),
# unwinding 64 blocks (median of three),
# `check`, and the stage regime (the chain caught up again in bulk stages of 1 % of its blocks
# each, as mainnet's catch-up runs: stage count, per-stage merge seconds and where they go by
# family, bytes per log, a projection).
# The last line is one JSON object with every figure (docs/benchmarks.md explains them).
#
# Usage: scripts/bench-scale.sh [SIZE]
# Environment: BENCH_DIR (default ${TMPDIR:-/tmp}/ots-bench-scale) holds the recording, which is
# kept and reused by the next run of the same SIZE and SEED, and the database, which is not;
# SEED (default 1); SYNC_FLAGS (default "--stage-max-run-mib 16384": `sync` runs with its
# defaults, what a user gets, but for the bound on a stage's run files, fixed so that the chain
# is one stage whatever the disk holds — the default bound comes from the free disk; e.g.
# "--write-path incremental" to measure the other path); OTS_BENCH_STAGE_REGIME=0 leaves the
# stage regime out, OTS_BENCH_STAGE_BLOCKS sets its stage size, OTS_BENCH_RESIDENT_SHARE=0.1 runs
# it again with its page cache held to that share of the database file (a memory cgroup, v1; needs
# root: `stage_regime_bounded`, and the defaults' stages under `stage_regime_defaults.bounded`),
# OTS_BENCH_ONE_PERCENT=0 leaves out the 1 % stages (only the defaults' run),
# OTS_BENCH_MAINNET_SPARE_GIB (default 1024) is the disk a mainnet host has to spare, from which
# the stage count the defaults give mainnet follows, run on this chain as
# `stage_regime_defaults`. Needs at the default size: about
# 7 GB of disk for the recording, 5 GB for the database and its compacted copy, the bulk stages'
# run files, 4 GiB of memory, and about 25 minutes on 2 cores (3.5 of them generating the
# recording, 14 the stage regimes).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-21000000}
SEED=${SEED:-1}
DIR=${BENCH_DIR:-${TMPDIR:-/tmp}/ots-bench-scale}

cargo build --release --locked --bin ots-indexer --example gen_chain --example bench_scale
# shellcheck source=scripts/lib/recording.sh
. scripts/lib/recording.sh
cleanup() { rm -rf "$DIR/db" "$DIR/db-tenth" "$DIR/db-compacted" "$DIR/db-staged" "$DIR/db-unwind"; }
trap cleanup EXIT
# shellcheck disable=SC2086 # SYNC_FLAGS is a list of flags
./target/release/examples/bench_scale "$RECORDING" "$DIR" ./target/release/ots-indexer ${SYNC_FLAGS---stage-max-run-mib 16384}
