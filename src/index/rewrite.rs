//! When a batch rewrites a table whole instead of changing it in place.
//!
//! A batch that changes a large share of a table's entries dirties nearly every page of it
//! either way. Rewritten whole — emptied in the batch's transaction and appended to again in key
//! order from a snapshot of the state the transaction started from — the table costs a
//! sequential copy per entry instead of a seek and an update per changed one, and its pages come
//! out full (MDBX splits a page it appends to at its end, not in its middle).

use signet_libmdbx::tx::{Rw, TransactionKind};
use tracing::debug;

use crate::db::{tables::Table, DbResult, TableCursor, Txn, WriteTxn};

/// A table is rewritten whole once a batch changes more than one in this many of its entries.
/// Measured on the benchmark chain (docs/benchmarks-history.md): an entry copied in key order costs
/// ~0.2 µs, a seek and update in place ~3 µs; at 1 in 4 the one-block-per-transaction run gained
/// nothing over 1 in 16, and always rewriting halved it.
const REWRITE_SHARE: u64 = 16;

/// A table of one entry per key that a write only adds to or sums into (holdings, address
/// totals) is rewritten whole by a stage whose rows touch at least one in this many of its
/// entries. Merged in place such a table is left with pages two thirds full, which the stage then
/// repacks (`index::packing`): rewritten it comes out packed at once. Smaller stages update in
/// place: a stage of 1 % of the 2 M benchmark chain touches about one in five holdings, nearly
/// all of them there already, and the copy cost more than the seeks it saved (docs/benchmarks.md,
/// "Lists rewritten whole in large stages").
pub(super) const SUMMARY_REWRITE_SHARE: u64 = 2;

/// Whether a batch that changes `changed` entries of a table holding `entries` should rewrite it
/// whole (always for an empty table: rewriting it is appending).
pub(super) fn rewrite_pays(entries: u64, changed: u64) -> bool {
    rewrite_pays_at(REWRITE_SHARE, entries, changed)
}

/// As [`rewrite_pays`], at one in `share` entries changed.
const fn rewrite_pays_at(share: u64, entries: u64, changed: u64) -> bool {
    changed.saturating_mul(share) >= entries
}

/// Table `T` being rewritten whole in a write transaction: emptied, then appended to in key
/// order — the entries of a snapshot of it (the state the transaction started from) copied,
/// with the write's own merged in by the caller, who walks both in key order: [`Rewrite::copy_while`]
/// copies the old entries before the caller's next key, [`Rewrite::take_if`] takes the next one
/// out of the copy (to be changed and appended again).
pub(super) struct Rewrite<'a, K: TransactionKind, T: Table> {
    old: TableCursor<'a, K, T>,
    next: Option<(T::Key, T::Value)>,
    out: TableCursor<'a, Rw, T>,
}

impl<'a, K: TransactionKind, T: Table> Rewrite<'a, K, T> {
    /// A rewrite of `T` if a write that changes at most `changed` of its entries changes one in
    /// `share` or more. `before` must hold `T` as `txn` found it (nothing in `txn` may have
    /// written `T` yet).
    pub(super) fn begin_if_pays(
        txn: &'a WriteTxn,
        before: &'a Txn<K>,
        changed: u64,
        share: u64,
    ) -> DbResult<Option<Self>> {
        let entries = txn.stats::<T>()?.entries;
        if !rewrite_pays_at(share, entries, changed) {
            return Ok(None);
        }
        debug!(target: "ots::index", table = T::ID.name(), entries, changed, "table rewritten whole");
        Self::begin(txn, before).map(Some)
    }

    /// Empties `T` in `txn`; `before` must hold `T` as `txn` found it.
    fn begin(txn: &'a WriteTxn, before: &'a Txn<K>) -> DbResult<Self> {
        let mut old = before.walking_cursor::<T>()?;
        let next = old.first()?;
        txn.clear::<T>()?;
        let out = txn.walking_cursor::<T>()?;
        Ok(Self { old, next, out })
    }

    /// Takes the next old entry out of the copy if `wanted` says so.
    pub(super) fn take_if(
        &mut self,
        wanted: impl FnOnce(&T::Key, &T::Value) -> bool,
    ) -> DbResult<Option<(T::Key, T::Value)>> {
        match self.next.take_if(|(k, v)| wanted(k, v)) {
            Some(entry) => {
                self.next = self.old.next_entry()?;
                Ok(Some(entry))
            }
            None => Ok(None),
        }
    }

    /// Copies the old entries, in order, while `before` holds for them.
    pub(super) fn copy_while(&mut self, mut before: impl FnMut(&T::Key, &T::Value) -> bool) -> DbResult<()> {
        while let Some((key, value)) = self.take_if(&mut before)? {
            self.out.append(&key, &value)?;
        }
        Ok(())
    }

    /// Appends an entry: it must sort after every entry copied or appended so far.
    pub(super) fn append(&mut self, key: &T::Key, value: &T::Value) -> DbResult<()> {
        self.out.append(key, value)
    }

    /// Copies the old entries left.
    pub(super) fn finish(mut self) -> DbResult<()> {
        self.copy_while(|_, _| true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_shares_rewrite_small_ones_update_in_place() {
        assert!(rewrite_pays(0, 0));
        assert!(rewrite_pays(1_600, 100));
        assert!(!rewrite_pays(1_601, 100));
        assert!(rewrite_pays(10, 10));
        assert!(!rewrite_pays(u64::MAX, 1));
    }
}
