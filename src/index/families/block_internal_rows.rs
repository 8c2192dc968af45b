//! `OtsInternalRowsByBlock`: how many rows Etherscan's `txlistinternal` by block range shows up to
//! each block — the frames below a transaction's top call that move ether, create or selfdestruct
//! — so that a deep page of a block range skips the blocks before it from the index instead of
//! tracing them (docs/etherscan.md, `txlistinternal`). Written by the block-times family, a row
//! for each block with call frames and such a frame; keyed by block, so an unwind drops the rows
//! above the block it goes back to.
//!
//! A value is cumulative: the rows of every block up to and including its own since the table's
//! first row, so the rows of blocks `a..=b` are [`through`]`(b) − through(a − 1)`, exact where
//! every block of `a..=b` was indexed with call frames and after the table began (the state's
//! `internal_txs_from` and `internal_rows_from`: [`counted_from`]).

use signet_libmdbx::tx::TransactionKind;

use crate::db::{
    codec::{BlockNumber, Count},
    state,
    tables::OtsInternalRowsByBlock,
    DbResult, Txn, WriteTxn,
};
use crate::index::{families::address_index::lists_internal, integrity::broken};
use crate::txid::TxId;
use ots_classifiers::BlockData;

/// Adds `block`'s listed frames to the count, if it came with call frames and has any.
pub fn write(txn: &WriteTxn, block: &BlockData) -> DbResult<()> {
    let Some(frames) = block.frames.as_deref() else { return Ok(()) };
    let rows = frames.iter().filter(|f| lists_internal(f)).count() as u64;
    if rows == 0 {
        return Ok(());
    }
    let mut cursor = txn.cursor::<OtsInternalRowsByBlock>()?;
    match cursor.last()? {
        Some((BlockNumber(last), Count(before))) if last < block.number => {
            cursor.append(&BlockNumber(block.number), &Count(before + rows))
        }
        None => cursor.append(&BlockNumber(block.number), &Count(rows)),
        Some(_) => {
            // Written again (a batch retried over the same blocks): the rows before it stand.
            let before = through(txn, block.number.saturating_sub(1))?;
            let before = if block.number == 0 { 0 } else { before };
            txn.put::<OtsInternalRowsByBlock>(&BlockNumber(block.number), &Count(before + rows))
        }
    }
}

/// The rows of every counted block up to and including `block` (0 before the first).
pub fn through<K: TransactionKind>(txn: &Txn<K>, block: u64) -> DbResult<u64> {
    let mut cursor = txn.cursor::<OtsInternalRowsByBlock>()?;
    let at_or_below = match cursor.seek(&BlockNumber(block))? {
        Some((BlockNumber(b), count)) if b == block => Some(count),
        Some(_) => cursor.prev_entry()?.map(|(_, count)| count),
        None => cursor.last()?.map(|(_, count)| count),
    };
    Ok(at_or_below.map_or(0, |Count(c)| c))
}

/// The first block from which the counts are exact: every block from it on was indexed with call
/// frames and counted. `None` when none is (no frames up to the tip).
pub fn counted_from<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Option<u64>> {
    let frames_from = state::read_internal_txs_from(txn)?;
    if frames_from == state::INTERNAL_TXS_NOWHERE {
        return Ok(None);
    }
    Ok(Some(TxId(frames_from.max(state::read_internal_rows_from(txn)?)).block()))
}

/// Deletes the counts of the blocks above `to`.
pub fn unwind_to(txn: &WriteTxn, to: u64) -> DbResult<()> {
    let Some(first) = to.checked_add(1) else { return Ok(()) };
    let mut cursor = txn.cursor::<OtsInternalRowsByBlock>()?;
    while cursor.seek(&BlockNumber(first))?.is_some() {
        cursor.delete_current()?;
    }
    Ok(())
}

/// Counts grow from block to block, and no block is past the tip.
pub fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    let mut cursor = txn.cursor::<OtsInternalRowsByBlock>()?;
    let mut next = cursor.first()?;
    let mut before = 0;
    while let Some((BlockNumber(block), Count(count))) = next {
        if tip.is_none_or(|t| block > t) {
            return Err(broken::<OtsInternalRowsByBlock>(
                &block.to_be_bytes(),
                "a block beyond the tip".into(),
            ));
        }
        if count <= before {
            return Err(broken::<OtsInternalRowsByBlock>(
                &block.to_be_bytes(),
                format!("the count {count} does not grow from {before}"),
            ));
        }
        before = count;
        next = cursor.next_entry()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{AccessMode, Db};

    #[test]
    fn counts_add_up_between_blocks_and_unwind_from_the_top() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let txn = db.begin_write().expect("write");
        // Blocks 3, 4 and 9 have 2, 1 and 5 rows.
        for (block, count) in [(3, 2), (4, 3), (9, 8)] {
            txn.put::<OtsInternalRowsByBlock>(&BlockNumber(block), &Count(count)).expect("put");
        }
        let counts: Vec<u64> = (0..12).map(|b| through(&txn, b).expect("through")).collect();
        assert_eq!(counts, [0, 0, 0, 2, 3, 3, 3, 3, 3, 8, 8, 8]);
        check(&txn, Some(9)).expect("grows");
        assert!(check(&txn, Some(8)).is_err(), "block 9 is beyond the tip");
        unwind_to(&txn, 5).expect("unwind");
        assert_eq!(through(&txn, 11).expect("through"), 3);
        txn.put::<OtsInternalRowsByBlock>(&BlockNumber(7), &Count(3)).expect("put");
        assert!(check(&txn, Some(9)).is_err(), "a count that does not grow");
    }
}
