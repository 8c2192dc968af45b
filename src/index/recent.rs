//! The reorg window's rows kept apart (`OtsRecentIds`, `OtsRecentSent`), keyed by block: what
//! blocks still in the window added to the address lists and the appearance lists, in small
//! tables instead of on the pages of the large ones.
//!
//! A block's rows are appended when it is written, moved into the large tables in one piece when
//! it leaves the window, and deleted in one piece when it is unwound: each touches a few
//! neighbouring pages, not a page of each large table per address (docs/architecture.md,
//! "Invariants"). A list reads as its table's ids followed by these, all of which are larger;
//! finding an address's window rows takes one seek per window block. Each list is named by the
//! undo journal's row kind for it.

use std::collections::BTreeMap;

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use crate::db::{
    codec::{BlockNumber, IndexKind, RecentId, RecentSent, ValueCodec},
    tables::{OtsRecentIds, OtsRecentSent},
    DbResult, Txn, WriteTxn,
};

/// Window ids by (list, address), each list ascending.
pub type IdsByList = BTreeMap<(IndexKind, Address), Vec<u64>>;

/// Window transactions by sender, as (TxId, nonce) ascending.
pub type SentBySender = BTreeMap<Address, Vec<(u64, u64)>>;

/// The blocks the window holds rows of in `T`, ascending.
fn blocks<K: TransactionKind, T>(txn: &Txn<K>) -> DbResult<Vec<u64>>
where
    T: crate::db::tables::DupTable + crate::db::tables::Table<Key = BlockNumber>,
{
    let mut out = Vec::new();
    let mut cursor = txn.cursor::<T>()?;
    let mut next = cursor.first()?;
    while let Some((BlockNumber(block), _)) = next {
        out.push(block);
        next = cursor.next_key()?;
    }
    Ok(out)
}

/// The window's ids of `address` in list `kind`, ascending.
pub fn ids<K: TransactionKind>(txn: &Txn<K>, kind: IndexKind, address: &Address) -> DbResult<Vec<u64>> {
    // A DupFixed table seeks with a whole value: the least dup of the list.
    let least = RecentId { kind, address: *address, id: 0 }.encode_value();
    let mut out = Vec::new();
    let mut cursor = txn.cursor::<OtsRecentIds>()?;
    for block in blocks::<K, OtsRecentIds>(txn)? {
        let mut next = cursor.seek_dup_at_least(&BlockNumber(block), &least)?;
        while let Some(row) = next.filter(|r| r.kind == kind && r.address == *address) {
            out.push(row.id);
            next = cursor.next_dup()?;
        }
    }
    Ok(out)
}

/// How many ids the window holds for `address` in list `kind`.
pub fn count<K: TransactionKind>(txn: &Txn<K>, kind: IndexKind, address: &Address) -> DbResult<u64> {
    Ok(ids(txn, kind, address)?.len() as u64)
}

/// The window's transactions `sender` sent, as (TxId, nonce), ascending.
pub fn sent<K: TransactionKind>(txn: &Txn<K>, sender: &Address) -> DbResult<Vec<(u64, u64)>> {
    let least = RecentSent { sender: *sender, tx: 0, nonce: 0 }.encode_value();
    let mut out = Vec::new();
    let mut cursor = txn.cursor::<OtsRecentSent>()?;
    for block in blocks::<K, OtsRecentSent>(txn)? {
        let mut next = cursor.seek_dup_at_least(&BlockNumber(block), &least)?;
        while let Some(row) = next.filter(|r| r.sender == *sender) {
            out.push((row.tx, row.nonce));
            next = cursor.next_dup()?;
        }
    }
    Ok(out)
}

/// How many transactions the window holds that `sender` sent.
pub fn sent_count<K: TransactionKind>(txn: &Txn<K>, sender: &Address) -> DbResult<u64> {
    Ok(sent(txn, sender)?.len() as u64)
}

/// Rows for the window, gathered by block and written at once.
#[derive(Debug, Default)]
pub struct NewRows {
    ids: BTreeMap<u64, Vec<RecentId>>,
    sent: BTreeMap<u64, Vec<RecentSent>>,
}

impl NewRows {
    /// Block `block` added `id` to `address`'s list `kind`.
    pub fn id(&mut self, block: u64, kind: IndexKind, address: Address, id: u64) {
        self.ids.entry(block).or_default().push(RecentId { kind, address, id });
    }

    /// Block `block` holds transaction `tx` that `sender` sent with `nonce`.
    pub fn sent(&mut self, block: u64, sender: Address, tx: u64, nonce: u64) {
        self.sent.entry(block).or_default().push(RecentSent { sender, tx, nonce });
    }

    /// Writes every row, in order. One by one: another family may already have written rows of
    /// the same blocks, and these sort among them.
    pub fn write(self, txn: &WriteTxn) -> DbResult<()> {
        let mut ids = txn.cursor::<OtsRecentIds>()?;
        for (block, mut rows) in self.ids {
            rows.sort_unstable();
            for row in &rows {
                ids.put(&BlockNumber(block), row)?;
            }
        }
        let mut sent = txn.cursor::<OtsRecentSent>()?;
        for (block, mut rows) in self.sent {
            rows.sort_unstable();
            for row in &rows {
                sent.put(&BlockNumber(block), row)?;
            }
        }
        Ok(())
    }
}

/// What blocks leaving the window held, taken out of it.
#[derive(Debug, Default)]
pub struct Leaving {
    /// Ids by list and address.
    pub ids: IdsByList,
    /// Sent transactions by sender.
    pub sent: SentBySender,
}

impl Leaving {
    /// Takes `kind`'s lists out, addresses ascending.
    pub fn take_list(&mut self, kind: IndexKind) -> Vec<(Address, Vec<u64>)> {
        let keys: Vec<(IndexKind, Address)> = self.ids.keys().filter(|(k, _)| *k == kind).copied().collect();
        keys.into_iter().filter_map(|key| self.ids.remove(&key).map(|ids| (key.1, ids))).collect()
    }
}

/// Takes every row of the window's blocks below `keep_from` out of it: those blocks leave it.
pub fn take_below(txn: &WriteTxn, keep_from: u64) -> DbResult<Leaving> {
    let mut leaving = Leaving::default();
    let mut cursor = txn.cursor::<OtsRecentIds>()?;
    while let Some((BlockNumber(block), _)) = cursor.first()?.filter(|(b, _)| b.0 < keep_from) {
        for row in cursor.dups(&BlockNumber(block))? {
            leaving.ids.entry((row.kind, row.address)).or_default().push(row.id);
        }
        txn.delete::<OtsRecentIds>(&BlockNumber(block), None)?;
    }
    let mut cursor = txn.cursor::<OtsRecentSent>()?;
    while let Some((BlockNumber(block), _)) = cursor.first()?.filter(|(b, _)| b.0 < keep_from) {
        for row in cursor.dups(&BlockNumber(block))? {
            leaving.sent.entry(row.sender).or_default().push((row.tx, row.nonce));
        }
        txn.delete::<OtsRecentSent>(&BlockNumber(block), None)?;
    }
    Ok(leaving)
}

/// Deletes the rows of blocks above `to`: they are unwound.
pub fn unwind(txn: &WriteTxn, to: u64) -> DbResult<()> {
    while let Some((BlockNumber(block), _)) = txn.cursor::<OtsRecentIds>()?.last()?.filter(|(b, _)| b.0 > to)
    {
        txn.delete::<OtsRecentIds>(&BlockNumber(block), None)?;
    }
    while let Some((BlockNumber(block), _)) = txn.cursor::<OtsRecentSent>()?.last()?.filter(|(b, _)| b.0 > to)
    {
        txn.delete::<OtsRecentSent>(&BlockNumber(block), None)?;
    }
    Ok(())
}

/// Every row the window holds (for `check`): ids by list and address, sent transactions by
/// sender, and the blocks they belong to.
pub fn all<K: TransactionKind>(txn: &Txn<K>) -> DbResult<(Leaving, Vec<u64>)> {
    let mut rows = Leaving::default();
    let mut blocks = Vec::new();
    let mut cursor = txn.cursor::<OtsRecentIds>()?;
    let mut next = cursor.first()?;
    while let Some((BlockNumber(block), row)) = next {
        if blocks.last() != Some(&block) {
            blocks.push(block);
        }
        rows.ids.entry((row.kind, row.address)).or_default().push(row.id);
        next = cursor.next_entry()?;
    }
    let mut cursor = txn.cursor::<OtsRecentSent>()?;
    let mut next = cursor.first()?;
    while let Some((BlockNumber(block), row)) = next {
        if !blocks.contains(&block) {
            blocks.push(block);
        }
        rows.sent.entry(row.sender).or_default().push((row.tx, row.nonce));
        next = cursor.next_entry()?;
    }
    blocks.sort_unstable();
    Ok((rows, blocks))
}
