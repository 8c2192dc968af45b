//! The integrity checker: every invariant of the format (docs/format.md), family by family.

use alloy_primitives::{Keccak256, B256};
use signet_libmdbx::tx::TransactionKind;

pub use super::integrity::CheckReport;
use super::{
    address_index::{self, AddressIndexFamily},
    appearances, balances,
    family::{Checking, Family, ForEachFamily},
    holdings, integrity, journal, recent,
    roster::{each_family, state_tables},
    staged_totals,
};
use crate::db::{
    codec::BlockNumber,
    state,
    tables::{OtsRecentIds, OtsUndoJournal},
    Db, DbError, DbResult, Txn, WriteTxn,
};

/// Checks the whole database, family by family; the error names the first broken table and
/// key.
pub fn check<K: TransactionKind>(txn: &Txn<K>) -> Result<CheckReport, DbError> {
    struct Check<'a, K: TransactionKind>(&'a Txn<K>, Checking);
    impl<K: TransactionKind> ForEachFamily for Check<'_, K> {
        type Error = DbError;
        fn family<F: Family>(&mut self) -> DbResult<()> {
            F::check(self.0, &mut self.1)
        }
    }
    // Without a checkpoint (a database no writer has bound) there is no tip to compare with.
    let tip = state::read_state(txn).ok().and_then(|s| s.checkpoint).map(|c| c.number);
    let (window, window_blocks) = recent::all(txn)?;
    recent_blocks_journalled(txn, &window_blocks)?;
    let mut each = Check(txn, Checking { tip, window, report: CheckReport::default() });
    each_family(&mut each)?;
    Ok(each.1.report)
}

/// Every block the reorg window's own tables hold rows of is one the undo journal holds: rows
/// of any other block would never leave the window, nor be unwound.
fn recent_blocks_journalled<K: TransactionKind>(txn: &Txn<K>, blocks: &[u64]) -> Result<(), DbError> {
    for &block in blocks {
        if txn.get::<OtsUndoJournal>(&BlockNumber(block))?.is_none() {
            return Err(integrity::broken::<OtsRecentIds>(
                &block.to_be_bytes(),
                "rows of a block the undo journal does not hold".into(),
            ));
        }
    }
    Ok(())
}

/// The transfer indexes and their counters alone (ots2's `transferIntegrityChecker`): keys and
/// counts agree, ids grow, only the last chunk is open, no id beyond the tip.
pub fn check_transfer_indexes<K: TransactionKind>(txn: &Txn<K>) -> Result<CheckReport, DbError> {
    let (window, window_blocks) = recent::all(txn)?;
    recent_blocks_journalled(txn, &window_blocks)?;
    let mut checking = Checking { tip: state::read_tip(txn)?, window, report: CheckReport::default() };
    AddressIndexFamily::check(txn, &mut checking)?;
    Ok(checking.report)
}

/// The holdings tables alone (ots2's `holdingsIntegrityChecker`): one dup per (holder, token),
/// none first seen beyond the tip.
pub fn check_holdings_tables<K: TransactionKind>(txn: &Txn<K>) -> Result<(), DbError> {
    holdings::check(txn, state::read_tip(txn)?)
}

/// A write transaction (to be dropped, never committed) in which the database reads as if its
/// catch-up had ended and every block had left the reorg window: young levels and staged
/// segments folded, deferred rankings built, the window folded.
fn folded(db: &Db) -> Result<WriteTxn, DbError> {
    let txn = db.begin_write()?;
    // The writer lock is held and nothing written: the snapshot is the state `txn` starts from.
    let before = db.begin_read()?;
    address_index::levels::fold_all(&txn, &before)?;
    appearances::levels::fold_older(&txn, &before)?;
    staged_totals::fold_staged(&txn, Some(&before))?;
    holdings::fold_staged(&txn, Some(&before))?;
    balances::staged_owners::fold(&txn, Some(&before))?;
    balances::rank_deferred(&txn)?;
    journal::fold_window(&txn)?;
    Ok(txn)
}

/// One raw entry of [`dump`]: table name, key bytes, value bytes.
pub type DumpEntry = (&'static str, Vec<u8>, Vec<u8>);

/// Every entry of every family's tables (the roster's [`state_tables`]: not the indexer's
/// state, the journal or the window's own rows, which depend on where batches and reorgs fell),
/// as raw bytes, read as if every block had left the reorg window (in a write transaction that is dropped, never committed: it waits for a running
/// writer): two indexes of the same chain are equal exactly when their dumps are.
pub fn dump(db: &Db) -> Result<Vec<DumpEntry>, DbError> {
    let txn = folded(db)?;
    let mut out = Vec::new();
    for table in state_tables() {
        out.extend(txn.raw_entries(table)?.into_iter().map(|(k, v)| (table.name(), k, v)));
    }
    Ok(out)
}

/// Keccak-256 of [`dump`] (each table's name, then each entry as key length ‖ key ‖ value
/// length ‖ value, lengths 4-byte BE), streamed: equal for two databases exactly when their
/// dumps are equal, short of a hash collision, however large they are.
pub fn dump_hash(db: &Db) -> Result<B256, DbError> {
    let txn = folded(db)?;
    let mut hasher = Keccak256::new();
    for table in state_tables() {
        hasher.update(table.name().as_bytes());
        txn.for_each_raw(table, |k, v| {
            hasher.update((k.len() as u32).to_be_bytes());
            hasher.update(k);
            hasher.update((v.len() as u32).to_be_bytes());
            hasher.update(v);
        })?;
    }
    Ok(hasher.finalize())
}
