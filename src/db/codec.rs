//! Key and value codecs.
//!
//! Keys are order-preserving: every integer is 8 bytes big-endian so that MDBX's memcmp order is
//! numeric order, and addresses are their 20 raw bytes. Value codecs are kept apart because they
//! only have to round-trip, not sort (except dup values, whose order the tables document).

use alloy_primitives::{Address, B256};
use roaring::RoaringTreemap;

use crate::txid::TxId;

mod appearances;
mod balances;
mod contract_info;
mod label;
mod recent;
mod row_ids;
mod totals;
pub use appearances::{
    gap_len, pack_chunks, varint_len, ChunkCounts, Creation, ListKey, NonceAnchor, NonceRun, PackedIds, Role,
    Unpacked, MAX_PACKED_BYTES,
};
pub use balances::{
    Balance, BalancePrior, MultiKey, MultiPrior, OwnerPrior, PairKey, Rank, StagedOwnerKey, TokenIdKey,
    VarKey, WindowValue,
};
pub use contract_info::ContractInfo;
pub use label::{Label, MAX_LABEL_BYTES};
pub use recent::{ListId, RecentId, RecentKey, RecentSent, SentTx};
pub use row_ids::RowIdChunk;
pub use totals::{AddressTotals, TotalsDelta};

/// A value read from disk did not have the shape its table declares.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {reason} (got {len} bytes)")]
pub struct CodecError {
    /// What was being decoded.
    pub what: &'static str,
    /// Why it failed.
    pub reason: &'static str,
    /// Length of the bytes that failed.
    pub len: usize,
}

impl CodecError {
    pub(crate) fn new(what: &'static str, reason: &'static str, len: usize) -> Self {
        Self { what, reason, len }
    }
}

/// An order-preserving key encoding.
pub trait KeyCodec: Sized {
    /// The encoded form; fixed-size keys live on the stack.
    type Encoded: AsRef<[u8]>;
    /// Encodes so that byte order equals the key's natural order.
    fn encode_key(&self) -> Self::Encoded;
    /// Decodes, checking the length.
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError>;
}

/// A value encoding (also used for dup values, whose sort order the table documents).
pub trait ValueCodec: Sized {
    /// Encodes the value.
    fn encode_value(&self) -> Vec<u8>;
    /// Decodes, checking the length and shape.
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError>;
}

pub(crate) fn be_u64(bytes: &[u8], what: &'static str) -> Result<u64, CodecError> {
    let arr: [u8; 8] =
        bytes.try_into().map_err(|_| CodecError::new(what, "expected 8 bytes", bytes.len()))?;
    Ok(u64::from_be_bytes(arr))
}

pub(crate) fn address(bytes: &[u8], what: &'static str) -> Result<Address, CodecError> {
    if bytes.len() != 20 {
        return Err(CodecError::new(what, "expected a 20-byte address", bytes.len()));
    }
    Ok(Address::from_slice(bytes))
}

/// A block number as a key or value: 8 bytes big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockNumber(pub u64);

/// A block's Unix time in seconds (value of `OtsBlockTimes`): 8 bytes big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub u64);

/// A cumulative count (key of the match counter tables): 8 bytes big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Count(pub u64);

macro_rules! be_u64_codec {
    ($ty:ty, $what:literal) => {
        impl KeyCodec for $ty {
            type Encoded = [u8; 8];
            fn encode_key(&self) -> [u8; 8] {
                self.0.to_be_bytes()
            }
            fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
                be_u64(bytes, $what).map(Self)
            }
        }
        impl ValueCodec for $ty {
            fn encode_value(&self) -> Vec<u8> {
                self.0.to_be_bytes().to_vec()
            }
            fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
                be_u64(bytes, $what).map(Self)
            }
        }
    };
}

be_u64_codec!(BlockNumber, "block number");
be_u64_codec!(Count, "count");
be_u64_codec!(Timestamp, "timestamp");
be_u64_codec!(crate::txid::TxId, "transaction id");

impl KeyCodec for Address {
    type Encoded = [u8; 20];
    fn encode_key(&self) -> [u8; 20] {
        self.0 .0
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        address(bytes, "address key")
    }
}

impl ValueCodec for Address {
    fn encode_value(&self) -> Vec<u8> {
        self.0 .0.to_vec()
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        address(bytes, "address value")
    }
}

/// Chunk id of the last chunk of an address index.
pub const LAST_CHUNK: u64 = u64::MAX;

/// Key of an address index: `address (20) ‖ chunk id (8, BE)`.
///
/// The chunk id is the largest id stored in the chunk, except for the address's last chunk,
/// whose id is [`LAST_CHUNK`]; so a seek to `address ‖ id` lands on the chunk holding `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChunkKey {
    /// The indexed address.
    pub address: Address,
    /// Largest id in the chunk, or [`LAST_CHUNK`].
    pub chunk: u64,
}

impl ChunkKey {
    /// The key of `address`'s last chunk.
    pub const fn last(address: Address) -> Self {
        Self { address, chunk: LAST_CHUNK }
    }

    /// Whether this is an address's last chunk.
    pub const fn is_last(&self) -> bool {
        self.chunk == LAST_CHUNK
    }
}

/// `address (20) ‖ n (8, BE)`: the key of every per-address list table.
pub(crate) fn address_u64_key(address: &Address, n: u64) -> [u8; 28] {
    let mut out = [0u8; 28];
    out[..20].copy_from_slice(address.as_slice());
    out[20..].copy_from_slice(&n.to_be_bytes());
    out
}

/// The parts of an [`address_u64_key`].
pub(crate) fn split_address_u64_key(bytes: &[u8], what: &'static str) -> Result<(Address, u64), CodecError> {
    if bytes.len() != 28 {
        return Err(CodecError::new(what, "expected 28 bytes", bytes.len()));
    }
    Ok((Address::from_slice(&bytes[..20]), be_u64(&bytes[20..], what)?))
}

impl KeyCodec for ChunkKey {
    type Encoded = [u8; 28];
    fn encode_key(&self) -> [u8; 28] {
        address_u64_key(&self.address, self.chunk)
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        let (address, chunk) = split_address_u64_key(bytes, "chunk key")?;
        Ok(Self { address, chunk })
    }
}

/// The key of a staged segment's chunk of an address index: `segment (8, BE) ‖ address (20) ‖
/// largest id in the chunk (8, BE)`. Segment first, so that a stage's chunks append after every
/// earlier stage's; a segment holds each address's ids of that stage whole, so no chunk is ever
/// reopened and none needs the last-chunk key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StagedChunkKey {
    /// The stage's newest block.
    pub segment: u64,
    /// The indexed address.
    pub address: Address,
    /// Largest id in the chunk.
    pub chunk: u64,
}

impl KeyCodec for StagedChunkKey {
    type Encoded = [u8; 36];
    fn encode_key(&self) -> [u8; 36] {
        let mut out = [0u8; 36];
        out[..8].copy_from_slice(&self.segment.to_be_bytes());
        out[8..].copy_from_slice(&address_u64_key(&self.address, self.chunk));
        out
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 36 {
            return Err(CodecError::new("staged chunk key", "expected 36 bytes", bytes.len()));
        }
        let segment = be_u64(&bytes[..8], "staged chunk key")?;
        let (address, chunk) = split_address_u64_key(&bytes[8..], "staged chunk key")?;
        Ok(Self { segment, address, chunk })
    }
}

/// The key of a staged segment of a holdings table: `segment (8, BE) ‖ tier (1) ‖ kind (1, the
/// holdings table's [`IndexKind`]) ‖ holder (20)`. A stage's segment (tier 0) is newer than
/// every other, and segments merge newest first into one keyed by the newest of them at the
/// next tier: either way the segment written sorts after every key, and is appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StagedHoldingKey {
    /// How many merges of segments made this one (0: a stage wrote it).
    pub tier: u8,
    /// The newest block of the stages it holds.
    pub segment: u64,
    /// The holdings table it belongs to.
    pub kind: IndexKind,
    /// The holder.
    pub holder: Address,
}

impl KeyCodec for StagedHoldingKey {
    type Encoded = [u8; 30];
    fn encode_key(&self) -> [u8; 30] {
        let mut out = [0u8; 30];
        out[..8].copy_from_slice(&self.segment.to_be_bytes());
        out[8] = self.tier;
        out[9] = self.kind as u8;
        out[10..].copy_from_slice(self.holder.as_slice());
        out
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        const WHAT: &str = "staged holding key";
        if bytes.len() != 30 {
            return Err(CodecError::new(WHAT, "expected 30 bytes", bytes.len()));
        }
        let kind = IndexKind::from_byte(bytes[9]).ok_or_else(|| {
            CodecError::new(WHAT, "an unknown kind byte (given as the length)", bytes[9].into())
        })?;
        Ok(Self {
            segment: be_u64(&bytes[..8], WHAT)?,
            tier: bytes[8],
            kind,
            holder: Address::from_slice(&bytes[10..]),
        })
    }
}

/// The value of an address-index chunk: its ids, ascending, in some encoding.
pub trait ChunkIds: ValueCodec {
    /// The chunk of `ids` (strictly ascending).
    fn from_ids(ids: Vec<u64>) -> Self;
    /// Its ids.
    fn into_ids(self) -> Vec<u64>;
}

impl ChunkIds for IdChunk {
    fn from_ids(ids: Vec<u64>) -> Self {
        Self(ids)
    }
    fn into_ids(self) -> Vec<u64> {
        self.0
    }
}

/// The ids of one address-index chunk: ascending, no duplicates, 8 bytes BE each.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdChunk(pub Vec<u64>);

impl ValueCodec for IdChunk {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.0.len() * 8);
        for id in &self.0 {
            out.extend_from_slice(&id.to_be_bytes());
        }
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if !bytes.len().is_multiple_of(8) {
            return Err(CodecError::new("id chunk", "length is not a multiple of 8", bytes.len()));
        }
        let ids: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        if ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(CodecError::new("id chunk", "ids are not strictly ascending", bytes.len()));
        }
        Ok(Self(ids))
    }
}

/// Largest total an address may have while its counter uses the 1-byte form.
pub const MAX_UNIQUE_CHUNK_COUNT: u64 = 256;

/// A dup of an address-index counter table (docs/format.md, "Address-index counters").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterDup {
    /// 1 byte, `total − 1`: the address has exactly one chunk and at most 256 ids.
    Unique {
        /// Number of ids (1..=256).
        total: u64,
    },
    /// 16 bytes: cumulative count up to and including the chunk, then the chunk id.
    Regular {
        /// Ids in this chunk and all earlier ones.
        cumulative: u64,
        /// The chunk's id ([`LAST_CHUNK`] for the last one).
        chunk: u64,
    },
}

impl CounterDup {
    /// Cumulative count up to and including this dup's chunk.
    pub const fn cumulative(&self) -> u64 {
        match *self {
            Self::Unique { total } => total,
            Self::Regular { cumulative, .. } => cumulative,
        }
    }

    /// The chunk this dup describes.
    pub const fn chunk(&self) -> u64 {
        match *self {
            Self::Unique { .. } => LAST_CHUNK,
            Self::Regular { chunk, .. } => chunk,
        }
    }
}

impl ValueCodec for CounterDup {
    fn encode_value(&self) -> Vec<u8> {
        match *self {
            Self::Unique { total } => {
                debug_assert!((1..=MAX_UNIQUE_CHUNK_COUNT).contains(&total));
                vec![(total - 1) as u8]
            }
            Self::Regular { cumulative, chunk } => {
                let mut out = Vec::with_capacity(16);
                out.extend_from_slice(&cumulative.to_be_bytes());
                out.extend_from_slice(&chunk.to_be_bytes());
                out
            }
        }
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        match bytes.len() {
            1 => Ok(Self::Unique { total: u64::from(bytes[0]) + 1 }),
            16 => Ok(Self::Regular {
                cumulative: be_u64(&bytes[..8], "counter dup")?,
                chunk: be_u64(&bytes[8..], "counter dup")?,
            }),
            n => Err(CodecError::new("counter dup", "expected 1 or 16 bytes", n)),
        }
    }
}

/// Bits of `OtsAddrAttributes` (docs/format.md, "OtsAddrAttributes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u64)]
pub enum AttributeBit {
    /// Bit 0.
    Erc20 = 0,
    /// Bit 1.
    Erc165 = 1,
    /// Bit 2.
    Erc721 = 2,
    /// Bit 3.
    Erc721Metadata = 3,
    /// Bit 4.
    Erc1155 = 4,
    /// Bit 5.
    Erc1167 = 5,
    /// Bit 6.
    Erc4626 = 6,
}

/// The attribute bitmap of an address, stored in the 64-bit portable roaring format
/// (the bytes Go's `roaring64.WriteTo` writes), as ots2 stores it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Attributes(pub RoaringTreemap);

impl Attributes {
    /// Whether `bit` is set.
    pub fn has(&self, bit: AttributeBit) -> bool {
        self.0.contains(bit as u64)
    }

    /// Sets `bit`; returns whether it was newly set.
    pub fn set(&mut self, bit: AttributeBit) -> bool {
        self.0.insert(bit as u64)
    }
}

impl ValueCodec for Attributes {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.0.serialized_size());
        // Writing into a Vec cannot fail.
        let _ = self.0.serialize_into(&mut out);
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        RoaringTreemap::deserialize_from(bytes)
            .map(Self)
            .map_err(|_| CodecError::new("attributes", "not a portable roaring64 bitmap", bytes.len()))
    }
}

/// A dup of a holdings table: `token (20) ‖ TxId of the first appearance (8, BE)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Holding {
    /// The token held.
    pub token: Address,
    /// The first transaction in which the holder appeared in a transfer of the token.
    pub first: TxId,
}

impl ValueCodec for Holding {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(28);
        out.extend_from_slice(self.token.as_slice());
        out.extend_from_slice(&self.first.0.to_be_bytes());
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() != 28 {
            return Err(CodecError::new("holding dup", "expected 28 bytes", bytes.len()));
        }
        Ok(Self {
            token: Address::from_slice(&bytes[..20]),
            first: TxId(be_u64(&bytes[20..], "holding dup")?),
        })
    }
}

/// The block hash alone of an `OtsUndoJournal` value (its first 32 bytes), for readers that
/// only ask whether a block is still the one indexed: a block's record names every row it wrote
/// (thousands on a busy block), which a full decode would build for nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UndoRecordHash(pub B256);

impl ValueCodec for UndoRecordHash {
    fn encode_value(&self) -> Vec<u8> {
        self.0.to_vec()
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() < 32 || !(bytes.len() - 32).is_multiple_of(21) {
            return Err(CodecError::new("undo record", "expected 32 + 21·n bytes", bytes.len()));
        }
        Ok(Self(B256::from_slice(&bytes[..32])))
    }
}

/// Which kind of row an undo record entry refers to. The address-index and appearance kinds
/// number the lists of the reorg window's own tables (`OtsRecentIds`) instead: the journal holds
/// none of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum IndexKind {
    /// `OtsERC20TransferIndex` / `OtsERC20TransferCounter`.
    Erc20Transfers = 0,
    /// `OtsERC721TransferIndex` / `OtsERC721TransferCounter`.
    Erc721Transfers = 1,
    /// `OtsContractInfo`: the block wrote this contract's row.
    ContractInfo = 2,
    /// `OtsTransferProbes`: the block re-probed this Transfer emitter in vain.
    TransferProbe = 3,
    /// `OtsLabels`: the block labelled this address.
    Label = 4,
    /// `OtsERC20Holdings`: the holder first appeared with a token in this block.
    Erc20Holdings = 5,
    /// `OtsERC721Holdings`: likewise.
    Erc721Holdings = 6,
    /// `OtsBlocksRewardedIndex` / `OtsBlocksRewardedCounter` (ids are block numbers).
    BlocksRewarded = 7,
    /// `OtsWithdrawalsIndex` / `OtsWithdrawalsCounter` (ids are withdrawal indexes).
    Withdrawals = 8,
    /// `OtsERC1155TransferIndex` / `OtsERC1155TransferCounter`.
    Erc1155Transfers = 9,
    /// `OtsERC1155Holdings`.
    Erc1155Holdings = 10,
    /// `OtsAppearances`: the block added transactions to this address's list.
    Appearances = 11,
    /// The sent marks of `OtsAppearances` and `OtsNonceAnchors`: the block added transactions
    /// this address sent.
    SentTxs = 12,
    /// `OtsContractCreators`: the block created a contract at this address.
    ContractCreator = 13,
    /// `OtsCodeRemovals`: the block removed this contract's code.
    CodeRemoval = 14,
    /// The received marks of `OtsAppearances`: the block holds transactions this address was
    /// the top-level recipient (or the created contract) of, and not the sender. Only the
    /// reorg window's rows use it.
    Received = 15,
    /// `OtsInternalTxIndex` / `OtsInternalTxCounter`.
    InternalTxs = 16,
    /// `OtsTransferRowsIndex` / `OtsTransferRowsCounter`.
    TransferRows = 17,
    /// `OtsTokenTransfersIndex` / `OtsTokenTransfersCounter`.
    TokenTransfers = 18,
    /// `OtsInternalRowsIndex` / `OtsInternalRowsCounter`.
    InternalRows = 19,
    /// `OtsPartyTokenIndex` / `OtsPartyTokenCounter`.
    PartyToken = 20,
}

impl IndexKind {
    pub(crate) const fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Erc20Transfers),
            1 => Some(Self::Erc721Transfers),
            2 => Some(Self::ContractInfo),
            3 => Some(Self::TransferProbe),
            4 => Some(Self::Label),
            5 => Some(Self::Erc20Holdings),
            6 => Some(Self::Erc721Holdings),
            7 => Some(Self::BlocksRewarded),
            8 => Some(Self::Withdrawals),
            9 => Some(Self::Erc1155Transfers),
            10 => Some(Self::Erc1155Holdings),
            11 => Some(Self::Appearances),
            12 => Some(Self::SentTxs),
            13 => Some(Self::ContractCreator),
            14 => Some(Self::CodeRemoval),
            15 => Some(Self::Received),
            16 => Some(Self::InternalTxs),
            17 => Some(Self::TransferRows),
            18 => Some(Self::TokenTransfers),
            19 => Some(Self::InternalRows),
            20 => Some(Self::PartyToken),
            _ => None,
        }
    }
}

/// What one block wrote that cannot be found again from its block number: its hash, and the
/// addresses of the rows it wrote in large tables (holdings, creators, contract metadata and the
/// like). Kept for the newest blocks only (the reorg window).
///
/// Bytes: block hash (32) ‖ repeated [index kind (1) ‖ address (20)], sorted, no repeats.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UndoRecord {
    /// Hash of the block.
    pub hash: B256,
    /// `(row kind, address)` pairs of the rows the block wrote in large tables.
    pub touched: Vec<(IndexKind, Address)>,
}

impl ValueCodec for UndoRecord {
    fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + 21 * self.touched.len());
        out.extend_from_slice(self.hash.as_slice());
        for (kind, address) in &self.touched {
            out.push(*kind as u8);
            out.extend_from_slice(address.as_slice());
        }
        out
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() < 32 || !(bytes.len() - 32).is_multiple_of(21) {
            return Err(CodecError::new("undo record", "expected 32 + 21·n bytes", bytes.len()));
        }
        let touched = bytes[32..]
            .chunks_exact(21)
            .map(|c| {
                IndexKind::from_byte(c[0])
                    .map(|k| (k, Address::from_slice(&c[1..])))
                    .ok_or_else(|| CodecError::new("undo record", "unknown index kind", bytes.len()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { hash: B256::from_slice(&bytes[..32]), touched })
    }
}

/// Raw bytes, for the internal-state table whose values each key defines.
impl ValueCodec for Vec<u8> {
    fn encode_value(&self) -> Vec<u8> {
        self.clone()
    }
    fn decode_value(bytes: &[u8]) -> Result<Self, CodecError> {
        Ok(bytes.to_vec())
    }
}

/// Key of the internal-state table: a short ASCII name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateKey(pub String);

impl KeyCodec for StateKey {
    type Encoded = Vec<u8>;
    fn encode_key(&self) -> Vec<u8> {
        self.0.as_bytes().to_vec()
    }
    fn decode_key(bytes: &[u8]) -> Result<Self, CodecError> {
        String::from_utf8(bytes.to_vec())
            .map(Self)
            .map_err(|_| CodecError::new("state key", "not UTF-8", bytes.len()))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_undo_record_hash_is_the_records_first_32_bytes() {
        let record = UndoRecord {
            hash: B256::repeat_byte(7),
            touched: vec![
                (IndexKind::Appearances, Address::repeat_byte(1)),
                (IndexKind::CodeRemoval, Address::ZERO),
            ],
        };
        let bytes = record.encode_value();
        assert_eq!(UndoRecordHash::decode_value(&bytes), Ok(UndoRecordHash(B256::repeat_byte(7))));
        assert_eq!(UndoRecordHash(B256::repeat_byte(7)).encode_value(), bytes[..32].to_vec());
        assert!(UndoRecordHash::decode_value(&bytes[..40]).is_err());
        assert_eq!(bytes[32 + 21], 14, "code removals are row kind 0e");
    }

    use super::*;
    use alloy_primitives::{address, hex};

    fn round_trip_value<V: ValueCodec + PartialEq + std::fmt::Debug>(v: &V) -> Vec<u8> {
        let bytes = v.encode_value();
        assert_eq!(&V::decode_value(&bytes).expect("decodes"), v);
        bytes
    }

    #[test]
    fn counter_dups_match_the_reference_vectors() {
        // ots/indexer/counter_test.go (docs/format.md, "Address-index counters").
        assert_eq!(round_trip_value(&CounterDup::Unique { total: 1 }), hex!("00"));
        assert_eq!(round_trip_value(&CounterDup::Unique { total: 256 }), hex!("ff"));
        assert_eq!(
            round_trip_value(&CounterDup::Regular { cumulative: 257, chunk: 0x1234567812345678 }),
            hex!("0000000000000101 1234567812345678")
        );
        assert_eq!(
            round_trip_value(&CounterDup::Regular { cumulative: 0, chunk: LAST_CHUNK }),
            hex!("0000000000000000 ffffffffffffffff")
        );
        assert!(CounterDup::decode_value(&[0; 8]).is_err());
    }

    #[test]
    fn regular_counter_dups_sort_by_cumulative_count() {
        // The range seek of a page read (docs/format.md, "Address-index counters") relies on memcmp order of an 8-byte probe against 16-byte dups.
        let dup = CounterDup::Regular { cumulative: 488, chunk: 5 }.encode_value();
        assert!(488u64.to_be_bytes().as_slice() < dup.as_slice());
        assert!(489u64.to_be_bytes().as_slice() > dup.as_slice());
    }

    #[test]
    fn keys_are_big_endian_and_order_preserving() {
        assert_eq!(BlockNumber(0x0102).encode_key(), hex!("0000000000000102"));
        assert_eq!(BlockNumber::decode_key(&hex!("0000000000000102")), Ok(BlockNumber(0x0102)));
        assert!(BlockNumber(255).encode_key() < BlockNumber(256).encode_key());
        assert_eq!(Count::decode_key(&Count(7).encode_key()), Ok(Count(7)));
        assert_eq!(Timestamp(1_700_000_000).encode_value(), hex!("000000006553f100"));
        assert_eq!(Timestamp::decode_value(&hex!("000000006553f100")), Ok(Timestamp(1_700_000_000)));
        assert!(Timestamp::decode_value(&[0; 4]).is_err());
        assert!(Count::decode_key(&[1, 2, 3]).is_err());
    }

    #[test]
    fn chunk_keys_put_the_last_chunk_after_all_others() {
        let a = address!("00000000000000000000000000000000000000aa");
        let key = ChunkKey { address: a, chunk: 0x1234 };
        assert_eq!(key.encode_key(), hex!("00000000000000000000000000000000000000aa 0000000000001234"));
        assert_eq!(ChunkKey::decode_key(&key.encode_key()), Ok(key));
        assert_eq!(
            ChunkKey::last(a).encode_key(),
            hex!("00000000000000000000000000000000000000aa ffffffffffffffff")
        );
        assert!(key.encode_key() < ChunkKey::last(a).encode_key());
        assert!(ChunkKey::decode_key(&[0; 27]).is_err());
    }

    #[test]
    fn staged_chunk_keys_sort_by_segment_then_address_then_chunk() {
        let a = address!("00000000000000000000000000000000000000aa");
        let key = StagedChunkKey { segment: 0x0102, address: a, chunk: 0x1234 };
        assert_eq!(
            key.encode_key(),
            hex!("0000000000000102 00000000000000000000000000000000000000aa 0000000000001234")
        );
        assert_eq!(StagedChunkKey::decode_key(&key.encode_key()), Ok(key));
        let later = StagedChunkKey { segment: 0x0103, address: Address::ZERO, chunk: 0 };
        assert!(key.encode_key() < later.encode_key());
        assert!(StagedChunkKey::decode_key(&[0; 35]).is_err());
    }

    #[test]
    fn staged_holding_keys_sort_by_segment_then_tier_then_kind_then_holder() {
        let a = address!("00000000000000000000000000000000000000aa");
        let key = StagedHoldingKey { tier: 1, segment: 0x0102, kind: IndexKind::Erc721Holdings, holder: a };
        assert_eq!(key.encode_key(), hex!("0000000000000102 01 06 00000000000000000000000000000000000000aa"));
        assert_eq!(StagedHoldingKey::decode_key(&key.encode_key()), Ok(key));
        let later = StagedHoldingKey {
            tier: 1,
            segment: 0x0103,
            kind: IndexKind::Erc20Holdings,
            holder: Address::ZERO,
        };
        assert!(key.encode_key() < later.encode_key());
        // A merge of segments up to 0x0103 sorts after them.
        let merged = StagedHoldingKey { tier: 2, ..later };
        assert!(later.encode_key() < merged.encode_key());
        assert!(StagedHoldingKey::decode_key(&[0; 29]).is_err());
        let mut unknown = key.encode_key();
        unknown[9] = 0xff;
        assert!(StagedHoldingKey::decode_key(&unknown).is_err());
    }

    #[test]
    fn id_chunks_are_ascending_be_u64s() {
        assert_eq!(round_trip_value(&IdChunk(vec![1, 0x0100])), hex!("0000000000000001 0000000000000100"));
        assert!(IdChunk::decode_value(&[0; 12]).is_err());
        assert!(IdChunk::decode_value(&hex!("0000000000000002 0000000000000001")).is_err());
    }

    #[test]
    fn attributes_use_the_roaring64_portable_format() {
        let mut attrs = Attributes::default();
        attrs.set(AttributeBit::Erc20);
        // u64 LE bucket count, u32 LE high key, then a 32-bit portable bitmap: cookie 12346,
        // one container, key 0 with cardinality−1 = 0, offset 16, value 0.
        assert_eq!(
            round_trip_value(&attrs.clone()),
            hex!("0100000000000000 00000000 3a300000 01000000 0000 0000 10000000 0000")
        );
        attrs.set(AttributeBit::Erc721);
        assert_eq!(
            round_trip_value(&attrs.clone()),
            hex!("0100000000000000 00000000 3a300000 01000000 0000 0100 10000000 0000 0200")
        );
        assert!(attrs.has(AttributeBit::Erc721) && !attrs.has(AttributeBit::Erc1155));
        assert!(Attributes::decode_value(&[1, 2, 3]).is_err());
    }

    #[test]
    fn holdings_are_token_then_txid() {
        let h =
            Holding { token: address!("00000000000000000000000000000000000000bb"), first: TxId(0x0500003) };
        assert_eq!(round_trip_value(&h), hex!("00000000000000000000000000000000000000bb 0000000000500003"));
        assert!(Holding::decode_value(&[0; 20]).is_err());
    }

    #[test]
    fn undo_records_are_hash_then_kind_and_address() {
        let r = UndoRecord {
            hash: B256::repeat_byte(0xab),
            touched: vec![
                (IndexKind::Erc20Transfers, address!("00000000000000000000000000000000000000c1")),
                (IndexKind::Erc721Transfers, address!("00000000000000000000000000000000000000c2")),
            ],
        };
        let bytes = round_trip_value(&r);
        assert_eq!(bytes.len(), 32 + 2 * 21);
        assert_eq!(&bytes[32..53], &hex!("00 00000000000000000000000000000000000000c1"));
        assert_eq!(&bytes[53..], &hex!("01 00000000000000000000000000000000000000c2"));
        assert!(UndoRecord::decode_value(&[0; 40]).is_err());
        let mut bad = bytes;
        bad[32] = 0x7f; // no such index kind
        assert!(UndoRecord::decode_value(&bad).is_err());
    }

    #[test]
    fn addresses_round_trip() {
        let a = address!("d8da6bf26964af9d7eed9e03e53415d37aa96045");
        assert_eq!(Address::decode_key(&a.encode_key()), Ok(a));
        assert_eq!(round_trip_value(&a), hex!("d8da6bf26964af9d7eed9e03e53415d37aa96045"));
        assert!(Address::decode_value(&[0; 21]).is_err());
    }
}
