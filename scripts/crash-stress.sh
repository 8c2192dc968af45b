#!/usr/bin/env bash
# Kill -9 stress, two modes.
#
#   scripts/crash-stress.sh [ROUNDS]
#     The crash test with many more rounds than CI runs (default 200): every round kills the
#     indexer at a random moment of catch-up from a local Anvil while a `serve` process reads,
#     and checks the database.
#
#   scripts/crash-stress.sh --recording [KILLS] [SIZE]
#     A long catch-up: `sync --source` over a generated mainnet-shaped recording of SIZE
#     transactions (default 1,000,000) in batches of 50 blocks, killed with SIGKILL up to KILLS
#     times (default 100). Each run is killed a random 0-400 ms after its first batch commits, so
#     every kill lands while the run is still catching up (a run that reached the head has
#     exited, and is not counted). `check` runs after every kill; at the end the database must
#     hash (`check --hash`) the same as a clean index of the same recording.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != "--recording" ]; then
  bash testbed/setup.sh
  OTS_CRASH_ROUNDS=${1:-200} cargo test --locked --test crash -- --nocapture
  exit 0
fi

KILLS=${2:-100}
SIZE=${3:-1000000}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cargo build --release --locked --bin ots-indexer --example gen_chain
BIN=./target/release/ots-indexer
RECORDING="$WORK/chain.rec.gz"
./target/release/examples/gen_chain "$SIZE" 7 "$RECORDING"

kills=0
rounds=0
while [ "$kills" -lt "$KILLS" ]; do
  rounds=$((rounds + 1))
  "$BIN" sync --exit-at-head --batch-blocks 50 --source "$RECORDING" --datadir "$WORK/db" \
    --log ots::sync=debug,warn > "$WORK/run.log" 2>&1 &
  pid=$!
  # Wait for this run's first commit (it resumes from the last one), then a random moment.
  while kill -0 "$pid" 2>/dev/null && ! grep -q "indexed batch" "$WORK/run.log"; do sleep 0.02; done
  sleep "0.$(printf '%03d' $((RANDOM % 400)))"
  if kill -9 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null || true
    kills=$((kills + 1))
    at=$(grep -o "indexed batch from=[0-9]* to=[0-9]*" "$WORK/run.log" | tail -1 | grep -o "to=[0-9]*" || true)
    if ! "$BIN" check --datadir "$WORK/db" --log warn > "$WORK/check.log" 2>&1; then
      echo "check failed after kill $kills:" >&2
      cat "$WORK/check.log" >&2
      exit 1
    fi
    echo "kill $kills: mid-catch-up (last commit of that run: ${at:-none}); check ok"
  else
    # The run reached the head before the kill: the catch-up is over.
    wait "$pid" || { echo "sync failed:" >&2; cat "$WORK/run.log" >&2; exit 1; }
    echo "run $rounds reached the head before its kill"
    break
  fi
done
# Finish the catch-up, then compare with a clean index of the same recording.
"$BIN" sync --exit-at-head --batch-blocks 50 --source "$RECORDING" --datadir "$WORK/db" --log warn
"$BIN" sync --exit-at-head --source "$RECORDING" --datadir "$WORK/clean" --log warn
crashed=$("$BIN" check --hash --datadir "$WORK/db" --log warn | tail -1)
clean=$("$BIN" check --hash --datadir "$WORK/clean" --log warn | tail -1)
echo "killed: $crashed"
echo "clean:  $clean"
if [ "$crashed" != "$clean" ]; then
  echo "FAILED: the database killed $kills times differs from a clean index" >&2
  exit 1
fi
echo "ok: $kills kills with SIGKILL, every one mid-catch-up; check passed after each; the final tables equal a clean index's"
