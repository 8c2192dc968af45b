//! Match tables and their cumulative counters (spec §2.1, §2.2, §4.3).

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use crate::db::{
    codec::{BlockNumber, Count},
    tables::Table,
    DbError, DbResult, Txn, WriteTxn,
};

/// A match table: deployment block → contract addresses.
pub trait MatchTable: Table<Key = BlockNumber, Value = Address> {}
impl<T: Table<Key = BlockNumber, Value = Address>> MatchTable for T {}

/// A match counter table: cumulative count → block.
pub trait MatchCounter: Table<Key = Count, Value = BlockNumber> {}
impl<T: Table<Key = Count, Value = BlockNumber>> MatchCounter for T {}

/// Largest page a contract-list read may ask for (the reference's limit).
pub const MAX_MATCH_PAGE: u64 = 500;

/// Number of matches so far: the key of the counter's last row.
pub fn match_count<C: MatchCounter, K: TransactionKind>(txn: &Txn<K>) -> DbResult<u64> {
    Ok(txn.cursor::<C>()?.last()?.map_or(0, |(Count(total), _)| total))
}

/// Adds the matches of `block`, which must be newer than every block already in the table.
/// `addresses` must be sorted and free of repeats.
pub fn append_matches<M: MatchTable, C: MatchCounter>(
    txn: &WriteTxn,
    block: u64,
    addresses: &[Address],
) -> DbResult<()> {
    if addresses.is_empty() {
        return Ok(());
    }
    let last = txn.cursor::<C>()?.last()?;
    let (total, last_block) = last.map_or((0, None), |(Count(t), BlockNumber(b))| (t, Some(b)));
    if last_block.is_some_and(|b| b >= block) {
        return Err(DbError::Corrupt {
            table: C::ID.name(),
            key: alloy_primitives::hex::encode(total.to_be_bytes()),
            reason: format!("matches for block {block} arrive after block {last_block:?}: blocks must be appended in order"),
        });
    }
    let key = BlockNumber(block);
    for address in addresses {
        txn.put::<M>(&key, address)?;
    }
    txn.put::<C>(&Count(total + addresses.len() as u64), &key)
}

/// Matches `idx..idx + count` (0-based, oldest first) as `(block, address)`.
pub fn match_page<M: MatchTable, C: MatchCounter, K: TransactionKind>(
    txn: &Txn<K>,
    idx: u64,
    count: u64,
) -> DbResult<Vec<(u64, Address)>> {
    let mut out = Vec::new();
    if count == 0 {
        return Ok(out);
    }
    let mut counter = txn.cursor::<C>()?;
    let Some((Count(cumulative), BlockNumber(block))) = counter.seek(&Count(idx + 1))? else {
        return Ok(out);
    };
    let before = counter.prev_entry()?.map_or(0, |(Count(c), _)| c);
    let skip = idx - before;
    if cumulative <= idx {
        return Err(corrupt_counter::<C>(cumulative, "seek returned a smaller cumulative count"));
    }
    let mut matches = txn.cursor::<M>()?;
    let mut current = matches.seek_exact(&BlockNumber(block))?.map(|a| (block, a));
    if current.is_none() {
        return Err(DbError::Corrupt {
            table: M::ID.name(),
            key: alloy_primitives::hex::encode(block.to_be_bytes()),
            reason: format!("the counter points at block {block}, which has no matches"),
        });
    }
    for _ in 0..skip {
        current = matches.next_entry()?.map(|(BlockNumber(b), a)| (b, a));
    }
    while let Some(m) = current {
        out.push(m);
        if out.len() as u64 == count {
            break;
        }
        current = matches.next_entry()?.map(|(BlockNumber(b), a)| (b, a));
    }
    Ok(out)
}

fn corrupt_counter<C: Table>(at: u64, reason: &str) -> DbError {
    DbError::Corrupt {
        table: C::ID.name(),
        key: alloy_primitives::hex::encode(at.to_be_bytes()),
        reason: reason.to_owned(),
    }
}
