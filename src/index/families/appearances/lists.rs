//! One packed TxId list (`OtsAppearances`) with its sent marks: appending, counting all ids or
//! the sent ones, and reading it in either direction (docs/format.md, "Appearances").
//!
//! Chunks are packed greedily from each chunk's first id, and an append re-packs only the last
//! chunk, so the chunks of a list depend on its ids and marks alone, not on where batches fell.

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use crate::{
    db::{
        codec::{pack_chunks, ChunkCounts, ListKey, PackedIds, Unpacked},
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

/// How many ids a list holds, and how many of them the address sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListCounts {
    /// Every id.
    pub all: u64,
    /// The ids the address sent.
    pub sent: u64,
}

/// Appends `ids` (ascending, all above the list's last id) with their sent marks (same
/// positions) to `address`'s list; returns what the list held before.
pub fn append<T: PackedList>(
    txn: &WriteTxn,
    address: &Address,
    ids: &[u64],
    sent: &[bool],
) -> DbResult<ListCounts> {
    let Some(&first_new) = ids.first() else { return count::<T, _>(txn, address) };
    let mut cursor = txn.cursor::<T>()?;
    let (base, sent_base, mut all, mut marks) = match last_chunk(&mut cursor, address)? {
        Some((key, packed)) => {
            if key.last >= first_new {
                return Err(corrupt::<T>(
                    &key,
                    format!("appending TxId {} at or below the list's last one", TxId(first_new)),
                ));
            }
            let Unpacked { base, sent_base, ids, sent } = unpack::<T>(&key, &packed)?;
            cursor.delete(&key)?;
            (base, sent_base, ids, sent)
        }
        None => (0, 0, Vec::new(), Vec::new()),
    };
    let before = ListCounts {
        all: base + all.len() as u64,
        sent: sent_base + marks.iter().filter(|&&s| s).count() as u64,
    };
    all.extend_from_slice(ids);
    marks.extend_from_slice(sent);
    for (last, packed) in pack_chunks(base, sent_base, &all, &marks) {
        cursor.put(&ListKey { address: *address, last }, &packed)?;
    }
    Ok(before)
}

fn counts_of<T: PackedList>(key: &ListKey, packed: &PackedIds) -> DbResult<ChunkCounts> {
    packed.counts().map_err(|e| corrupt::<T>(key, e.to_string()))
}

/// Number of ids in `address`'s list, and of those it sent.
pub fn count<T: PackedList, K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<ListCounts> {
    let mut cursor = txn.cursor::<T>()?;
    match last_chunk(&mut cursor, address)? {
        Some((key, packed)) => {
            let c = counts_of::<T>(&key, &packed)?;
            Ok(ListCounts { all: c.base + c.n, sent: c.sent_base + c.sent })
        }
        None => Ok(ListCounts::default()),
    }
}

/// The `position`-th id (0 first) of `address`'s list, or with `sent` of the ids it sent.
pub fn nth<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    position: u64,
    sent: bool,
) -> DbResult<Option<u64>> {
    let mut cursor = txn.cursor::<T>()?;
    let mut next = cursor.seek(&ListKey { address: *address, last: 0 })?;
    while let Some((key, packed)) = next.filter(|(k, _)| k.address == *address) {
        let c = counts_of::<T>(&key, &packed)?;
        let (base, n) = if sent { (c.sent_base, c.sent) } else { (c.base, c.n) };
        if position < base + n {
            let chunk = unpack::<T>(&key, &packed)?;
            let Some(i) = position.checked_sub(base) else { return Ok(None) };
            return Ok(if sent {
                chunk.sent_ids().nth(i as usize)
            } else {
                chunk.ids.get(i as usize).copied()
            });
        }
        next = cursor.next_entry()?;
    }
    Ok(None)
}

/// The first and the last id of `address`'s list, if it has any: two chunk reads however long
/// the list is (a chunk's key is its last id).
pub fn ends<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
) -> DbResult<Option<(u64, u64)>> {
    let mut cursor = txn.cursor::<T>()?;
    let Some((key, packed)) =
        cursor.seek(&ListKey { address: *address, last: 0 })?.filter(|(k, _)| k.address == *address)
    else {
        return Ok(None);
    };
    let Some(&first) = unpack::<T>(&key, &packed)?.ids.first() else {
        return Err(corrupt::<T>(&key, "an empty chunk".into()));
    };
    let last = last_chunk(&mut cursor, address)?.map_or(key.last, |(key, _)| key.last);
    Ok(Some((first, last)))
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
pub(super) fn take(page: &mut BlockPage, id: u64, want: usize) -> bool {
    let full = page.ids.len() >= want;
    if full && page.ids.last().is_some_and(|&l| TxId(l).block() != TxId(id).block()) {
        page.more = true;
        return false;
    }
    page.ids.push(id);
    true
}

/// Adds `address`'s ids below `cut` to `page`, newest first: until it holds at least `want`
/// when there are, and then the rest of the last block's (it is full when `more` is set).
pub fn before<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    cut: u64,
    want: usize,
    page: &mut BlockPage,
) -> DbResult<()> {
    let mut cursor = txn.cursor::<T>()?;
    let found = cursor.seek(&ListKey { address: *address, last: cut })?;
    let mut entry = match found {
        Some((key, value)) if key.address == *address => Some((key, value)),
        Some(_) => cursor.prev_entry()?,
        None => cursor.last()?,
    };
    while let Some((key, packed)) = entry.filter(|(k, _)| k.address == *address) {
        for &id in unpack::<T>(&key, &packed)?.ids.iter().rev().filter(|&&id| id < cut) {
            if !take(page, id, want) {
                return Ok(());
            }
        }
        entry = cursor.prev_entry()?;
    }
    Ok(())
}

/// Adds `address`'s ids at or above `from` to `page`, oldest first: until it holds at least
/// `want` when there are, and then the rest of the last block's (it is full when `more` is set).
pub fn after<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    from: u64,
    want: usize,
    page: &mut BlockPage,
) -> DbResult<()> {
    let mut cursor = txn.cursor::<T>()?;
    let mut entry = cursor.seek(&ListKey { address: *address, last: from })?;
    while let Some((key, packed)) = entry.filter(|(k, _)| k.address == *address) {
        for &id in unpack::<T>(&key, &packed)?.ids.iter().filter(|&&id| id >= from) {
            if !take(page, id, want) {
                return Ok(());
            }
        }
        entry = cursor.next_entry()?;
    }
    Ok(())
}

/// Checks every list of table `T`: chunks decode, each key is its chunk's last id, counts (of
/// all ids and of sent ones) run on from chunk to chunk, ids grow, none at or above `below`.
/// Returns (addresses, ids).
pub fn check<T: PackedList, K: TransactionKind>(txn: &Txn<K>, below: u64) -> DbResult<(u64, u64)> {
    let (mut addresses, mut total) = (0, 0);
    let mut cursor = txn.walking_cursor::<T>()?;
    let mut next = cursor.first()?;
    // Address, ids so far, sent ids so far, last id.
    let mut current: Option<(Address, ListCounts, u64)> = None;
    while let Some((key, packed)) = next {
        let chunk = unpack::<T>(&key, &packed)?;
        let (seen, last) = match current {
            Some((a, seen, last)) if a == key.address => (seen, Some(last)),
            _ => {
                addresses += 1;
                (ListCounts::default(), None)
            }
        };
        if chunk.base != seen.all || chunk.sent_base != seen.sent {
            return Err(corrupt::<T>(
                &key,
                format!(
                    "counts {} earlier ids ({} sent), the list has {} ({} sent)",
                    chunk.base, chunk.sent_base, seen.all, seen.sent
                ),
            ));
        }
        if last.is_some_and(|l| chunk.ids[0] <= l) {
            return Err(corrupt::<T>(&key, "ids do not grow from the chunk before".into()));
        }
        if key.last >= below {
            return Err(corrupt::<T>(&key, format!("holds TxId {}, beyond the indexed tip", TxId(key.last))));
        }
        total += chunk.ids.len() as u64;
        let now = ListCounts {
            all: seen.all + chunk.ids.len() as u64,
            sent: seen.sent + chunk.sent_ids().count() as u64,
        };
        current = Some((key.address, now, key.last));
        next = cursor.next_entry()?;
    }
    Ok((addresses, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{tables::OtsAppearances, AccessMode, Db};

    fn id(block: u64, index: u64) -> u64 {
        TxId::new(block, index).expect("fits").0
    }

    /// A list long enough for many chunks, whose sent marks come in runs of both kinds and
    /// mixed, appended in uneven batches: counts, the k-th id and the k-th sent id always equal a
    /// plain vector's, and the chunks equal a list written in one append.
    #[test]
    fn sent_marks_survive_appends_in_any_batches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let (a, b) = (Address::repeat_byte(0xa1), Address::repeat_byte(0xb2));
        // Three ids a block, then a gap of blocks: both kinds of gap occur.
        let ids: Vec<u64> = (0..3_000u64).map(|i| id(10 + i / 3 * 7, (i % 3) * 50 + (i * 37) % 40)).collect();
        let sent: Vec<bool> =
            (0..3_000u64).map(|i| (i / 400) % 3 == 1 || ((i / 400) % 3 == 2 && i % 3 == 0)).collect();
        let txn = db.begin_write().expect("write");
        let mut at = 0;
        for step in [1, 7, 300, 2, 900, 1_790] {
            let before = append::<OtsAppearances>(&txn, &a, &ids[at..at + step], &sent[at..at + step])
                .expect("append");
            let sent_before = sent[..at].iter().filter(|&&s| s).count() as u64;
            assert_eq!(before, ListCounts { all: at as u64, sent: sent_before });
            at += step;
        }
        assert_eq!(at, ids.len());
        append::<OtsAppearances>(&txn, &b, &ids, &sent).expect("append at once");
        let chunks = |who: &Address| -> Vec<(u64, Vec<u8>)> {
            let mut cursor = txn.cursor::<OtsAppearances>().expect("cursor");
            let mut out = Vec::new();
            let mut next = cursor.seek(&ListKey { address: *who, last: 0 }).expect("seek");
            while let Some((key, packed)) = next.filter(|(k, _)| k.address == *who) {
                out.push((key.last, packed.0));
                next = cursor.next_entry().expect("next");
            }
            out
        };
        assert!(chunks(&a).len() > 3, "several chunks");
        assert_eq!(chunks(&a), chunks(&b), "batches do not change the bytes");

        let sent_ids: Vec<u64> = ids.iter().zip(&sent).filter(|(_, &s)| s).map(|(&i, _)| i).collect();
        let model_check = |who: &Address, len: usize| {
            let sent_ids: Vec<u64> =
                sent_ids.iter().copied().filter(|&i| i < ids.get(len).copied().unwrap_or(u64::MAX)).collect();
            assert_eq!(
                count::<OtsAppearances, _>(&txn, who).expect("count"),
                ListCounts { all: len as u64, sent: sent_ids.len() as u64 }
            );
            let first_and_last = ids[..len].first().zip(ids[..len].last()).map(|(&f, &l)| (f, l));
            assert_eq!(ends::<OtsAppearances, _>(&txn, who).expect("ends"), first_and_last);
            for k in (0..len).step_by(97).chain([len.saturating_sub(1), len]) {
                assert_eq!(
                    nth::<OtsAppearances, _>(&txn, who, k as u64, false).expect("nth"),
                    ids[..len].get(k).copied(),
                    "id {k}"
                );
            }
            for k in (0..sent_ids.len()).step_by(61).chain([sent_ids.len().saturating_sub(1), sent_ids.len()])
            {
                assert_eq!(
                    nth::<OtsAppearances, _>(&txn, who, k as u64, true).expect("nth"),
                    sent_ids.get(k).copied(),
                    "sent {k}"
                );
            }
        };
        model_check(&a, ids.len());
        let (c, keep) = (Address::repeat_byte(0xc3), 1_201);
        append::<OtsAppearances>(&txn, &c, &ids[..keep], &sent[..keep]).expect("append a prefix");
        model_check(&c, keep);
        check::<OtsAppearances, _>(&txn, u64::MAX).expect("consistent");
    }
}
