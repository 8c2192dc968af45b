//! Which tables a bulk stage's merge left swollen, and their repacking before the stage commits.
//!
//! A stage after the first merges its rows among the keys the tables hold already. The families
//! that append to most of their keys rewrite their tables whole (`index::rewrite`); the others
//! (balances, owners, holder ranks, address totals) insert and update in place, and each page an
//! insert splits is left about two thirds full: the 21 M-transaction benchmark chain in three
//! stages wrote 10 % more bytes per transfer log than in one (docs/benchmarks.md, "Stages that
//! leave their tables packed"). A table whose bytes per entry grew by more than [`SWOLLEN`] over
//! what the stage found is repacked (`db::repack`): one sequential copy of it, paid by the
//! stages that split its pages.

use std::{path::Path, time::Instant};

use tracing::{debug, warn};

use crate::{
    db::{repack::repack, tables::TableId, DbResult, TableStats, WriteTxn},
    etl::disk_space,
};

/// A table is repacked once its bytes per entry exceed this multiple of what they were when the
/// stage began. Merged in place a table's pages settle near two thirds full (1.4–1.5× in all); a
/// stage that touches a fraction of the pages swells it by part of that (1.2× and more for the
/// address totals and holder ranks of a third of the 2 M chain). Tables of growing entries (the
/// chunked lists) grow 1.01–1.04× a stage on that chain.
const SWOLLEN: f64 = 1.15;

/// Whether a table that held `before` when the stage began and holds `after` now, of at least
/// `smallest` bytes, should be repacked.
pub(super) fn swollen(before: &TableStats, after: &TableStats, smallest: u64) -> bool {
    if before.entries == 0 || after.entries == 0 || after.bytes < smallest {
        return false;
    }
    let was = before.bytes as f64 / before.entries as f64;
    let now = after.bytes as f64 / after.entries as f64;
    now > was * SWOLLEN
}

/// The tables of `txn` of at least `smallest` bytes that [`swollen`] says of against `before`
/// (the tables as the stage found them), with their sizes now. A table the stage rewrote whole
/// is packed already (`index::rewrite`), whatever its bytes per entry: a chunked list's entries
/// lengthen as its chunks fill, which a second copy would not undo.
fn swollen_tables(
    txn: &WriteTxn,
    before: &[TableStats],
    smallest: u64,
) -> DbResult<Vec<(TableId, TableStats)>> {
    let mut tables = Vec::new();
    for before in before.iter().filter(|b| !txn.emptied(b.table)) {
        let after = txn.stats_of(before.table)?;
        if swollen(before, &after, smallest) {
            tables.push((before.table, after));
        }
    }
    Ok(tables)
}

/// Repacks every table of `txn` of at least `smallest` bytes that [`swollen`] says of against
/// `before` (the tables as the stage found them), spilling through `dir`.
pub(super) fn repack_swollen(
    txn: &WriteTxn,
    before: &[TableStats],
    dir: &Path,
    smallest: u64,
) -> DbResult<()> {
    for (table, after) in swollen_tables(txn, before, smallest)? {
        // The spill and the table's new pages (its old ones are free only once the stage
        // commits) need about twice its bytes: on a disk without them the table stays as it is,
        // rather than failing a stage that would fail the same way again.
        let room = disk_space(dir).map(|d| d.available).unwrap_or(0);
        if room < after.bytes.saturating_mul(2) {
            warn!(
                target: "ots::index",
                table = table.name(),
                bytes = after.bytes,
                free = room,
                "table left unpacked: the disk lacks room to repack it"
            );
            continue;
        }
        let started = Instant::now();
        repack(txn, table, dir)?;
        let packed = txn.stats_of(table)?;
        debug!(
            target: "ots::index",
            table = table.name(),
            entries = packed.entries,
            bytes_before = after.bytes,
            bytes_after = packed.bytes,
            seconds = started.elapsed().as_secs_f64(),
            "table repacked"
        );
    }
    Ok(())
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
    fn a_table_merged_in_place_is_repacked_and_one_appended_to_is_not() {
        let before = stats(100_000, 5_000_000);
        // Pages two thirds full after a merge that doubled the entries.
        assert!(swollen(&before, &stats(200_000, 15_000_000), REPACK_FROM_BYTES));
        // Appended in key order: the same bytes per entry.
        assert!(!swollen(&before, &stats(200_000, 10_100_000), REPACK_FROM_BYTES));
        // A stage that split a third of the pages.
        assert!(swollen(&before, &stats(200_000, 12_000_000), REPACK_FROM_BYTES));
        // Entries that lengthened a little.
        assert!(!swollen(&before, &stats(200_000, 10_800_000), REPACK_FROM_BYTES));
    }

    #[test]
    fn new_small_and_emptied_tables_are_left_alone() {
        assert!(!swollen(&stats(0, 0), &stats(200_000, 15_000_000), REPACK_FROM_BYTES));
        assert!(!swollen(&stats(1_000, 50_000), &stats(2_000, 3_000_000), REPACK_FROM_BYTES));
        assert!(!swollen(&stats(100_000, 5_000_000), &stats(0, 0), REPACK_FROM_BYTES));
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
