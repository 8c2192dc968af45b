//! The reorg window's holder counts and ranking: kept beside its balances so that a token's
//! holder count reads one row per window block that changed it, and a page of its holders
//! reads the page, however many of its holders the window changed (docs/format.md, "The reorg
//! window's balances").
//!
//! `OtsRecentHolderCounts` holds, per token and window block, the holders the block gained less
//! those it lost; `OtsRecentHolderRanks` ranks the holders of `OtsRecentBalances` by their
//! balance now. Both change where `OtsRecentBalances` does: when a batch writes the window
//! ([`super::book`]), when its blocks leave it, and when they are unwound ([`super::window`]).

use std::collections::BTreeMap;

use alloy_primitives::{Address, U256};
use signet_libmdbx::tx::TransactionKind;

use crate::{
    db::{
        codec::{BlockNumber, KeyCodec, PairKey, Rank, WindowValue},
        tables::*,
        DbResult, Txn, WriteTxn,
    },
    index::integrity::broken,
};

/// How a block that took a balance from `before` to `after` changed its token's holder count.
pub(super) fn holders_gained(before: U256, after: U256) -> i64 {
    i64::from(before.is_zero() && !after.is_zero()) - i64::from(!before.is_zero() && after.is_zero())
}

/// Moves the window ranks of keys from their newest window balance before a change to their
/// newest after it (`None`: no window value, so no window rank). The deletes, then the puts,
/// go in rank order, each landing next to the one before.
pub(super) fn move_ranks(
    txn: &WriteTxn,
    moved: impl IntoIterator<Item = (PairKey, Option<U256>, Option<U256>)>,
) -> DbResult<()> {
    // Rank dups sort by !balance, then holder.
    let mut stale: Vec<(Address, U256, Address)> = Vec::new();
    let mut fresh: Vec<(Address, U256, Address)> = Vec::new();
    for (key, was, now) in moved {
        if was == now {
            continue;
        }
        if let Some(balance) = was.filter(|b| !b.is_zero()) {
            stale.push((key.token, !balance, key.holder));
        }
        if let Some(balance) = now.filter(|b| !b.is_zero()) {
            fresh.push((key.token, !balance, key.holder));
        }
    }
    stale.sort_unstable();
    fresh.sort_unstable();
    let mut ranks = txn.cursor::<OtsRecentHolderRanks>()?;
    for (token, inverted, holder) in stale {
        ranks.delete_dup(&token, &Rank { balance: !inverted, holder })?;
    }
    for (token, inverted, holder) in fresh {
        ranks.put(&token, &Rank { balance: !inverted, holder })?;
    }
    Ok(())
}

/// Records how window blocks changed holder counts, from their rows: (block, token, balance
/// before the block, after it). The blocks must have no count rows yet.
pub(super) fn add_counts(
    txn: &WriteTxn,
    rows: impl IntoIterator<Item = (u64, Address, U256, U256)>,
) -> DbResult<()> {
    let mut changes: BTreeMap<(Address, u64), i64> = BTreeMap::new();
    for (block, token, before, after) in rows {
        let gained = holders_gained(before, after);
        if gained != 0 {
            *changes.entry((token, block)).or_default() += gained;
        }
    }
    let mut counts = txn.cursor::<OtsRecentHolderCounts>()?;
    for ((token, block), value) in changes {
        if value != 0 {
            counts.put(&token, &WindowValue { block, value })?;
        }
    }
    Ok(())
}

/// Drops the holder-count changes of the (token, block) pairs given (repeats are fine).
pub(super) fn drop_counts(txn: &WriteTxn, pairs: impl IntoIterator<Item = (Address, u64)>) -> DbResult<()> {
    let mut pairs: Vec<(Address, u64)> = pairs.into_iter().collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut counts = txn.cursor::<OtsRecentHolderCounts>()?;
    for (token, block) in pairs {
        if counts.seek_sub_key_exact(&token, &block)?.is_some() {
            counts.delete_current()?;
        }
    }
    Ok(())
}

/// Drops every holder-count change of `tokens` (repeats are fine) by blocks above `to`.
pub(super) fn drop_counts_above(
    txn: &WriteTxn,
    tokens: impl IntoIterator<Item = Address>,
    to: u64,
) -> DbResult<()> {
    let mut tokens: Vec<Address> = tokens.into_iter().collect();
    tokens.sort_unstable();
    tokens.dedup();
    let mut counts = txn.cursor::<OtsRecentHolderCounts>()?;
    for token in tokens {
        while counts.seek_sub_key(&token, &(to + 1))?.is_some() {
            counts.delete_current()?;
        }
    }
    Ok(())
}

/// What the two tables must hold, computed from the window's balances: each (token, block)'s
/// non-zero count change, and each token's window holders with a balance, ranked.
struct Expected {
    counts: BTreeMap<(Address, u64), i64>,
    ranks: Vec<(Address, Rank)>,
}

fn expected<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Expected> {
    let mut counts: BTreeMap<(Address, u64), i64> = BTreeMap::new();
    let mut window = txn.cursor::<OtsRecentBalances>()?;
    let mut rows = txn.cursor::<OtsRecentBalancesByBlock>()?;
    let mut entry = rows.first()?;
    while let Some((BlockNumber(block), row)) = entry {
        let after = window.seek_sub_key_exact(&row.key, &block)?.ok_or_else(|| {
            broken::<OtsRecentBalances>(row.key.encode_key().as_ref(), format!("no value of block {block}"))
        })?;
        *counts.entry((row.key.token, block)).or_default() += holders_gained(row.old, after.value);
        entry = rows.next_entry()?;
    }
    counts.retain(|_, change| *change != 0);
    let mut ranks = Vec::new();
    let mut entry = window.first()?;
    while let Some((key, _)) = entry {
        if let Some(now) = window.last_dup()?.filter(|v| !v.value.is_zero()) {
            ranks.push((key.token, Rank { balance: now.value, holder: key.holder }));
        }
        entry = window.next_key()?;
    }
    Ok(Expected { counts, ranks })
}

/// Computes both tables anew from the window's balances (the upgrade from format 8, which had
/// neither).
pub fn rebuild(txn: &WriteTxn) -> DbResult<()> {
    let Expected { counts, ranks } = expected(txn)?;
    txn.clear::<OtsRecentHolderCounts>()?;
    txn.clear::<OtsRecentHolderRanks>()?;
    let mut cursor = txn.cursor::<OtsRecentHolderCounts>()?;
    for ((token, block), value) in counts {
        cursor.put(&token, &WindowValue { block, value })?;
    }
    let mut cursor = txn.cursor::<OtsRecentHolderRanks>()?;
    for (token, rank) in ranks {
        cursor.put(&token, &rank)?;
    }
    Ok(())
}

/// Each window block's count change and each window holder's rank are there, and nothing else.
pub(super) fn check<K: TransactionKind>(txn: &Txn<K>) -> DbResult<()> {
    let Expected { counts, ranks } = expected(txn)?;
    let mut cursor = txn.cursor::<OtsRecentHolderCounts>()?;
    for (&(token, block), &change) in &counts {
        let found = cursor.seek_sub_key_exact(&token, &block)?.map(|v| v.value);
        if found != Some(change) {
            return Err(broken::<OtsRecentHolderCounts>(
                token.as_slice(),
                format!("block {block} changed the holder count by {change}, the table says {found:?}"),
            ));
        }
    }
    let stored = txn.entries::<OtsRecentHolderCounts>()?;
    if stored != counts.len() as u64 {
        return Err(broken::<OtsRecentHolderCounts>(
            &[],
            format!("{stored} rows for {} blocks' count changes", counts.len()),
        ));
    }
    let mut cursor = txn.cursor::<OtsRecentHolderRanks>()?;
    for (token, rank) in &ranks {
        if !cursor.seek_both(token, rank)? {
            return Err(broken::<OtsRecentHolderRanks>(
                token.as_slice(),
                format!("no rank for holder {} with {}", rank.holder, rank.balance),
            ));
        }
    }
    let stored = txn.entries::<OtsRecentHolderRanks>()?;
    if stored != ranks.len() as u64 {
        return Err(broken::<OtsRecentHolderRanks>(
            &[],
            format!("{stored} ranks for {} window holders with a balance", ranks.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_gains_a_holder_from_nothing_and_loses_one_to_nothing() {
        let (zero, one, two) = (U256::ZERO, U256::from(1), U256::from(2));
        assert_eq!(holders_gained(zero, one), 1);
        assert_eq!(holders_gained(one, zero), -1);
        assert_eq!(holders_gained(one, two), 0);
        assert_eq!(holders_gained(zero, zero), 0);
    }
}
