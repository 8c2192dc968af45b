#!/usr/bin/env bash
# Stage-count equality at scale: indexes one generated mainnet-shaped recording of SIZE
# transactions (default 2,000,000) batch by batch (the incremental path) and in bulk stages —
# one stage, 10 and 100 stages of equal block counts, stages bounded by their run files (compressed
# after the first, `--stage-compress-runs auto`) — and prints each database's
# `check --hash`, seconds and file size. Fails unless every hash is the same and `check` passes
# on each: the tables must not depend on how many stages wrote them. Every run keeps the
# party-token index (`--party-token-index on`), so that its tables are compared too.
#
# Usage: scripts/stage-hash.sh [SIZE]
# Environment: BENCH_DIR (default ${TMPDIR:-/tmp}/ots-bench-scale) keeps the recording (shared
# with scripts/bench-scale.sh); SEED (default 1). Needs about 2 GB of disk and 6 minutes at the
# default size on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-2000000}
SEED=${SEED:-1}
DIR=${BENCH_DIR:-${TMPDIR:-/tmp}/ots-bench-scale}

cargo build --release --locked --bin ots-indexer --example gen_chain
BIN=./target/release/ots-indexer
# shellcheck source=scripts/lib/recording.sh
. scripts/lib/recording.sh
WORK=$(mktemp -d "$DIR/stage-hash.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

index() {
  local name=$1
  shift
  local started ended hash bytes
  started=$(date +%s.%N)
  "$BIN" sync --exit-at-head --source "$RECORDING" --datadir "$WORK/$name" --log warn --party-token-index on "$@"
  ended=$(date +%s.%N)
  "$BIN" check --datadir "$WORK/$name" --log warn > /dev/null
  hash=$("$BIN" check --hash --datadir "$WORK/$name" --log warn | tail -1)
  bytes=$(stat -c %s "$WORK/$name/mdbx.dat")
  printf '%-16s %7.1f s %12d bytes  %s\n' "$name" "$(echo "$ended - $started" | bc)" "$bytes" "$hash"
  echo "$hash" >> "$WORK/hashes"
}

index one-stage --write-path bulk
last=$("$BIN" status --datadir "$WORK/one-stage" | awk '/^indexed block/ {print $3}')
rm -rf "${WORK:?}/one-stage"
for stages in 10 100; do
  index "$stages-stages" --write-path bulk --stage-max-blocks $(((last + stages) / stages))
  rm -rf "${WORK:?}/$stages-stages"
done
# Stages that end on their run files' bound: the first writes them plain, the rest compressed.
index run-bound --write-path bulk --stage-max-run-mib 48 --stage-compress-runs auto
rm -rf "${WORK:?}/run-bound"
index batches --write-path incremental
rm -rf "${WORK:?}/batches"
if [ "$(sort -u "$WORK/hashes" | wc -l)" -ne 1 ]; then
  echo "FAILED: the tables differ with the number of stages" >&2
  exit 1
fi
echo "ok: 1, 10 and 100 stages, stages with compressed run files and batches give the same tables ($last blocks)"
