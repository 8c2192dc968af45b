//! The balances' part of the reorg window: what its blocks changed, kept apart from the large
//! tables so that unwinding them deletes a few small rows instead of moving balances, ranks and
//! holder counts back (docs/format.md, "The reorg window's balances").
//!
//! `OtsRecentBalances`, `OtsRecentOwners` and `OtsRecentMultiBalances` hold, per key, the value
//! each window block left; the per-block tables (`OtsRecentBalancesByBlock` and its two siblings) name the
//! keys each block changed. The large tables hold the state before the window: a block leaving
//! it settles its values there ([`super::book`]), an unwind deletes its rows here.

use alloy_primitives::{Address, U256};
use signet_libmdbx::tx::TransactionKind;

use super::{book::BalanceBook, holders};
use crate::{
    db::{
        codec::{BlockNumber, KeyCodec, PairKey, ValueCodec, WindowValue},
        tables::*,
        DbResult, Txn, WriteTxn,
    },
    index::{integrity::broken, journal::prune_blocks, window::WindowStart},
};

/// The value `key` has now by the window table `W`, if a window block changed it.
pub(super) fn newest<W, K, V>(txn: &Txn<K>, key: &W::Key) -> DbResult<Option<V>>
where
    W: DupSubKey<SubKey = u64> + Table<Value = WindowValue<V>>,
    K: TransactionKind,
{
    let mut cursor = txn.cursor::<W>()?;
    if cursor.seek_exact(key)?.is_none() {
        return Ok(None);
    }
    Ok(cursor.last_dup()?.map(|row| row.value))
}

/// Settles every value the blocks leaving the window (as it starts at `window`) left into the
/// large tables and drops their window dups (their per-block rows go with [`prune`]): what a
/// batch does for the blocks leaving the window, on its own.
pub fn fold(txn: &WriteTxn, window: WindowStart) -> DbResult<()> {
    BalanceBook::default().resolve(txn, window.first_kept())?.write(txn, None)
}

/// Drops the per-block rows of the blocks that left the window (their values settled when they
/// left).
pub fn prune(txn: &WriteTxn, window: WindowStart) -> DbResult<()> {
    prune_blocks::<OtsRecentBalancesByBlock>(txn, window)?;
    prune_blocks::<OtsRecentOwnersByBlock>(txn, window)?;
    prune_blocks::<OtsRecentMultiBalancesByBlock>(txn, window)
}

/// Deletes the window rows of blocks `to + 1..=tip`: the large tables never held them.
pub fn unwind(txn: &WriteTxn, to: u64, tip: u64) -> DbResult<()> {
    // Newest first: each key's newest value steps back one block at a time.
    for block in (to + 1..=tip).rev() {
        let mut keys: Vec<PairKey> =
            txn.cursor::<OtsRecentBalancesByBlock>()?.dups(&BlockNumber(block))?.iter().map(|p| p.key).collect();
        keys.sort_unstable();
        keys.dedup();
        let before = holders::newest_balances(txn, &keys)?;
        unwind_block::<OtsRecentBalancesByBlock, OtsRecentBalances, _>(txn, block, |p| p.key)?;
        holders::rerank(txn, &keys, &before)?;
        holders::drop_counts(txn, keys.iter().map(|key| (key.token, block)))?;
        unwind_block::<OtsRecentOwnersByBlock, OtsRecentOwners, _>(txn, block, |p| p.key)?;
        unwind_block::<OtsRecentMultiBalancesByBlock, OtsRecentMultiBalances, _>(txn, block, |p| p.key)?;
    }
    Ok(())
}

fn unwind_block<U, W, V>(txn: &WriteTxn, block: u64, key: impl Fn(U::Value) -> W::Key) -> DbResult<()>
where
    U: DupTable + Table<Key = BlockNumber>,
    W: DupSubKey<SubKey = u64> + Table<Value = WindowValue<V>>,
    V: Default,
    WindowValue<V>: ValueCodec,
{
    let number = BlockNumber(block);
    let rows = txn.cursor::<U>()?.dups(&number)?;
    let mut window = txn.cursor::<W>()?;
    for row in rows {
        if window.seek_sub_key_exact(&key(row), &block)?.is_some() {
            window.delete_current()?;
        }
    }
    txn.delete::<U>(&number, None)?;
    Ok(())
}

/// The per-block rows and the window dups name the same (key, block) pairs, one each, and each
/// row's value before its block is the key's value the block found: the window dup of the block
/// before it, or the large table's value for the key's first window block.
pub(super) fn check<K: TransactionKind>(txn: &Txn<K>) -> DbResult<()> {
    check_family::<OtsRecentBalancesByBlock, OtsRecentBalances, _, _>(
        txn,
        |p| (p.key, p.old),
        |txn, key| Ok(txn.get::<OtsTokenBalances>(key)?.map_or(U256::ZERO, |b| b.0)),
    )?;
    check_family::<OtsRecentOwnersByBlock, OtsRecentOwners, _, _>(
        txn,
        |p| (p.key, p.old),
        |txn, key| Ok(txn.get::<OtsERC721Owners>(key)?.unwrap_or(Address::ZERO)),
    )?;
    check_family::<OtsRecentMultiBalancesByBlock, OtsRecentMultiBalances, _, _>(
        txn,
        |p| (p.key, p.old),
        |txn, key| Ok(txn.get::<OtsERC1155Balances>(key)?.map_or(U256::ZERO, |b| b.0)),
    )
}

fn check_family<U, W, V, K>(
    txn: &Txn<K>,
    row: impl Fn(U::Value) -> (W::Key, V),
    settled: impl Fn(&Txn<K>, &W::Key) -> DbResult<V>,
) -> DbResult<()>
where
    U: DupTable + Table<Key = BlockNumber>,
    W: DupSubKey<SubKey = u64> + Table<Value = WindowValue<V>>,
    V: Default + PartialEq + std::fmt::Debug,
    WindowValue<V>: ValueCodec,
    K: TransactionKind,
{
    let mut rows = 0u64;
    let mut window = txn.cursor::<W>()?;
    let mut cursor = txn.cursor::<U>()?;
    let mut entry = cursor.first()?;
    while let Some((BlockNumber(block), value)) = entry {
        let (key, before) = row(value);
        let bad = |reason: String| broken::<W>(key.encode_key().as_ref(), reason);
        if window.seek_sub_key_exact(&key, &block)?.is_none() {
            return Err(bad(format!("no value of block {block}")));
        }
        let found = match window.prev_dup()? {
            Some(earlier) => earlier.value,
            None => settled(txn, &key)?,
        };
        if found != before {
            return Err(bad(format!(
                "block {block}'s row in {} says the value before it was {before:?}, but it was {found:?}",
                U::ID.name()
            )));
        }
        rows += 1;
        entry = cursor.next_entry()?;
    }
    let dups = txn.entries::<W>()?;
    if dups != rows {
        return Err(broken::<W>(&[], format!("{dups} dups for {rows} rows of {}", U::ID.name())));
    }
    Ok(())
}
