//! The chunk codec of `OtsTransferRowsIndex`: its ids (row ids: TxId ‖ kind ‖ code, docs/format.md,
//! "Address indexes") packed as gaps instead of 8 bytes each. An address that makes many rows
//! per transaction (a pool, a router, a busy trader) has a row id for most of its transactions,
//! a few blocks apart: about 3 bytes each packed.

use super::{
    appearances::{get_varint, put_varint},
    ChunkIds, CodecError, ValueCodec,
};

/// Bits of a row id below its TxId.
const SHIFT: u32 = 12;
/// Bits of a TxId below its block.
const INDEX_BITS: u32 = 20;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// One chunk of row ids, ascending. Bytes: the first id (8, BE), then for each next id the
/// blocks from the one before (varint), then `step << 3 | kind << 1 | other` (varint), `step`
/// being the transaction index (from the one before's within a block, else itself) and `other`
/// set when the code is not 1 (two rows, the common case), and then the code (varint).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RowIdChunk(pub Vec<u64>);

/// `(block, index, kind, code)` of a row id.
const fn parts(id: u64) -> (u64, u64, u64, u64) {
    let tx = id >> SHIFT;
    (tx >> INDEX_BITS, tx & INDEX_MASK, (id >> 10) & 3, id & 0x3ff)
}

impl ValueCodec for RowIdChunk {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 3 * self.0.len());
        let mut ids = self.0.iter();
        let Some(&first) = ids.next() else { return out };
        out.extend_from_slice(&first.to_be_bytes());
        let mut before = parts(first);
        for &id in ids {
            let now = parts(id);
            let blocks = now.0 - before.0;
            let step = if blocks == 0 { now.1 - before.1 } else { now.1 };
            put_varint(&mut out, blocks);
            put_varint(&mut out, (step << 3) | (now.2 << 1) | u64::from(now.3 != 1));
            if now.3 != 1 {
                put_varint(&mut out, now.3);
            }
            before = now;
        }
        out
    }

    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        let bad = |why: &'static str| CodecError::new("row id chunk", why, bytes.len());
        if bytes.is_empty() {
            return Ok(Self(Vec::new()));
        }
        let first: [u8; 8] =
            bytes.get(..8).and_then(|b| b.try_into().ok()).ok_or_else(|| bad("shorter than one id"))?;
        let first = u64::from_be_bytes(first);
        let mut ids = vec![first];
        let (mut block, mut index, ..) = parts(first);
        let mut at = 8;
        while at < bytes.len() {
            let blocks = get_varint(bytes, &mut at)?;
            let packed = get_varint(bytes, &mut at)?;
            let (step, kind) = (packed >> 3, (packed >> 1) & 3);
            let code = if packed & 1 == 1 { get_varint(bytes, &mut at)? } else { 1 };
            block = block.checked_add(blocks).ok_or_else(|| bad("a block past the ids' reach"))?;
            index = if blocks == 0 { index.checked_add(step) } else { Some(step) }
                .filter(|i| *i <= INDEX_MASK)
                .ok_or_else(|| bad("a transaction index past 2^20"))?;
            if kind == 3 || code > 0x3ff || block >> (64 - SHIFT - INDEX_BITS) != 0 {
                return Err(bad("a kind, code or block past the ids' reach"));
            }
            let id = (((block << INDEX_BITS) | index) << SHIFT) | (kind << 10) | code;
            if ids.last().is_some_and(|&last| id <= last) {
                return Err(bad("ids are not strictly ascending"));
            }
            ids.push(id);
        }
        Ok(Self(ids))
    }
}

impl ChunkIds for RowIdChunk {
    fn from_ids(ids: Vec<u64>) -> Self {
        Self(ids)
    }
    fn into_ids(self) -> Vec<u64> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::hex;

    use super::*;

    /// Block `block`, transaction `index`, kind `kind`, code `code`.
    const fn row(block: u64, index: u64, kind: u64, code: u64) -> u64 {
        (((block << 20) | index) << 12) | (kind << 10) | code
    }

    #[test]
    fn row_ids_pack_as_gaps_after_the_first() {
        let chunk = RowIdChunk(vec![
            row(0x10, 5, 0, 1),
            row(0x10, 7, 1, 2),
            row(0x12, 3, 0, 1_023),
            row(0x12, 9, 2, 1),
        ]);
        let bytes = chunk.encode_value();
        // The first id whole; then no block and 2 transactions on, kind 1, a code other than 1
        // (2 << 3 | 1 << 1 | 1 = 0x13), code 2; then 2 blocks on, transaction 3, kind 0, code
        // 1,023 (FF 07); then 6 transactions on, kind 2, code 1 (6 << 3 | 2 << 1 = 0x34).
        assert_eq!(bytes, hex!("0000001000005001 00 13 02 02 19 ff07 00 34"));
        assert_eq!(RowIdChunk::decode_value(&bytes).expect("decode"), chunk);
        // One transaction's rows of two kinds: the same transaction, kinds ascending.
        let same_tx = RowIdChunk(vec![row(9, 1, 0, 3), row(9, 1, 2, 1)]);
        assert_eq!(RowIdChunk::decode_value(&same_tx.encode_value()).expect("decode"), same_tx);
        assert_eq!(RowIdChunk::decode_value(&[]).expect("empty"), RowIdChunk(Vec::new()));
    }

    /// Ascending ids of every shape round-trip: blocks far apart, transactions past a byte,
    /// every kind, codes 1 (packed) and others.
    #[test]
    fn any_ascending_row_ids_round_trip() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        let (mut block, mut ids) = (0, Vec::new());
        for _ in 0..2_000 {
            block += [0, 0, 1, 2, 300, 1 << 20][next(6) as usize];
            let (index, kind, code) = (next(1 << 20), next(3), [1, 1, 2, 1_023][next(4) as usize]);
            let id = row(block, index, kind, code);
            if ids.last().is_none_or(|&last| id > last) {
                ids.push(id);
            }
        }
        let chunk = RowIdChunk(ids);
        assert_eq!(RowIdChunk::decode_value(&chunk.encode_value()).expect("decode"), chunk);
    }

    #[test]
    fn a_chunk_that_does_not_grow_or_runs_short_is_refused() {
        let mut bytes = RowIdChunk(vec![row(3, 4, 1, 5)]).encode_value();
        assert!(RowIdChunk::decode_value(&bytes[..5]).is_err());
        // The same id again: no block, no transaction on, the same kind and code.
        bytes.extend_from_slice(&[0, (1 << 1) | 1, 5]);
        assert!(RowIdChunk::decode_value(&bytes).is_err());
        // A varint cut short.
        let mut cut = RowIdChunk(vec![row(3, 4, 1, 5)]).encode_value();
        cut.extend_from_slice(&[1, 0x80]);
        assert!(RowIdChunk::decode_value(&cut).is_err());
    }
}
