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
//! The marks say what the address was in each transaction: its sender, its top-level recipient
//! or created contract ("received"), or neither. They replace a second list of the transactions
//! each address sent, and let an account's `txlist` be counted from the index alone: a chunk whose
//! ids were all sent, or none, says so in two bits of its count; a chunk with received ids has a
//! byte of modes after it; only roles that differ within a chunk take a bitmap, one bit an id.

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

/// What an address was in a transaction it appears in, as far as the lists say: what Etherscan's
/// `txlist` of the address lists is its `Sent` and `Received` transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Role {
    /// Only an inner frame's party, a log's emitter or a selfdestruct's (or a transaction
    /// indexed before the database kept received marks: docs/format.md, "Appearances").
    #[default]
    Other,
    /// The top-level recipient, or the contract the transaction created, and not its sender.
    Received,
    /// The transaction's sender.
    Sent,
}

impl Role {
    /// Whether the address is a top-level party: the transaction is one of its `txlist` rows.
    pub const fn listed(self) -> bool {
        !matches!(self, Self::Other)
    }
}

/// A chunk unpacked: its ids, ascending, what the address was in each, and how many ids (and
/// sent ids) the address's earlier chunks hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Unpacked {
    /// Ids in the address's earlier chunks.
    pub base: u64,
    /// Ids in the address's earlier chunks that it sent.
    pub sent_base: u64,
    /// This chunk's ids, ascending; the last one is the key's.
    pub ids: Vec<u64>,
    /// What the address was in each of `ids` (same positions).
    pub roles: Vec<Role>,
}

impl Unpacked {
    /// The ids this chunk holds that the address sent, ascending.
    pub fn sent_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.ids.iter().zip(&self.roles).filter(|(_, &r)| r == Role::Sent).map(|(&id, _)| id)
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
    /// Received ids in this chunk.
    pub received: u64,
}

/// How a chunk marks a role among the ids it concerns: none, all, or a bitmap of them.
const MARKS_NONE: u64 = 0;
const MARKS_ALL: u64 = 1;
const MARKS_BITMAP: u64 = 2;
/// The count's low bits holding this say a byte of both roles' modes follows (received ids).
const MARKS_BOTH: u64 = 3;

fn marks_mode(marks: impl Iterator<Item = bool> + Clone) -> u64 {
    match (marks.clone().any(|m| m), marks.into_iter().all(|m| m)) {
        (false, _) => MARKS_NONE,
        (true, true) => MARKS_ALL,
        (true, false) => MARKS_BITMAP,
    }
}

/// Bytes of the bitmap of `count` ids of which `set` are marked: none unless they differ.
const fn bitmap_len(count: usize, set: usize) -> usize {
    if set == 0 || set == count {
        0
    } else {
        count.div_ceil(8)
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

/// Sets bit `i` for each `i`-th of `marks` that is set, after `out`'s bytes.
fn put_bitmap(out: &mut Vec<u8>, marks: impl ExactSizeIterator<Item = bool>) {
    let at = out.len();
    out.resize(at + marks.len().div_ceil(8), 0);
    for (i, _) in marks.enumerate().filter(|(_, m)| *m) {
        out[at + i / 8] |= 1 << (i % 8);
    }
}

/// The bitmap of `count` ids at `at` (moved past it) and how many of its bits are set, or why
/// it is not canonical: bits past its ids, or every id the same (that is a mode, not a bitmap).
fn get_bitmap<'a>(bytes: &'a [u8], at: &mut usize, count: usize) -> Result<(&'a [u8], u64), CodecError> {
    let bad = |reason| CodecError::new("packed ids", reason, bytes.len());
    let map = bytes.get(*at..*at + count.div_ceil(8)).ok_or_else(|| bad("a bitmap runs past the end"))?;
    *at += map.len();
    let tail = (count % 8) as u32;
    if tail != 0 && map[map.len() - 1] >> tail != 0 {
        return Err(bad("a bitmap has bits past its ids"));
    }
    let ones: u64 = map.iter().map(|b| u64::from(b.count_ones())).sum();
    if ones == 0 || ones == count as u64 {
        return Err(bad("a bitmap where every id agrees"));
    }
    Ok((map, ones))
}

/// The marks of a bitmap's `count` ids.
fn bits(map: &[u8], count: usize) -> Vec<bool> {
    (0..count).map(|i| map[i / 8] >> (i % 8) & 1 == 1).collect()
}

/// The header: the counts, how the roles are marked, and where the bitmaps or the gaps start.
struct Header {
    counts: ChunkCounts,
    sent_mode: u64,
    received_mode: u64,
    /// Offset of the bytes after the count varints and the modes' byte.
    body: usize,
}

impl PackedIds {
    /// Packs `ids` (ascending, not empty) with the address's roles in them behind `base`
    /// earlier ids of which `sent_base` were sent; the chunk's key is the last id.
    pub fn pack(base: u64, sent_base: u64, ids: &[u64], roles: &[Role]) -> Self {
        debug_assert_eq!(ids.len(), roles.len());
        let sent_mode = marks_mode(roles.iter().map(|&r| r == Role::Sent));
        let not_sent = roles.iter().filter(|&&r| r != Role::Sent);
        let received_mode = marks_mode(not_sent.clone().map(|&r| r == Role::Received));
        let mut out = Vec::with_capacity(7 + 2 * ids.len());
        put_varint(&mut out, base);
        put_varint(&mut out, sent_base);
        if received_mode == MARKS_NONE {
            put_varint(&mut out, (ids.len() as u64) << 2 | sent_mode);
        } else {
            put_varint(&mut out, (ids.len() as u64) << 2 | MARKS_BOTH);
            out.push((received_mode << 2 | sent_mode) as u8);
        }
        if sent_mode == MARKS_BITMAP {
            put_bitmap(&mut out, roles.iter().map(|&r| r == Role::Sent));
        }
        if received_mode == MARKS_BITMAP {
            let received: Vec<bool> = not_sent.map(|&r| r == Role::Received).collect();
            put_bitmap(&mut out, received.into_iter());
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
        let n = head >> 2;
        if n == 0 || n > bytes.len() as u64 {
            return Err(bad("its count does not fit its length"));
        }
        let (sent_mode, received_mode) = match head & 3 {
            MARKS_BOTH => {
                let modes = u64::from(*bytes.get(at).ok_or_else(|| bad("its modes' byte is missing"))?);
                at += 1;
                let (sent, received) = (modes & 3, modes >> 2);
                if sent > MARKS_BITMAP || received == MARKS_NONE || received > MARKS_BITMAP {
                    return Err(bad("an unknown mode of its marks"));
                }
                (sent, received)
            }
            sent => (sent, MARKS_NONE),
        };
        let mut probe = at;
        let sent = match sent_mode {
            MARKS_NONE => 0,
            MARKS_ALL => n,
            _ => get_bitmap(bytes, &mut probe, n as usize)?.1,
        };
        let received = match received_mode {
            MARKS_NONE => 0,
            MARKS_ALL if sent == n => return Err(bad("received marks where every id was sent")),
            MARKS_ALL => n - sent,
            _ => get_bitmap(bytes, &mut probe, (n - sent) as usize)?.1,
        };
        Ok(Header {
            counts: ChunkCounts { base, n, sent_base, sent, received },
            sent_mode,
            received_mode,
            body: at,
        })
    }

    /// The ids of the chunk keyed `last`, ascending, with the address's roles in them.
    pub fn unpack(&self, last: u64) -> Result<Unpacked, CodecError> {
        let bytes = &self.0;
        let bad = |reason| CodecError::new("packed ids", reason, bytes.len());
        let Header { counts, sent_mode, received_mode, body } = self.header()?;
        let n = counts.n as usize;
        let mut at = body;
        let sent: Vec<bool> = match sent_mode {
            MARKS_BITMAP => bits(get_bitmap(bytes, &mut at, n)?.0, n),
            mode => vec![mode == MARKS_ALL; n],
        };
        let not_sent = n - counts.sent as usize;
        let received: Vec<bool> = match received_mode {
            MARKS_BITMAP => bits(get_bitmap(bytes, &mut at, not_sent)?.0, not_sent),
            mode => vec![mode == MARKS_ALL; not_sent],
        };
        let mut received = received.into_iter();
        let roles = sent
            .iter()
            .map(|&s| match (s, s || received.next().unwrap_or(false)) {
                (true, _) => Role::Sent,
                (false, true) => Role::Received,
                (false, false) => Role::Other,
            })
            .collect();
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
        Ok(Unpacked { base: counts.base, sent_base: counts.sent_base, ids, roles })
    }

    /// Only the header: how many ids (and sent ids) the earlier chunks hold and this one holds.
    pub fn counts(&self) -> Result<ChunkCounts, CodecError> {
        Ok(self.header()?.counts)
    }
}

/// Bytes a chunk's marks take beyond its count: the modes' byte and the bitmaps, for `n` ids of
/// which `sent` were sent and `received` received.
const fn marks_len(n: usize, sent: usize, received: usize) -> usize {
    let both = if received > 0 { 1 } else { 0 };
    both + bitmap_len(n, sent) + bitmap_len(n - sent, received)
}

/// `(sent, received)` counted on by `role`.
const fn tally((sent, received): (usize, usize), role: Role) -> (usize, usize) {
    match role {
        Role::Sent => (sent + 1, received),
        Role::Received => (sent, received + 1),
        Role::Other => (sent, received),
    }
}

/// Splits ascending `ids` with the address's roles in them (whose first `base` predecessors,
/// `sent_base` of them sent, live in earlier chunks) into chunks of at most
/// [`MAX_PACKED_BYTES`]: `(key's last id, packed)` in order. Greedy from each chunk's first id,
/// so the chunks depend on the ids and roles alone.
pub fn pack_chunks(mut base: u64, mut sent_base: u64, ids: &[u64], roles: &[Role]) -> Vec<(u64, PackedIds)> {
    debug_assert_eq!(ids.len(), roles.len());
    let mut out = Vec::new();
    let mut start = 0;
    while start < ids.len() {
        // Header room for the largest base and count varints a chunk can need.
        let header = varint_len(base) + varint_len(sent_base) + 3;
        let (mut sent, mut received) = tally((0, 0), roles[start]);
        let mut gaps = 0;
        let mut end = start + 1;
        while end < ids.len() {
            let gap = gap_len(ids[end], ids[end - 1]);
            let (s, r) = tally((sent, received), roles[end]);
            if header + gaps + gap + marks_len(end + 1 - start, s, r) > MAX_PACKED_BYTES {
                break;
            }
            gaps += gap;
            (sent, received) = (s, r);
            end += 1;
        }
        let chunk = &roles[start..end];
        out.push((ids[end - 1], PackedIds::pack(base, sent_base, &ids[start..end], chunk)));
        base += (end - start) as u64;
        sent_base += sent as u64;
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

/// One run of a sender's carried nonces in a staged segment of the appearance lists (ours,
/// `OtsNonceRunsStaged`): from the sender's `position`-th sent transaction of the segment (0
/// first) on, each carries one more than `nonce`, up to the sender's next run. Sender (20) ‖
/// position (8, BE) ‖ nonce (8, BE); dups sort by sender, then position. A segment has a run at
/// position 0 for every sender it holds, and one wherever a carried nonce is not the previous
/// one's plus one. Its positions count within the segment, so a stage writes it without
/// knowing how many transactions the sender sent before; the fold turns the runs into
/// [`NonceAnchor`]s at absolute positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NonceRun {
    /// The sender.
    pub sender: Address,
    /// Position among the sender's sent transactions of the segment.
    pub position: u64,
    /// The nonce that transaction carries.
    pub nonce: u64,
}

impl ValueCodec for NonceRun {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(36);
        out.extend_from_slice(self.sender.as_slice());
        out.extend_from_slice(&self.position.to_be_bytes());
        out.extend_from_slice(&self.nonce.to_be_bytes());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 36 {
            return Err(CodecError::new("nonce run", "expected 36 bytes", bytes.len()));
        }
        Ok(Self {
            sender: Address::from_slice(&bytes[..20]),
            position: be_u64(&bytes[20..28], "nonce run")?,
            nonce: be_u64(&bytes[28..], "nonce run")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(block: u64, index: u64) -> u64 {
        TxId::new(block, index).expect("fits").0
    }

    fn roles(sent: &[bool]) -> Vec<Role> {
        sent.iter().map(|&s| if s { Role::Sent } else { Role::Other }).collect()
    }

    #[test]
    fn packs_to_pinned_bytes() {
        // base 3 (1 sent), three ids: (5,2) (5,7) (9,0), none sent; key holds (9,0).
        let ids = [id(5, 2), id(5, 7), id(9, 0)];
        let packed = PackedIds::pack(3, 1, &ids, &[Role::Other; 3]);
        // base, sent base, count 3 << 2 | none, then gaps newest first: (9,0)→(5,7) = 4
        // blocks, index 7; (5,7)→(5,2) = same block, 7 − 2 − 1 = 4.
        assert_eq!(packed.0, vec![3, 1, 12, 4, 7, 0, 4]);
        let unpacked = packed.unpack(id(9, 0)).expect("unpacks");
        assert_eq!(
            unpacked,
            Unpacked { base: 3, sent_base: 1, ids: ids.to_vec(), roles: vec![Role::Other; 3] }
        );
        let counts = ChunkCounts { base: 3, n: 3, sent_base: 1, sent: 0, received: 0 };
        assert_eq!(packed.counts().expect("counts"), counts);
        // All sent: the count's low bits say so, no bitmap.
        let all = PackedIds::pack(3, 1, &ids, &[Role::Sent; 3]);
        assert_eq!(all.0, vec![3, 1, 13, 4, 7, 0, 4]);
        assert_eq!(all.counts().expect("counts").sent, 3);
        // Only the middle one sent: mode 2 and a bitmap byte, bit i for the i-th oldest id.
        let mixed = PackedIds::pack(3, 1, &ids, &roles(&[false, true, false]));
        assert_eq!(mixed.0, vec![3, 1, 14, 0b010, 4, 7, 0, 4]);
        let unpacked = mixed.unpack(id(9, 0)).expect("unpacks");
        assert_eq!(unpacked.roles, roles(&[false, true, false]));
        assert_eq!(unpacked.sent_ids().collect::<Vec<_>>(), vec![id(5, 7)]);
        let counts = ChunkCounts { base: 3, n: 3, sent_base: 1, sent: 1, received: 0 };
        assert_eq!(mixed.counts().expect("counts"), counts);
    }

    #[test]
    fn received_marks_take_a_modes_byte_to_pinned_bytes() {
        use Role::{Other, Received, Sent};
        let ids = [id(5, 2), id(5, 7), id(9, 0)];
        let gaps = [4, 7, 0, 4];
        let cases: [([Role; 3], Vec<u8>, u64, u64); 4] = [
            // Every id received: count 3 << 2 | 3, then the modes' byte: received all (1 << 2),
            // sent none.
            ([Received; 3], vec![15, 0b0100], 0, 3),
            // The middle one sent, the others received: received all of the not-sent, sent by
            // bitmap.
            ([Received, Sent, Received], vec![15, 0b0110, 0b010], 1, 2),
            // The oldest received, the others neither: received by a bitmap of the 3 not sent.
            ([Received, Other, Other], vec![15, 0b1000, 0b001], 0, 1),
            // Sent, received, neither: both bitmaps, the received one over the 2 not sent.
            ([Sent, Received, Other], vec![15, 0b1010, 0b001, 0b01], 1, 1),
        ];
        for (marks, head, sent, received) in cases {
            let packed = PackedIds::pack(3, 1, &ids, &marks);
            let expected: Vec<u8> = [3, 1].into_iter().chain(head).chain(gaps).collect();
            assert_eq!(packed.0, expected, "{marks:?}");
            let unpacked = packed.unpack(id(9, 0)).expect("unpacks");
            assert_eq!(unpacked.roles, marks);
            assert_eq!(unpacked.ids, ids);
            let counts = ChunkCounts { base: 3, n: 3, sent_base: 1, sent, received };
            assert_eq!(packed.counts().expect("counts"), counts, "{marks:?}");
        }
        // Not canonical: a modes' byte saying no received ids, received marks on a chunk all
        // sent, a received bitmap whose ids agree, an unknown mode.
        for bad in [
            vec![0, 0, 11, 0b0000, 1, 0],
            vec![0, 0, 11, 0b0101, 1, 0],
            vec![0, 0, 11, 0b1000, 0b11, 1, 0],
            vec![0, 0, 11, 0b1100, 1, 0],
            vec![0, 0, 11, 0b0111, 1, 0],
            vec![0, 0, 11],
        ] {
            assert!(PackedIds(bad.clone()).unpack(id(2, 0)).is_err(), "{bad:?}");
            assert!(PackedIds(bad.clone()).counts().is_err(), "{bad:?}");
        }
        assert!(PackedIds(vec![0, 0, 11, 0b1000, 0b01, 1, 0]).unpack(id(2, 0)).is_ok());
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
        // Runs of each role and of mixed roles, of uneven lengths, so that chunks of every
        // pair of modes occur.
        let roles: Vec<Role> = (0..5000u64)
            .map(|i| match (i / 600) % 6 {
                0 => Role::Other,
                1 => Role::Sent,
                2 if i % 3 == 0 => Role::Received,
                2 => Role::Other,
                3 => Role::Received,
                4 if i % 13 == 0 => Role::Sent,
                4 => Role::Received,
                _ if i % 13 == 0 => Role::Sent,
                _ if i % 5 == 0 => Role::Other,
                _ => Role::Received,
            })
            .collect();
        let chunks = pack_chunks(0, 0, &ids, &roles);
        assert!(chunks.len() > 1);
        let (mut back, mut back_roles, mut modes) = (Vec::new(), Vec::new(), [[false; 3]; 3]);
        for (last, packed) in &chunks {
            assert!(packed.0.len() <= MAX_PACKED_BYTES, "{}", packed.0.len());
            let u = packed.unpack(*last).expect("unpacks");
            assert_eq!(u.base, back.len() as u64);
            assert_eq!(u.sent_base, back_roles.iter().filter(|&&r| r == Role::Sent).count() as u64);
            assert_eq!(u.ids.last(), Some(last));
            let sent = marks_mode(u.roles.iter().map(|&r| r == Role::Sent));
            let not_sent = u.roles.iter().filter(|&&r| r != Role::Sent);
            let received = marks_mode(not_sent.map(|&r| r == Role::Received));
            modes[sent as usize][received as usize] = true;
            back.extend(u.ids);
            back_roles.extend(u.roles);
        }
        assert_eq!(back, ids);
        assert_eq!(back_roles, roles);
        for (sent, received) in [(0, 0), (1, 0), (2, 0), (0, 1), (0, 2), (2, 1), (2, 2)] {
            assert!(modes[sent][received], "sent mode {sent} with received mode {received} occurs");
        }
    }

    #[test]
    fn refuses_damaged_bytes() {
        let packed = PackedIds::pack(0, 0, &[id(1, 0), id(2, 0)], &[Role::Other; 2]);
        assert!(PackedIds(packed.0[..packed.0.len() - 1].to_vec()).unpack(id(2, 0)).is_err());
        let mut longer = packed.0;
        longer.push(0);
        assert!(PackedIds(longer).unpack(id(2, 0)).is_err());
        // A gap of 5 blocks back from block 2.
        assert!(PackedIds(vec![0, 0, 8, 5, 0]).unpack(id(2, 0)).is_err());
        // A modes' byte missing, a bitmap whose ids all agree, a bit past the ids.
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
        let r = NonceRun { sender: Address::repeat_byte(0xbb), position: 2, nonce: 0x0105 };
        let bytes = r.encode_value();
        assert_eq!(&bytes[..20], &[0xbb; 20]);
        assert_eq!(&bytes[20..], &[0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 5]);
        assert_eq!(NonceRun::decode_value(&bytes).expect("decodes"), r);
        assert!(NonceRun::decode_value(&bytes[..35]).is_err());
        let k = ListKey { address: Address::repeat_byte(1), last: 9 };
        assert_eq!(ListKey::decode_key(&k.encode_key()).expect("decodes"), k);
        assert_eq!(&k.encode_key()[20..], &9u64.to_be_bytes());
    }
}
