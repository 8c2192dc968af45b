#!/usr/bin/env bash
# Kill -9 stress, two modes.
#
#   scripts/crash-stress.sh [ROUNDS]
#     The crash test with many more rounds than CI runs (default 200): every round kills the
#     indexer at a random moment of catch-up from a local Anvil while a `serve` process reads,
#     and checks the database.
#
#   scripts/crash-stress.sh --recording [KILLS] [SIZE]
#     A long catch-up through bulk stages: `sync --source --write-path bulk` over a generated
#     mainnet-shaped recording of SIZE transactions (default 3,000,000), with small stages (1 MiB
#     of buffered rows, 2 MiB of run files: a stage every few hundred blocks), killed with SIGKILL
#     up to KILLS times (default 100). Each run is let commit one stage (so every run moves the
#     index on), then killed in the phase it is due for, in turn: while the next stage gathers
#     (a random 0-300 ms after it starts), while it merges (0-100 ms after its merge starts), or
#     as it commits (at its "committing" line). The phase a kill landed in is read from the run's
#     log and counted. `check` runs after every kill; at the end the database must hash
#     (`check --hash`) the same as a clean index of the same recording, and after every kill the
#     index must hold the last stage the run logged as committed. The stages keep their journal
#     as when fetching from a node (STAGE_JOURNAL=off: not), so a restart after a kill while
#     gathering first gathers the journalled blocks again; the runs that did are counted.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != "--recording" ]; then
  bash testbed/setup.sh
  OTS_CRASH_ROUNDS=${1:-200} cargo test --locked --test it crash:: -- --nocapture
  exit 0
fi

KILLS=${2:-100}
SIZE=${3:-3000000}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cargo build --release --locked --bin ots-indexer --example gen_chain
BIN=./target/release/ots-indexer
RECORDING="$WORK/chain.rec.zst"
./target/release/examples/gen_chain "$SIZE" 7 "$RECORDING"
SYNC=(sync --exit-at-head --write-path bulk --batch-blocks 50 --stage-buffer-mib 1 --stage-max-run-mib 2
  --stage-journal "${STAGE_JOURNAL:-on}" --source "$RECORDING" --datadir "$WORK/db")

lines() { grep -c "$1" "$WORK/run.log" || true; }
# Waits until the run's log has more than $2 lines matching $1; false if the run ended first.
wait_for() {
  while kill -0 "$pid" 2>/dev/null; do
    [ "$(lines "$1")" -gt "$2" ] && return 0
    sleep 0.005
  done
  return 1
}
# The phase the run was in when killed: the last phase line of its log.
phase_of_kill() {
  local last
  last=$(grep -oE "bulk stage (started|merging|committing|committed)" "$WORK/run.log" | tail -1)
  case "$last" in
    "bulk stage merging") echo merging ;;
    "bulk stage committing") echo committing ;;
    "bulk stage committed") echo between-stages ;;
    *) echo collecting ;;
  esac
}

declare -A landed=([collecting]=0 [merging]=0 [committing]=0 [between-stages]=0)
targets=(collecting merging committing)
kills=0
rounds=0
resumed=0
while [ "$kills" -lt "$KILLS" ]; do
  rounds=$((rounds + 1))
  "$BIN" "${SYNC[@]}" --log ots::sync=info,ots::index=info,warn > "$WORK/run.log" 2>&1 &
  pid=$!
  target=${targets[$((kills % 3))]}
  # One stage of this run commits first, so that every run moves the index on.
  ok=true
  wait_for "bulk stage committed" 0 || ok=false
  if $ok; then
    case "$target" in
      collecting) wait_for "bulk stage started" 1 && sleep "0.$(printf '%03d' $((RANDOM % 300)))" || ok=false ;;
      merging) wait_for "bulk stage merging" 1 && sleep "0.$(printf '%03d' $((RANDOM % 100)))" || ok=false ;;
      committing) wait_for "bulk stage committing" 1 || ok=false ;;
    esac
  fi
  if $ok && kill -9 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null || true
    if grep -q "bulk stage resumed from its journal" "$WORK/run.log"; then resumed=$((resumed + 1)); fi
    kills=$((kills + 1))
    phase=$(phase_of_kill)
    landed[$phase]=$((landed[$phase] + 1))
    if ! "$BIN" check --datadir "$WORK/db" --log warn > "$WORK/check.log" 2>&1; then
      echo "check failed after kill $kills:" >&2
      cat "$WORK/check.log" >&2
      exit 1
    fi
    # A killed process never takes back a stage it logged as committed.
    committed=$(grep "bulk stage committed" "$WORK/run.log" | tail -1 | grep -oE ' to=[0-9]+' | cut -d= -f2 || true)
    indexed=$("$BIN" status --datadir "$WORK/db" --log warn | awk '/^indexed block/ {print $3}')
    if [ -n "$committed" ] && { [ "$indexed" = "-" ] || [ "$indexed" -lt "$committed" ]; }; then
      echo "kill $kills: the run committed a stage to block $committed, the index is at $indexed" >&2
      exit 1
    fi
    echo "kill $kills (aimed at $target): landed while $phase; check ok; indexed to $indexed"
  else
    # The run reached the head before its kill: the catch-up is over.
    wait "$pid" || { echo "sync failed:" >&2; cat "$WORK/run.log" >&2; exit 1; }
    echo "run $rounds reached the head before its kill"
    break
  fi
done
# Finish the catch-up, then compare with a clean index of the same recording.
"$BIN" "${SYNC[@]}" --log warn
"$BIN" sync --exit-at-head --write-path incremental --source "$RECORDING" --datadir "$WORK/clean" --log warn
crashed=$("$BIN" check --hash --datadir "$WORK/db" --log warn | tail -1)
clean=$("$BIN" check --hash --datadir "$WORK/clean" --log warn | tail -1)
echo "killed: $crashed"
echo "clean:  $clean"
if [ "$crashed" != "$clean" ]; then
  echo "FAILED: the database killed $kills times differs from a clean index" >&2
  exit 1
fi
echo "kills by phase: collecting ${landed[collecting]}, merging ${landed[merging]}, committing ${landed[committing]}, between stages ${landed[between-stages]}"
echo "runs that began by gathering a killed stage's journal again: $resumed"
echo "ok: $kills kills with SIGKILL during a bulk catch-up; check passed after each; the final tables equal a clean batch-by-batch index's"
