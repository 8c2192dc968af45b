//! The reorg window's rows kept apart (`OtsRecentIds`, `OtsRecentSent`), keyed by block: what
//! blocks still in the window added to the address lists and the appearance lists, in small
//! tables instead of on the pages of the large ones.
//!
//! A block's rows are appended when it is written, moved into the large tables in one piece when
//! it leaves the window, and deleted in one piece when it is unwound: each touches a few pages of
//! small tables, not a page of each large table per address (docs/architecture.md,
//! "Invariants"). The same rows are kept by address too (`OtsRecentIdsByAddress`,
//! `OtsRecentSentBySender`), for reads: a list reads as its table's ids followed by these, all
//! of which are larger, one seek away. Each list is named by the undo journal's row kind for it.

use std::collections::BTreeMap;

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use super::{integrity, window::WindowStart};
use crate::db::{
    codec::{BlockNumber, IndexKind, ListId, RecentId, RecentKey, RecentSent, SentTx},
    tables::{OtsRecentIds, OtsRecentIdsByAddress, OtsRecentSent, OtsRecentSentBySender},
    DbResult, Txn, WriteTxn,
};

/// Window ids by (list, address), each list ascending.
pub type IdsByList = BTreeMap<(IndexKind, Address), Vec<u64>>;

/// Window transactions by sender, as (TxId, nonce) ascending.
pub type SentBySender = BTreeMap<Address, Vec<(u64, u64)>>;

/// The window's ids of `address` in list `kind`, ascending.
pub fn ids<K: TransactionKind>(txn: &Txn<K>, kind: IndexKind, address: &Address) -> DbResult<Vec<u64>> {
    let key = RecentKey { kind, address: *address };
    Ok(txn.cursor::<OtsRecentIdsByAddress>()?.dups(&key)?.into_iter().map(|ListId(id)| id).collect())
}

/// How many ids the window holds for `address` in list `kind`.
pub fn count<K: TransactionKind>(txn: &Txn<K>, kind: IndexKind, address: &Address) -> DbResult<u64> {
    let mut cursor = txn.cursor::<OtsRecentIdsByAddress>()?;
    if cursor.seek_exact(&RecentKey { kind, address: *address })?.is_none() {
        return Ok(0);
    }
    Ok(cursor.dup_count()? as u64)
}

/// The window's transactions `sender` sent, as (TxId, nonce), ascending.
pub fn sent<K: TransactionKind>(txn: &Txn<K>, sender: &Address) -> DbResult<Vec<(u64, u64)>> {
    Ok(txn.cursor::<OtsRecentSentBySender>()?.dups(sender)?.into_iter().map(|s| (s.tx, s.nonce)).collect())
}

/// How many transactions the window holds that `sender` sent.
pub fn sent_count<K: TransactionKind>(txn: &Txn<K>, sender: &Address) -> DbResult<u64> {
    let mut cursor = txn.cursor::<OtsRecentSentBySender>()?;
    if cursor.seek_exact(sender)?.is_none() {
        return Ok(0);
    }
    Ok(cursor.dup_count()? as u64)
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
        let mut by_address = txn.cursor::<OtsRecentIdsByAddress>()?;
        for (block, mut rows) in self.ids {
            rows.sort_unstable();
            for row in &rows {
                ids.put(&BlockNumber(block), row)?;
                by_address.put(&RecentKey { kind: row.kind, address: row.address }, &ListId(row.id))?;
            }
        }
        let mut sent = txn.cursor::<OtsRecentSent>()?;
        let mut by_sender = txn.cursor::<OtsRecentSentBySender>()?;
        for (block, mut rows) in self.sent {
            rows.sort_unstable();
            for row in &rows {
                sent.put(&BlockNumber(block), row)?;
                by_sender.put(&row.sender, &SentTx { tx: row.tx, nonce: row.nonce })?;
            }
        }
        Ok(())
    }
}

/// Rows of the window's own tables, by list and address and by sender: what blocks leaving it
/// held ([`take_leaving`]), or everything it holds ([`all`], for `check`).
#[derive(Debug, Default)]
pub struct WindowRows {
    /// Ids by list and address.
    pub ids: IdsByList,
    /// Sent transactions by sender.
    pub sent: SentBySender,
}

impl WindowRows {
    /// Takes `kind`'s lists out, addresses ascending.
    pub fn take_list(&mut self, kind: IndexKind) -> Vec<(Address, Vec<u64>)> {
        let keys: Vec<(IndexKind, Address)> = self.ids.keys().filter(|(k, _)| *k == kind).copied().collect();
        keys.into_iter().filter_map(|key| self.ids.remove(&key).map(|ids| (key.1, ids))).collect()
    }
}

/// Takes every row of the blocks that leave the window as it starts at `window` out of it.
pub fn take_leaving(txn: &WriteTxn, window: WindowStart) -> DbResult<WindowRows> {
    let mut leaving = WindowRows::default();
    take_blocks(txn, |block| !window.keeps(block), false, Some(&mut leaving))?;
    Ok(leaving)
}

/// Deletes the rows of blocks above `to`: they are unwound.
pub fn unwind(txn: &WriteTxn, to: u64) -> DbResult<()> {
    take_blocks(txn, |block| block > to, true, None)
}

/// Takes out the rows of the blocks at the window's start (or, `from_end`, at its end) that
/// `whose` accepts, from both of each table's orders, into `into` if given. The by-address
/// rows go in key order: an unwind's are the last dups of their keys, and in order the
/// deletes walk the table's pages once (a 64-block unwind of the 21 M chain deletes ~70 k).
fn take_blocks(
    txn: &WriteTxn,
    whose: impl Fn(u64) -> bool,
    from_end: bool,
    mut into: Option<&mut WindowRows>,
) -> DbResult<()> {
    let mut ids = Vec::new();
    let mut cursor = txn.cursor::<OtsRecentIds>()?;
    loop {
        let edge = if from_end { cursor.last()? } else { cursor.first()? };
        let Some((BlockNumber(block), _)) = edge.filter(|(b, _)| whose(b.0)) else { break };
        ids.extend(cursor.dups(&BlockNumber(block))?);
        txn.delete::<OtsRecentIds>(&BlockNumber(block), None)?;
    }
    // Within a key, ids ascend with their blocks: sorted, each list's ids keep their order.
    ids.sort_unstable_by_key(|row| (row.kind, row.address, row.id));
    let mut by_address = txn.cursor::<OtsRecentIdsByAddress>()?;
    for row in ids {
        by_address.delete_dup(&RecentKey { kind: row.kind, address: row.address }, &ListId(row.id))?;
        if let Some(into) = into.as_deref_mut() {
            into.ids.entry((row.kind, row.address)).or_default().push(row.id);
        }
    }
    let mut sent = Vec::new();
    let mut cursor = txn.cursor::<OtsRecentSent>()?;
    loop {
        let edge = if from_end { cursor.last()? } else { cursor.first()? };
        let Some((BlockNumber(block), _)) = edge.filter(|(b, _)| whose(b.0)) else { break };
        sent.extend(cursor.dups(&BlockNumber(block))?);
        txn.delete::<OtsRecentSent>(&BlockNumber(block), None)?;
    }
    sent.sort_unstable_by_key(|row| (row.sender, row.tx));
    let mut by_sender = txn.cursor::<OtsRecentSentBySender>()?;
    for row in sent {
        by_sender.delete_dup(&row.sender, &SentTx { tx: row.tx, nonce: row.nonce })?;
        if let Some(into) = into.as_deref_mut() {
            into.sent.entry(row.sender).or_default().push((row.tx, row.nonce));
        }
    }
    Ok(())
}

/// Deletes every window row of list `kind` (an index no longer kept), from both orders.
pub fn drop_list(txn: &WriteTxn, kind: IndexKind) -> DbResult<()> {
    let mut rows = Vec::new();
    let mut cursor = txn.cursor::<OtsRecentIds>()?;
    let mut next = cursor.first()?;
    while let Some((block, row)) = next {
        if row.kind == kind {
            rows.push((block, row));
        }
        next = cursor.next_entry()?;
    }
    for (block, row) in rows {
        txn.delete::<OtsRecentIds>(&block, Some(&row))?;
        txn.delete::<OtsRecentIdsByAddress>(
            &RecentKey { kind, address: row.address },
            Some(&ListId(row.id)),
        )?;
    }
    Ok(())
}

/// Every row the window holds (for `check`): ids by list and address, sent transactions by
/// sender, and the blocks they belong to.
pub fn all<K: TransactionKind>(txn: &Txn<K>) -> DbResult<(WindowRows, Vec<u64>)> {
    let mut rows = WindowRows::default();
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
    by_address_agrees(txn, &rows)?;
    Ok((rows, blocks))
}

/// The by-address tables hold exactly the rows of the by-block ones (`rows`).
fn by_address_agrees<K: TransactionKind>(txn: &Txn<K>, rows: &WindowRows) -> DbResult<()> {
    let mut ids = IdsByList::new();
    let mut cursor = txn.cursor::<OtsRecentIdsByAddress>()?;
    let mut next = cursor.first()?;
    while let Some((RecentKey { kind, address }, ListId(id))) = next {
        ids.entry((kind, address)).or_default().push(id);
        next = cursor.next_entry()?;
    }
    let mut sent = SentBySender::new();
    let mut cursor = txn.cursor::<OtsRecentSentBySender>()?;
    let mut next = cursor.first()?;
    while let Some((sender, SentTx { tx, nonce })) = next {
        sent.entry(sender).or_default().push((tx, nonce));
        next = cursor.next_entry()?;
    }
    // The by-block rows come in block order, so each list's ids ascend only if blocks' do.
    if ids != rows.ids {
        return Err(integrity::broken::<OtsRecentIdsByAddress>(&[], "differs from OtsRecentIds".into()));
    }
    if sent != rows.sent {
        return Err(integrity::broken::<OtsRecentSentBySender>(&[], "differs from OtsRecentSent".into()));
    }
    Ok(())
}
