//! The address indexes' staged segments (docs/format.md, "Staged segments"): what the later
//! bulk stages of a catch-up append, one segment a stage, instead of merging into a list's tables.
//!
//! A stage's ids fall on addresses all over a list, so merged into its tables (or into a young
//! level that grows with them) they dirty pages in proportion to what the tables hold, not to
//! what the stage holds. Keyed by the stage first, a segment is written at the table's end,
//! pages filled whole, at the cost of the stage's own rows. An address's ids are then spread
//! over the segments (one or two seeks each to find), and the catch-up's end folds them all into
//! the main tables in one streamed rewrite, merging the segments by address. A stage that would
//! leave more than [`MAX_SEGMENTS`] folds them with its own rows, which bounds what a read seeks.
//!
//! An address's ids in a segment follow its ids in the main tables, the young level and every
//! older segment: a list reads as main ‖ young ‖ segments, oldest first ‖ window.

use std::{cmp::Reverse, collections::BinaryHeap};

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use super::{
    chunks::{grouped_rows, LevelRows, CHUNK_IDS},
    IdList,
};
use crate::{
    db::{
        codec::{ChunkIds, StagedChunkKey},
        tables::*,
        DbError, DbResult, ReadTxn, TableCursor, Txn, WriteTxn,
    },
    index::integrity::broken,
};

/// The most segments a list keeps: a stage that would leave more folds them all. A read of an
/// address seeks each segment once or twice; a mainnet catch-up at the defaults is well under
/// this many stages, one of 1 % stages folds about once.
pub const MAX_SEGMENTS: usize = 128;

/// A staged segment table: `segment ‖ address ‖ chunk` → ids.
pub trait StagedIndex: Table<Key = StagedChunkKey, Value: ChunkIds> {}
impl<T: Table<Key = StagedChunkKey, Value: ChunkIds>> StagedIndex for T {}

/// Something done with the staged table of one list, whichever it is.
pub trait StagedViewer {
    /// What it gives.
    type Output;
    /// Does it with table `S`.
    fn view<S: StagedIndex>(&mut self) -> Self::Output;
}

/// Runs `viewer` on the staged table of `list`.
pub fn view_staged<V: StagedViewer>(list: IdList, viewer: &mut V) -> V::Output {
    match list {
        IdList::Erc20Transfers => viewer.view::<OtsERC20TransferIndexStaged>(),
        IdList::Erc721Transfers => viewer.view::<OtsERC721TransferIndexStaged>(),
        IdList::Erc1155Transfers => viewer.view::<OtsERC1155TransferIndexStaged>(),
        IdList::BlocksRewarded => viewer.view::<OtsBlocksRewardedIndexStaged>(),
        IdList::Withdrawals => viewer.view::<OtsWithdrawalsIndexStaged>(),
        IdList::InternalTxs => viewer.view::<OtsInternalTxIndexStaged>(),
        IdList::TransferRows => viewer.view::<OtsTransferRowsIndexStaged>(),
        IdList::TokenTransfers => viewer.view::<OtsTokenTransfersIndexStaged>(),
        IdList::InternalRows => viewer.view::<OtsInternalRowsIndexStaged>(),
        IdList::PartyToken => viewer.view::<OtsPartyTokenIndexStaged>(),
    }
}

const fn start_of(segment: u64, address: Address) -> StagedChunkKey {
    StagedChunkKey { segment, address, chunk: 0 }
}

/// The segments `list` holds, oldest first: one seek each.
pub fn segment_keys<K: TransactionKind>(txn: &Txn<K>, list: IdList) -> DbResult<Vec<u64>> {
    struct Keys<'a, K: TransactionKind>(&'a Txn<K>);
    impl<K: TransactionKind> StagedViewer for Keys<'_, K> {
        type Output = DbResult<Vec<u64>>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            let mut cursor = self.0.cursor::<S>()?;
            let mut keys = Vec::new();
            let mut next = Some(0);
            while let Some(segment) = next {
                let Some((key, _)) = cursor.seek(&start_of(segment, Address::ZERO))? else { break };
                keys.push(key.segment);
                next = key.segment.checked_add(1);
            }
            Ok(keys)
        }
    }
    view_staged(list, &mut Keys(txn))
}

/// Appends one stage's `rows` (addresses ascending, each with its ids of the stage, ascending)
/// to `list` as segment `segment`, which must be newer than every segment held.
pub fn append_segment(
    txn: &WriteTxn,
    list: IdList,
    segment: u64,
    rows: impl Iterator<Item = (Address, Vec<u64>)>,
) -> DbResult<()> {
    struct Append<'a, R>(&'a WriteTxn, u64, Option<R>);
    impl<R: Iterator<Item = (Address, Vec<u64>)>> StagedViewer for Append<'_, R> {
        type Output = DbResult<()>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            let Some(rows) = self.2.take() else { return Ok(()) };
            let mut cursor = self.0.cursor::<S>()?;
            if let Some((last, _)) = cursor.last()? {
                if last.segment >= self.1 {
                    return Err(DbError::Corrupt {
                        table: S::ID.name(),
                        key: alloy_primitives::hex::encode(crate::db::codec::KeyCodec::encode_key(&last)),
                        reason: format!("segment {} appended after segment {}", self.1, last.segment),
                    });
                }
            }
            // An address may come in several rows (a long list in pieces): the chunk a row leaves
            // short waits for the next, so the chunks are cut as from the address's whole list.
            let mut short: Option<(Address, Vec<u64>)> = None;
            // The address last appended and its next chunk's ordinal.
            let mut placed: Option<(Address, u64)> = None;
            let mut append = |address: Address, ids: &[u64]| -> DbResult<()> {
                if ids.is_empty() {
                    return Ok(());
                }
                let chunk = match placed {
                    Some((held, next)) if held == address => next,
                    _ => 0,
                };
                placed = Some((address, chunk + 1));
                let key = StagedChunkKey { segment: self.1, address, chunk };
                cursor.append(&key, &S::Value::from_ids(ids.to_vec()))
            };
            for (address, ids) in rows {
                let ids = match short.take() {
                    Some((held, mut waiting)) if held == address => {
                        waiting.extend_from_slice(&ids);
                        waiting
                    }
                    Some((held, waiting)) => {
                        append(held, &waiting)?;
                        ids
                    }
                    None => ids,
                };
                let whole = ids.len() - ids.len() % CHUNK_IDS;
                for piece in ids[..whole].chunks(CHUNK_IDS) {
                    append(address, piece)?;
                }
                if whole < ids.len() {
                    short = Some((address, ids[whole..].to_vec()));
                }
            }
            if let Some((address, waiting)) = short {
                append(address, &waiting)?;
            }
            Ok(())
        }
    }
    view_staged(list, &mut Append(txn, segment, Some(rows)))
}

/// An address's chunks in one segment, as its last chunk tells them.
struct Held {
    segment: u64,
    /// The ordinal of its last chunk.
    last_chunk: u64,
    /// The last chunk's ids.
    last_ids: Vec<u64>,
}

impl Held {
    /// The address's ids in the segment: its chunks but the last hold [`CHUNK_IDS`] each.
    fn count(&self) -> u64 {
        self.last_chunk.saturating_mul(CHUNK_IDS as u64).saturating_add(self.last_ids.len() as u64)
    }
}

/// The segments of one staged table holding an address, oldest first.
struct Holding<'c, K: TransactionKind, S: StagedIndex> {
    cursor: TableCursor<'c, K, S>,
    address: Address,
    /// The oldest segment not looked at yet (`None`: past the newest possible).
    from: Option<u64>,
}

impl<'c, K: TransactionKind, S: StagedIndex> Holding<'c, K, S> {
    fn new(txn: &'c Txn<K>, address: Address) -> DbResult<Self> {
        Ok(Self { cursor: txn.cursor::<S>()?, address, from: Some(0) })
    }

    /// The next segment holding the address, with its last chunk: a seek to the address in
    /// each segment (landing in a later segment, one more there), and one past its chunks. Only
    /// the address's last chunk is decoded, never a neighbour's.
    fn next(&mut self) -> DbResult<Option<Held>> {
        let address = self.address;
        while let Some(segment) = self.from {
            let Some(key) = self.cursor.seek_key(&start_of(segment, address))? else {
                self.from = None;
                break;
            };
            if key.address != address {
                // Not in this segment, or landed in a later one: look for the address there.
                self.from = if key.segment > segment { Some(key.segment) } else { segment.checked_add(1) };
                continue;
            }
            self.from = key.segment.checked_add(1);
            let past = StagedChunkKey { segment: key.segment, address, chunk: u64::MAX };
            // The entry after the address's chunks (not decoded: it is another list's), then
            // the one before it.
            let last = match self.cursor.seek_key(&past)? {
                Some(k) if k == past => self.cursor.seek(&past)?,
                Some(_) => self.cursor.prev_entry()?,
                None => self.cursor.last()?,
            };
            let Some((last, chunk)) = last.filter(|(k, _)| k.segment == key.segment && k.address == address)
            else {
                return Err(broken::<S>(
                    &crate::db::codec::KeyCodec::encode_key(&key),
                    "the address's last chunk in the segment is missing".into(),
                ));
            };
            return Ok(Some(Held {
                segment: last.segment,
                last_chunk: last.chunk,
                last_ids: chunk.into_ids(),
            }));
        }
        Ok(None)
    }

    /// The ids of chunk `chunk` of the address in `segment`.
    fn chunk(&mut self, segment: u64, chunk: u64) -> DbResult<Vec<u64>> {
        let key = StagedChunkKey { segment, address: self.address, chunk };
        match self.cursor.seek_exact(&key)? {
            Some(ids) => Ok(ids.into_ids()),
            None => Err(broken::<S>(
                &crate::db::codec::KeyCodec::encode_key(&key),
                "a chunk before the address's last in the segment is missing".into(),
            )),
        }
    }
}

/// How many ids `address` has in the segments of `list`: two seeks or three a segment, whatever
/// its ids there (mid-catch-up the busiest lists of mainnet hold tens of millions of ids a
/// segment).
pub fn address_count<K: TransactionKind>(txn: &Txn<K>, list: IdList, address: &Address) -> DbResult<u64> {
    struct Count<'a, K: TransactionKind>(&'a Txn<K>, Address);
    impl<K: TransactionKind> StagedViewer for Count<'_, K> {
        type Output = DbResult<u64>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            let mut holding = Holding::<K, S>::new(self.0, self.1)?;
            let mut count = 0u64;
            while let Some(held) = holding.next()? {
                count = count.saturating_add(held.count());
            }
            Ok(count)
        }
    }
    view_staged(list, &mut Count(txn, *address))
}

/// The ids `skip..skip + count` of `address` in the segments of `list`, ascending (fewer where
/// the segments hold fewer): the segments before the page are counted, not read, and the page's
/// first chunk is sought by its ordinal.
pub fn address_page<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    skip: u64,
    count: u64,
) -> DbResult<Vec<u64>> {
    struct Page<'a, K: TransactionKind>(&'a Txn<K>, Address, u64, u64);
    impl<K: TransactionKind> StagedViewer for Page<'_, K> {
        type Output = DbResult<Vec<u64>>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            let (mut skip, want) = (self.2, usize::try_from(self.3).unwrap_or(usize::MAX));
            let mut page = Vec::new();
            let mut holding = Holding::<K, S>::new(self.0, self.1)?;
            while page.len() < want {
                let Some(held) = holding.next()? else { break };
                let held_count = held.count();
                if skip >= held_count {
                    skip -= held_count;
                    continue;
                }
                let mut chunk = skip / CHUNK_IDS as u64;
                let mut from = (skip % CHUNK_IDS as u64) as usize;
                skip = 0;
                while page.len() < want && chunk <= held.last_chunk {
                    let ids = if chunk == held.last_chunk {
                        held.last_ids.clone()
                    } else {
                        holding.chunk(held.segment, chunk)?
                    };
                    let start = from.min(ids.len());
                    let take = (want - page.len()).min(ids.len() - start);
                    page.extend_from_slice(&ids[start..start + take]);
                    from = 0;
                    chunk += 1;
                }
            }
            Ok(page)
        }
    }
    view_staged(list, &mut Page(txn, *address, skip, count))
}

/// How many ids `address` has below `id` in the segments of `list`, and whether that is all of
/// its ids there: the segments wholly below are counted, and in the one that holds `id` its
/// chunk is found by bisecting the chunks' ordinals.
pub fn address_rank<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    id: u64,
) -> DbResult<(u64, bool)> {
    struct Rank<'a, K: TransactionKind>(&'a Txn<K>, Address, u64);
    impl<K: TransactionKind> StagedViewer for Rank<'_, K> {
        type Output = DbResult<(u64, bool)>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            let id = self.2;
            let mut holding = Holding::<K, S>::new(self.0, self.1)?;
            let mut below = 0u64;
            while let Some(held) = holding.next()? {
                if held.last_ids.last().is_none_or(|&last| last < id) {
                    below = below.saturating_add(held.count());
                    continue;
                }
                // The first chunk whose last id is at least `id`: the last chunk is one.
                let (mut low, mut high) = (0, held.last_chunk);
                let mut found = held.last_ids.clone();
                while low < high {
                    let middle = low + (high - low) / 2;
                    let ids = holding.chunk(held.segment, middle)?;
                    if ids.last().is_some_and(|&last| last >= id) {
                        high = middle;
                        found = ids;
                    } else {
                        low = middle + 1;
                    }
                }
                let under = found.partition_point(|&x| x < id) as u64;
                // Every later segment's ids follow this one's.
                return Ok((below.saturating_add(low * CHUNK_IDS as u64 + under), false));
            }
            Ok((below, true))
        }
    }
    view_staged(list, &mut Rank(txn, *address, id))
}

/// One segment read whole: addresses ascending, each with its ids of the segment.
fn segment_rows<'a, K: TransactionKind, S: StagedIndex>(
    txn: &'a Txn<K>,
    segment: u64,
) -> DbResult<LevelRows<'a>> {
    let mut cursor = txn.walking_cursor::<S>()?;
    let first = cursor.seek(&start_of(segment, Address::ZERO))?;
    Ok(grouped_rows(cursor, first, move |k| k.segment == segment, |k| k.address))
}

/// An address's ids across the segments are read in pieces of about this many (a piece ends at
/// the first segment that reaches it): the busiest addresses of a chain caught up in many
/// stages hold hundreds of millions of ids across them. Tests take small pieces, so that their
/// few ids make addresses of many pieces.
pub(super) const PIECE_IDS: usize = if cfg!(test) { 16 } else { 1 << 20 };

/// Every segment of `list` read from `txn` and merged: addresses ascending, each with its ids
/// of all segments, oldest segment first, in one row or (past [`PIECE_IDS`]) in several
/// consecutive rows, each's ids following the previous one's.
pub fn staged_rows<K: TransactionKind>(txn: &Txn<K>, list: IdList) -> DbResult<LevelRows<'_>> {
    struct Open<'a, K: TransactionKind>(&'a Txn<K>, Vec<u64>);
    impl<'a, K: TransactionKind> StagedViewer for Open<'a, K> {
        type Output = DbResult<Vec<LevelRows<'a>>>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            self.1.iter().map(|&segment| segment_rows::<K, S>(self.0, segment)).collect()
        }
    }
    let segments = segment_keys(txn, list)?;
    let readers = view_staged(list, &mut Open(txn, segments))?;
    Ok(Box::new(MergedSegments::new(readers)))
}

/// Segments merged by address; an address's ids are joined in segment order (the heap orders
/// equal addresses by segment).
struct MergedSegments<'a> {
    readers: Vec<LevelRows<'a>>,
    heads: Vec<Vec<u64>>,
    heap: BinaryHeap<Reverse<(Address, usize)>>,
    failed: Option<DbError>,
}

impl<'a> MergedSegments<'a> {
    fn new(readers: Vec<LevelRows<'a>>) -> Self {
        let heads = vec![Vec::new(); readers.len()];
        let mut merged = Self { readers, heads, heap: BinaryHeap::new(), failed: None };
        for i in 0..merged.readers.len() {
            merged.advance(i);
        }
        merged
    }

    fn advance(&mut self, i: usize) {
        match self.readers[i].next() {
            Some(Ok((address, ids))) => {
                self.heads[i] = ids;
                self.heap.push(Reverse((address, i)));
            }
            Some(Err(e)) => self.failed = self.failed.take().or(Some(e)),
            None => {}
        }
    }
}

impl Iterator for MergedSegments<'_> {
    type Item = DbResult<(Address, Vec<u64>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        let Reverse((address, first)) = self.heap.pop()?;
        let mut ids = std::mem::take(&mut self.heads[first]);
        self.advance(first);
        while let Some(i) = self.heap.peek().filter(|top| top.0 .0 == address).map(|top| top.0 .1) {
            if ids.len() >= PIECE_IDS {
                break;
            }
            self.heap.pop();
            ids.append(&mut self.heads[i]);
            self.advance(i);
        }
        match self.failed.take() {
            Some(e) => Some(Err(e)),
            None => Some(Ok((address, ids))),
        }
    }
}

/// Entries of the staged table of `list`.
pub fn entries<K: TransactionKind>(txn: &Txn<K>, list: IdList) -> DbResult<u64> {
    struct Entries<'a, K: TransactionKind>(&'a Txn<K>);
    impl<K: TransactionKind> StagedViewer for Entries<'_, K> {
        type Output = DbResult<u64>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            self.0.entries::<S>()
        }
    }
    view_staged(list, &mut Entries(txn))
}

/// Empties the staged table of `list`.
pub fn clear(txn: &WriteTxn, list: IdList) -> DbResult<()> {
    struct Clear<'a>(&'a WriteTxn);
    impl StagedViewer for Clear<'_> {
        type Output = DbResult<()>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            self.0.clear::<S>()
        }
    }
    view_staged(list, &mut Clear(txn))
}

/// Checks the chunks of every segment of `list`: none empty or past [`CHUNK_IDS`] ids, an
/// address's chunks in a segment numbered from 0 and full but the last, its ids ascending
/// within the segment, none at or above `below`. (That they follow the address's older ids is
/// checked on the merged rows.)
pub fn check_chunks<K: TransactionKind>(txn: &Txn<K>, list: IdList, below: u64) -> DbResult<()> {
    struct Chunks<'a, K: TransactionKind>(&'a Txn<K>, u64);
    impl<K: TransactionKind> StagedViewer for Chunks<'_, K> {
        type Output = DbResult<()>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            let mut cursor = self.0.walking_cursor::<S>()?;
            let mut next = cursor.first()?;
            // The chunk before: its key, last id and how many ids it held.
            let mut previous: Option<(StagedChunkKey, u64, usize)> = None;
            while let Some((key, chunk)) = next {
                let ids = chunk.into_ids();
                let bad =
                    |reason: String| Err(broken::<S>(&crate::db::codec::KeyCodec::encode_key(&key), reason));
                let (Some(&first), Some(&last)) = (ids.first(), ids.last()) else {
                    return bad("an empty chunk".into());
                };
                if ids.len() > CHUNK_IDS || ids.windows(2).any(|w| w[0] >= w[1]) {
                    return bad(format!("{} ids, not ascending", ids.len()));
                }
                if last >= self.1 {
                    return bad(format!("holds id {last:#x}, beyond the indexed tip"));
                }
                let same = previous.filter(|(p, ..)| p.segment == key.segment && p.address == key.address);
                let expected = same.map_or(0, |(p, ..)| p.chunk.saturating_add(1));
                if key.chunk != expected {
                    return bad(format!("chunk {} of the address in the segment, not {expected}", key.chunk));
                }
                if let Some((_, before_last, before_len)) = same {
                    if before_len != CHUNK_IDS {
                        return bad(format!("follows a chunk of {before_len} ids, not {CHUNK_IDS}"));
                    }
                    if before_last >= first {
                        return bad("ids do not ascend across the address's chunks".into());
                    }
                }
                previous = Some((key, last, ids.len()));
                next = cursor.next_entry()?;
            }
            Ok(())
        }
    }
    view_staged(list, &mut Chunks(txn, below))
}

/// Keys the chunks of `list`'s segments by their ordinal within the segment's list of the
/// address, as format 24 does, where formats 20 to 23 keyed them by their largest id: the
/// table copied from `before` (the state `txn` started from) in key order, which the ordinals
/// keep. Returns the chunks copied.
pub fn key_by_ordinal(txn: &WriteTxn, before: &ReadTxn, list: IdList) -> DbResult<u64> {
    struct Rekey<'a>(&'a WriteTxn, &'a ReadTxn);
    impl StagedViewer for Rekey<'_> {
        type Output = DbResult<u64>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            if self.1.entries::<S>()? == 0 {
                return Ok(0);
            }
            let mut old = self.1.walking_cursor::<S>()?;
            let mut next = old.first()?;
            self.0.clear::<S>()?;
            let mut out = self.0.walking_cursor::<S>()?;
            let (mut placed, mut copied): (Option<(u64, Address, u64)>, u64) = (None, 0);
            while let Some((key, chunk)) = next {
                let ordinal = match placed {
                    Some((segment, address, next)) if segment == key.segment && address == key.address => {
                        next
                    }
                    _ => 0,
                };
                placed = Some((key.segment, key.address, ordinal + 1));
                out.append(&StagedChunkKey { chunk: ordinal, ..key }, &chunk)?;
                copied += 1;
                next = old.next_entry()?;
            }
            Ok(copied)
        }
    }
    view_staged(list, &mut Rekey(txn, before))
}

/// The name of the staged table of `list`.
pub fn table_name(list: IdList) -> &'static str {
    struct Name;
    impl StagedViewer for Name {
        type Output = &'static str;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            S::ID.name()
        }
    }
    view_staged(list, &mut Name)
}
