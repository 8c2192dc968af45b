//! One packed TxId list (`OtsAppearances`) with its marks of the address's role in each id:
//! appending, counting all ids, the sent ones or the listed ones (sent or received), and reading
//! it in either direction (docs/format.md, "Appearances").
//!
//! Chunks are packed greedily from each chunk's first id, and an append re-packs only the last
//! chunk, so the chunks of a list depend on its ids and marks alone, not on where batches fell.

use alloy_primitives::Address;
use signet_libmdbx::tx::TransactionKind;

use crate::{
    db::{
        codec::{pack_chunks, ChunkCounts, KeyCodec, ListKey, PackedIds, Role, StagedChunkKey, Unpacked},
        tables::Table,
        DbError, DbResult, TableCursor, Txn, WriteTxn,
    },
    index::rewrite::Rewrite,
    txid::TxId,
};

/// Where one list lies in its table: the address, and in a table of staged segments the
/// segment (0 in the tables keyed by address alone). Ordered as the tables' keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    /// The segment (a stage's newest block); 0 outside the staged segments.
    pub segment: u64,
    /// The list's address.
    pub address: Address,
}

impl From<&Address> for Place {
    fn from(address: &Address) -> Self {
        Self { segment: 0, address: *address }
    }
}

/// The key of a packed list's chunk: its list's place and the chunk's largest TxId.
pub trait PlacedKey: KeyCodec + Copy {
    /// The key of the chunk of the list at `place` whose largest id is `last`.
    fn at(place: Place, last: u64) -> Self;
    /// The list it belongs to.
    fn place(&self) -> Place;
    /// The chunk's largest id.
    fn last(&self) -> u64;
}

impl PlacedKey for ListKey {
    fn at(place: Place, last: u64) -> Self {
        Self { address: place.address, last }
    }
    fn place(&self) -> Place {
        Place::from(&self.address)
    }
    fn last(&self) -> u64 {
        self.last
    }
}

impl PlacedKey for StagedChunkKey {
    fn at(place: Place, last: u64) -> Self {
        Self { segment: place.segment, address: place.address, chunk: last }
    }
    fn place(&self) -> Place {
        Place { segment: self.segment, address: self.address }
    }
    fn last(&self) -> u64 {
        self.chunk
    }
}

/// A packed list table: `[segment ‖] address ‖ largest TxId of the chunk` → packed chunk.
pub trait PackedList: Table<Key: PlacedKey, Value = PackedIds> {}
impl<T: Table<Key: PlacedKey, Value = PackedIds>> PackedList for T {}

fn corrupt<T: PackedList>(key: &T::Key, reason: String) -> DbError {
    let bytes = key.encode_key();
    DbError::Corrupt { table: T::ID.name(), key: alloy_primitives::hex::encode(bytes.as_ref()), reason }
}

/// Unpacks the chunk at `key`, naming it if its bytes are damaged.
pub(super) fn unpack<T: PackedList>(key: &T::Key, packed: &PackedIds) -> DbResult<Unpacked> {
    packed.unpack(key.last()).map_err(|e| corrupt::<T>(key, e.to_string()))
}

/// `address`'s last chunk, if it has any.
fn last_chunk<T: PackedList, K: TransactionKind>(
    cursor: &mut TableCursor<'_, K, T>,
    place: Place,
) -> DbResult<Option<(T::Key, PackedIds)>> {
    let after = cursor.seek(&T::Key::at(place, u64::MAX))?;
    let entry = match after {
        Some((key, value)) if key.place() == place => Some((key, value)),
        Some(_) => cursor.prev_entry()?,
        None => cursor.last()?,
    };
    Ok(entry.filter(|(key, _)| key.place() == place))
}

/// How many ids a list holds, and how many of them the address sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListCounts {
    /// Every id.
    pub all: u64,
    /// The ids the address sent.
    pub sent: u64,
}

/// Appends `ids` (ascending, all above the list's last id) with the address's roles in them
/// (same positions) to `address`'s list; returns what the list held before.
pub fn append<T: PackedList>(
    txn: &WriteTxn,
    address: &Address,
    ids: &[u64],
    roles: &[Role],
) -> DbResult<ListCounts> {
    if ids.is_empty() {
        return count::<T, _>(txn, address);
    }
    let mut cursor = txn.cursor::<T>()?;
    let last = last_chunk(&mut cursor, Place::from(address))?;
    let replaced = last.as_ref().map(|(key, _)| *key);
    let (before, chunks) = extend_last::<T>(last, ids, roles)?;
    if let Some(key) = replaced {
        cursor.delete(&key)?;
    }
    for (last, packed) in chunks {
        cursor.put(&T::Key::at(Place::from(address), last), &packed)?;
    }
    Ok(before)
}

/// As [`append`], for lists appended to in address order while their table is rewritten whole
/// (`index::rewrite`): the old chunks of lists before `address` are copied first, and
/// `address`'s own, but for the last, which is re-packed with `ids`. The writes themselves keep
/// the last chunk open for the address's next piece (`levels::Lists`); this is their one-piece
/// form, which the tests below pin.
#[cfg(test)]
fn append_rewriting<T: PackedList, K: TransactionKind>(
    rewrite: &mut Rewrite<'_, K, T>,
    address: &Address,
    ids: &[u64],
    roles: &[Role],
) -> DbResult<ListCounts> {
    let last = open_rewriting(rewrite, address)?;
    let (before, chunks) = extend_last::<T>(last, ids, roles)?;
    for (last, packed) in chunks {
        rewrite.append(&T::Key::at(Place::from(address), last), &packed)?;
    }
    Ok(before)
}

/// The start of an append to a list of a table being rewritten: copies the old chunks of lists before `address`, and
/// `address`'s own but for the last, which it returns (to be re-packed with what follows).
pub(super) fn open_rewriting<T: PackedList, K: TransactionKind>(
    rewrite: &mut Rewrite<'_, K, T>,
    address: &Address,
) -> DbResult<Option<(T::Key, PackedIds)>> {
    rewrite.copy_while(|key, _| key.place() < Place::from(address))?;
    let mut last = None;
    while let Some(chunk) = rewrite.take_if(|key, _| key.place() == Place::from(address))? {
        if let Some((key, packed)) = last.replace(chunk) {
            rewrite.append(&key, &packed)?;
        }
    }
    Ok(last)
}

/// A list's last chunk (if it has one) with `ids` and their roles added, packed again; and what
/// the list held before.
pub(super) fn extend_last<T: PackedList>(
    last: Option<(T::Key, PackedIds)>,
    ids: &[u64],
    roles: &[Role],
) -> DbResult<(ListCounts, Vec<(u64, PackedIds)>)> {
    let first_new = ids.first().copied().unwrap_or(u64::MAX);
    let (base, sent_base, mut all, mut marks) = match last {
        Some((key, packed)) => {
            if key.last() >= first_new {
                return Err(corrupt::<T>(
                    &key,
                    format!("appending TxId {} at or below the list's last one", TxId(first_new)),
                ));
            }
            let Unpacked { base, sent_base, ids, roles } = unpack::<T>(&key, &packed)?;
            (base, sent_base, ids, roles)
        }
        None => (0, 0, Vec::new(), Vec::new()),
    };
    let before = ListCounts {
        all: base + all.len() as u64,
        sent: sent_base + marks.iter().filter(|&&r| r == Role::Sent).count() as u64,
    };
    all.extend_from_slice(ids);
    marks.extend_from_slice(roles);
    Ok((before, pack_chunks(base, sent_base, &all, &marks)))
}

fn counts_of<T: PackedList>(key: &T::Key, packed: &PackedIds) -> DbResult<ChunkCounts> {
    packed.counts().map_err(|e| corrupt::<T>(key, e.to_string()))
}

/// Number of ids in the list at `at`, and of those it sent.
pub fn count<T: PackedList, K: TransactionKind>(txn: &Txn<K>, at: impl Into<Place>) -> DbResult<ListCounts> {
    let place = at.into();
    let mut cursor = txn.cursor::<T>()?;
    match last_chunk(&mut cursor, place)? {
        Some((key, packed)) => {
            let c = counts_of::<T>(&key, &packed)?;
            Ok(ListCounts { all: c.base + c.n, sent: c.sent_base + c.sent })
        }
        None => Ok(ListCounts::default()),
    }
}

/// How many ids of the list at `at` are below `id`: one chunk read (a chunk's key is its last
/// id, and its counts say how many ids come before it).
pub fn rank<T: PackedList, K: TransactionKind>(txn: &Txn<K>, at: impl Into<Place>, id: u64) -> DbResult<u64> {
    let place = at.into();
    let mut cursor = txn.cursor::<T>()?;
    match cursor.seek(&T::Key::at(place, id))? {
        Some((key, packed)) if key.place() == place => {
            let base = counts_of::<T>(&key, &packed)?.base;
            let below = unpack::<T>(&key, &packed)?.ids.partition_point(|&x| x < id);
            Ok(base + below as u64)
        }
        _ => Ok(count::<T, K>(txn, place)?.all),
    }
}

/// How many ids of the list at `at` below `id` the address sent: one chunk read.
pub fn rank_sent<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    at: impl Into<Place>,
    id: u64,
) -> DbResult<u64> {
    let place = at.into();
    let mut cursor = txn.cursor::<T>()?;
    match cursor.seek(&T::Key::at(place, id))? {
        Some((key, packed)) if key.place() == place => {
            let chunk = unpack::<T>(&key, &packed)?;
            let below = chunk.ids.partition_point(|&x| x < id);
            Ok(chunk.sent_base + chunk.roles[..below].iter().filter(|&&r| r == Role::Sent).count() as u64)
        }
        _ => Ok(count::<T, K>(txn, place)?.sent),
    }
}

/// The address's role in each of `ids` (ascending or descending, as a walk reads them), `None`
/// for an id its list does not hold: a chunk read for each run of ids it holds.
pub fn roles_of_ids<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    at: impl Into<Place>,
    ids: &[u64],
) -> DbResult<Vec<Option<Role>>> {
    let place = at.into();
    let mut cursor = txn.cursor::<T>()?;
    let mut chunk: Option<Unpacked> = None;
    let mut roles = Vec::with_capacity(ids.len());
    for &id in ids {
        let holds =
            |c: &Unpacked| c.ids.first().is_some_and(|&f| f <= id) && c.ids.last().is_some_and(|&l| id <= l);
        if !chunk.as_ref().is_some_and(holds) {
            chunk = match cursor.seek(&T::Key::at(place, id))? {
                Some((key, packed)) if key.place() == place => Some(unpack::<T>(&key, &packed)?),
                _ => None,
            };
        }
        let role = chunk.as_ref().and_then(|c| c.ids.binary_search(&id).ok().map(|i| c.roles[i]));
        roles.push(role);
    }
    Ok(roles)
}

/// How many ids of the list at `at` in `first..=last` the address sent or received (its
/// `txlist` rows among them): the chunks holding the range, read once each.
pub fn listed_within<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    at: impl Into<Place>,
    first: u64,
    last: u64,
) -> DbResult<u64> {
    let place = at.into();
    let mut cursor = txn.cursor::<T>()?;
    let mut listed = 0;
    let mut entry = cursor.seek(&T::Key::at(place, first))?;
    while let Some((key, packed)) = entry.filter(|(k, _)| k.place() == place) {
        let chunk = unpack::<T>(&key, &packed)?;
        let inside = chunk.ids.iter().zip(&chunk.roles).filter(|(&id, _)| first <= id && id <= last);
        listed += inside.filter(|(_, r)| r.listed()).count() as u64;
        if key.last() >= last {
            break;
        }
        entry = cursor.next_entry()?;
    }
    Ok(listed)
}

/// The `position`-th id (0 first) of the list at `at`, or with `sent` of the ids it sent.
pub fn nth<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    at: impl Into<Place>,
    position: u64,
    sent: bool,
) -> DbResult<Option<u64>> {
    let place = at.into();
    let mut cursor = txn.cursor::<T>()?;
    let mut next = cursor.seek(&T::Key::at(place, 0))?;
    while let Some((key, packed)) = next.filter(|(k, _)| k.place() == place) {
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

/// The first and the last id of the list at `at`, if it has any: two chunk reads however long
/// the list is (a chunk's key is its last id).
pub fn ends<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    at: impl Into<Place>,
) -> DbResult<Option<(u64, u64)>> {
    let place = at.into();
    let mut cursor = txn.cursor::<T>()?;
    let Some((key, packed)) = cursor.seek(&T::Key::at(place, 0))?.filter(|(k, _)| k.place() == place) else {
        return Ok(None);
    };
    let Some(&first) = unpack::<T>(&key, &packed)?.ids.first() else {
        return Err(corrupt::<T>(&key, "an empty chunk".into()));
    };
    let last = last_chunk(&mut cursor, place)?.map_or(key.last(), |(key, _)| key.last());
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

/// Adds the ids of the list at `at` below `cut` to `page`, newest first: until it holds at least `want`
/// when there are, and then the rest of the last block's (it is full when `more` is set).
pub fn before<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    at: impl Into<Place>,
    cut: u64,
    want: usize,
    page: &mut BlockPage,
) -> DbResult<()> {
    let place = at.into();
    let mut cursor = txn.cursor::<T>()?;
    let found = cursor.seek(&T::Key::at(place, cut))?;
    let mut entry = match found {
        Some((key, value)) if key.place() == place => Some((key, value)),
        Some(_) => cursor.prev_entry()?,
        None => cursor.last()?,
    };
    while let Some((key, packed)) = entry.filter(|(k, _)| k.place() == place) {
        for &id in unpack::<T>(&key, &packed)?.ids.iter().rev().filter(|&&id| id < cut) {
            if !take(page, id, want) {
                return Ok(());
            }
        }
        entry = cursor.prev_entry()?;
    }
    Ok(())
}

/// Adds the ids of the list at `at` at or above `from` to `page`, oldest first: until it holds at least
/// `want` when there are, and then the rest of the last block's (it is full when `more` is set).
pub fn after<T: PackedList, K: TransactionKind>(
    txn: &Txn<K>,
    at: impl Into<Place>,
    from: u64,
    want: usize,
    page: &mut BlockPage,
) -> DbResult<()> {
    let place = at.into();
    let mut cursor = txn.cursor::<T>()?;
    let mut entry = cursor.seek(&T::Key::at(place, from))?;
    while let Some((key, packed)) = entry.filter(|(k, _)| k.place() == place) {
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
    let mut current: Option<(Place, ListCounts, u64)> = None;
    while let Some((key, packed)) = next {
        let chunk = unpack::<T>(&key, &packed)?;
        let (seen, last) = match current {
            Some((a, seen, last)) if a == key.place() => (seen, Some(last)),
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
        if key.last() >= below {
            return Err(corrupt::<T>(
                &key,
                format!("holds TxId {}, beyond the indexed tip", TxId(key.last())),
            ));
        }
        total += chunk.ids.len() as u64;
        let now = ListCounts {
            all: seen.all + chunk.ids.len() as u64,
            sent: seen.sent + chunk.sent_ids().count() as u64,
        };
        current = Some((key.place(), now, key.last()));
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

    /// A list long enough for many chunks, whose roles come in runs of each kind and mixed,
    /// appended in uneven batches: counts, the k-th id, the k-th sent id and the listed ids of a
    /// range always equal a plain vector's, and the chunks equal a list written in one append.
    #[test]
    fn sent_marks_survive_appends_in_any_batches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let (a, b) = (Address::repeat_byte(0xa1), Address::repeat_byte(0xb2));
        // Three ids a block, then a gap of blocks: both kinds of gap occur.
        let ids: Vec<u64> = (0..3_000u64).map(|i| id(10 + i / 3 * 7, (i % 3) * 50 + (i * 37) % 40)).collect();
        let roles: Vec<Role> = (0..3_000u64)
            .map(|i| match ((i / 400) % 3, i % 3) {
                (1, _) | (2, 0) => Role::Sent,
                (0, 1) if i > 1_000 => Role::Received,
                (2, 1) => Role::Received,
                _ => Role::Other,
            })
            .collect();
        let sent: Vec<bool> = roles.iter().map(|&r| r == Role::Sent).collect();
        let txn = db.begin_write().expect("write");
        let mut at = 0;
        for step in [1, 7, 300, 2, 900, 1_790] {
            let before = append::<OtsAppearances>(&txn, &a, &ids[at..at + step], &roles[at..at + step])
                .expect("append");
            let sent_before = sent[..at].iter().filter(|&&s| s).count() as u64;
            assert_eq!(before, ListCounts { all: at as u64, sent: sent_before });
            at += step;
        }
        assert_eq!(at, ids.len());
        append::<OtsAppearances>(&txn, &b, &ids, &roles).expect("append at once");
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
            // Ranks of listed ids, of ids between them, and of ids before and past the list.
            for k in (0..len).step_by(89).chain([len.saturating_sub(1)]).filter(|&k| k < len) {
                for probe in [ids[k], ids[k] + 1, ids[k].saturating_sub(1)] {
                    let below = ids[..len].partition_point(|&x| x < probe) as u64;
                    assert_eq!(
                        rank::<OtsAppearances, _>(&txn, who, probe).expect("rank"),
                        below,
                        "rank {probe}"
                    );
                }
            }
            for k in (0..len).step_by(83).chain([len.saturating_sub(1)]).filter(|&k| k < len) {
                for probe in [ids[k], ids[k] + 1] {
                    let below = sent_ids.partition_point(|&x| x < probe) as u64;
                    assert_eq!(
                        rank_sent::<OtsAppearances, _>(&txn, who, probe).expect("rank"),
                        below,
                        "sent rank {probe}"
                    );
                }
            }
            // The listed ids (sent or received) of ranges of every length and position.
            for (k, span) in (0..len).step_by(71).zip([1, 2, 100, 250, 999, 3, 1_500].into_iter().cycle()) {
                let (first, last) = (ids[k], ids[(k + span).min(len) - 1]);
                let listed = ids[..len]
                    .iter()
                    .zip(&roles)
                    .filter(|(&id, r)| first <= id && id <= last && r.listed())
                    .count() as u64;
                assert_eq!(
                    listed_within::<OtsAppearances, _>(&txn, who, first, last).expect("listed"),
                    listed,
                    "listed in {k}..{}",
                    k + span
                );
            }
            assert_eq!(rank::<OtsAppearances, _>(&txn, who, 0).expect("rank"), 0);
            assert_eq!(rank::<OtsAppearances, _>(&txn, who, u64::MAX).expect("rank"), len as u64);
        };
        model_check(&a, ids.len());
        let (c, keep) = (Address::repeat_byte(0xc3), 1_201);
        append::<OtsAppearances>(&txn, &c, &ids[..keep], &roles[..keep]).expect("append a prefix");
        model_check(&c, keep);
        check::<OtsAppearances, _>(&txn, u64::MAX).expect("consistent");
    }

    /// Appends written while the table is rewritten whole leave exactly the entries the same
    /// appends leave in place: untouched lists copied, touched ones re-packed from their last
    /// chunk, new ones added, in any position among the old.
    #[test]
    fn a_rewrite_appends_what_an_append_in_place_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let ids: Vec<u64> = (0..2_500u64).map(|i| id(5 + i / 4 * 3, i % 4 * 9)).collect();
        let sent: Vec<Role> = (0..2_500u64)
            .map(|i| match i % 5 {
                _ if (i / 300) % 2 == 1 => Role::Sent,
                0 => Role::Sent,
                1 | 2 if i > 700 => Role::Received,
                _ => Role::Other,
            })
            .collect();
        let who = |n: u8| Address::repeat_byte(n);
        let first = [(who(0x20), 1_700), (who(0x40), 3), (who(0x60), 900), (who(0x80), 1)];
        let txn = db.begin_write().expect("write");
        for (address, n) in first {
            append::<OtsAppearances>(&txn, &address, &ids[..n], &sent[..n]).expect("append");
        }
        txn.commit().expect("commit");
        // Later appends: a new list first, between and last; old ones touched or not.
        let later = [
            (who(0x10), 0, 40),
            (who(0x20), 1_700, 800),
            (who(0x50), 0, 2_500),
            (who(0x80), 1, 2),
            (who(0x90), 7, 9),
        ];
        let entries = |txn: &WriteTxn| txn.raw_entries(OtsAppearances::ID).expect("entries");

        let txn = db.begin_write().expect("write");
        let in_place: Vec<ListCounts> = later
            .iter()
            .map(|&(a, from, n)| {
                append::<OtsAppearances>(&txn, &a, &ids[from..from + n], &sent[from..from + n])
            })
            .collect::<DbResult<_>>()
            .expect("append in place");
        let expected = entries(&txn);
        drop(txn);

        let before = db.begin_read().expect("snapshot");
        let txn = db.begin_write().expect("write");
        let mut rewrite = Rewrite::<_, OtsAppearances>::begin_if_pays(&txn, &before, u64::MAX, 1)
            .expect("begin")
            .expect("a rewrite");
        let rewritten: Vec<ListCounts> = later
            .iter()
            .map(|&(a, from, n)| {
                append_rewriting(&mut rewrite, &a, &ids[from..from + n], &sent[from..from + n])
            })
            .collect::<DbResult<_>>()
            .expect("append rewriting");
        rewrite.finish().expect("finish");
        assert_eq!(rewritten, in_place, "the counts before each append");
        assert_eq!(entries(&txn), expected, "the same entries");
        check::<OtsAppearances, _>(&txn, u64::MAX).expect("consistent");
        // An append at or below a list's last id is refused, as in place.
        let mut rewrite = Rewrite::<_, OtsAppearances>::begin_if_pays(&txn, &before, u64::MAX, 1)
            .expect("begin")
            .expect("a rewrite");
        assert!(append_rewriting(&mut rewrite, &who(0x60), &ids[..1], &sent[..1]).is_err());
    }
}
