//! Which tables a catch-up's stages left swollen, and their repacking.
//!
//! A stage after the first merges its rows among the keys the tables hold already. The families
//! that append to most of their keys rewrite their tables whole (`index::rewrite`); the others
//! (balances, owners, holder ranks, address totals, holdings) insert and update in place. An
//! insert into a full page splits it into two half-full ones, so a stage that touches most pages
//! of a packed table leaves it nearly twice its packed size; merged into again, pages with room
//! take the inserts and the table settles well below that.
//!
//! Repacking such a table at every stage's end (one sequential copy of it) therefore paid twice:
//! the copy, and the next stage's splitting of every page the copy left full. On the 21 M
//! benchmark chain in stages of 1 % the repacks of holdings, ERC721 owners and address totals
//! took 5 of a late stage's 12.5 s (docs/benchmarks.md, "Packing once, at the catch-up's end").
//! So a stage repacks a table only past [`SWOLLEN_MIDWAY`] times its packed bytes per entry, and
//! the catch-up packs, once its last stage has committed ([`pack_caught_up`]), every table past
//! [`SWOLLEN`] times: its database ends as compact as one stage writes it.
//!
//! A table's packed size is recorded (`state::set_packed`) whenever a stage leaves it packed: it
//! appended to an empty table in key order, rewrote it whole, or repacked it. A table a stage
//! finds unrecorded (written by batches, or by an older build) is recorded as the stage found it.

use std::{path::Path, time::Instant};

use tracing::{debug, warn};

use crate::{
    db::{
        repack::repack,
        state::{read_packed, set_packed},
        tables::TableId,
        DbResult, TableStats, WriteTxn,
    },
    etl::disk_space,
};

/// The catch-up's end repacks a table whose bytes per entry exceed this multiple of its packed
/// ones. Merged in place a table's pages settle near two thirds full (1.4–1.5× in all); tables
/// of growing entries (the chunked lists) grow 1.01–1.04× a stage on the 2 M chain.
const SWOLLEN: f64 = 1.15;

/// A stage repacks a table past this multiple of its packed bytes per entry (or, unrecorded, of
/// those the stage found): a bound on what the catch-up's stages leave swollen on the disk.
/// A stage that splits every page of a packed table takes it to just under 2×.
const SWOLLEN_MIDWAY: f64 = 2.5;

/// Whether a table of `now`, of at least `smallest` bytes, has bytes per entry past `factor`
/// times those of `packed`.
fn swollen(packed: &TableStats, now: &TableStats, smallest: u64, factor: f64) -> bool {
    if packed.entries == 0 || now.entries == 0 || now.bytes < smallest {
        return false;
    }
    let was = packed.bytes as f64 / packed.entries as f64;
    let is = now.bytes as f64 / now.entries as f64;
    is > was * factor
}

/// The tables of `txn` of at least `smallest` bytes that a stage should repack, given `before`
/// (the tables as the stage found them; a table's own, unrecorded), with their sizes now. A
/// table the stage rewrote whole
/// is packed already (`index::rewrite`), whatever its bytes per entry: a chunked list's entries
/// lengthen as its chunks fill, which a second copy would not undo.
fn swollen_tables(
    txn: &WriteTxn,
    before: &[TableStats],
    smallest: u64,
) -> DbResult<Vec<(TableId, TableStats)>> {
    let mut tables = Vec::new();
    for before in before.iter().filter(|b| !txn.emptied(b.table)) {
        let now = txn.stats_of(before.table)?;
        let packed = read_packed(txn, before.table)?.unwrap_or(*before);
        if swollen(&packed, &now, smallest, SWOLLEN_MIDWAY) {
            tables.push((before.table, now));
        }
    }
    Ok(tables)
}

/// Ends a stage's merge: repacks every table of `txn` of at least `smallest` bytes that
/// [`swollen_tables`] lists against `before` (the tables as the stage found them), spilling
/// through `dir`, and records the packed size of every table the stage left packed.
pub(super) fn repack_swollen(
    txn: &WriteTxn,
    before: &[TableStats],
    dir: &Path,
    smallest: u64,
) -> DbResult<()> {
    // Written before sizes were recorded (by batches, an older build, `compact`): what the
    // stage found stands for the table's packed size, at most as dense as that.
    for before in before.iter().filter(|b| b.entries > 0) {
        if read_packed(txn, before.table)?.is_none() {
            set_packed(txn, before)?;
        }
    }
    for (table, now) in swollen_tables(txn, before, smallest)? {
        repack_table(txn, table, &now, dir)?;
    }
    // Appended to from empty, or emptied and appended to again: in key order, pages full.
    for before in before {
        if before.entries == 0 || txn.emptied(before.table) {
            let now = txn.stats_of(before.table)?;
            if now.entries > 0 {
                set_packed(txn, &now)?;
            }
        }
    }
    Ok(())
}

/// Repacks `table` (of `now`) through `dir` if the disk has room, and records its packed size;
/// whether it did.
fn repack_table(txn: &WriteTxn, table: TableId, now: &TableStats, dir: &Path) -> DbResult<bool> {
    // The spill and the table's new pages (its old ones are free only once the transaction
    // commits) need about twice its bytes: on a disk without them the table stays as it is,
    // rather than failing a write that would fail the same way again.
    let room = disk_space(dir).map(|d| d.available).unwrap_or(0);
    if room < now.bytes.saturating_mul(2) {
        warn!(
            target: "ots::index",
            table = table.name(),
            bytes = now.bytes,
            free = room,
            "table left unpacked: the disk lacks room to repack it"
        );
        return Ok(false);
    }
    let started = Instant::now();
    repack(txn, table, dir)?;
    let packed = txn.stats_of(table)?;
    set_packed(txn, &packed)?;
    debug!(
        target: "ots::index",
        table = table.name(),
        entries = packed.entries,
        bytes_before = now.bytes,
        bytes_after = packed.bytes,
        seconds = started.elapsed().as_secs_f64(),
        "table repacked"
    );
    Ok(true)
}

/// What [`pack_caught_up`] did (the sync loop logs it as `catch-up packed`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Packed {
    /// Tables repacked.
    pub tables: u64,
    /// Their bytes before.
    pub bytes_before: u64,
    /// Their bytes after.
    pub bytes_after: u64,
    /// Tokens whose holder ranking the catch-up deferred, ranked first.
    pub ranked: u64,
    /// Addresses whose totals the catch-up's stages staged, summed into the table first.
    pub staged: u64,
    /// Chunks of the address indexes' staged segments folded into their main tables first.
    pub staged_chunks: u64,
    /// Pairs of the holdings' staged segments folded into the holdings tables first.
    pub staged_holdings: u64,
    /// Owners of the ERC721 owners' staged segments folded into their table first.
    pub staged_owners: u64,
}

/// Repacks, in `txn`, every table of at least `smallest` bytes whose bytes per entry exceed
/// [`SWOLLEN`] times its recorded packed ones (a table never recorded is left as it is),
/// spilling through `dir`: what a catch-up does once its last stage has committed, so that the
/// stages' in-place merges leave no swollen table behind.
pub(super) fn pack_caught_up(txn: &WriteTxn, dir: &Path, smallest: u64) -> DbResult<Packed> {
    let mut done = Packed::default();
    for &table in TableId::ALL {
        let Some(packed) = read_packed(txn, table)? else { continue };
        let now = txn.stats_of(table)?;
        if swollen(&packed, &now, smallest, SWOLLEN) && repack_table(txn, table, &now, dir)? {
            done.tables += 1;
            done.bytes_before += now.bytes;
            done.bytes_after += txn.stats_of(table)?.bytes;
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::{Address, U256};

    use crate::{
        db::{
            codec::{Balance, PairKey},
            tables::OtsTokenBalances,
            AccessMode, Db,
        },
        index::stage::REPACK_FROM_BYTES,
    };

    fn stats(entries: u64, bytes: u64) -> TableStats {
        TableStats { table: TableId::OtsERC721Owners, entries, bytes }
    }

    #[test]
    fn a_table_split_throughout_is_packed_at_the_end_and_only_far_past_that_by_a_stage() {
        let packed = stats(100_000, 5_000_000);
        // Every page split once: nearly twice the packed bytes per entry.
        let split = stats(200_000, 19_000_000);
        assert!(swollen(&packed, &split, REPACK_FROM_BYTES, SWOLLEN));
        assert!(!swollen(&packed, &split, REPACK_FROM_BYTES, SWOLLEN_MIDWAY));
        assert!(swollen(&packed, &stats(200_000, 26_000_000), REPACK_FROM_BYTES, SWOLLEN_MIDWAY));
        // Pages two thirds full, or appended in key order.
        assert!(swollen(&packed, &stats(200_000, 15_000_000), REPACK_FROM_BYTES, SWOLLEN));
        assert!(!swollen(&packed, &stats(200_000, 10_100_000), REPACK_FROM_BYTES, SWOLLEN));
        // Entries that lengthened a little.
        assert!(!swollen(&packed, &stats(200_000, 10_800_000), REPACK_FROM_BYTES, SWOLLEN));
    }

    #[test]
    fn new_small_and_emptied_tables_are_left_alone() {
        for factor in [SWOLLEN, SWOLLEN_MIDWAY] {
            assert!(!swollen(&stats(0, 0), &stats(200_000, 55_000_000), REPACK_FROM_BYTES, factor));
            assert!(!swollen(&stats(1_000, 50_000), &stats(2_000, 3_000_000), REPACK_FROM_BYTES, factor));
            assert!(!swollen(&stats(100_000, 5_000_000), &stats(0, 0), REPACK_FROM_BYTES, factor));
        }
    }

    /// Real MDBX: balances inserted at random among packed ones split the table's pages; a stage
    /// leaves it so, the catch-up's end repacks it against its recorded packed size, once.
    #[test]
    fn a_stage_leaves_a_split_table_and_the_catch_up_packs_it_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
        let key = |i: u64| PairKey {
            token: Address::repeat_byte(7),
            holder: Address::left_padding_from(&i.to_be_bytes()),
        };
        // A first stage: appended from empty, in key order.
        let txn = db.begin_write().expect("write");
        let found = txn.table_stats().expect("stats");
        for i in (0..40_000u64).map(|i| i * 2) {
            txn.put::<OtsTokenBalances>(&key(i), &Balance(U256::from(i + 1))).expect("put");
        }
        repack_swollen(&txn, &found, dir.path(), 0).expect("stage end");
        let first = txn.stats::<OtsTokenBalances>().expect("stats");
        assert_eq!(read_packed(&txn, TableId::OtsTokenBalances).expect("record"), Some(first));
        txn.commit().expect("commit");
        // A second stage: a key in every ten, spread evenly, splitting every page.
        let txn = db.begin_write().expect("write");
        let found = txn.table_stats().expect("stats");
        for i in (0..4_000u64).map(|i| i * 20 + 1) {
            txn.put::<OtsTokenBalances>(&key(i), &Balance(U256::from(i + 1))).expect("put");
        }
        let split = txn.stats::<OtsTokenBalances>().expect("stats");
        let per_entry = |s: &TableStats| s.bytes as f64 / s.entries as f64;
        assert!(per_entry(&split) > 1.3 * per_entry(&first), "{split:?} after {first:?}");
        repack_swollen(&txn, &found, dir.path(), 0).expect("stage end");
        assert_eq!(txn.stats::<OtsTokenBalances>().expect("stats"), split, "a stage leaves it split");
        txn.commit().expect("commit");
        let want = crate::index::check::dump(&db).expect("dump");
        // The catch-up's end: repacked once, to its packed bytes per entry, entries unchanged.
        let txn = db.begin_write().expect("write");
        let done = pack_caught_up(&txn, dir.path(), 0).expect("pack");
        let packed = txn.stats::<OtsTokenBalances>().expect("stats");
        assert_eq!((done.tables, done.bytes_before, done.bytes_after), (1, split.bytes, packed.bytes));
        assert!(per_entry(&packed) < 1.1 * per_entry(&first), "{packed:?}, first {first:?}");
        assert_eq!(read_packed(&txn, TableId::OtsTokenBalances).expect("record"), Some(packed));
        assert_eq!(pack_caught_up(&txn, dir.path(), 0).expect("again").tables, 0);
        txn.commit().expect("commit");
        assert_eq!(crate::index::check::dump(&db).expect("dump"), want);
    }

    #[test]
    fn a_table_the_stage_rewrote_whole_is_not_repacked_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
        let fill = |txn: &WriteTxn| {
            for i in 1..=2_000u64 {
                let holder = Address::left_padding_from(&i.to_be_bytes());
                let key = PairKey { token: Address::repeat_byte(7), holder };
                txn.put::<OtsTokenBalances>(&key, &Balance(U256::from(i))).expect("put");
            }
        };
        // As the stage found it: a byte an entry, so the table now is swollen against that.
        let found = [TableStats { table: TableId::OtsTokenBalances, entries: 2_000, bytes: 2_000 }];
        let txn = db.begin_write().expect("write");
        fill(&txn);
        let listed = swollen_tables(&txn, &found, 0).expect("stats");
        // Past the bound a stage repacks at (a byte an entry before).
        assert_eq!(listed.iter().map(|(t, _)| *t).collect::<Vec<_>>(), [TableId::OtsTokenBalances]);
        txn.commit().expect("commit");

        let txn = db.begin_write().expect("write");
        assert!(!txn.emptied(TableId::OtsTokenBalances));
        txn.clear::<OtsTokenBalances>().expect("clear");
        fill(&txn);
        assert!(txn.emptied(TableId::OtsTokenBalances));
        assert!(!txn.emptied(TableId::OtsERC721Owners));
        assert!(swollen_tables(&txn, &found, 0).expect("stats").is_empty());
    }
}
