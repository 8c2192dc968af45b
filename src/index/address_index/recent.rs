//! The reorg window's part of the address lists (`OtsRecentIds`): ids that blocks still in the
//! window added, kept in one small table instead of on the pages of the large ones.
//!
//! Unwinding a block then deletes a few dups of this table instead of re-cutting a chunk on a
//! page of its own in each large table (docs/architecture.md, "The reorg window"). A list reads
//! as its table's ids followed by these, all of which are larger.

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use super::IdList;
use crate::db::{
    codec::{ListId, RecentKey},
    tables::OtsRecentIds,
    DbResult, Txn, WriteTxn,
};

const fn key(list: IdList, address: Address) -> RecentKey {
    RecentKey { kind: list.journal_kind(), address }
}

/// The window's ids of `address` in `list`, ascending.
pub fn ids<K: TransactionKind>(txn: &Txn<K>, list: IdList, address: &Address) -> DbResult<Vec<u64>> {
    Ok(txn.cursor::<OtsRecentIds>()?.dups(&key(list, *address))?.into_iter().map(|ListId(id)| id).collect())
}

/// How many ids the window holds for `address` in `list`.
pub fn count<K: TransactionKind>(txn: &Txn<K>, list: IdList, address: &Address) -> DbResult<u64> {
    let mut cursor = txn.cursor::<OtsRecentIds>()?;
    if cursor.seek_exact(&key(list, *address))?.is_none() {
        return Ok(0);
    }
    Ok(cursor.dup_count()? as u64)
}

/// Adds `new_ids` (ascending, each larger than every id the list holds) to `address`'s window.
pub fn add(txn: &WriteTxn, list: IdList, address: &Address, new_ids: &[u64]) -> DbResult<()> {
    let values: Vec<ListId> = new_ids.iter().copied().map(ListId).collect();
    txn.cursor::<OtsRecentIds>()?.put_dups(&key(list, *address), &values)?;
    Ok(())
}

/// Removes from `address`'s window in `list` the ids on one side of `cut` (`below`: those
/// under it; otherwise those at or above it) and returns them, ascending.
fn remove(txn: &WriteTxn, list: IdList, address: &Address, cut: u64, below: bool) -> DbResult<Vec<u64>> {
    let key = key(list, *address);
    let all = ids(txn, list, address)?;
    let split = all.partition_point(|&id| id < cut);
    let (removed, kept) = if below { all.split_at(split) } else { (&all[split..], &all[..split]) };
    if removed.is_empty() {
        return Ok(Vec::new());
    }
    if kept.is_empty() {
        txn.delete::<OtsRecentIds>(&key, None)?;
    } else {
        for &id in removed {
            txn.delete::<OtsRecentIds>(&key, Some(&ListId(id)))?;
        }
    }
    Ok(removed.to_vec())
}

/// Takes the ids below `cut` out of `address`'s window in `list`: their blocks leave it.
pub fn take_below(txn: &WriteTxn, list: IdList, address: &Address, cut: u64) -> DbResult<Vec<u64>> {
    remove(txn, list, address, cut, true)
}

/// Deletes the ids at or above `cut` from `address`'s window in `list`: their blocks are
/// unwound.
pub fn cut_back(txn: &WriteTxn, list: IdList, address: &Address, cut: u64) -> DbResult<()> {
    remove(txn, list, address, cut, false).map(drop)
}

/// Every address's window in `list`, addresses ascending.
pub fn all<K: TransactionKind>(txn: &Txn<K>, list: IdList) -> DbResult<Vec<(Address, Vec<u64>)>> {
    let mut out: Vec<(Address, Vec<u64>)> = Vec::new();
    let mut cursor = txn.cursor::<OtsRecentIds>()?;
    let mut next = cursor.seek(&key(list, Address::ZERO))?;
    while let Some((RecentKey { kind, address }, ListId(id))) = next {
        if kind != list.journal_kind() {
            break;
        }
        match out.last_mut() {
            Some((last, ids)) if *last == address => ids.push(id),
            _ => out.push((address, vec![id])),
        }
        next = cursor.next_entry()?;
    }
    Ok(out)
}
