//! The two stored levels of every address index (docs/format.md, "Young levels"): the main
//! tables, and a young level of the same layout that the bulk stages of a catch-up append to.
//!
//! A stage's ids fall on addresses all over a list, so merged into the main tables they dirty
//! nearly every page of them: a catch-up of a hundred stages would copy the whole list a hundred
//! times. Appended to a young level instead, a stage rewrites only that level, which is folded
//! into the main tables (one streamed whole rewrite) once it would pass an eighth of them: the
//! main tables are then copied about once each time they grow by that eighth. The first write
//! of the incremental path folds what is left, so a followed index has one level.
//!
//! An address's ids in the young level all follow its ids in the main one, and the reorg
//! window's follow both: a list reads as main ‖ young ‖ window.

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;
use tracing::debug;

use super::{
    chunks::{id_count, id_page, id_rank, rewrite_with_appends, AddressCounter, AddressIndex, IdAppender},
    view_id_list, IdList, IdListViewer,
};
use crate::{
    db::{codec::ChunkIds, tables::*, DbError, DbResult, TableStats, Txn, WriteTxn},
    index::rewrite::rewrite_pays,
};

/// A young level is folded into the main tables once a write would leave its index holding
/// more than one byte in this many of the main index's. At a share `1/s` a catch-up of `n`
/// stages copies the main tables about `n / s / 2 + s` times over in all (each stage the young
/// level, the folds the main one); 8 is near the least for the hundred stages of a mainnet
/// catch-up. Bytes, not entries: the busiest addresses, which every stage appends to, hold many
/// chunks in the main index and one or two in the young level.
const FOLD_SHARE: u64 = 8;

/// What a new id is taken to add to an index (an id of 8 bytes; a row id takes less, packed).
const BYTES_PER_ID: u64 = 8;

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

/// The young level's tables, index then counter, list by list.
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

/// How many ids of `address` in `list` the levels hold: those older than the reorg window.
pub fn stored_count<K: TransactionKind>(txn: &Txn<K>, list: IdList, address: &Address) -> DbResult<u64> {
    LEVELS
        .into_iter()
        .try_fold(0, |sum, level| Ok(sum + view_level(list, level, &mut Counted(txn, address))?))
}

/// Stored ids `idx..idx + count` of `address` in `list`, ascending: the main level's, then the
/// young one's.
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
            break;
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
    Ok((below, true))
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

/// Whether a stage's write of `ids` ids to `list` goes to its young level: the main index holds
/// something, and the young one would stay within [`FOLD_SHARE`] of it.
pub(super) fn stays_young<K: TransactionKind>(txn: &Txn<K>, list: IdList, ids: u64) -> DbResult<bool> {
    let main = index_stats(txn, list, Level::Main)?;
    let young = index_stats(txn, list, Level::Young)?.bytes.saturating_add(ids.saturating_mul(BYTES_PER_ID));
    Ok(young_fits(&main, young))
}

/// Whether a young level of `young` bytes stays within [`FOLD_SHARE`] of a main table that
/// holds `main` (and holds something: a catch-up's first stage writes the main table). The
/// appearance lists' young level folds by the same rule.
pub(crate) fn young_fits(main: &TableStats, young: u64) -> bool {
    main.entries > 0 && young.saturating_mul(FOLD_SHARE) <= main.bytes
}

/// One level of a list read whole, addresses ascending, each with all its ids.
pub(super) type LevelRows<'a> = Box<dyn Iterator<Item = DbResult<(Address, Vec<u64>)>> + 'a>;

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
            let mut pending = cursor.first()?;
            Ok(Box::new(std::iter::from_fn(move || {
                let (key, chunk) = pending.take()?;
                let mut ids = chunk.into_ids();
                loop {
                    match cursor.next_entry() {
                        Err(e) => return Some(Err(e)),
                        Ok(Some((k, c))) if k.address == key.address => ids.extend(c.into_ids()),
                        Ok(next) => {
                            pending = next;
                            return Some(Ok((key.address, ids)));
                        }
                    }
                }
            })))
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
/// address's following every id stored for it) to `list`: into its young level when `young`
/// and [`stays_young`] says so, otherwise into its main tables, folding the young level in with
/// them. `before` is a snapshot of the state `txn` started from; without one the young level
/// must be empty.
pub(super) fn write_rows(
    txn: &WriteTxn,
    before: Option<&crate::db::ReadTxn>,
    list: IdList,
    rows: impl Iterator<Item = (Address, Vec<u64>)>,
    (addresses, ids): (u64, u64),
    young: bool,
) -> DbResult<()> {
    if addresses == 0 && entries(txn, list, Level::Young)? == 0 {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let said = |how: &str| {
        debug!(target: "ots::index", list = ?list, how, addresses, seconds = started.elapsed().as_secs_f64(), "list written");
    };
    if young && before.is_some() && stays_young(txn, list, ids)? {
        let mut into = IntoLevel { txn, before, rows: Some(rows), addresses, whole: false };
        view_level(list, Level::Young, &mut into)?;
        said("young");
        return Ok(());
    }
    if entries(txn, list, Level::Young)? == 0 {
        let mut into = IntoLevel { txn, before, rows: Some(rows), addresses, whole: false };
        view_level(list, Level::Main, &mut into)?;
        said("main");
        return Ok(());
    }
    let Some(before) = before else {
        return Err(unfolded(list));
    };
    let mut failed = None;
    let young_rows = level_rows(before, list, Level::Young)?.map_while(|row| match row {
        Ok(row) => Some(row),
        Err(e) => {
            failed = Some(e);
            None
        }
    });
    let merged = JoinedRows { older: young_rows.peekable(), newer: rows.peekable() };
    let mut into = IntoLevel { txn, before: Some(before), rows: Some(merged), addresses, whole: true };
    view_level(list, Level::Main, &mut into)?;
    // The young rows borrow `failed` until they are dropped.
    drop(into);
    if let Some(e) = failed {
        return Err(e);
    }
    clear_young(txn, list)?;
    said("folded");
    Ok(())
}

/// Folds every young level into its main tables (a no-op for the empty ones); `before` is a
/// snapshot of the state `txn` started from.
pub fn fold_young(txn: &WriteTxn, before: &crate::db::ReadTxn) -> DbResult<()> {
    for list in super::ID_LISTS {
        if entries(txn, list, Level::Young)? > 0 {
            write_rows(txn, Some(before), list, std::iter::empty(), (0, 0), false)?;
        }
    }
    Ok(())
}

/// Whether any list has a young level.
pub fn any_young<K: TransactionKind>(txn: &Txn<K>) -> DbResult<bool> {
    for list in super::ID_LISTS {
        if entries(txn, list, Level::Young)? > 0 {
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
        reason: "a young level is left to fold, but the write has no snapshot to fold it from".into(),
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
/// newer ones.
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

    const LIST: IdList = IdList::Erc20Transfers;

    /// Writes `rows` as a stage would, in its own transaction.
    fn stage(db: &Db, rows: &[(Address, Vec<u64>)], young: bool) {
        let txn = db.begin_write().expect("write");
        let before = db.begin_read().expect("read");
        let ids = rows.iter().map(|(_, ids)| ids.len() as u64).sum();
        write_rows(&txn, Some(&before), LIST, rows.iter().cloned(), (rows.len() as u64, ids), young)
            .expect("rows");
        txn.commit().expect("commit");
    }

    fn raw(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
        let txn = db.begin_read().expect("read");
        [TableId::OtsERC20TransferIndex, TableId::OtsERC20TransferCounter]
            .into_iter()
            .flat_map(|t| txn.raw_entries(t).expect("entries"))
            .collect()
    }

    /// Many addresses with a few ids each in the first stage, then stages of a few addresses,
    /// one of which runs past a chunk: later stages stay young until the young level would pass
    /// an eighth of the main one, when one folds it in, and every read sees the lists a single
    /// level holds; folded, the main tables are byte for byte those of one level written stage
    /// by stage.
    #[test]
    fn a_young_level_reads_and_folds_as_one_level() {
        let dir = tempfile::tempdir().expect("tempdir");
        let leveled = Db::open(&dir.path().join("leveled"), AccessMode::ReadWrite).expect("open");
        let single = Db::open(&dir.path().join("single"), AccessMode::ReadWrite).expect("open");
        let address = |i: u64| Address::left_padding_from(&i.to_be_bytes());
        let first: Vec<(Address, Vec<u64>)> = (0..4_000).map(|i| (address(i), vec![i, 5_000 + i])).collect();
        let mut stages = vec![first];
        for s in 1..12u64 {
            let base = 10_000 * s;
            let mut rows = vec![(address(3), (base..base + 300).collect::<Vec<u64>>())];
            rows.extend((0..8).map(|k| (address(s * 31 + k), vec![base + 500 + k])));
            rows.push((address(1_000 + s), vec![base + 600, base + 601]));
            stages.push(rows);
        }
        // A last small stage, young whether the one before folded or not.
        stages.push(vec![(address(5), vec![999_999])]);
        let (mut went_young, mut folded, mut young_before) = (false, false, 0);
        for rows in &stages {
            stage(&leveled, rows, true);
            stage(&single, rows, false);
            let young = entries(&leveled.begin_read().expect("read"), LIST, Level::Young).expect("entries");
            went_young |= young > 0;
            folded |= young < young_before;
            young_before = young;
            let (a, b) = (leveled.begin_read().expect("read"), single.begin_read().expect("read"));
            for i in (0..420).chain(1_000..1_020) {
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
        assert!(went_young && folded, "the later stages went to the young level, which was folded with one");
        let young_left = entries(&leveled.begin_read().expect("read"), LIST, Level::Young).expect("entries");
        assert!(young_left > 0, "the last stages are still young");
        assert_ne!(raw(&leveled), raw(&single));

        // Folded (what a dump and the incremental path's first write do): one level, the same bytes.
        let txn = leveled.begin_write().expect("write");
        fold_young(&txn, &leveled.begin_read().expect("read")).expect("fold");
        txn.commit().expect("commit");
        assert!(!any_young(&leveled.begin_read().expect("read")).expect("young"));
        assert_eq!(raw(&leveled), raw(&single));
    }

    /// Without a snapshot a write cannot fold a young level: it is refused, not misordered.
    #[test]
    fn a_write_without_a_snapshot_refuses_to_leave_a_young_level_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let who = Address::repeat_byte(7);
        let many: Vec<(Address, Vec<u64>)> =
            (0..5_000u64).map(|i| (Address::left_padding_from(&i.to_be_bytes()), vec![i])).collect();
        stage(&db, &many, true);
        stage(&db, &[(who, vec![500])], true);
        assert!(any_young(&db.begin_read().expect("read")).expect("young"));
        let txn = db.begin_write().expect("write");
        let refused = write_rows(&txn, None, LIST, [(who, vec![600])].into_iter(), (1, 1), false);
        assert!(matches!(refused, Err(DbError::Corrupt { .. })), "{refused:?}");
    }
}
