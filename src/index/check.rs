//! The integrity checker: every invariant of the format (docs/format.md), family by family.

use alloy_primitives::{Keccak256, B256};
use signet_libmdbx::tx::TransactionKind;

pub use super::integrity::CheckReport;
use super::{
    address_index, appearances, balances, contract_info, holdings, integrity, journal, labels, lifetimes,
    matches, probes, recent, totals,
};
use crate::{
    db::{
        codec::BlockNumber,
        state,
        tables::{OtsRecentIds, OtsUndoJournal, TableId},
        Db, DbError, Txn,
    },
    txid::TxId,
};

/// The first TxId past block `tip` (every id when nothing is indexed).
fn first_past(tip: Option<u64>) -> u64 {
    tip.map_or(u64::MAX, |t| TxId::first_of_block(t + 1).0)
}

/// Checks the whole database; the error names the first broken table and key.
pub fn check<K: TransactionKind>(txn: &Txn<K>) -> Result<CheckReport, DbError> {
    let mut report = CheckReport::default();
    // Without a checkpoint (a database no writer has bound) there is no tip to compare with.
    let tip = state::read_state(txn).ok().and_then(|s| s.checkpoint).map(|c| c.number);
    let (window, window_blocks) = recent::all(txn)?;
    recent_blocks_journalled(txn, &window_blocks)?;
    matches::check(txn, &mut report)?;
    address_index::check_transfers(txn, &mut report, first_past(tip))?;
    address_index::check_recent(txn, &mut report, first_past(tip), &window.ids)?;
    contract_info::check(txn, tip)?;
    labels::check(txn, tip)?;
    probes::check(txn, tip)?;
    balances::check(txn)?;
    holdings::check(txn, tip)?;
    totals::check(txn, tip)?;
    lifetimes::check(txn, tip)?;
    (report.appearance_addresses, report.appearances) = appearances::check(txn, first_past(tip), &window)?;
    Ok(report)
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
    let mut report = CheckReport::default();
    let below = first_past(state::read_tip(txn)?);
    address_index::check_transfers(txn, &mut report, below)?;
    let (window, window_blocks) = recent::all(txn)?;
    recent_blocks_journalled(txn, &window_blocks)?;
    address_index::check_recent(txn, &mut report, below, &window.ids)?;
    Ok(report)
}

/// The holdings tables alone (ots2's `holdingsIntegrityChecker`): one dup per (holder, token),
/// none first seen beyond the tip.
pub fn check_holdings_tables<K: TransactionKind>(txn: &Txn<K>) -> Result<(), DbError> {
    holdings::check(txn, state::read_tip(txn)?)
}

/// One raw entry of [`dump`]: table name, key bytes, value bytes.
pub type DumpEntry = (&'static str, Vec<u8>, Vec<u8>);

/// The tables [`dump`] and [`dump_hash`] cover: all but our own state and journal tables (the
/// journal depends on where batches and reorgs fell) and the reorg window's own tables, which
/// they read as moved into the large tables (where the window starts depends on the same).
fn dumped_tables() -> impl Iterator<Item = TableId> {
    TableId::ALL.iter().copied().filter(|t| {
        !matches!(
            t,
            TableId::OtsIndexerState
                | TableId::OtsUndoJournal
                | TableId::OtsRecentIds
                | TableId::OtsRecentSent
                | TableId::OtsRecentIdsByAddress
                | TableId::OtsRecentSentBySender
                | TableId::OtsBalanceUndo
                | TableId::OtsOwnerUndo
                | TableId::OtsERC1155BalanceUndo
                | TableId::OtsRecentBalances
                | TableId::OtsRecentOwners
                | TableId::OtsRecentMultiBalances
        )
    })
}

/// Every entry of every ots2 table, as raw bytes, read as if every block had left the reorg
/// window (in a write transaction that is dropped, never committed: it waits for a running
/// writer): two indexes of the same chain are equal exactly when their dumps are.
pub fn dump(db: &Db) -> Result<Vec<DumpEntry>, DbError> {
    let txn = db.begin_write()?;
    journal::fold_window(&txn)?;
    let mut out = Vec::new();
    for table in dumped_tables() {
        out.extend(txn.raw_entries(table)?.into_iter().map(|(k, v)| (table.name(), k, v)));
    }
    Ok(out)
}

/// Keccak-256 of [`dump`] (each table's name, then each entry as key length ‖ key ‖ value
/// length ‖ value, lengths 4-byte BE), streamed: equal for two databases exactly when their
/// dumps are equal, short of a hash collision, however large they are.
pub fn dump_hash(db: &Db) -> Result<B256, DbError> {
    let txn = db.begin_write()?;
    journal::fold_window(&txn)?;
    let mut hasher = Keccak256::new();
    for table in dumped_tables() {
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
