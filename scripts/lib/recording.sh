# Sourced by the benchmark scripts: sets RECORDING to the generated mainnet-shaped recording of
# $SIZE transactions with seed $SEED under $DIR, generating it (with the release gen_chain,
# already built) unless a complete one is there. The recording format is in the name: one of an
# older format is generated again.
mkdir -p "$DIR"
RECORDING="$DIR/chain-$SIZE-seed$SEED-f4.rec.zst"
if [ ! -s "$RECORDING" ]; then
  echo "generating $SIZE transactions (seed $SEED) to $RECORDING" >&2
  ./target/release/examples/gen_chain "$SIZE" "$SEED" "$RECORDING.part" >&2
  mv "$RECORDING.part" "$RECORDING"
else
  echo "reusing $RECORDING" >&2
fi
