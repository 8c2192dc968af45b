//! The stored levels of every address index (docs/format.md, "Young levels" and "Staged
//! segments"): the main tables; a young level of the same layout, which the bulk stages of a
//! catch-up appended to up to format 19 and which is folded in as before where a database still
//! holds one; and the staged segments ([`super::staged`]) that later stages append now.
//!
//! An address's ids in the young level all follow its ids in the main one, the segments' follow
//! both, and the reorg window's follow all: a list reads as main ‖ young ‖ segments ‖ window.
//! Any write that is not a stage's (the catch-up's end, the first batch after it, a dump) folds
//! the young level and the segments into the main tables in one streamed rewrite, so a
//! followed index has one level.

use std::{
    cell::Cell,
    sync::mpsc::{sync_channel, SyncSender},
};

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;
use tracing::{debug, warn};

use super::{
    chunks::{
        grouped_rows, id_count, id_page, id_rank, rewrite_with_appends, AddressCounter, AddressIndex,
        IdAppender, LevelRows,
    },
    staged, view_id_list, IdList, IdListViewer,
};
use crate::{
    db::{tables::*, Db, DbError, DbResult, TableStats, Txn, WriteTxn},
    index::rewrite::rewrite_pays,
};

/// Where a list's stored ids are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The main tables (`OtsERC20TransferIndex`, …): what ots2 reads.
    Main,
    /// The young level (`OtsERC20TransferIndexYoung`, …): newer ids of a catch-up.
    Young,
}

/// The levels, oldest ids first.
pub const LEVELS: [Level; 2] = [Level::Main, Level::Young];

/// Runs `viewer` on the tables of `list` at `level`.
pub fn view_level<V: IdListViewer>(list: IdList, level: Level, viewer: &mut V) -> V::Output {
    if level == Level::Main {
        return view_id_list(list, viewer);
    }
    match list {
        IdList::Erc20Transfers => viewer.view::<OtsERC20TransferIndexYoung, OtsERC20TransferCounterYoung>(),
        IdList::Erc721Transfers => {
            viewer.view::<OtsERC721TransferIndexYoung, OtsERC721TransferCounterYoung>()
        }
        IdList::Erc1155Transfers => {
            viewer.view::<OtsERC1155TransferIndexYoung, OtsERC1155TransferCounterYoung>()
        }
        IdList::BlocksRewarded => viewer.view::<OtsBlocksRewardedIndexYoung, OtsBlocksRewardedCounterYoung>(),
        IdList::Withdrawals => viewer.view::<OtsWithdrawalsIndexYoung, OtsWithdrawalsCounterYoung>(),
        IdList::InternalTxs => viewer.view::<OtsInternalTxIndexYoung, OtsInternalTxCounterYoung>(),
        IdList::TransferRows => viewer.view::<OtsTransferRowsIndexYoung, OtsTransferRowsCounterYoung>(),
        IdList::TokenTransfers => viewer.view::<OtsTokenTransfersIndexYoung, OtsTokenTransfersCounterYoung>(),
        IdList::InternalRows => viewer.view::<OtsInternalRowsIndexYoung, OtsInternalRowsCounterYoung>(),
        IdList::PartyToken => viewer.view::<OtsPartyTokenIndexYoung, OtsPartyTokenCounterYoung>(),
    }
}

/// The young level's tables, index then counter, list by list, then the staged segments'.
pub const YOUNG_TABLES: &[TableId] = &[
    TableId::OtsERC20TransferIndexYoung,
    TableId::OtsERC20TransferCounterYoung,
    TableId::OtsERC721TransferIndexYoung,
    TableId::OtsERC721TransferCounterYoung,
    TableId::OtsERC1155TransferIndexYoung,
    TableId::OtsERC1155TransferCounterYoung,
    TableId::OtsWithdrawalsIndexYoung,
    TableId::OtsWithdrawalsCounterYoung,
    TableId::OtsBlocksRewardedIndexYoung,
    TableId::OtsBlocksRewardedCounterYoung,
    TableId::OtsInternalTxIndexYoung,
    TableId::OtsInternalTxCounterYoung,
    TableId::OtsTransferRowsIndexYoung,
    TableId::OtsTransferRowsCounterYoung,
    TableId::OtsTokenTransfersIndexYoung,
    TableId::OtsTokenTransfersCounterYoung,
    TableId::OtsInternalRowsIndexYoung,
    TableId::OtsInternalRowsCounterYoung,
    TableId::OtsPartyTokenIndexYoung,
    TableId::OtsPartyTokenCounterYoung,
    // The staged segments ([`super::staged`]), emptied with the young level.
    TableId::OtsERC20TransferIndexStaged,
    TableId::OtsERC721TransferIndexStaged,
    TableId::OtsERC1155TransferIndexStaged,
    TableId::OtsWithdrawalsIndexStaged,
    TableId::OtsBlocksRewardedIndexStaged,
    TableId::OtsInternalTxIndexStaged,
    TableId::OtsTransferRowsIndexStaged,
    TableId::OtsTokenTransfersIndexStaged,
    TableId::OtsInternalRowsIndexStaged,
    TableId::OtsPartyTokenIndexStaged,
];

pub(super) struct Counted<'a, K: TransactionKind>(pub(super) &'a Txn<K>, pub(super) &'a Address);

impl<K: TransactionKind> IdListViewer for Counted<'_, K> {
    type Output = DbResult<u64>;
    fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output {
        id_count::<C, K>(self.0, self.1)
    }
}

struct Paged<'a, K: TransactionKind> {
    txn: &'a Txn<K>,
    address: &'a Address,
    idx: u64,
    count: u64,
}

impl<K: TransactionKind> IdListViewer for Paged<'_, K> {
    type Output = DbResult<Vec<u64>>;
    fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output {
        id_page::<I, C, K>(self.txn, self.address, self.idx, self.count)
    }
}

struct Ranked<'a, K: TransactionKind> {
    txn: &'a Txn<K>,
    address: &'a Address,
    id: u64,
}

impl<K: TransactionKind> IdListViewer for Ranked<'_, K> {
    type Output = DbResult<u64>;
    fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output {
        id_rank::<I, C, K>(self.txn, self.address, self.id)
    }
}

/// How many ids of `address` in `list` the levels hold, staged segments aside.
pub(super) fn leveled_count<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
) -> DbResult<u64> {
    LEVELS
        .into_iter()
        .try_fold(0, |sum, level| Ok(sum + view_level(list, level, &mut Counted(txn, address))?))
}

/// How many ids of `address` in `list` are stored: those older than the reorg window.
pub fn stored_count<K: TransactionKind>(txn: &Txn<K>, list: IdList, address: &Address) -> DbResult<u64> {
    Ok(leveled_count(txn, list, address)? + staged::address_count(txn, list, address)?)
}

/// Stored ids `idx..idx + count` of `address` in `list`, ascending: the main level's, then the
/// young one's, then the staged segments'.
pub fn stored_page<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    mut idx: u64,
    mut count: u64,
) -> DbResult<Vec<u64>> {
    let mut out = Vec::new();
    for level in LEVELS {
        if count == 0 {
            return Ok(out);
        }
        let held = view_level(list, level, &mut Counted(txn, address))?;
        let Some(left) = held.checked_sub(idx).filter(|&n| n > 0) else {
            idx -= held;
            continue;
        };
        let page = view_level(list, level, &mut Paged { txn, address, idx, count: count.min(left) })?;
        count = count.saturating_sub(page.len() as u64);
        out.extend(page);
        idx = 0;
    }
    if count > 0 {
        out.extend(staged::address_page(txn, list, address, idx, count)?);
    }
    Ok(out)
}

/// How many stored ids of `address` in `list` are below `id`, and whether that is all of them
/// (the window's ids then come next).
pub fn stored_rank<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    address: &Address,
    id: u64,
) -> DbResult<(u64, bool)> {
    let mut below = 0;
    for level in LEVELS {
        let rank = view_level(list, level, &mut Ranked { txn, address, id })?;
        below += rank;
        if rank < view_level(list, level, &mut Counted(txn, address))? {
            // Every later level's ids follow this one's.
            return Ok((below, false));
        }
    }
    let (rank, all) = staged::address_rank(txn, list, address, id)?;
    Ok((below + rank, all))
}

/// Entries and bytes of the index table of `list` at `level`.
fn index_stats<K: TransactionKind>(txn: &Txn<K>, list: IdList, level: Level) -> DbResult<TableStats> {
    struct Stats<'a, K: TransactionKind>(&'a Txn<K>);
    impl<K: TransactionKind> IdListViewer for Stats<'_, K> {
        type Output = DbResult<TableStats>;
        fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output {
            self.0.stats::<I>()
        }
    }
    view_level(list, level, &mut Stats(txn))
}

/// Entries of the index table of `list` at `level`.
pub(super) fn entries<K: TransactionKind>(txn: &Txn<K>, list: IdList, level: Level) -> DbResult<u64> {
    Ok(index_stats(txn, list, level)?.entries)
}

/// Reads `list` at `level` whole from `txn`.
pub(super) fn level_rows<K: TransactionKind>(
    txn: &Txn<K>,
    list: IdList,
    level: Level,
) -> DbResult<LevelRows<'_>> {
    struct Open<'a, K: TransactionKind>(&'a Txn<K>);
    impl<'a, K: TransactionKind> IdListViewer for Open<'a, K> {
        type Output = DbResult<LevelRows<'a>>;
        fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output {
            let mut cursor = self.0.walking_cursor::<I>()?;
            let first = cursor.first()?;
            Ok(grouped_rows(cursor, first, |_| true, |k| k.address))
        }
    }
    view_level(list, level, &mut Open(txn))
}

/// Appends rows (addresses ascending, each with new ids that follow its stored ones) to one
/// level: rewritten whole from `before` (the state the transaction started from) when the rows
/// touch a large share of it or `whole` asks for it, appended in place otherwise.
struct IntoLevel<'a, R> {
    txn: &'a WriteTxn,
    before: Option<&'a crate::db::ReadTxn>,
    rows: Option<R>,
    addresses: u64,
    whole: bool,
}

impl<R: Iterator<Item = (Address, Vec<u64>)>> IdListViewer for IntoLevel<'_, R> {
    type Output = DbResult<()>;
    fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output {
        let Some(rows) = self.rows.take() else { return Ok(()) };
        match self.before {
            Some(before) if self.whole || rewrite_pays(self.txn.stats::<I>()?.entries, self.addresses) => {
                rewrite_with_appends::<I, C, _>(self.txn, before, rows)
            }
            _ => {
                let mut appender = IdAppender::<I, C>::new(self.txn)?;
                for (address, ids) in rows {
                    appender.append(&address, &ids)?;
                }
                Ok(())
            }
        }
    }
}

/// Writes `rows` (addresses ascending, at most `addresses` of them with `ids` ids in all, each
/// address's following every id stored for it) to `list`. A stage's write (`segment`, its key)
/// appends them as a staged segment ([`staged`]) when the main tables hold something and fewer
/// than [`staged::MAX_SEGMENTS`] segments are held; any other write goes to the main tables,
/// folding the young level and the segments in with it. `before` is a snapshot of the state
/// `txn` started from; without one there must be nothing to fold.
pub(super) fn write_rows(
    txn: &WriteTxn,
    before: Option<&crate::db::ReadTxn>,
    list: IdList,
    rows: impl Iterator<Item = (Address, Vec<u64>)>,
    (addresses, ids): (u64, u64),
    segment: Option<u64>,
) -> DbResult<()> {
    let segments = staged::segment_keys(txn, list)?;
    let young = entries(txn, list, Level::Young)? > 0;
    if addresses == 0 && !young && segments.is_empty() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let said = |how: &str| {
        debug!(target: "ots::index", list = ?list, how, addresses, ids, seconds = started.elapsed().as_secs_f64(), "list written");
    };
    if let (Some(segment), Some(_)) = (segment, before) {
        let newer = segments.last().is_none_or(|&last| last < segment);
        if newer && segments.len() < staged::MAX_SEGMENTS && entries(txn, list, Level::Main)? > 0 {
            staged::append_segment(txn, list, segment, rows)?;
            said("staged");
            return Ok(());
        }
    }
    if !young && segments.is_empty() {
        let mut into = IntoLevel { txn, before, rows: Some(rows), addresses, whole: false };
        view_level(list, Level::Main, &mut into)?;
        said("main");
        return Ok(());
    }
    let Some(before) = before else {
        return Err(unfolded(list));
    };
    let (mut young_failed, mut staged_failed) = (None, None);
    let young_rows =
        level_rows(before, list, Level::Young)?.map_while(|row| row.map_err(|e| young_failed = Some(e)).ok());
    let staged_rows =
        staged::staged_rows(before, list)?.map_while(|row| row.map_err(|e| staged_failed = Some(e)).ok());
    let older = JoinedRows { older: young_rows.peekable(), newer: staged_rows.peekable() };
    let merged = JoinedRows { older: older.peekable(), newer: rows.peekable() };
    let mut into = IntoLevel { txn, before: Some(before), rows: Some(merged), addresses, whole: true };
    view_level(list, Level::Main, &mut into)?;
    // The older rows borrow the failures until they are dropped.
    drop(into);
    if let Some(e) = young_failed.or(staged_failed) {
        return Err(e);
    }
    clear_young(txn, list)?;
    staged::clear(txn, list)?;
    said("folded");
    Ok(())
}

/// Rows (or ids, whichever comes first) the beside thread of [`fold_list_beside`] sends at a
/// time, and batches it may be ahead.
const BESIDE_BATCH_ROWS: usize = 4096;
const BESIDE_BATCH_IDS: usize = 1 << 20;
const BESIDE_BATCHES_AHEAD: usize = 4;

/// What the beside thread of [`fold_list_beside`] sends.
enum OlderRows {
    /// The next rows of the young level and the segments, merged by address.
    Rows(Vec<(Address, Vec<u64>)>),
    /// No snapshot could be begun on the thread (every reader slot taken): nothing follows.
    Unavailable,
}

/// Reads `list`'s young level and segments from a snapshot of `db`, merged by address, and
/// sends them to `to` a batch at a time (until the receiver is gone).
fn send_older_rows(db: &Db, list: IdList, to: &SyncSender<DbResult<OlderRows>>) -> DbResult<()> {
    let snapshot = match db.begin_read() {
        Ok(snapshot) => snapshot,
        Err(error) => {
            warn!(target: "ots::index", %error, list = ?list, "no read snapshot beside the fold; folding on the writer");
            let _ = to.send(Ok(OlderRows::Unavailable));
            return Ok(());
        }
    };
    let (mut young_failed, mut staged_failed) = (None, None);
    let young_rows = level_rows(&snapshot, list, Level::Young)?
        .map_while(|row| row.map_err(|e| young_failed = Some(e)).ok());
    let staged_rows =
        staged::staged_rows(&snapshot, list)?.map_while(|row| row.map_err(|e| staged_failed = Some(e)).ok());
    let mut older = JoinedRows { older: young_rows.peekable(), newer: staged_rows.peekable() };
    loop {
        let (mut batch, mut ids) = (Vec::with_capacity(BESIDE_BATCH_ROWS), 0);
        let mut last = true;
        for row in older.by_ref() {
            ids += row.1.len();
            batch.push(row);
            if batch.len() == BESIDE_BATCH_ROWS || ids >= BESIDE_BATCH_IDS {
                last = false;
                break;
            }
        }
        if !batch.is_empty() && to.send(Ok(OlderRows::Rows(batch))).is_err() {
            return Ok(());
        }
        if last {
            break;
        }
    }
    drop(older);
    match young_failed.or(staged_failed) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// As [`fold_list`], with the young level and the segments read and merged on a second thread
/// (from a snapshot of `db` it begins, the state `txn` started from: the writer lock is held and
/// the list not written yet) while this one rewrites the main tables: at a catch-up's end, the
/// reads of a hundred segments are half the fold. Without a reader slot for that snapshot, as
/// [`fold_list`].
pub fn fold_list_beside(
    db: &Db,
    txn: &WriteTxn,
    before: &crate::db::ReadTxn,
    list: IdList,
) -> DbResult<Option<u64>> {
    let chunks = staged::entries(txn, list)?;
    if chunks == 0 && entries(txn, list, Level::Young)? == 0 {
        return Ok(None);
    }
    let started = std::time::Instant::now();
    let folded = std::thread::scope(|scope| -> DbResult<bool> {
        let (sender, batches) = sync_channel::<DbResult<OlderRows>>(BESIDE_BATCHES_AHEAD);
        scope.spawn(move || {
            if let Err(e) = send_older_rows(db, list, &sender) {
                let _ = sender.send(Err(e));
            }
        });
        let result = (|| {
            let failed = Cell::new(None);
            let unavailable = Cell::new(false);
            let mut older = batches
                .iter()
                .map_while(|batch| match batch {
                    Ok(OlderRows::Rows(rows)) => Some(rows),
                    Ok(OlderRows::Unavailable) => {
                        unavailable.set(true);
                        None
                    }
                    Err(e) => {
                        failed.set(Some(e));
                        None
                    }
                })
                .flatten()
                .peekable();
            // The first batch tells whether the thread has a snapshot, before anything is written.
            if older.peek().is_none() {
                if let Some(e) = failed.take() {
                    return Err(e);
                }
                if unavailable.get() {
                    return Ok(false);
                }
            }
            let mut into =
                IntoLevel { txn, before: Some(before), rows: Some(older), addresses: 0, whole: true };
            view_level(list, Level::Main, &mut into)?;
            drop(into);
            failed.take().map_or(Ok(true), Err)
        })();
        // The thread stops sending once nothing receives.
        drop(batches);
        result
    })?;
    if !folded {
        return fold_list(txn, before, list);
    }
    clear_young(txn, list)?;
    staged::clear(txn, list)?;
    debug!(target: "ots::index", list = ?list, how = "folded", beside = true, addresses = 0u64, ids = 0u64, seconds = started.elapsed().as_secs_f64(), "list written");
    mark_main_packed(txn, list)?;
    Ok(Some(chunks))
}

/// Records `list`'s main tables, just rewritten whole, as packed (`index::packing`).
fn mark_main_packed(txn: &WriteTxn, list: IdList) -> DbResult<()> {
    struct Main;
    impl IdListViewer for Main {
        type Output = [TableId; 2];
        fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output {
            [I::ID, C::ID]
        }
    }
    for table in view_level(list, Level::Main, &mut Main) {
        crate::db::state::set_packed(txn, &txn.stats_of(table)?)?;
    }
    Ok(())
}

/// Folds every young level and staged segment into its main tables (a no-op for the lists
/// without); `before` is a snapshot of the state `txn` started from, in which no list has been
/// written yet. Returns how many staged chunks were folded.
pub fn fold_all(txn: &WriteTxn, before: &crate::db::ReadTxn) -> DbResult<u64> {
    let mut chunks = 0;
    for list in super::ID_LISTS {
        chunks += fold_list(txn, before, list)?.unwrap_or(0);
    }
    Ok(chunks)
}

/// Folds the young level and the staged segments of `list` into its main tables; `before` is a
/// snapshot of the state `txn` started from, in which the list has not been written yet.
/// Returns how many staged chunks were folded, `None` when there was nothing to fold. The main
/// tables, rewritten whole, are recorded as packed (`index::packing`), so that a repack in a
/// later transaction leaves them be.
pub fn fold_list(txn: &WriteTxn, before: &crate::db::ReadTxn, list: IdList) -> DbResult<Option<u64>> {
    let chunks = staged::entries(txn, list)?;
    if chunks == 0 && entries(txn, list, Level::Young)? == 0 {
        return Ok(None);
    }
    write_rows(txn, Some(before), list, std::iter::empty(), (0, 0), None)?;
    mark_main_packed(txn, list)?;
    Ok(Some(chunks))
}

/// Whether any list has a young level or a staged segment.
pub fn any_unfolded<K: TransactionKind>(txn: &Txn<K>) -> DbResult<bool> {
    for list in super::ID_LISTS {
        if entries(txn, list, Level::Young)? > 0 || staged::entries(txn, list)? > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

fn clear_young(txn: &WriteTxn, list: IdList) -> DbResult<()> {
    struct Clear<'a>(&'a WriteTxn);
    impl IdListViewer for Clear<'_> {
        type Output = DbResult<()>;
        fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output {
            self.0.clear::<I>()?;
            self.0.clear::<C>()
        }
    }
    view_level(list, Level::Young, &mut Clear(txn))
}

fn unfolded(list: IdList) -> DbError {
    let table = view_level(list, Level::Young, &mut TableName);
    DbError::Corrupt {
        table,
        key: String::new(),
        reason:
            "a young level or staged segment is left to fold, but the write has no snapshot to fold it from"
                .into(),
    }
}

struct TableName;

impl IdListViewer for TableName {
    type Output = &'static str;
    fn view<I: AddressIndex, C: AddressCounter>(&mut self) -> Self::Output {
        I::ID.name()
    }
}

/// Two row streams of one list, addresses ascending, joined: an address's older ids, then its
/// newer ones. An address may come in consecutive rows (pieces of a long list): its newer ids
/// join the last of its older rows.
struct JoinedRows<O: Iterator<Item = (Address, Vec<u64>)>, N: Iterator<Item = (Address, Vec<u64>)>> {
    older: std::iter::Peekable<O>,
    newer: std::iter::Peekable<N>,
}

impl<O: Iterator<Item = (Address, Vec<u64>)>, N: Iterator<Item = (Address, Vec<u64>)>> Iterator
    for JoinedRows<O, N>
{
    type Item = (Address, Vec<u64>);

    fn next(&mut self) -> Option<Self::Item> {
        let address = match (self.older.peek(), self.newer.peek()) {
            (None, None) => return None,
            (Some((a, _)), None) | (None, Some((a, _))) => *a,
            (Some((a, _)), Some((b, _))) => *a.min(b),
        };
        let mut ids = self.older.next_if(|(a, _)| *a == address).map(|(_, ids)| ids).unwrap_or_default();
        if self.older.peek().is_some_and(|(a, _)| *a == address) {
            return Some((address, ids));
        }
        if let Some((_, newer)) = self.newer.next_if(|(a, _)| *a == address) {
            ids.extend(newer);
        }
        Some((address, ids))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{AccessMode, Db};
    use crate::index::integrity::CheckReport;

    const LIST: IdList = IdList::Erc20Transfers;

    fn ids_of(rows: &[(Address, Vec<u64>)]) -> (u64, u64) {
        (rows.len() as u64, rows.iter().map(|(_, ids)| ids.len() as u64).sum())
    }

    /// Writes `rows` as a stage would (`segment`: its key; `None`, a batch), in its own
    /// transaction.
    fn stage(db: &Db, rows: &[(Address, Vec<u64>)], segment: Option<u64>) {
        let txn = db.begin_write().expect("write");
        let before = db.begin_read().expect("read");
        write_rows(&txn, Some(&before), LIST, rows.iter().cloned(), ids_of(rows), segment).expect("rows");
        txn.commit().expect("commit");
    }

    /// Writes `rows` to the young level, as a stage of a format-19 catch-up did.
    fn young(db: &Db, rows: &[(Address, Vec<u64>)]) {
        let txn = db.begin_write().expect("write");
        let before = db.begin_read().expect("read");
        let addresses = rows.len() as u64;
        let mut into = IntoLevel {
            txn: &txn,
            before: Some(&before),
            rows: Some(rows.iter().cloned()),
            addresses,
            whole: false,
        };
        view_level(LIST, Level::Young, &mut into).expect("young");
        txn.commit().expect("commit");
    }

    fn raw(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
        let txn = db.begin_read().expect("read");
        [TableId::OtsERC20TransferIndex, TableId::OtsERC20TransferCounter]
            .into_iter()
            .flat_map(|t| txn.raw_entries(t).expect("entries"))
            .collect()
    }

    fn report(db: &Db) -> CheckReport {
        let mut report = CheckReport::default();
        super::super::check_transfers(&db.begin_read().expect("read"), &mut report, u64::MAX).expect("check");
        report
    }

    fn address(i: u64) -> Address {
        Address::left_padding_from(&i.to_be_bytes())
    }

    /// Every read of the lists `leveled` holds (addresses `who`) gives what `single` gives.
    fn same_reads(leveled: &Db, single: &Db, who: impl Iterator<Item = u64>) {
        let (a, b) = (leveled.begin_read().expect("read"), single.begin_read().expect("read"));
        for i in who {
            let who = address(i);
            let n = stored_count(&b, LIST, &who).expect("count");
            assert_eq!(stored_count(&a, LIST, &who).expect("count"), n, "{who}");
            let all = stored_page(&b, LIST, &who, 0, n).expect("page");
            assert_eq!(stored_page(&a, LIST, &who, 0, n).expect("page"), all, "{who}");
            for at in [0, 1, n / 2, n.saturating_sub(2), n] {
                let page = stored_page(&b, LIST, &who, at, 250).expect("page");
                assert_eq!(stored_page(&a, LIST, &who, at, 250).expect("page"), page, "{who} from {at}");
            }
            for id in all.iter().flat_map(|&id| [id, id + 1]).chain([0, u64::MAX]) {
                let rank = stored_rank(&b, LIST, &who, id).expect("rank");
                assert_eq!(stored_rank(&a, LIST, &who, id).expect("rank"), rank, "{who} at {id}");
            }
        }
    }

    /// Many addresses with a few ids each in the first stage (to the main tables), a young level
    /// as a format-19 catch-up left it, then stages of a few addresses, one of which runs past
    /// a chunk in every stage: the later stages append segments, and every read and the check
    /// see the lists a single level holds; folded, the main tables are byte for byte those of one
    /// level written stage by stage.
    #[test]
    fn staged_segments_read_and_fold_as_one_level() {
        let dir = tempfile::tempdir().expect("tempdir");
        let leveled = Db::open(&dir.path().join("leveled"), AccessMode::ReadWrite).expect("open");
        let single = Db::open(&dir.path().join("single"), AccessMode::ReadWrite).expect("open");
        let first: Vec<(Address, Vec<u64>)> = (0..4_000).map(|i| (address(i), vec![i, 5_000 + i])).collect();
        stage(&leveled, &first, Some(1));
        stage(&single, &first, None);
        let legacy: Vec<(Address, Vec<u64>)> = (2..6).map(|i| (address(i), vec![9_000 + i])).collect();
        young(&leveled, &legacy);
        stage(&single, &legacy, None);
        for s in 2..14u64 {
            let base = 10_000 * s;
            let mut rows = vec![(address(3), (base..base + 300).collect::<Vec<u64>>())];
            rows.extend((0..8).map(|k| (address(s * 31 + k), vec![base + 500 + k])));
            rows.push((address(1_000 + s), vec![base + 600, base + 601]));
            // A list of a 1-byte counter until its 11th stage, read in pieces of several segments.
            rows.push((address(2_000), (base + 700..base + 725).collect()));
            stage(&leveled, &rows, Some(s));
            stage(&single, &rows, None);
            same_reads(&leveled, &single, (0..420).chain(1_000..1_020).chain([2_000]));
            assert_eq!(report(&leveled), report(&single), "after stage {s}");
        }
        let txn = leveled.begin_read().expect("read");
        assert_eq!(staged::segment_keys(&txn, LIST).expect("keys"), (2..14).collect::<Vec<u64>>());
        assert!(entries(&txn, LIST, Level::Young).expect("entries") > 0, "the young level is kept");
        assert_ne!(raw(&leveled), raw(&single));
        // The segments are read an address's piece at a time, each at most a segment's row past
        // the bound: address 2,000's 300 ids in several pieces.
        let rows: Vec<(Address, Vec<u64>)> =
            staged::staged_rows(&txn, LIST).expect("rows").map(|row| row.expect("row")).collect();
        assert!(rows.iter().all(|(_, ids)| ids.len() < staged::PIECE_IDS + 300));
        assert!(rows.iter().filter(|(a, _)| *a == address(2_000)).count() > 3);
        drop(txn);

        // Folded (what the catch-up's end, a dump and the incremental path's first write do):
        // one level, the same bytes.
        let txn = leveled.begin_write().expect("write");
        let folded = fold_all(&txn, &leveled.begin_read().expect("read")).expect("fold");
        txn.commit().expect("commit");
        assert!(folded >= 12 * 3, "{folded} chunks folded");
        assert!(!any_unfolded(&leveled.begin_read().expect("read")).expect("young"));
        assert_eq!(raw(&leveled), raw(&single));
    }

    /// A read of an address's staged ids goes through its chunks one at a time and stops once it
    /// has its answer: with a broken chunk in a later segment, a page and a rank before it are
    /// read as from one level, and only a read that needs that chunk (the count) fails, naming
    /// the table. Reading the segments whole first (mainnet's busiest lists hold tens of
    /// millions of ids a segment) failed all three.
    #[test]
    fn staged_reads_stop_at_what_they_need() {
        let dir = tempfile::tempdir().expect("tempdir");
        let leveled = Db::open(&dir.path().join("leveled"), AccessMode::ReadWrite).expect("open");
        let single = Db::open(&dir.path().join("single"), AccessMode::ReadWrite).expect("open");
        let busy = address(7);
        let first: Vec<(Address, Vec<u64>)> = (0..20).map(|i| (address(i), vec![i])).collect();
        stage(&leveled, &first, Some(1));
        stage(&single, &first, None);
        for s in 2..5u64 {
            let rows = vec![(busy, (1_000 * s..1_000 * s + 600).collect::<Vec<u64>>())];
            stage(&leveled, &rows, Some(s));
            stage(&single, &rows, None);
        }
        let txn = leveled.begin_write().expect("write");
        let key = crate::db::codec::StagedChunkKey { segment: 9, address: busy, chunk: u64::MAX };
        txn.put::<OtsERC20TransferIndexStaged>(&key, &crate::db::codec::IdChunk(vec![9_002, 9_001]))
            .expect("put");
        txn.commit().expect("commit");

        let (a, b) = (leveled.begin_read().expect("read"), single.begin_read().expect("read"));
        for (at, count) in [(0, 25), (1, 600), (700, 250), (1, 1_800)] {
            assert_eq!(
                stored_page(&a, LIST, &busy, at, count).expect("page"),
                stored_page(&b, LIST, &busy, at, count).expect("page"),
                "{count} from {at}"
            );
        }
        for id in [0, 1, 2_000, 3_599, 4_599] {
            assert_eq!(
                stored_rank(&a, LIST, &busy, id).expect("rank"),
                stored_rank(&b, LIST, &busy, id).expect("rank")
            );
        }
        let error = stored_count(&a, LIST, &busy).expect_err("the broken chunk is read").to_string();
        assert!(error.contains("OtsERC20TransferIndexStaged"), "{error}");
        // An address that seeks past it to a later segment does not decode it.
        let after = address(8);
        assert_eq!(
            stored_count(&a, LIST, &after).expect("count"),
            stored_count(&b, LIST, &after).expect("count")
        );
    }

    /// Segments as formats 20 to 23 keyed them (each chunk by its largest id) are keyed by
    /// ordinal by the upgrade to format 24 into the bytes a stage of this format writes, and
    /// `check` refuses a segment whose ordinals skip or whose chunk before an address's last is
    /// not full.
    #[test]
    fn segments_keyed_by_largest_id_are_keyed_by_ordinal() {
        use super::super::chunks::CHUNK_IDS;
        use crate::db::codec::{IdChunk, StagedChunkKey};
        let dir = tempfile::tempdir().expect("tempdir");
        let old = Db::open(&dir.path().join("old"), AccessMode::ReadWrite).expect("open");
        let new = Db::open(&dir.path().join("new"), AccessMode::ReadWrite).expect("open");
        let first: Vec<(Address, Vec<u64>)> = (0..30).map(|i| (address(i), vec![i])).collect();
        stage(&old, &first, Some(1));
        stage(&new, &first, Some(1));
        let stages: Vec<Vec<(Address, Vec<u64>)>> = (2..5u64)
            .map(|s| {
                (0..6).map(|k| (address(k * s), (0..100 * k + 7).map(|i| 10_000 * s + i).collect())).collect()
            })
            .collect();
        let txn = old.begin_write().expect("write");
        for (s, rows) in (2..).zip(&stages) {
            for (who, ids) in rows {
                for chunk in ids.chunks(CHUNK_IDS) {
                    let key = StagedChunkKey { segment: s, address: *who, chunk: *chunk.last().expect("id") };
                    txn.put::<OtsERC20TransferIndexStaged>(&key, &IdChunk(chunk.to_vec())).expect("put");
                }
            }
        }
        txn.commit().expect("commit");
        for (s, rows) in (2..).zip(&stages) {
            stage(&new, rows, Some(s));
        }
        let staged_bytes = |db: &Db| {
            db.begin_read().expect("read").raw_entries(TableId::OtsERC20TransferIndexStaged).expect("raw")
        };
        assert_ne!(staged_bytes(&old), staged_bytes(&new));

        let txn = old.begin_write().expect("write");
        let keyed = staged::key_by_ordinal(&txn, &old.begin_read().expect("read"), LIST).expect("rekey");
        txn.commit().expect("commit");
        assert_eq!(keyed, staged_bytes(&new).len() as u64);
        assert_eq!(staged_bytes(&old), staged_bytes(&new));
        same_reads(&old, &new, 0..30);
        assert_eq!(report(&old), report(&new));

        // A short chunk before an address's last, then a skipped ordinal.
        let busy = address(4);
        for (chunk, ids) in [(0, vec![90_000, 90_001]), (1, vec![90_002]), (3, vec![90_003])] {
            let txn = new.begin_write().expect("write");
            let key = StagedChunkKey { segment: 9, address: busy, chunk };
            txn.put::<OtsERC20TransferIndexStaged>(&key, &IdChunk(ids)).expect("put");
            txn.commit().expect("commit");
            let checked = staged::check_chunks(&new.begin_read().expect("read"), LIST, u64::MAX);
            match chunk {
                0 => checked.expect("one chunk is an address's last"),
                1 => {
                    assert!(format!("{:?}", checked.expect_err("short")).contains("follows a chunk of 2 ids"))
                }
                _ => {}
            }
        }
        let txn = new.begin_write().expect("write");
        txn.delete::<OtsERC20TransferIndexStaged>(
            &StagedChunkKey { segment: 9, address: busy, chunk: 0 },
            None,
        )
        .expect("delete");
        txn.put::<OtsERC20TransferIndexStaged>(
            &StagedChunkKey { segment: 9, address: busy, chunk: 0 },
            &IdChunk((89_000..89_000 + CHUNK_IDS as u64).collect()),
        )
        .expect("put");
        txn.commit().expect("commit");
        let checked = staged::check_chunks(&new.begin_read().expect("read"), LIST, u64::MAX);
        assert!(format!("{:?}", checked.expect_err("skipped"))
            .contains("chunk 3 of the address in the segment, not 2"));
    }

    /// The catch-up's end folds with the segments read on a second thread: segments and a young
    /// level of more rows than the thread sends at a time fold to the bytes the fold on the writer
    /// thread gives, and the bytes of one level written stage by stage.
    #[test]
    fn a_fold_beside_gives_the_fold_on_the_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let open = |name: &str| Db::open(&dir.path().join(name), AccessMode::ReadWrite).expect("open");
        let (beside, writer, single) = (open("beside"), open("writer"), open("single"));
        let first: Vec<(Address, Vec<u64>)> = (0..6_000).map(|i| (address(i), vec![i])).collect();
        let legacy: Vec<(Address, Vec<u64>)> =
            (0..5_000).map(|i| (address(3 * i), vec![10_000 + i])).collect();
        let stages: Vec<Vec<(Address, Vec<u64>)>> = (1..4u64)
            .map(|s| {
                (0..5_000).map(|i| (address(i * s + 7), vec![100_000 * s + i, 100_000 * s + i + 1])).collect()
            })
            .collect();
        for db in [&beside, &writer] {
            stage(db, &first, Some(0));
            young(db, &legacy);
            for (s, rows) in (1..).zip(&stages) {
                stage(db, rows, Some(s));
            }
        }
        for rows in std::iter::once(&first).chain([&legacy]).chain(&stages) {
            stage(&single, rows, None);
        }
        assert_eq!(staged::segment_keys(&beside.begin_read().expect("read"), LIST).expect("keys"), [1, 2, 3]);

        let txn = writer.begin_write().expect("write");
        let on_writer = fold_list(&txn, &writer.begin_read().expect("read"), LIST).expect("fold");
        txn.commit().expect("commit");
        let txn = beside.begin_write().expect("write");
        let snapshot = beside.begin_read().expect("read");
        let folded = fold_list_beside(&beside, &txn, &snapshot, LIST).expect("fold");
        drop(snapshot);
        txn.commit().expect("commit");

        assert_eq!(folded, on_writer);
        assert!(folded.is_some_and(|chunks| chunks >= 15_000), "{folded:?}");
        assert!(!any_unfolded(&beside.begin_read().expect("read")).expect("unfolded"));
        assert_eq!(raw(&beside), raw(&writer));
        assert_eq!(raw(&beside), raw(&single));
        let txn = beside.begin_write().expect("write");
        let again = fold_list_beside(&beside, &txn, &beside.begin_read().expect("read"), LIST).expect("fold");
        assert_eq!(again, None, "nothing left to fold");
    }

    /// A stage that would leave more than [`staged::MAX_SEGMENTS`] segments folds them with its
    /// own rows; a stage never appends a segment at or below one it holds.
    #[test]
    fn a_stage_past_the_segment_bound_folds_every_segment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let leveled = Db::open(&dir.path().join("leveled"), AccessMode::ReadWrite).expect("open");
        let single = Db::open(&dir.path().join("single"), AccessMode::ReadWrite).expect("open");
        let first: Vec<(Address, Vec<u64>)> = (0..50).map(|i| (address(i), vec![i])).collect();
        stage(&leveled, &first, Some(0));
        stage(&single, &first, None);
        let mut most = 0;
        for s in 1..=(staged::MAX_SEGMENTS as u64 + 1) {
            let rows = vec![(address(s % 7), vec![100 * s]), (address(60 + s), vec![100 * s + 1])];
            stage(&leveled, &rows, Some(s));
            stage(&single, &rows, None);
            most = most
                .max(staged::segment_keys(&leveled.begin_read().expect("read"), LIST).expect("keys").len());
        }
        assert_eq!(most, staged::MAX_SEGMENTS);
        assert!(!any_unfolded(&leveled.begin_read().expect("read")).expect("young"), "the last stage folded");
        assert_eq!(raw(&leveled), raw(&single));
        same_reads(&leveled, &single, 0..200);

        // An older segment key than the newest held (not what a catch-up gives) folds instead.
        let rows = vec![(address(1), vec![1_000_000])];
        stage(&leveled, &rows, Some(500));
        stage(&leveled, &[(address(2), vec![1_000_001])], Some(400));
        stage(&single, &rows, None);
        stage(&single, &[(address(2), vec![1_000_001])], None);
        assert!(!any_unfolded(&leveled.begin_read().expect("read")).expect("young"));
        assert_eq!(raw(&leveled), raw(&single));
    }

    /// Without a snapshot a write cannot fold a staged segment: it is refused, not misordered.
    #[test]
    fn a_write_without_a_snapshot_refuses_to_leave_a_segment_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let who = Address::repeat_byte(7);
        let many: Vec<(Address, Vec<u64>)> = (0..5_000u64).map(|i| (address(i), vec![i])).collect();
        stage(&db, &many, Some(1));
        stage(&db, &[(who, vec![500])], Some(2));
        assert!(any_unfolded(&db.begin_read().expect("read")).expect("young"));
        let txn = db.begin_write().expect("write");
        let refused = write_rows(&txn, None, LIST, [(who, vec![600])].into_iter(), (1, 1), None);
        assert!(matches!(refused, Err(DbError::Corrupt { .. })), "{refused:?}");
    }
}
