//! A key's dups in a DupFixed table read a leaf page at a time: one MDBX call per page of dups
//! instead of one per dup, for walks that pass many of them (a holder page of a busy token
//! passes every stored holder the reorg window changed before its rows).

use std::{borrow::Cow, cmp::Ordering};

use signet_libmdbx::tx::TransactionKind;

use super::{
    codec::{KeyCodec, ValueCodec},
    error::{table_err, DbResult},
    tables::{DupSubKey, DupTable, Layout},
    txn::{decode_value, TableCursor},
};

/// A cursor over one key's dups, from a dup it was placed on to the key's last.
#[derive(Debug)]
pub struct DupRun<'tx, K: TransactionKind, T: DupTable> {
    cursor: TableCursor<'tx, K, T>,
    key: Vec<u8>,
    /// The leaf page of dups that holds the current one.
    page: Cow<'tx, [u8]>,
    /// Bytes of one dup.
    size: usize,
    /// The current dup's index on `page`.
    at: usize,
}

impl<'tx, K: TransactionKind, T: DupTable> DupRun<'tx, K, T> {
    /// Places `cursor` on `key`'s first dup; returns the run and that dup, or `None` when the
    /// table has no `key`. The table must be DupFixed.
    pub fn first(mut cursor: TableCursor<'tx, K, T>, key: &T::Key) -> DbResult<Option<(Self, T::Value)>> {
        let Some(first) = cursor.seek_exact(key)? else { return Ok(None) };
        let run = Self::placed(cursor, key, &first)?;
        Ok(Some((run, first)))
    }

    fn placed(mut cursor: TableCursor<'tx, K, T>, key: &T::Key, current: &T::Value) -> DbResult<Self> {
        let key = key.encode_key().as_ref().to_vec();
        if T::ID.layout() != Layout::DupFixed {
            return Err(table_err("dup page", T::ID.name(), &key, signet_libmdbx::MdbxError::Incompatible));
        }
        let encoded = current.encode_value();
        let size = encoded.len();
        let page = cursor.dup_page()?.unwrap_or(Cow::Borrowed(&[]));
        // The page starts at its own first dup, not at the cursor's: find the current one.
        let at = find(&page, size, &encoded)
            .ok_or_else(|| table_err("dup page", T::ID.name(), &key, signet_libmdbx::MdbxError::Corrupted))?;
        Ok(Self { cursor, key, page, size, at })
    }

    /// The key's next dup, `None` after its last.
    pub fn next_dup(&mut self) -> DbResult<Option<T::Value>> {
        self.at += 1;
        if (self.at + 1) * self.size > self.page.len() {
            match self.cursor.next_dup_page()? {
                Some(page) if page.len() >= self.size => {
                    self.page = page;
                    self.at = 0;
                }
                _ => {
                    self.page = Cow::Borrowed(&[]);
                    self.at = 0;
                    return Ok(None);
                }
            }
        }
        let bytes = &self.page[self.at * self.size..(self.at + 1) * self.size];
        decode_value::<T>(&self.key, bytes).map(Some)
    }
}

impl<'tx, K: TransactionKind, T: DupSubKey> DupRun<'tx, K, T> {
    /// Places `cursor` on `key`'s first dup whose sub-key is `sub` or later; returns the run and
    /// that dup, or `None` when `key` has no such dup.
    pub fn at_or_after(
        mut cursor: TableCursor<'tx, K, T>,
        key: &T::Key,
        sub: &T::SubKey,
    ) -> DbResult<Option<(Self, T::Value)>> {
        let Some(first) = cursor.seek_sub_key(key, sub)? else { return Ok(None) };
        let run = Self::placed(cursor, key, &first)?;
        Ok(Some((run, first)))
    }
}

/// The index of the `size`-byte dup `value` on a sorted `page` of them.
fn find(page: &[u8], size: usize, value: &[u8]) -> Option<usize> {
    if size == 0 || !page.len().is_multiple_of(size) {
        return None;
    }
    let (mut low, mut high) = (0, page.len() / size);
    while low < high {
        let mid = low + (high - low) / 2;
        match page[mid * size..(mid + 1) * size].cmp(value) {
            Ordering::Less => low = mid + 1,
            Ordering::Greater => high = mid,
            Ordering::Equal => return Some(mid),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{Address, U256};

    use super::*;
    use crate::db::{codec::Rank, tables::OtsTokenHolderRanks, AccessMode, Db};

    fn rank(i: u64) -> Rank {
        Rank { balance: U256::from(i + 1), holder: Address::with_last_byte((i % 251) as u8) }
    }

    #[test]
    fn a_run_reads_every_dup_from_where_it_was_placed_across_pages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let token = Address::with_last_byte(7);
        let other = Address::with_last_byte(8);
        // Enough dups to fill several leaf pages of the sub-tree.
        let mut ranks: Vec<Rank> = (0..2_000).map(rank).collect();
        ranks.sort_by_key(|r| r.encode_value());
        let txn = db.begin_write().expect("write");
        for r in &ranks {
            txn.put::<OtsTokenHolderRanks>(&token, r).expect("put");
        }
        txn.put::<OtsTokenHolderRanks>(&other, &rank(1)).expect("put");
        let few = Address::with_last_byte(9);
        let mut small: Vec<Rank> = (0..5).map(rank).collect();
        small.sort_by_key(|r| r.encode_value());
        for r in &small {
            txn.put::<OtsTokenHolderRanks>(&few, r).expect("put");
        }
        txn.commit().expect("commit");
        {
            // A page of dups the transaction changed.
            let txn = db.begin_write().expect("write");
            txn.delete::<OtsTokenHolderRanks>(&token, Some(&ranks[700])).expect("delete");
            let mut left = ranks.clone();
            left.remove(700);
            let dups = txn.cursor::<OtsTokenHolderRanks>().expect("cursor").dups(&token).expect("dups");
            assert_eq!(dups, left, "a dirty page");
        }

        let txn = db.begin_read().expect("read");
        let cursor = txn.cursor::<OtsTokenHolderRanks>().expect("cursor");
        let (mut run, first) = DupRun::first(cursor, &token).expect("first").expect("there");
        let mut read = vec![first];
        while let Some(r) = run.next_dup().expect("next") {
            read.push(r);
        }
        assert_eq!(read, ranks, "every dup once, in order, and none of the next key");

        for from in [0, 1, 299, 300, 1_234, 1_999] {
            // At a dup, and at a rank between it and the one before (balances are unique).
            let between = Rank { balance: ranks[from].balance, holder: Address::ZERO };
            for seek in [ranks[from], between] {
                let cursor = txn.cursor::<OtsTokenHolderRanks>().expect("cursor");
                let (mut run, at) = DupRun::at_or_after(cursor, &token, &seek).expect("at").expect("there");
                assert_eq!(at, ranks[from], "from dup {from}");
                let mut read = Vec::new();
                while let Some(r) = run.next_dup().expect("next") {
                    read.push(r);
                }
                assert_eq!(read, ranks[from + 1..], "from dup {from}");
            }
        }
        let cursor = txn.cursor::<OtsTokenHolderRanks>().expect("cursor");
        let past = Rank { balance: U256::ZERO, holder: Address::ZERO };
        assert!(DupRun::at_or_after(cursor, &token, &past).expect("at").is_none(), "past the last dup");
        let cursor = txn.cursor::<OtsTokenHolderRanks>().expect("cursor");
        let (mut run, only) = DupRun::first(cursor, &other).expect("first").expect("there");
        assert_eq!(only, rank(1));
        assert!(run.next_dup().expect("next").is_none(), "a key of one dup");
        let cursor = txn.cursor::<OtsTokenHolderRanks>().expect("cursor");
        assert!(DupRun::first(cursor, &Address::ZERO).expect("first").is_none(), "no such key");
        // A key of a few dups keeps them on a page of its own inside its leaf node.
        for from in 0..small.len() {
            let cursor = txn.cursor::<OtsTokenHolderRanks>().expect("cursor");
            let (mut run, _) = DupRun::at_or_after(cursor, &few, &small[from]).expect("at").expect("there");
            let mut read = Vec::new();
            while let Some(r) = run.next_dup().expect("next") {
                read.push(r);
            }
            assert_eq!(read, small[from + 1..], "a few dups, from dup {from}");
        }

        // `dups` reads a DupFixed key's pages the same way, committed or dirty.
        let mut cursor = txn.cursor::<OtsTokenHolderRanks>().expect("cursor");
        assert_eq!(cursor.dups(&token).expect("dups"), ranks);
        assert_eq!(cursor.dups(&other).expect("dups"), [rank(1)]);
        assert_eq!(cursor.dups(&few).expect("dups"), small);
        assert!(cursor.dups(&Address::ZERO).expect("dups").is_empty());
    }
}
