//! Codecs of the appearance family (not part of ots2): packed TxId lists, contract creations and
//! sender-nonce anchors (docs/format.md, "Appearances").
//!
//! A TxId list is stored as chunks keyed `address ‖ the chunk's largest TxId`; a chunk's value
//! holds the number of ids (and of sent ids) in the address's earlier chunks, its own count with
//! how it marks the ids the address sent, and the gaps from each id to the one before it, newest
//! first, as LEB128 varints. A gap is the block distance and then either the older id's index in
//! its block (another block) or the index distance minus one (same block): one byte each for an
//! address seen every few blocks, where the raw 8-byte ids of the transfer indexes cost eight.
//!
//! The sent marks replace a second list of the transactions each address sent: a chunk whose ids
//! were all sent, or none, says so in two bits of its count; only a chunk of both carries a
//! bitmap, one bit an id.

use alloy_primitives::Address;

use super::{address, address_u64_key, be_u64, split_address_u64_key, CodecError, KeyCodec, ValueCodec};
use crate::txid::TxId;

/// Bytes a packed chunk may reach before the next id starts a new chunk: small enough that an
/// append rewrites little, large enough that the 28-byte key and the node header cost ~4%.
pub const MAX_PACKED_BYTES: usize = 1000;

/// Key of a packed list chunk: `address (20) ‖ largest TxId in the chunk (8, BE)`. A seek to
/// `address ‖ id` lands on the chunk holding `id`, or the first one after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListKey {
    /// The address.
    pub address: Address,
    /// The chunk's largest TxId.
    pub last: u64,
}

impl KeyCodec for ListKey {
    type Encoded = [u8; 28];
    fn encode_key(&self) -> [u8; 28] {
        address_u64_key(&self.address, self.last)
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        let (address, last) = split_address_u64_key(bytes, "list key")?;
        Ok(Self { address, last })
    }
}

/// A packed chunk's bytes, as stored: only [`PackedIds::unpack`] with the chunk's key makes ids
/// of them, since the key holds the newest id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PackedIds(pub Vec<u8>);

impl ValueCodec for PackedIds {
    fn encode_value(&self) -> Vec<u8> {
        self.0.clone()
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() < 3 {
            return Err(CodecError::new("packed ids", "expected at least 3 bytes", bytes.len()));
        }
        Ok(Self(bytes.to_vec()))
    }
}

/// A chunk unpacked: its ids, ascending, which of them the address sent, and how many ids (and
/// sent ids) the address's earlier chunks hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Unpacked {
    /// Ids in the address's earlier chunks.
    pub base: u64,
    /// Ids in the address's earlier chunks that it sent.
    pub sent_base: u64,
    /// This chunk's ids, ascending; the last one is the key's.
    pub ids: Vec<u64>,
    /// Whether the address sent each of `ids` (same positions).
    pub sent: Vec<bool>,
}

impl Unpacked {
    /// The ids this chunk holds that the address sent, ascending.
    pub fn sent_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.ids.iter().zip(&self.sent).filter(|(_, &s)| s).map(|(&id, _)| id)
    }
}

/// A chunk's header alone: what counting and finding the chunk of the k-th id need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkCounts {
    /// Ids in the address's earlier chunks.
    pub base: u64,
    /// Ids in this chunk.
    pub n: u64,
    /// Sent ids in the address's earlier chunks.
    pub sent_base: u64,
    /// Sent ids in this chunk.
    pub sent: u64,
}

/// How a chunk says which of its ids were sent: none, all, or a bitmap of its ids.
const SENT_NONE: u64 = 0;
const SENT_ALL: u64 = 1;
const SENT_BITMAP: u64 = 2;

fn sent_mode(sent: &[bool]) -> u64 {
    match (sent.iter().any(|&s| s), sent.iter().all(|&s| s)) {
        (false, _) => SENT_NONE,
        (true, true) => SENT_ALL,
        (true, false) => SENT_BITMAP,
    }
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes `put_varint` writes for `v`.
pub const fn varint_len(v: u64) -> usize {
    let bits = 64 - v.leading_zeros() as usize;
    if bits == 0 {
        1
    } else {
        bits.div_ceil(7)
    }
}

pub(super) fn get_varint(bytes: &[u8], at: &mut usize) -> Result<u64, CodecError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let Some(&b) = bytes.get(*at) else {
            return Err(CodecError::new("packed ids", "a varint runs past the end", bytes.len()));
        };
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(CodecError::new("packed ids", "a varint is longer than 10 bytes", bytes.len()))
}

/// The gap from `older` to `newer` (`older < newer`) as two varints.
fn put_gap(out: &mut Vec<u8>, newer: u64, older: u64) {
    let (n, o) = (TxId(newer), TxId(older));
    let blocks = n.block() - o.block();
    put_varint(out, blocks);
    put_varint(out, if blocks == 0 { n.index() - o.index() - 1 } else { o.index() });
}

/// Bytes of the gap from `older` to `newer`.
pub const fn gap_len(newer: u64, older: u64) -> usize {
    let (n, o) = (TxId(newer), TxId(older));
    let blocks = n.block() - o.block();
    varint_len(blocks) + varint_len(if blocks == 0 { n.index() - o.index() - 1 } else { o.index() })
}

/// The header: the counts, and where the sent bitmap or the gaps start.
struct Header {
    counts: ChunkCounts,
    mode: u64,
    /// Offset of the bytes after the count varints.
    body: usize,
}

impl PackedIds {
    /// Packs `ids` (ascending, not empty) with their sent flags behind `base` earlier ids of
    /// which `sent_base` were sent; the chunk's key is the last id.
    pub fn pack(base: u64, sent_base: u64, ids: &[u64], sent: &[bool]) -> Self {
        debug_assert_eq!(ids.len(), sent.len());
        let mode = sent_mode(sent);
        let mut out = Vec::with_capacity(6 + 2 * ids.len());
        put_varint(&mut out, base);
        put_varint(&mut out, sent_base);
        put_varint(&mut out, (ids.len() as u64) << 2 | mode);
        if mode == SENT_BITMAP {
            let at = out.len();
            out.resize(at + ids.len().div_ceil(8), 0);
            for (i, _) in sent.iter().enumerate().filter(|(_, &s)| s) {
                out[at + i / 8] |= 1 << (i % 8);
            }
        }
        for pair in ids.windows(2).rev() {
            put_gap(&mut out, pair[1], pair[0]);
        }
        Self(out)
    }

    fn header(&self) -> Result<Header, CodecError> {
        let bytes = &self.0;
        let bad = |reason| CodecError::new("packed ids", reason, bytes.len());
        let mut at = 0;
        let base = get_varint(bytes, &mut at)?;
        let sent_base = get_varint(bytes, &mut at)?;
        let head = get_varint(bytes, &mut at)?;
        let (n, mode) = (head >> 2, head & 3);
        if n == 0 || n > bytes.len() as u64 {
            return Err(bad("its count does not fit its length"));
        }
        let sent = match mode {
            SENT_NONE => 0,
            SENT_ALL => n,
            SENT_BITMAP => {
                let map = bytes
                    .get(at..at + (n as usize).div_ceil(8))
                    .ok_or_else(|| bad("its sent bitmap runs past the end"))?;
                let ones: u64 = map.iter().map(|b| u64::from(b.count_ones())).sum();
                // Canonical bytes only: no bit past the ids, and a bitmap only where they differ.
                let tail = (n % 8) as u32;
                if tail != 0 && map[map.len() - 1] >> tail != 0 {
                    return Err(bad("its sent bitmap has bits past its ids"));
                }
                if ones == 0 || ones == n {
                    return Err(bad("a sent bitmap where every id agrees"));
                }
                ones
            }
            _ => return Err(bad("an unknown sent mode")),
        };
        Ok(Header { counts: ChunkCounts { base, n, sent_base, sent }, mode, body: at })
    }

    /// The ids of the chunk keyed `last`, ascending, with their sent flags.
    pub fn unpack(&self, last: u64) -> Result<Unpacked, CodecError> {
        let bytes = &self.0;
        let bad = |reason| CodecError::new("packed ids", reason, bytes.len());
        let Header { counts, mode, body } = self.header()?;
        let n = counts.n as usize;
        let mut at = body;
        let sent: Vec<bool> = match mode {
            SENT_BITMAP => {
                let map = &bytes[at..at + n.div_ceil(8)];
                at += map.len();
                (0..n).map(|i| map[i / 8] >> (i % 8) & 1 == 1).collect()
            }
            mode => vec![mode == SENT_ALL; n],
        };
        let mut ids = Vec::with_capacity(n);
        let mut newer = TxId(last);
        ids.push(last);
        for _ in 1..n {
            let blocks = get_varint(bytes, &mut at)?;
            let rest = get_varint(bytes, &mut at)?;
            let older = if blocks == 0 {
                newer.index().checked_sub(rest + 1).map(|i| TxId(newer.0 - newer.index() + i))
            } else {
                newer.block().checked_sub(blocks).and_then(|b| TxId::new(b, rest).ok())
            };
            newer = older.ok_or_else(|| bad("a gap reaches below TxId 0"))?;
            ids.push(newer.0);
        }
        if at != bytes.len() {
            return Err(bad("bytes left after the last gap"));
        }
        ids.reverse();
        Ok(Unpacked { base: counts.base, sent_base: counts.sent_base, ids, sent })
    }

    /// Only the header: how many ids (and sent ids) the earlier chunks hold and this one holds.
    pub fn counts(&self) -> Result<ChunkCounts, CodecError> {
        Ok(self.header()?.counts)
    }
}

/// Splits ascending `ids` with their sent flags (whose first `base` predecessors, `sent_base` of
/// them sent, live in earlier chunks) into chunks of at most [`MAX_PACKED_BYTES`]: `(key's last
/// id, packed)` in order. Greedy from each chunk's first id, so the chunks depend on the ids and
/// flags alone.
pub fn pack_chunks(mut base: u64, mut sent_base: u64, ids: &[u64], sent: &[bool]) -> Vec<(u64, PackedIds)> {
    debug_assert_eq!(ids.len(), sent.len());
    let mut out = Vec::new();
    let mut start = 0;
    while start < ids.len() {
        // Header room for the largest base and count varints a chunk can need.
        let mut len = varint_len(base) + varint_len(sent_base) + 3;
        let mut mixed = false;
        let mut end = start + 1;
        while end < ids.len() {
            let gap = gap_len(ids[end], ids[end - 1]);
            let mixed_with = mixed || sent[end] != sent[start];
            let bitmap = if mixed_with { (end + 1 - start).div_ceil(8) } else { 0 };
            if len + gap + bitmap > MAX_PACKED_BYTES {
                break;
            }
            len += gap;
            mixed = mixed_with;
            end += 1;
        }
        let flags = &sent[start..end];
        out.push((ids[end - 1], PackedIds::pack(base, sent_base, &ids[start..end], flags)));
        base += (end - start) as u64;
        sent_base += flags.iter().filter(|&&s| s).count() as u64;
        start = end;
    }
    out
}

/// Who created a contract and in which transaction: TxId (8, BE) ‖ creator (20), the `from` of
/// the creating frame. Dups of one address sort by TxId, so the newest creation is the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Creation {
    /// The creating transaction.
    pub tx: TxId,
    /// The creating frame's caller: the sender, or a factory.
    pub creator: Address,
}

impl ValueCodec for Creation {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(28);
        out.extend_from_slice(&self.tx.0.to_be_bytes());
        out.extend_from_slice(self.creator.as_slice());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 28 {
            return Err(CodecError::new("creation", "expected 28 bytes", bytes.len()));
        }
        Ok(Self { tx: TxId(be_u64(&bytes[..8], "creation")?), creator: address(&bytes[8..], "creation")? })
    }
}

/// Where a sender's nonces stop counting its own transactions: the sender's `position`-th sent
/// transaction (0 first) carries `nonce`, and each later one one more, up to the next anchor.
/// Position (8, BE) ‖ nonce (8, BE); dups sort by position. Written only where the nonce is not
/// one more than the previous sent transaction's (the first one: not 0) — an EIP-7702
/// authorization, or a CREATE by delegated code, moved it in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NonceAnchor {
    /// Position among the sender's transactions.
    pub position: u64,
    /// That transaction's nonce.
    pub nonce: u64,
}

impl ValueCodec for NonceAnchor {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        out.extend_from_slice(&self.position.to_be_bytes());
        out.extend_from_slice(&self.nonce.to_be_bytes());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 16 {
            return Err(CodecError::new("nonce anchor", "expected 16 bytes", bytes.len()));
        }
        Ok(Self {
            position: be_u64(&bytes[..8], "nonce anchor")?,
            nonce: be_u64(&bytes[8..], "nonce anchor")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(block: u64, index: u64) -> u64 {
        TxId::new(block, index).expect("fits").0
    }

    #[test]
    fn packs_to_pinned_bytes() {
        // base 3 (1 sent), three ids: (5,2) (5,7) (9,0), none sent; key holds (9,0).
        let ids = [id(5, 2), id(5, 7), id(9, 0)];
        let packed = PackedIds::pack(3, 1, &ids, &[false; 3]);
        // base, sent base, count 3 << 2 | none, then gaps newest first: (9,0)→(5,7) = 4
        // blocks, index 7; (5,7)→(5,2) = same block, 7 − 2 − 1 = 4.
        assert_eq!(packed.0, vec![3, 1, 12, 4, 7, 0, 4]);
        let unpacked = packed.unpack(id(9, 0)).expect("unpacks");
        assert_eq!(unpacked, Unpacked { base: 3, sent_base: 1, ids: ids.to_vec(), sent: vec![false; 3] });
        assert_eq!(packed.counts().expect("counts"), ChunkCounts { base: 3, n: 3, sent_base: 1, sent: 0 });
        // All sent: the count's low bits say so, no bitmap.
        let all = PackedIds::pack(3, 1, &ids, &[true; 3]);
        assert_eq!(all.0, vec![3, 1, 13, 4, 7, 0, 4]);
        assert_eq!(all.counts().expect("counts").sent, 3);
        // Only the middle one sent: mode 2 and a bitmap byte, bit i for the i-th oldest id.
        let mixed = PackedIds::pack(3, 1, &ids, &[false, true, false]);
        assert_eq!(mixed.0, vec![3, 1, 14, 0b010, 4, 7, 0, 4]);
        let unpacked = mixed.unpack(id(9, 0)).expect("unpacks");
        assert_eq!(unpacked.sent, vec![false, true, false]);
        assert_eq!(unpacked.sent_ids().collect::<Vec<_>>(), vec![id(5, 7)]);
        assert_eq!(mixed.counts().expect("counts"), ChunkCounts { base: 3, n: 3, sent_base: 1, sent: 1 });
    }

    #[test]
    fn varints_are_leb128() {
        let mut out = Vec::new();
        put_varint(&mut out, 300);
        assert_eq!(out, vec![0xac, 0x02]);
        assert_eq!(varint_len(300), 2);
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(u64::MAX), 10);
        let mut at = 0;
        assert_eq!(get_varint(&out, &mut at).expect("reads"), 300);
    }

    #[test]
    fn round_trips_and_splits_at_the_size_cap() {
        let ids: Vec<u64> = (0..5000u64).map(|i| id(i * 300 + i % 7, i % 1000)).collect();
        // Runs of sent and not sent of uneven lengths, so that chunks of each mode occur.
        let sent: Vec<bool> = (0..5000u64).map(|i| (i / 700) % 2 == 1 || (i % 13 == 0 && i > 3000)).collect();
        let chunks = pack_chunks(0, 0, &ids, &sent);
        assert!(chunks.len() > 1);
        let (mut back, mut back_sent, mut modes) = (Vec::new(), Vec::new(), [false; 3]);
        for (last, packed) in &chunks {
            assert!(packed.0.len() <= MAX_PACKED_BYTES, "{}", packed.0.len());
            let u = packed.unpack(*last).expect("unpacks");
            assert_eq!(u.base, back.len() as u64);
            assert_eq!(u.sent_base, back_sent.iter().filter(|&&s| s).count() as u64);
            assert_eq!(u.ids.last(), Some(last));
            modes[sent_mode(&u.sent) as usize] = true;
            back.extend(u.ids);
            back_sent.extend(u.sent);
        }
        assert_eq!(back, ids);
        assert_eq!(back_sent, sent);
        assert_eq!(modes, [true; 3], "every sent mode occurs");
    }

    #[test]
    fn refuses_damaged_bytes() {
        let packed = PackedIds::pack(0, 0, &[id(1, 0), id(2, 0)], &[false, false]);
        assert!(PackedIds(packed.0[..packed.0.len() - 1].to_vec()).unpack(id(2, 0)).is_err());
        let mut longer = packed.0;
        longer.push(0);
        assert!(PackedIds(longer).unpack(id(2, 0)).is_err());
        // A gap of 5 blocks back from block 2.
        assert!(PackedIds(vec![0, 0, 8, 5, 0]).unpack(id(2, 0)).is_err());
        // Mode 3, a bitmap whose ids all agree, a bit past the ids.
        assert!(PackedIds(vec![0, 0, 11, 1, 0]).unpack(id(2, 0)).is_err());
        assert!(PackedIds(vec![0, 0, 10, 0b11, 1, 0]).unpack(id(2, 0)).is_err());
        assert!(PackedIds(vec![0, 0, 10, 0b101, 1, 0]).unpack(id(2, 0)).is_err());
        assert!(PackedIds(vec![0, 0, 10, 0b01, 1, 0]).unpack(id(2, 0)).is_ok());
        assert!(PackedIds::decode_value(&[0, 0]).is_err());
    }

    #[test]
    fn creation_and_anchor_bytes() {
        let c = Creation { tx: TxId(0x0102), creator: Address::repeat_byte(0xaa) };
        let bytes = c.encode_value();
        assert_eq!(&bytes[..8], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&bytes[8..], &[0xaa; 20]);
        assert_eq!(Creation::decode_value(&bytes).expect("decodes"), c);
        let a = NonceAnchor { position: 1, nonce: 7 };
        assert_eq!(a.encode_value(), [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7]);
        assert_eq!(NonceAnchor::decode_value(&a.encode_value()).expect("decodes"), a);
        let k = ListKey { address: Address::repeat_byte(1), last: 9 };
        assert_eq!(ListKey::decode_key(&k.encode_key()).expect("decodes"), k);
        assert_eq!(&k.encode_key()[20..], &9u64.to_be_bytes());
    }
}
