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

use super::{
    book::{BalanceBook, Ranking},
    holders,
};
use crate::{
    db::{
        codec::{BlockNumber, KeyCodec, ValueCodec, WindowValue},
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
    // Owners a catch-up staged would hide what settles under them.
    super::staged_owners::fold(txn, None)?;
    BalanceBook::default().resolve(txn, window.first_kept())?.write(txn, None, Ranking::Kept, None).map(drop)
}

/// Drops the per-block rows of the blocks that left the window (their values settled when they
/// left).
pub fn prune(txn: &WriteTxn, window: WindowStart) -> DbResult<()> {
    prune_blocks::<OtsRecentBalancesByBlock>(txn, window)?;
    prune_blocks::<OtsRecentOwnersByBlock>(txn, window)?;
    prune_blocks::<OtsRecentMultiBalancesByBlock>(txn, window)
}

/// Deletes the window rows of blocks above `to`: the large tables never held them.
pub fn unwind(txn: &WriteTxn, to: u64) -> DbResult<()> {
    let moved = unwind_rows::<OtsRecentBalancesByBlock, OtsRecentBalances, _>(txn, to, |p| p.key)?;
    // The holders' window ranks move once, from each key's newest value before the unwind to
    // its newest after, however many of the unwound blocks changed it.
    holders::move_ranks(txn, moved.iter().copied())?;
    holders::drop_counts_above(txn, moved.iter().map(|(key, _, _)| key.token), to)?;
    unwind_rows::<OtsRecentOwnersByBlock, OtsRecentOwners, _>(txn, to, |p| p.key)?;
    unwind_rows::<OtsRecentMultiBalancesByBlock, OtsRecentMultiBalances, _>(txn, to, |p| p.key)?;
    Ok(())
}

/// A key the unwind changed, with its newest window value before and after it (`None`: none).
type Unwound<K, V> = (K, Option<V>, Option<V>);

/// Deletes the per-block rows of `U` above block `to` and the dups of `W` they name, key by key
/// (one walk over each key's dups); returns each key with its newest value before and after.
fn unwind_rows<U, W, V>(
    txn: &WriteTxn,
    to: u64,
    key: impl Fn(U::Value) -> W::Key,
) -> DbResult<Vec<Unwound<W::Key, V>>>
where
    U: DupTable + Table<Key = BlockNumber>,
    W: DupSubKey<SubKey = u64> + Table<Value = WindowValue<V>>,
    W::Key: Ord + Copy,
    V: Copy,
    WindowValue<V>: ValueCodec,
{
    let mut keys = Vec::new();
    let mut blocks = Vec::new();
    let mut rows = txn.cursor::<U>()?;
    let mut entry = rows.seek(&BlockNumber(to + 1))?;
    while let Some((BlockNumber(block), row)) = entry {
        keys.push(key(row));
        if blocks.last() != Some(&block) {
            blocks.push(block);
        }
        entry = rows.next_entry()?;
    }
    keys.sort_unstable();
    keys.dedup();
    let mut window = txn.cursor::<W>()?;
    let mut out = Vec::with_capacity(keys.len());
    let first_unwound = to + 1;
    for key in keys {
        // The unwound dups are the key's last ones (a dup's sub-key is its block).
        let Some(first) = window.seek_exact(&key)? else { continue };
        if first.block >= first_unwound {
            // Most keys the unwound blocks changed changed in no older window block: all go.
            let before = window.last_dup()?.map(|row| row.value);
            txn.delete::<W>(&key, None)?;
            out.push((key, before, None));
            continue;
        }
        let Some(mut last) = window.last_dup()? else { continue };
        if last.block < first_unwound {
            continue;
        }
        let before = Some(last.value);
        // From the last dup back: the key keeps its older dups, so the cursor stays on it.
        while last.block >= first_unwound {
            window.delete_current()?;
            last = window.last_dup()?.ok_or_else(|| {
                broken::<W>(key.encode_key().as_ref(), "its dups before the unwound blocks went too".into())
            })?;
        }
        out.push((key, before, Some(last.value)));
    }
    for block in &blocks {
        txn.delete::<U>(&BlockNumber(*block), None)?;
    }
    Ok(out)
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
