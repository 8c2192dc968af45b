//! One packed TxId list (`OtsAppearances`, `OtsSentTxs`): appending, truncating, counting and
//! reading it in either direction (docs/format.md, "Appearances").
//!
//! Chunks are packed greedily from each chunk's first id, and an append re-packs only the last
//! chunk, so the chunks of a list depend on its ids alone, not on where batches fell.

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use crate::{
    db::{
        codec::{pack_chunks, ListKey, PackedIds, Unpacked},
        tables::Table,
        DbError, DbResult, TableCursor, Txn, WriteTxn,
    },
    txid::TxId,
};

/// A packed list table: `address ‖ largest TxId of the chunk` → packed chunk.
pub trait PackedList: Table<Key = ListKey, Value = PackedIds> {}
impl<T: Table<Key = ListKey, Value = PackedIds>> PackedList for T {}

fn corrupt<T: Table>(key: &ListKey, reason: String) -> DbError {
    let mut bytes = key.address.to_vec();
    bytes.extend_from_slice(&key.last.to_be_bytes());
    DbError::Corrupt { table: T::ID.name(), key: alloy_primitives::hex::encode(bytes), reason }
}

/// Unpacks the chunk at `key`, naming it if its bytes are damaged.
pub(super) fn unpack<T: PackedList>(key: &ListKey, packed: &PackedIds) -> DbResult<Unpacked> {
    packed.unpack(key.last).map_err(|e| corrupt::<T>(key, e.to_string()))
}

/// `address`'s last chunk, if it has any.
fn last_chunk<T: PackedList, K: TransactionKind>(
    cursor: &mut TableCursor<'_, K, T>,
    address: &Address,
) -> DbResult<Option<(ListKey, PackedIds)>> {
    let after = cursor.seek(&ListKey { address: *address, last: u64::MAX })?;
    let entry = match after {
        Some((key, value)) if key.address == *address => Some((key, value)),
        Some(_) => cursor.prev_entry()?,
        None => cursor.last()?,
    };
    Ok(entry.filter(|(key, _)| key.address == *address))
}

/// Appends `ids` (ascending, all above the list's last id) to `address`'s list; returns how
/// many ids the list held before.
pub fn append<T: PackedList>(txn: &WriteTxn, address: &Address, ids: &[u64]) -> DbResult<u64> {
    let Some(&first_new) = ids.first() else { return Ok(0) };
    let mut cursor = txn.cursor::<T>()?;
    let (base, mut all) = match last_chunk(&mut cursor, address)? {
        Some((key, packed)) => {
            if key.last >= first_new {
                return Err(corrupt::<T>(
                    &key,
                    format!("appending TxId {} at or below the list's last one", TxId(first_new)),
                ));
            }
            let Unpacked { base, ids } = unpack::<T>(&key, &packed)?;
            cursor.delete(&key)?;
            (base, ids)
        }
        None => (0, Vec::new()),
    };
    let before = base + all.len() as u64;
    all.extend_from_slice(ids);
    for (last, packed) in pack_chunks(base, &all) {
        cursor.put(&ListKey { address: *address, last }, &packed)?;
    }
    Ok(before)
}

/// Cuts `address`'s list back to its ids below `cut`.
pub fn truncate<T: PackedList>(txn: &WriteTxn, address: &Address, cut: u64) -> DbResult<()> {
    let mut cursor = txn.cursor::<T>()?;
    let mut doomed = Vec::new();
    let mut next = cursor.seek(&ListKey { address: *address, last: cut })?;
    while let Some((key, packed)) = next.filter(|(k, _)| k.address == *address) {
        doomed.push((key, packed));
        next = cursor.next_entry()?;
    }
    let Some((first_key, first_packed)) = doomed.first() else { return Ok(()) };
    let kept = unpack::<T>(first_key, first_packed)?;
    for (key, _) in &doomed {
        cursor.delete(key)?;
    }
    let below: Vec<u64> = kept.ids.into_iter().filter(|&id| id < cut).collect();
    for (last, packed) in pack_chunks(kept.base, &below) {
        cursor.put(&ListKey { address: *address, last }, &packed)?;
    }
    Ok(())
}

/// Number of ids in `address`'s list.
pub fn count<T: PackedList, K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<u64> {
    let mut cursor = txn.cursor::<T>()?;
    match last_chunk(&mut cursor, address)? {
        Some((key, packed)) => {
            let (base, n) = packed.counts().map_err(|e| corrupt::<T>(&key, e.to_string()))?;
            Ok(base + n)
        }
        None => Ok(0),
    }
}

/// The `position`-th id (0 first) of `address`'s list.
pub fn nth<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    position: u64,
) -> DbResult<Option<u64>> {
    let mut cursor = txn.cursor::<T>()?;
    let mut next = cursor.seek(&ListKey { address: *address, last: 0 })?;
    while let Some((key, packed)) = next.filter(|(k, _)| k.address == *address) {
        let (base, n) = packed.counts().map_err(|e| corrupt::<T>(&key, e.to_string()))?;
        if position < base + n {
            let chunk = unpack::<T>(&key, &packed)?;
            return Ok(position.checked_sub(base).and_then(|i| chunk.ids.get(i as usize).copied()));
        }
        next = cursor.next_entry()?;
    }
    Ok(None)
}

/// A page of ids in whole blocks, and whether the list goes on past it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockPage {
    /// Ids in the order read.
    pub ids: Vec<u64>,
    /// Whether ids in further blocks exist in the direction read.
    pub more: bool,
}

/// Adds `id` unless the page already holds `want` ids and `id` starts another block; returns
/// false once the page is full.
fn take(page: &mut BlockPage, id: u64, want: usize) -> bool {
    let full = page.ids.len() >= want;
    if full && page.ids.last().is_some_and(|&l| TxId(l).block() != TxId(id).block()) {
        page.more = true;
        return false;
    }
    page.ids.push(id);
    true
}

/// `address`'s ids below `cut`, newest first: at least `want` when there are, and then the
/// rest of the last block's.
pub fn before<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    cut: u64,
    want: usize,
) -> DbResult<BlockPage> {
    let mut page = BlockPage::default();
    let mut cursor = txn.cursor::<T>()?;
    let found = cursor.seek(&ListKey { address: *address, last: cut })?;
    let mut entry = match found {
        Some((key, value)) if key.address == *address => Some((key, value)),
        Some(_) => cursor.prev_entry()?,
        None => cursor.last()?,
    };
    while let Some((key, packed)) = entry.filter(|(k, _)| k.address == *address) {
        for &id in unpack::<T>(&key, &packed)?.ids.iter().rev().filter(|&&id| id < cut) {
            if !take(&mut page, id, want) {
                return Ok(page);
            }
        }
        entry = cursor.prev_entry()?;
    }
    Ok(page)
}

/// `address`'s ids at or above `from`, oldest first: at least `want` when there are, and then
/// the rest of the last block's.
pub fn after<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    from: u64,
    want: usize,
) -> DbResult<BlockPage> {
    let mut page = BlockPage::default();
    let mut cursor = txn.cursor::<T>()?;
    let mut entry = cursor.seek(&ListKey { address: *address, last: from })?;
    while let Some((key, packed)) = entry.filter(|(k, _)| k.address == *address) {
        for &id in unpack::<T>(&key, &packed)?.ids.iter().filter(|&&id| id >= from) {
            if !take(&mut page, id, want) {
                return Ok(page);
            }
        }
        entry = cursor.next_entry()?;
    }
    Ok(page)
}

/// Checks every list of table `T`: chunks decode, each key is its chunk's last id, counts run
/// on from chunk to chunk, ids grow, none at or above `below`. Returns (addresses, ids).
pub fn check<T: PackedList, K: TransactionKind>(txn: &Txn<K>, below: u64) -> DbResult<(u64, u64)> {
    let (mut addresses, mut total) = (0, 0);
    let mut cursor = txn.walking_cursor::<T>()?;
    let mut next = cursor.first()?;
    let mut current: Option<(Address, u64, u64)> = None; // address, ids so far, last id
    while let Some((key, packed)) = next {
        let chunk = unpack::<T>(&key, &packed)?;
        let (seen, last) = match current {
            Some((a, seen, last)) if a == key.address => (seen, Some(last)),
            _ => {
                addresses += 1;
                (0, None)
            }
        };
        if chunk.base != seen {
            return Err(corrupt::<T>(
                &key,
                format!("counts {} earlier ids, the list has {seen}", chunk.base),
            ));
        }
        if last.is_some_and(|l| chunk.ids[0] <= l) {
            return Err(corrupt::<T>(&key, "ids do not grow from the chunk before".into()));
        }
        if key.last >= below {
            return Err(corrupt::<T>(&key, format!("holds TxId {}, beyond the indexed tip", TxId(key.last))));
        }
        total += chunk.ids.len() as u64;
        current = Some((key.address, seen + chunk.ids.len() as u64, key.last));
        next = cursor.next_entry()?;
    }
    Ok((addresses, total))
}
