//! The block-times family: `OtsBlockTimes`, every indexed block's timestamp, so that a block is
//! found by its time with a binary search of the table (Etherscan's `getblocknobytime`) and not
//! by a walk of the node's headers; and the other table keyed by block alone,
//! `OtsInternalRowsByBlock` ([`super::block_internal_rows`]).
//!
//! Rows are keyed by block, so the family needs no window of its own: a reorg or `unwind`
//! deletes the rows above the block it goes back to, and the blocks indexed after it write
//! theirs.

use signet_libmdbx::tx::TransactionKind;

use super::block_internal_rows;

use crate::db::{
    codec::{BlockNumber, Timestamp},
    tables::{OtsBlockTimes, TableId},
    DbResult, Txn, WriteTxn,
};
use crate::index::{
    error::WriteError,
    family::{Checking, Family, Unwinding},
    gather::BlockRows,
    integrity::broken,
    undo::UndoLog,
};

/// Which side of a time a block is looked for on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closest {
    /// The newest block whose timestamp is at or before the time.
    Before,
    /// The oldest block whose timestamp is at or after the time.
    After,
}

/// Records `number`'s timestamp. Blocks come in chain order, so the row is usually the table's
/// last and is appended (full pages); anything else is an ordinary put.
pub fn write(txn: &WriteTxn, number: u64, timestamp: u64) -> DbResult<()> {
    let mut cursor = txn.cursor::<OtsBlockTimes>()?;
    let after_last = cursor.last()?.is_none_or(|(BlockNumber(last), _)| last < number);
    if after_last {
        cursor.append(&BlockNumber(number), &Timestamp(timestamp))
    } else {
        cursor.put(&BlockNumber(number), &Timestamp(timestamp))
    }
}

/// The block on the `closest` side of `time` (Unix seconds), if the index holds one.
///
/// Block times never decrease along a chain (consensus rules make them strictly increasing on
/// Ethereum; some chains let several blocks share a second), so a binary search over block
/// numbers finds it in about log₂(tip) seeks. Where blocks share the time asked, `Before` gives
/// the newest of them and `After` the oldest.
pub fn closest<K: TransactionKind>(txn: &Txn<K>, time: u64, side: Closest) -> DbResult<Option<u64>> {
    let mut cursor = txn.cursor::<OtsBlockTimes>()?;
    match side {
        Closest::Before => newest_at_or_before(&mut cursor, time),
        Closest::After => {
            // The block after the newest one strictly before `time`.
            let Some(before) = time.checked_sub(1) else {
                return Ok(cursor.first()?.map(|(BlockNumber(b), _)| b));
            };
            match newest_at_or_before(&mut cursor, before)? {
                None => Ok(cursor.first()?.map(|(BlockNumber(b), _)| b)),
                Some(block) => {
                    cursor.seek(&BlockNumber(block))?;
                    Ok(cursor.next_entry()?.map(|(BlockNumber(b), _)| b))
                }
            }
        }
    }
}

/// The newest block whose time is at or before `time`.
fn newest_at_or_before<K: TransactionKind>(
    cursor: &mut crate::db::TableCursor<'_, K, OtsBlockTimes>,
    time: u64,
) -> DbResult<Option<u64>> {
    let Some((BlockNumber(mut high), _)) = cursor.last()? else { return Ok(None) };
    let mut low = 0u64;
    let mut found = None;
    // Invariant: every block below `low` is at or before `time` (the newest of them is
    // `found`), every block above `high` after it.
    while low <= high {
        let mid = low + (high - low) / 2;
        match cursor.seek(&BlockNumber(mid))? {
            Some((BlockNumber(block), Timestamp(t))) if block <= high && t <= time => {
                found = Some(block);
                low = block + 1;
            }
            _ => match mid.checked_sub(1) {
                Some(below) => high = below,
                None => break,
            },
        }
    }
    Ok(found)
}

/// Deletes the times of the blocks above `to`.
pub fn unwind_to(txn: &WriteTxn, to: u64) -> DbResult<()> {
    let Some(first) = to.checked_add(1) else { return Ok(()) };
    let mut cursor = txn.cursor::<OtsBlockTimes>()?;
    while cursor.seek(&BlockNumber(first))?.is_some() {
        cursor.delete_current()?;
    }
    Ok(())
}

/// One row for each block from genesis to the tip, and none past it.
pub fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    let mut cursor = txn.cursor::<OtsBlockTimes>()?;
    let mut next = cursor.first()?;
    let mut expected = 0u64;
    while let Some((BlockNumber(block), _)) = next {
        if tip.is_none_or(|t| block > t) {
            return Err(broken::<OtsBlockTimes>(&block.to_be_bytes(), "a block beyond the tip".into()));
        }
        if block != expected {
            return Err(broken::<OtsBlockTimes>(
                &block.to_be_bytes(),
                format!("the times of blocks {expected}..{block} are missing"),
            ));
        }
        expected += 1;
        next = cursor.next_entry()?;
    }
    match tip {
        Some(t) if expected != t + 1 => Err(broken::<OtsBlockTimes>(
            &expected.to_be_bytes(),
            format!("the times of blocks {expected}..={t} are missing"),
        )),
        _ => Ok(()),
    }
}

/// The blocks' times.
#[derive(Debug)]
pub struct BlockTimesFamily;

impl Family for BlockTimesFamily {
    const NAME: &'static str = "block times";
    const TABLES: &'static [TableId] = &[TableId::OtsBlockTimes, TableId::OtsInternalRowsByBlock];

    fn write_block(block: &BlockRows<'_, '_>, _: &mut UndoLog) -> Result<(), WriteError> {
        write(block.txn, block.block.number, block.block.timestamp)?;
        Ok(block_internal_rows::write(block.txn, block.block)?)
    }

    fn unwind(txn: &WriteTxn, unwinding: &Unwinding) -> DbResult<()> {
        unwind_to(txn, unwinding.to)?;
        block_internal_rows::unwind_to(txn, unwinding.to)
    }

    fn check<K: TransactionKind>(txn: &Txn<K>, checking: &mut Checking) -> DbResult<()> {
        check(txn, checking.tip)?;
        block_internal_rows::check(txn, checking.tip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{AccessMode, Db};

    /// A database holding `times[i]` as block `i`'s time.
    fn with_times(times: &[u64]) -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let txn = db.begin_write().expect("write");
        for (block, &time) in times.iter().enumerate() {
            write(&txn, block as u64, time).expect("write");
        }
        txn.commit().expect("commit");
        (dir, db)
    }

    /// The answer by a walk of every block, for comparison.
    fn walked(times: &[u64], time: u64, side: Closest) -> Option<u64> {
        let mut blocks = 0..times.len() as u64;
        match side {
            Closest::Before => blocks.rfind(|&b| times[b as usize] <= time),
            Closest::After => blocks.find(|&b| times[b as usize] >= time),
        }
    }

    #[test]
    fn the_search_agrees_with_a_walk_of_every_block() {
        // Gaps, a run of blocks sharing a second, and a lone first block.
        let times = [100, 112, 124, 124, 124, 136, 137, 200, 200, 260];
        let (_dir, db) = with_times(&times);
        let txn = db.begin_read().expect("read");
        for time in 0..300 {
            for side in [Closest::Before, Closest::After] {
                assert_eq!(
                    closest(&txn, time, side).expect("search"),
                    walked(&times, time, side),
                    "{side:?} {time}"
                );
            }
        }
        assert_eq!(closest(&txn, u64::MAX, Closest::Before).expect("search"), Some(9));
        assert_eq!(closest(&txn, u64::MAX, Closest::After).expect("search"), None);
        check(&txn, Some(9)).expect("whole");
    }

    #[test]
    fn an_empty_table_finds_nothing_and_one_block_finds_itself() {
        let (_dir, db) = with_times(&[]);
        let txn = db.begin_read().expect("read");
        assert_eq!(closest(&txn, 5, Closest::Before).expect("search"), None);
        assert_eq!(closest(&txn, 5, Closest::After).expect("search"), None);
        check(&txn, None).expect("empty");
        drop(txn);
        let (_dir, db) = with_times(&[7]);
        let txn = db.begin_read().expect("read");
        assert_eq!(closest(&txn, 7, Closest::Before).expect("search"), Some(0));
        assert_eq!(closest(&txn, 7, Closest::After).expect("search"), Some(0));
        assert_eq!(closest(&txn, 6, Closest::Before).expect("search"), None);
        assert_eq!(closest(&txn, 8, Closest::After).expect("search"), None);
    }

    #[test]
    fn an_unwind_drops_the_times_above_its_block_and_the_check_sees_gaps() {
        let (_dir, db) = with_times(&[10, 20, 30, 40, 50]);
        let txn = db.begin_write().expect("write");
        unwind_to(&txn, 2).expect("unwind");
        check(&txn, Some(2)).expect("whole after the unwind");
        assert!(check(&txn, Some(4)).is_err(), "blocks 3 and 4 are missing");
        assert!(check(&txn, Some(1)).is_err(), "block 2 is beyond the tip");
        assert_eq!(closest(&txn, 45, Closest::Before).expect("search"), Some(2));
        // A block written again after an unwind is appended.
        write(&txn, 3, 41).expect("write");
        assert_eq!(closest(&txn, 41, Closest::After).expect("search"), Some(3));
        txn.delete::<OtsBlockTimes>(&BlockNumber(1), None).expect("delete");
        let error = check(&txn, Some(3)).expect_err("a gap").to_string();
        assert!(error.contains("blocks 1..2 are missing"), "{error}");
    }
}
