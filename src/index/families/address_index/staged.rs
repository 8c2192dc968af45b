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

use std::{cmp::Reverse, collections::BinaryHeap, ops::ControlFlow};

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
        DbError, DbResult, Txn, WriteTxn,
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
            let mut append = |address: Address, ids: &[u64]| -> DbResult<()> {
                let Some(&chunk) = ids.last() else { return Ok(()) };
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

/// Goes through the ids of `address` in the segments of `list`, oldest first, a chunk at a
/// time (a seek or two a segment), until `visit` breaks. A read so holds one chunk of the
/// address's staged ids, not all of them: mid-catch-up, the busiest lists of mainnet hold tens of
/// millions of ids a segment, and an API read of such an address would hold gigabytes.
fn for_each_chunk<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    visit: &mut dyn FnMut(Vec<u64>) -> ControlFlow<()>,
) -> DbResult<()> {
    struct Walk<'a, 'v, K: TransactionKind> {
        txn: &'a Txn<K>,
        address: Address,
        visit: &'v mut dyn FnMut(Vec<u64>) -> ControlFlow<()>,
    }
    impl<K: TransactionKind> StagedViewer for Walk<'_, '_, K> {
        type Output = DbResult<()>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            let address = self.address;
            let mut cursor = self.txn.cursor::<S>()?;
            let mut segment = 0u64;
            loop {
                let Some((key, chunk)) = cursor.seek(&start_of(segment, address))? else { return Ok(()) };
                if key.segment > segment && key.address != address {
                    // Landed on the next segment's first address: seek this address there.
                    segment = key.segment;
                    continue;
                }
                let mut at = Some((key, chunk));
                while let Some((k, chunk)) =
                    at.take().filter(|(k, _)| k.segment == key.segment && k.address == address)
                {
                    if (self.visit)(chunk.into_ids()).is_break() {
                        return Ok(());
                    }
                    at = cursor.next_entry()?.filter(|(next, _)| next.segment == k.segment);
                }
                let Some(next) = key.segment.checked_add(1) else { return Ok(()) };
                segment = next;
            }
        }
    }
    view_staged(list, &mut Walk { txn, address: *address, visit })
}

/// How many ids `address` has in the segments of `list`.
pub fn address_count<K: TransactionKind>(txn: &Txn<K>, list: IdList, address: &Address) -> DbResult<u64> {
    let mut count = 0u64;
    for_each_chunk(txn, list, address, &mut |ids| {
        count += ids.len() as u64;
        ControlFlow::Continue(())
    })?;
    Ok(count)
}

/// The ids `skip..skip + count` of `address` in the segments of `list`, ascending (fewer where
/// the segments hold fewer).
pub fn address_page<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    mut skip: u64,
    count: u64,
) -> DbResult<Vec<u64>> {
    let want = usize::try_from(count).unwrap_or(usize::MAX);
    let mut page = Vec::new();
    if want == 0 {
        return Ok(page);
    }
    for_each_chunk(txn, list, address, &mut |ids| {
        let Some(from) = usize::try_from(skip).ok().filter(|&from| from < ids.len()) else {
            skip -= ids.len() as u64;
            return ControlFlow::Continue(());
        };
        skip = 0;
        let take = (want - page.len()).min(ids.len() - from);
        page.extend_from_slice(&ids[from..from + take]);
        if page.len() == want {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    Ok(page)
}

/// How many ids `address` has below `id` in the segments of `list`, and whether that is all of
/// its ids there.
pub fn address_rank<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    id: u64,
) -> DbResult<(u64, bool)> {
    let (mut below, mut all) = (0u64, true);
    for_each_chunk(txn, list, address, &mut |ids| {
        let under = ids.partition_point(|&x| x < id);
        below += under as u64;
        if under < ids.len() {
            // Every later chunk's ids follow this one's.
            all = false;
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    Ok((below, all))
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

/// Checks the chunks of every segment of `list`: none empty or past [`CHUNK_IDS`] ids, each
/// keyed by its largest id, an address's ids ascending within a segment, none at or above
/// `below`. (That they follow the address's older ids is checked on the merged rows.)
pub fn check_chunks<K: TransactionKind>(txn: &Txn<K>, list: IdList, below: u64) -> DbResult<()> {
    struct Chunks<'a, K: TransactionKind>(&'a Txn<K>, u64);
    impl<K: TransactionKind> StagedViewer for Chunks<'_, K> {
        type Output = DbResult<()>;
        fn view<S: StagedIndex>(&mut self) -> Self::Output {
            let mut cursor = self.0.walking_cursor::<S>()?;
            let mut next = cursor.first()?;
            let mut previous: Option<StagedChunkKey> = None;
            while let Some((key, chunk)) = next {
                let ids = chunk.into_ids();
                let bad =
                    |reason: String| Err(broken::<S>(&crate::db::codec::KeyCodec::encode_key(&key), reason));
                let (Some(&first), Some(&last)) = (ids.first(), ids.last()) else {
                    return bad("an empty chunk".into());
                };
                if ids.len() > CHUNK_IDS || last != key.chunk || ids.windows(2).any(|w| w[0] >= w[1]) {
                    return bad(format!("{} ids, not ascending up to the key's", ids.len()));
                }
                if last >= self.1 {
                    return bad(format!("holds id {last:#x}, beyond the indexed tip"));
                }
                if previous
                    .is_some_and(|p| p.segment == key.segment && p.address == key.address && p.chunk >= first)
                {
                    return bad("ids do not ascend across the address's chunks".into());
                }
                previous = Some(key);
                next = cursor.next_entry()?;
            }
            Ok(())
        }
    }
    view_staged(list, &mut Chunks(txn, below))
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
