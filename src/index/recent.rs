//! The reorg window's rows kept apart (`OtsRecentIds`, `OtsRecentSent`): what blocks still in
//! the window added to the address lists and the appearance lists, in small tables instead of
//! on the pages of the large ones.
//!
//! Unwinding a block then deletes a few dups of these tables instead of re-cutting a chunk on a
//! page of its own in each large table (docs/architecture.md, "Invariants"). A list reads as its
//! table's ids followed by these, all of which are larger. Each list is named by the undo
//! journal's row kind for it.

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use crate::db::{
    codec::{IndexKind, ListId, RecentKey, SentTx},
    tables::{OtsRecentIds, OtsRecentSent},
    DbResult, Txn, WriteTxn,
};

/// The window's ids of `address` in list `kind`, ascending.
pub fn ids<K: TransactionKind>(txn: &Txn<K>, kind: IndexKind, address: &Address) -> DbResult<Vec<u64>> {
    let key = RecentKey { kind, address: *address };
    Ok(txn.cursor::<OtsRecentIds>()?.dups(&key)?.into_iter().map(|ListId(id)| id).collect())
}

/// How many ids the window holds for `address` in list `kind`.
pub fn count<K: TransactionKind>(txn: &Txn<K>, kind: IndexKind, address: &Address) -> DbResult<u64> {
    let mut cursor = txn.cursor::<OtsRecentIds>()?;
    if cursor.seek_exact(&RecentKey { kind, address: *address })?.is_none() {
        return Ok(0);
    }
    Ok(cursor.dup_count()? as u64)
}

/// Adds `new_ids` (ascending, each larger than every id the list holds) to `address`'s window.
pub fn add(txn: &WriteTxn, kind: IndexKind, address: &Address, new_ids: &[u64]) -> DbResult<()> {
    let values: Vec<ListId> = new_ids.iter().copied().map(ListId).collect();
    txn.cursor::<OtsRecentIds>()?.put_dups(&RecentKey { kind, address: *address }, &values)?;
    Ok(())
}

/// Which side of a cut to remove.
#[derive(Clone, Copy)]
enum Side {
    /// Ids below the cut: their blocks leave the window.
    Below,
    /// Ids at or above it: their blocks are unwound.
    From,
}

/// Splits ascending `all` at `cut` into (removed, kept).
fn split<T>(all: &[T], cut: u64, side: Side, id: impl Fn(&T) -> u64) -> (&[T], &[T]) {
    let at = all.partition_point(|v| id(v) < cut);
    match side {
        Side::Below => all.split_at(at),
        Side::From => (&all[at..], &all[..at]),
    }
}

fn remove_ids(
    txn: &WriteTxn,
    kind: IndexKind,
    address: &Address,
    cut: u64,
    side: Side,
) -> DbResult<Vec<u64>> {
    let key = RecentKey { kind, address: *address };
    let all = ids(txn, kind, address)?;
    let (removed, kept) = split(&all, cut, side, |&id| id);
    if kept.is_empty() && !removed.is_empty() {
        txn.delete::<OtsRecentIds>(&key, None)?;
    } else {
        for &id in removed {
            txn.delete::<OtsRecentIds>(&key, Some(&ListId(id)))?;
        }
    }
    Ok(removed.to_vec())
}

/// Takes the ids below `cut` out of `address`'s window in list `kind`: their blocks leave it.
pub fn take_below(txn: &WriteTxn, kind: IndexKind, address: &Address, cut: u64) -> DbResult<Vec<u64>> {
    remove_ids(txn, kind, address, cut, Side::Below)
}

/// Deletes the ids at or above `cut` from `address`'s window in list `kind`: their blocks are
/// unwound.
pub fn cut_back(txn: &WriteTxn, kind: IndexKind, address: &Address, cut: u64) -> DbResult<()> {
    remove_ids(txn, kind, address, cut, Side::From).map(drop)
}

/// Every address's window in list `kind`, addresses ascending.
pub fn all<K: TransactionKind>(txn: &Txn<K>, kind: IndexKind) -> DbResult<Vec<(Address, Vec<u64>)>> {
    let mut out: Vec<(Address, Vec<u64>)> = Vec::new();
    let mut cursor = txn.cursor::<OtsRecentIds>()?;
    let mut next = cursor.seek(&RecentKey { kind, address: Address::ZERO })?;
    while let Some((key, ListId(id))) = next {
        if key.kind != kind {
            break;
        }
        match out.last_mut() {
            Some((last, ids)) if *last == key.address => ids.push(id),
            _ => out.push((key.address, vec![id])),
        }
        next = cursor.next_entry()?;
    }
    Ok(out)
}

/// Empties list `kind`'s window, returning what it held (addresses ascending).
pub fn take_all(txn: &WriteTxn, kind: IndexKind) -> DbResult<Vec<(Address, Vec<u64>)>> {
    let taken = all(txn, kind)?;
    for (address, _) in &taken {
        txn.delete::<OtsRecentIds>(&RecentKey { kind, address: *address }, None)?;
    }
    Ok(taken)
}

/// The window's transactions `sender` sent, as (TxId, nonce), ascending.
pub fn sent<K: TransactionKind>(txn: &Txn<K>, sender: &Address) -> DbResult<Vec<(u64, u64)>> {
    Ok(txn.cursor::<OtsRecentSent>()?.dups(sender)?.into_iter().map(|s| (s.tx, s.nonce)).collect())
}

/// How many transactions the window holds that `sender` sent.
pub fn sent_count<K: TransactionKind>(txn: &Txn<K>, sender: &Address) -> DbResult<u64> {
    let mut cursor = txn.cursor::<OtsRecentSent>()?;
    if cursor.seek_exact(sender)?.is_none() {
        return Ok(0);
    }
    Ok(cursor.dup_count()? as u64)
}

/// Adds `run` ((TxId, nonce), ascending, newer than every transaction the list holds) to
/// `sender`'s window.
pub fn add_sent(txn: &WriteTxn, sender: &Address, run: &[(u64, u64)]) -> DbResult<()> {
    let values: Vec<SentTx> = run.iter().map(|&(tx, nonce)| SentTx { tx, nonce }).collect();
    txn.cursor::<OtsRecentSent>()?.put_dups(sender, &values)?;
    Ok(())
}

fn remove_sent(txn: &WriteTxn, sender: &Address, cut: u64, side: Side) -> DbResult<Vec<(u64, u64)>> {
    let all = sent(txn, sender)?;
    let (removed, kept) = split(&all, cut, side, |&(tx, _)| tx);
    if kept.is_empty() && !removed.is_empty() {
        txn.delete::<OtsRecentSent>(sender, None)?;
    } else {
        for &(tx, nonce) in removed {
            txn.delete::<OtsRecentSent>(sender, Some(&SentTx { tx, nonce }))?;
        }
    }
    Ok(removed.to_vec())
}

/// Takes `sender`'s window transactions below TxId `cut` out: their blocks leave it.
pub fn take_sent_below(txn: &WriteTxn, sender: &Address, cut: u64) -> DbResult<Vec<(u64, u64)>> {
    remove_sent(txn, sender, cut, Side::Below)
}

/// Deletes `sender`'s window transactions at or above TxId `cut`: their blocks are unwound.
pub fn cut_sent_back(txn: &WriteTxn, sender: &Address, cut: u64) -> DbResult<()> {
    remove_sent(txn, sender, cut, Side::From).map(drop)
}

/// Each sender's transactions as (TxId, nonce), ascending; senders ascending.
pub type SentRuns = Vec<(Address, Vec<(u64, u64)>)>;

/// Every sender's window transactions.
pub fn all_sent<K: TransactionKind>(txn: &Txn<K>) -> DbResult<SentRuns> {
    let mut out = SentRuns::new();
    let mut cursor = txn.cursor::<OtsRecentSent>()?;
    let mut next = cursor.first()?;
    while let Some((sender, SentTx { tx, nonce })) = next {
        match out.last_mut() {
            Some((last, run)) if *last == sender => run.push((tx, nonce)),
            _ => out.push((sender, vec![(tx, nonce)])),
        }
        next = cursor.next_entry()?;
    }
    Ok(out)
}
