//! The address totals' staged segments (`OtsStagedTotals`; docs/format.md, "Staged totals"):
//! what each later bulk stage of a catch-up added, kept apart from `OtsAddressTotals` until the
//! catch-up ends.
//!
//! A stage's addresses fall all over the totals table, so merged into it they dirty more of its
//! pages the larger it has grown: the hundredth 1 % stage of a chain costs several times the
//! first (docs/benchmarks.md, "The stage regime"). A segment is instead appended under a key of
//! its own, at the cost of the stage's rows alone; reads add every segment; the catch-up's end
//! (or the first write of a batch, or a stage that would pass [`MAX_SEGMENTS`]) sums them into
//! the table in one pass in address order, merging all segments at once.

use std::{cmp::Reverse, collections::BinaryHeap};

use alloy_primitives::Address;
use signet_libmdbx::tx::{Rw, TransactionKind};

use crate::db::{
    codec::{AddressTotals, BlockNumber, TotalsDelta},
    tables::{DupSubKey, OtsAddressTotals, OtsStagedTotals, Table},
    DbError, DbResult, ReadTxn, TableCursor, Txn, WriteTxn,
};
use crate::index::{
    integrity::broken,
    rewrite::{Rewrite, SUMMARY_REWRITE_SHARE},
};

/// A stage that would leave more segments than this folds them all first: each read of an
/// address's totals looks into every segment (128 seeks take about 0.1 ms), and a catch-up of
/// many small stages would otherwise make them slower without bound. A catch-up of a hundred
/// stages (the 1 % regime) never folds before its end; at 64 the 21 M chain's 1 % stages folded
/// once midway, a 3 s stage (docs/benchmarks.md, "Staged totals").
pub(super) const MAX_SEGMENTS: usize = 128;

/// The segments' keys (each its stage's newest block with totals), oldest first.
pub fn segment_keys<K: TransactionKind>(txn: &Txn<K>) -> DbResult<Vec<u64>> {
    let mut cursor = txn.cursor::<OtsStagedTotals>()?;
    let mut keys = Vec::new();
    let mut next = cursor.first()?;
    while let Some((BlockNumber(key), _)) = next {
        keys.push(key);
        next = cursor.next_key()?;
    }
    Ok(keys)
}

/// Appends a stage's sums, in address order, as the segment `key`, which must follow every
/// segment's key. Returns how many addresses it holds.
pub(super) fn append_segment(
    txn: &WriteTxn,
    key: u64,
    sums: impl Iterator<Item = DbResult<(Address, AddressTotals)>>,
) -> DbResult<u64> {
    let mut cursor = txn.cursor::<OtsStagedTotals>()?;
    let mut written = 0;
    for sum in sums {
        let (address, added) = sum?;
        cursor.append(&BlockNumber(key), &TotalsDelta { address, added })?;
        written += 1;
    }
    Ok(written)
}

/// `sum` plus `address`'s dup under every key of `T` (the segments, or the reorg window's
/// blocks): one look-up per key.
pub(super) fn add_per_key<T, K>(
    txn: &Txn<K>,
    address: &Address,
    mut sum: AddressTotals,
) -> DbResult<AddressTotals>
where
    T: DupSubKey<SubKey = Address> + Table<Key = BlockNumber, Value = TotalsDelta>,
    K: TransactionKind,
{
    let mut cursor = txn.cursor::<T>()?;
    let mut next = cursor.first()?.map(|(BlockNumber(key), _)| key);
    while let Some(key) = next {
        if let Some(delta) = cursor.seek_sub_key_exact(&BlockNumber(key), address)? {
            sum = sum
                .checked_add(&delta.added)
                .ok_or_else(|| broken::<T>(address.as_slice(), "a sum past 2^256".into()))?;
        }
        next = match key.checked_add(1) {
            Some(after) => cursor.seek(&BlockNumber(after))?.map(|(BlockNumber(k), _)| k),
            None => None,
        };
    }
    Ok(sum)
}

/// Every segment merged: each address once, in address order, with what all segments hold for
/// it summed.
pub(super) struct StagedSums<'t, K: TransactionKind> {
    segments: Vec<TableCursor<'t, K, OtsStagedTotals>>,
    /// Each segment's next dup.
    heads: Vec<Option<AddressTotals>>,
    /// The segments by their next dup's address.
    order: BinaryHeap<Reverse<(Address, usize)>>,
}

impl<'t, K: TransactionKind> StagedSums<'t, K> {
    /// The merge of every segment `txn` holds.
    pub(super) fn open(txn: &'t Txn<K>) -> DbResult<Self> {
        let keys = segment_keys(txn)?;
        let mut sums = Self {
            segments: Vec::with_capacity(keys.len()),
            heads: Vec::with_capacity(keys.len()),
            order: BinaryHeap::with_capacity(keys.len()),
        };
        for key in keys {
            let mut cursor = txn.cursor::<OtsStagedTotals>()?;
            let first = cursor.seek(&BlockNumber(key))?.map(|(_, delta)| delta);
            sums.segments.push(cursor);
            sums.heads.push(None);
            sums.take(sums.segments.len() - 1, first);
        }
        Ok(sums)
    }

    fn take(&mut self, segment: usize, delta: Option<TotalsDelta>) {
        if let Some(TotalsDelta { address, added }) = delta {
            self.heads[segment] = Some(added);
            self.order.push(Reverse((address, segment)));
        }
    }

    /// Moves segment `segment` past the dup it was on and returns that dup's totals.
    fn advance(&mut self, segment: usize) -> DbResult<AddressTotals> {
        let added = self.heads[segment].take().unwrap_or_default();
        let next = self.segments[segment].next_dup()?;
        self.take(segment, next);
        Ok(added)
    }

    /// The next address and what the segments hold for it, summed.
    pub(super) fn next_sum(&mut self) -> DbResult<Option<(Address, AddressTotals)>> {
        let Some(Reverse((address, segment))) = self.order.pop() else { return Ok(None) };
        let mut sum = self.advance(segment)?;
        while let Some(&Reverse((next, segment))) = self.order.peek() {
            if next != address {
                break;
            }
            self.order.pop();
            let added = self.advance(segment)?;
            sum = sum.checked_add(&added).ok_or_else(|| overflow(&address))?;
        }
        Ok(Some((address, sum)))
    }
}

/// Sums every segment into `OtsAddressTotals` and empties `OtsStagedTotals`; returns how many
/// addresses it summed (0, doing nothing, when there are no segments). With `before` (a
/// snapshot of the state `txn` started from, which must not have written `OtsAddressTotals`
/// yet), a table the segments touch a large share of is rewritten whole (`index::rewrite`).
pub fn fold_staged(txn: &WriteTxn, before: Option<&ReadTxn>) -> DbResult<u64> {
    let staged = txn.entries::<OtsStagedTotals>()?;
    if staged == 0 {
        return Ok(0);
    }
    let mut rewrite = match before {
        Some(before) => {
            Rewrite::<_, OtsAddressTotals>::begin_if_pays(txn, before, staged, SUMMARY_REWRITE_SHARE)?
        }
        None => None,
    };
    let mut table = txn.cursor::<OtsAddressTotals>()?;
    let mut sums = StagedSums::open(txn)?;
    let mut folded = 0;
    while let Some((address, added)) = sums.next_sum()? {
        add_to_row(&mut rewrite, &mut table, address, &added)?;
        folded += 1;
    }
    drop(sums);
    if let Some(rewrite) = rewrite {
        rewrite.finish()?;
    }
    txn.clear::<OtsStagedTotals>()?;
    Ok(folded)
}

/// Adds `added` to `address`'s row of `OtsAddressTotals`: through `rewrite` (the table being
/// rewritten whole, addresses coming in order) or in place through `table`.
pub(super) fn add_to_row<K: TransactionKind>(
    rewrite: &mut Option<Rewrite<'_, K, OtsAddressTotals>>,
    table: &mut TableCursor<'_, Rw, OtsAddressTotals>,
    address: Address,
    added: &AddressTotals,
) -> DbResult<()> {
    let stored = match rewrite {
        Some(rewrite) => {
            rewrite.copy_while(|stored, _| stored < &address)?;
            rewrite.take_if(|stored, _| stored == &address)?.map(|(_, totals)| totals)
        }
        None => table.seek_exact(&address)?,
    };
    let sum = stored
        .unwrap_or_default()
        .checked_add(added)
        .ok_or_else(|| broken::<OtsAddressTotals>(address.as_slice(), "a sum past 2^256".into()))?;
    match rewrite {
        Some(rewrite) => rewrite.append(&address, &sum),
        None => table.put(&address, &sum),
    }
}

/// No segment of a block past the tip, no all-zero dup, and every address's row and segments
/// sum below 2^256.
pub(super) fn check<K: TransactionKind>(txn: &Txn<K>, tip: Option<u64>) -> DbResult<()> {
    for key in segment_keys(txn)? {
        if tip.is_none_or(|t| key > t) {
            return Err(broken::<OtsStagedTotals>(&key.to_be_bytes(), "a segment past the tip".into()));
        }
        for delta in txn.cursor::<OtsStagedTotals>()?.dups(&BlockNumber(key))? {
            if delta.added.is_zero() {
                return Err(broken::<OtsStagedTotals>(
                    &key.to_be_bytes(),
                    format!("{}: a dup of zeros", delta.address),
                ));
            }
        }
    }
    let mut sums = StagedSums::open(txn)?;
    while let Some((address, added)) = sums.next_sum()? {
        let stored = txn.get::<OtsAddressTotals>(&address)?.unwrap_or_default();
        if stored.checked_add(&added).is_none() {
            return Err(broken::<OtsStagedTotals>(address.as_slice(), "totals pass 2^256".into()));
        }
    }
    Ok(())
}

fn overflow(address: &Address) -> DbError {
    broken::<OtsStagedTotals>(address.as_slice(), "a sum past 2^256".into())
}
