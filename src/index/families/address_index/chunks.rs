//! Chunked per-address id lists and their counters: appending, rewriting, reading and verifying
//! one list (docs/format.md, "Address indexes").
//!
//! Ids of one address are kept ascending in chunks keyed `address ‖ largest id`, the last chunk
//! keyed `address ‖ FF…FF`. The counter table holds one dup per chunk with the cumulative count,
//! so the chunk holding the N-th id is one range seek away; while an address has at most 256
//! ids in a single chunk its counter is the single byte `total − 1` instead.

use alloy_primitives::Address;
use signet_libmdbx::tx::{Rw, TransactionKind};

use crate::db::{
    codec::{ChunkIds, ChunkKey, CounterDup, LAST_CHUNK, MAX_UNIQUE_CHUNK_COUNT},
    tables::{DupSubKey, Table},
    DbError, DbResult, TableCursor, Txn, WriteTxn,
};

/// Ids in every chunk but the last: the most whose 8-byte encoding stays under 1,950 bytes, the
/// value size past which MDBX (at 4 KiB pages) moves values to overflow pages. Kept from ots2
/// for byte compatibility.
pub const CHUNK_IDS: usize = 244;

/// An address index table: `address ‖ chunk id` → ids.
pub trait AddressIndex: Table<Key = ChunkKey, Value: ChunkIds> {}
impl<T: Table<Key = ChunkKey, Value: ChunkIds>> AddressIndex for T {}

/// An address counter table: `address` → counter dups.
pub trait AddressCounter: DupSubKey<SubKey = u64> + Table<Key = Address, Value = CounterDup> {}
impl<T: DupSubKey<SubKey = u64> + Table<Key = Address, Value = CounterDup>> AddressCounter for T {}

fn hex_key(address: &Address, chunk: u64) -> String {
    let mut k = address.to_vec();
    k.extend_from_slice(&chunk.to_be_bytes());
    alloy_primitives::hex::encode(k)
}

fn corrupt<T: Table>(address: &Address, chunk: u64, reason: String) -> DbError {
    DbError::Corrupt { table: T::ID.name(), key: hex_key(address, chunk), reason }
}

/// What replaces an address's last chunk and its counter dup after an append: chunks in key
/// order and their counter dups in order.
type NewTail<V> = (Vec<(ChunkKey, V)>, Vec<CounterDup>);

/// The counter's view of an address before an append.
#[derive(Debug)]
struct Tail {
    /// Ids in all chunks before the last one.
    base: u64,
    /// Whether the address is (or may become) a single chunk with a 1-byte counter.
    unique: bool,
    /// Ids of the last chunk.
    last_ids: Vec<u64>,
    /// Whether a counter dup describes the last chunk.
    has_last_dup: bool,
}

impl Tail {
    /// An address with no ids yet.
    fn empty() -> Self {
        Self { base: 0, unique: true, last_ids: Vec::new(), has_last_dup: false }
    }

    /// The tail of an address with `dups` counter dups: the first, the one before the last (if
    /// there are several) and the last; `last_ids` are the ids of its last chunk.
    fn of<I: AddressIndex, C: AddressCounter>(
        address: &Address,
        dups: usize,
        first: CounterDup,
        before_last: Option<CounterDup>,
        last: CounterDup,
        last_ids: Vec<u64>,
    ) -> DbResult<Self> {
        let bad_dups = |what: &str| corrupt::<C>(address, LAST_CHUNK, format!("counter dups {what}"));
        let (base, unique) = match (first, before_last) {
            (CounterDup::Unique { .. }, None) if dups == 1 => (0, true),
            (CounterDup::Unique { .. }, _) => {
                return Err(bad_dups(&format!("start with a 1-byte counter among {dups}")))
            }
            (CounterDup::Regular { .. }, None) if dups == 1 => (0, false),
            (CounterDup::Regular { .. }, Some(before)) if dups > 1 => (before.cumulative(), false),
            (CounterDup::Regular { .. }, _) => return Err(bad_dups("vanished")),
        };
        if last.chunk() != LAST_CHUNK {
            return Err(bad_dups(&format!("end in {last:?}, not one for the last chunk")));
        }
        if last_ids.len() as u64 != last.cumulative() - base {
            return Err(corrupt::<I>(
                address,
                LAST_CHUNK,
                format!(
                    "last chunk holds {} ids but the counter says {}",
                    last_ids.len(),
                    last.cumulative() - base
                ),
            ));
        }
        Ok(Self { base, unique, last_ids, has_last_dup: true })
    }

    /// The last chunk's ids with `new_ids` after them, which must follow them.
    fn merged<I: AddressIndex>(&self, address: &Address, new_ids: &[u64]) -> DbResult<Vec<u64>> {
        if let (Some(&last_old), Some(&first_new)) = (self.last_ids.last(), new_ids.first()) {
            if first_new <= last_old {
                return Err(corrupt::<I>(
                    address,
                    LAST_CHUNK,
                    format!("id {first_new} appended after id {last_old}: ids must grow"),
                ));
            }
        }
        let mut merged = Vec::with_capacity(self.last_ids.len() + new_ids.len());
        merged.extend_from_slice(&self.last_ids);
        merged.extend_from_slice(new_ids);
        Ok(merged)
    }

    /// The chunks and counter dups that replace the last chunk and its dup once `new_ids`
    /// (strictly ascending, each larger than every stored id) are appended.
    fn extend<I: AddressIndex>(self, address: &Address, new_ids: &[u64]) -> DbResult<NewTail<I::Value>> {
        let merged = self.merged::<I>(address, new_ids)?;
        if self.unique && merged.len() as u64 <= MAX_UNIQUE_CHUNK_COUNT {
            let total = merged.len() as u64;
            return Ok((
                vec![(ChunkKey::last(*address), I::Value::from_ids(merged))],
                vec![CounterDup::Unique { total }],
            ));
        }
        let mut cumulative = self.base;
        let pieces = merged.len().div_ceil(CHUNK_IDS);
        let mut chunks = Vec::with_capacity(pieces);
        let mut dups = Vec::with_capacity(pieces);
        for (i, piece) in merged.chunks(CHUNK_IDS).enumerate() {
            let chunk = if i + 1 == pieces { LAST_CHUNK } else { piece[piece.len() - 1] };
            cumulative += piece.len() as u64;
            chunks.push((ChunkKey { address: *address, chunk }, I::Value::from_ids(piece.to_vec())));
            dups.push(CounterDup::Regular { cumulative, chunk });
        }
        Ok((chunks, dups))
    }

    /// As [`Tail::extend`] for one piece of the ids appended, `more` pieces following it: the
    /// chunks and dups that stay whatever follows, and the tail the next piece extends. Chunks
    /// are cut every [`CHUNK_IDS`] ids from the list's first (or from its start while it may
    /// stay one chunk with a 1-byte counter), so piece by piece they come out as at once.
    fn extend_piece<I: AddressIndex>(
        self,
        address: &Address,
        new_ids: &[u64],
        more: bool,
    ) -> DbResult<(NewTail<I::Value>, Option<Self>)> {
        if !more {
            return Ok((self.extend::<I>(address, new_ids)?, None));
        }
        let mut merged = self.merged::<I>(address, new_ids)?;
        if merged.is_empty() || (self.unique && merged.len() as u64 <= MAX_UNIQUE_CHUNK_COUNT) {
            return Ok(((Vec::new(), Vec::new()), Some(Self { last_ids: merged, ..self })));
        }
        // The last 1 to CHUNK_IDS ids wait for the next piece; the chunks before them are whole.
        let whole = merged.len() - ((merged.len() - 1) % CHUNK_IDS + 1);
        let mut cumulative = self.base;
        let mut chunks = Vec::with_capacity(whole / CHUNK_IDS);
        let mut dups = Vec::with_capacity(whole / CHUNK_IDS);
        for piece in merged[..whole].chunks(CHUNK_IDS) {
            let chunk = piece[piece.len() - 1];
            cumulative += piece.len() as u64;
            chunks.push((ChunkKey { address: *address, chunk }, I::Value::from_ids(piece.to_vec())));
            dups.push(CounterDup::Regular { cumulative, chunk });
        }
        merged.drain(..whole);
        let rest =
            Self { base: cumulative, unique: false, last_ids: merged, has_last_dup: self.has_last_dup };
        Ok(((chunks, dups), Some(rest)))
    }
}

/// Appends ids to many addresses of one index through one cursor per table: addresses taken in
/// key order are each found next to the previous one.
#[derive(Debug)]
pub struct IdAppender<'tx, I: AddressIndex, C: AddressCounter> {
    index: TableCursor<'tx, Rw, I>,
    counter: TableCursor<'tx, Rw, C>,
}

impl<'tx, I: AddressIndex, C: AddressCounter> IdAppender<'tx, I, C> {
    /// An appender writing in `txn`.
    pub fn new(txn: &'tx WriteTxn) -> DbResult<Self> {
        Ok(Self { index: txn.cursor::<I>()?, counter: txn.cursor::<C>()? })
    }

    /// Reads the counter dups that matter for an append, leaving the counter cursor on the last.
    fn read_tail(&mut self, address: &Address) -> DbResult<Tail> {
        let Some(first) = self.counter.seek_exact(address)? else { return Ok(Tail::empty()) };
        let dups = self.counter.dup_count()?;
        let (before_last, last) = if dups > 1 {
            let last = self.counter.last_dup()?;
            let before = self.counter.prev_dup()?;
            // Back onto the last dup, which the append replaces.
            self.counter.last_dup()?;
            (before, last.unwrap_or(first))
        } else {
            (None, first)
        };
        let ids =
            self.index.seek_exact(&ChunkKey::last(*address))?.map(ChunkIds::into_ids).unwrap_or_default();
        Tail::of::<I, C>(address, dups, first, before_last, last, ids)
    }

    /// Appends `new_ids` (strictly ascending, each larger than every id already stored for the
    /// address) to `address`'s list, re-cutting only its last chunk.
    pub fn append(&mut self, address: &Address, new_ids: &[u64]) -> DbResult<()> {
        if new_ids.is_empty() {
            return Ok(());
        }
        let tail = self.read_tail(address)?;
        let replaces_dup = tail.has_last_dup;
        let (chunks, dups) = tail.extend::<I>(address, new_ids)?;
        if replaces_dup {
            self.counter.delete_current()?;
        }
        for (key, chunk) in &chunks {
            self.index.put(key, chunk)?;
        }
        for dup in &dups {
            self.counter.put(address, dup)?;
        }
        Ok(())
    }
}

/// Rewrites index `I` and counter `C` whole with `appends` (addresses ascending, each with its
/// new ids ascending) added: `before` is a snapshot of both tables as `txn` found them. Every
/// entry is appended in key order, so the pages come out full, as `compact` leaves them; for a
/// batch that appends to a large share of the addresses this is also cheaper than
/// [`IdAppender::append`] address by address (see `index::rewrite`). The entries are exactly
/// those the appender writes; untouched addresses are copied as they were.
pub fn rewrite_with_appends<I: AddressIndex, C: AddressCounter, K: TransactionKind>(
    txn: &WriteTxn,
    before: &Txn<K>,
    appends: impl IntoIterator<Item = (Address, impl AsRef<[u64]>)>,
) -> DbResult<()> {
    let mut old_index = before.walking_cursor::<I>()?;
    let mut old_counter = before.cursor::<C>()?;
    let mut next_chunk = old_index.first()?;
    let mut next_dup = old_counter.first()?;
    txn.clear::<I>()?;
    txn.clear::<C>()?;
    let mut index = txn.cursor::<I>()?;
    let mut counter = txn.cursor::<C>()?;
    let mut appends = appends.into_iter().peekable();
    loop {
        let Some(address) = [
            next_chunk.as_ref().map(|(k, _)| k.address),
            next_dup.as_ref().map(|(a, _)| *a),
            appends.peek().map(|(a, _)| *a),
        ]
        .into_iter()
        .flatten()
        .min() else {
            return Ok(());
        };
        // The old chunks and dups are copied as they come, but for the last of each, which an
        // append replaces: an address's list is never held whole.
        let (mut old_chunks, mut last_chunk) = (0u64, None);
        while let Some((key, chunk)) = next_chunk.take() {
            if key.address != address {
                next_chunk = Some((key, chunk));
                break;
            }
            old_chunks += 1;
            if key.chunk == LAST_CHUNK {
                last_chunk = Some(chunk);
            } else {
                index.append(&key, &chunk)?;
            }
            next_chunk = old_index.next_entry()?;
        }
        let (mut dups, mut first, mut before_last, mut last) = (0usize, None, None, None);
        while let Some((_, dup)) = next_dup.take_if(|(a, _)| *a == address) {
            dups += 1;
            first.get_or_insert(dup);
            if let Some(held) = last.replace(dup) {
                counter.append(&address, &held)?;
                before_last = Some(held);
            }
            next_dup = old_counter.next_entry()?;
        }
        // The new ids, in one row or in several (pieces of a long list), each following the last.
        let mut tail: Option<Tail> = None;
        while let Some((_, new_ids)) = appends.next_if(|(a, _)| *a == address) {
            let new_ids = new_ids.as_ref();
            let more = appends.peek().is_some_and(|(a, _)| *a == address);
            if new_ids.is_empty() && (more || tail.is_none()) {
                continue;
            }
            let from = match tail.take() {
                Some(tail) => tail,
                None => match (first, last.take()) {
                    (Some(first), Some(last)) => {
                        let last_ids = last_chunk.take().map(ChunkIds::into_ids).unwrap_or_default();
                        Tail::of::<I, C>(&address, dups, first, before_last, last, last_ids)?
                    }
                    _ if old_chunks == 0 => Tail::empty(),
                    _ => {
                        return Err(corrupt::<C>(&address, LAST_CHUNK, "chunks without a counter".into()));
                    }
                },
            };
            let ((new_chunks, new_dups), rest) = from.extend_piece::<I>(&address, new_ids, more)?;
            for (key, chunk) in &new_chunks {
                index.append(key, chunk)?;
            }
            for dup in &new_dups {
                counter.append(&address, dup)?;
            }
            tail = rest;
        }
        // Nothing appended: the last chunk and dup stay as they were.
        if let Some(chunk) = last_chunk {
            index.append(&ChunkKey::last(address), &chunk)?;
        }
        if let Some(dup) = last {
            counter.append(&address, &dup)?;
        }
    }
}

/// Appends `new_ids` to one address's list (see [`IdAppender::append`]).
pub fn append_ids<I: AddressIndex, C: AddressCounter>(
    txn: &WriteTxn,
    address: &Address,
    new_ids: &[u64],
) -> DbResult<()> {
    IdAppender::<I, C>::new(txn)?.append(address, new_ids)
}

/// Number of ids stored for `address`.
pub fn id_count<C: AddressCounter, K: TransactionKind>(txn: &Txn<K>, address: &Address) -> DbResult<u64> {
    let mut cursor = txn.cursor::<C>()?;
    if cursor.seek_exact(address)?.is_none() {
        return Ok(0);
    }
    Ok(cursor.last_dup()?.map_or(0, |d| d.cumulative()))
}

/// Ids `idx..idx + count` of `address` (0-based, oldest first).
///
/// Reads the counter's first dup and branches on its form: the reference range-seeks even
/// over the 1-byte form, and so returns nothing for an address with exactly one id.
pub fn id_page<I: AddressIndex, C: AddressCounter, K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    idx: u64,
    count: u64,
) -> DbResult<Vec<u64>> {
    let mut out = Vec::new();
    if count == 0 {
        return Ok(out);
    }
    let mut counter = txn.cursor::<C>()?;
    let Some(first) = counter.seek_exact(address)? else { return Ok(out) };
    let dup = match first {
        CounterDup::Unique { total } if idx < total => first,
        CounterDup::Unique { .. } => return Ok(out),
        CounterDup::Regular { .. } => {
            let Some(dup) = counter.seek_sub_key(address, &(idx + 1))? else {
                return Ok(out);
            };
            dup
        }
    };
    let mut index = txn.cursor::<I>()?;
    let chunk_key = ChunkKey { address: *address, chunk: dup.chunk() };
    let Some((key, chunk)) = index.seek(&chunk_key)? else {
        return Err(corrupt::<I>(address, dup.chunk(), "the counter names a chunk that is missing".into()));
    };
    let ids = chunk.into_ids();
    if key != chunk_key || (ids.len() as u64) > dup.cumulative() {
        return Err(corrupt::<I>(address, dup.chunk(), "the counter and the chunk disagree".into()));
    }
    let before = dup.cumulative() - ids.len() as u64;
    let skip = usize::try_from(idx - before).unwrap_or(usize::MAX);
    let want = usize::try_from(count).unwrap_or(usize::MAX);
    out.extend(ids.iter().skip(skip).take(want));
    while out.len() < want {
        match index.next_entry()? {
            Some((k, chunk)) if k.address == *address => {
                out.extend(chunk.into_ids().into_iter().take(want - out.len()));
            }
            _ => break,
        }
    }
    Ok(out)
}

/// How many stored ids of `address` are below `id`: the position `id` has, or would have, in
/// the list. One seek into the index and, in a chunk other than the last, a binary search of the
/// counter's dups for the chunk's place (every chunk but the last holds [`CHUNK_IDS`] ids).
pub fn id_rank<I: AddressIndex, C: AddressCounter, K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
    id: u64,
) -> DbResult<u64> {
    let mut counter = txn.cursor::<C>()?;
    let Some(first) = counter.seek_exact(address)? else { return Ok(0) };
    let total = match first {
        CounterDup::Unique { total } => total,
        CounterDup::Regular { .. } => counter.last_dup()?.map_or(0, |d| d.cumulative()),
    };
    let mut index = txn.cursor::<I>()?;
    let Some((key, chunk)) = index.seek(&ChunkKey { address: *address, chunk: id })? else {
        return Ok(total);
    };
    let ids = chunk.into_ids();
    if key.address != *address {
        return Ok(total);
    }
    let within = ids.partition_point(|&x| x < id) as u64;
    if key.chunk == LAST_CHUNK {
        return Ok(total - ids.len() as u64 + within);
    }
    // The chunk's ordinal m: the counter's m-th dup (cumulative 244·(m+1)) names it.
    let step = CHUNK_IDS as u64;
    let (mut low, mut high) = (0u64, total / step);
    while low < high {
        let middle = low + (high - low) / 2;
        let Some(dup) = counter.seek_sub_key(address, &(middle * step + 1))? else {
            return Err(corrupt::<C>(
                address,
                key.chunk,
                "the counter ends before a chunk of the index".into(),
            ));
        };
        if dup.chunk() < key.chunk {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    Ok(low * step + within)
}

/// Checks every invariant of one address's list (docs/format.md, "Address indexes" and their counters) and returns its ids.
pub fn verify_address<I: AddressIndex, C: AddressCounter, K: TransactionKind>(
    txn: &Txn<K>,
    address: &Address,
) -> DbResult<Vec<u64>> {
    let dups = txn.cursor::<C>()?.dups(address)?;
    let mut index = txn.cursor::<I>()?;
    let mut chunks = Vec::new();
    let mut next = index.seek(&ChunkKey { address: *address, chunk: 0 })?;
    while let Some((key, chunk)) = next {
        let ids = chunk.into_ids();
        if key.address != *address {
            break;
        }
        chunks.push((key.chunk, ids));
        next = index.next_entry()?;
    }
    let bad = |reason: String| Err(corrupt::<I>(address, LAST_CHUNK, reason));
    if dups.len() != chunks.len() {
        return bad(format!("{} counter dups for {} chunks", dups.len(), chunks.len()));
    }
    let mut all: Vec<u64> = Vec::new();
    for (i, ((chunk, ids), dup)) in chunks.iter().zip(&dups).enumerate() {
        let is_last = i + 1 == chunks.len();
        if ids.is_empty() {
            return bad(format!("chunk {chunk:#x} is empty"));
        }
        if is_last != (*chunk == LAST_CHUNK) {
            return bad(format!("chunk {chunk:#x} at position {i} of {}", chunks.len()));
        }
        if !is_last && (*chunk != ids[ids.len() - 1] || ids.len() != CHUNK_IDS) {
            return bad(format!("chunk {chunk:#x} is keyed or sized wrongly ({} ids)", ids.len()));
        }
        if all.last().is_some_and(|&l| l >= ids[0]) {
            return bad(format!("ids do not ascend across chunk {chunk:#x}"));
        }
        all.extend(ids);
        if dup.chunk() != *chunk || dup.cumulative() != all.len() as u64 {
            return bad(format!("counter dup {dup:?} does not describe chunk {chunk:#x}"));
        }
        if matches!(dup, CounterDup::Unique { total } if chunks.len() != 1 || *total > MAX_UNIQUE_CHUNK_COUNT)
        {
            return bad("a 1-byte counter on a multi-chunk list".into());
        }
    }
    Ok(all)
}

/// A list's level or staged segment read whole: addresses ascending, each with all its ids.
pub(super) type LevelRows<'a> = Box<dyn Iterator<Item = DbResult<(Address, Vec<u64>)>> + 'a>;

/// The chunks `cursor` walks from `first` on while `within` holds for their keys, grouped by
/// the address `address_of` reads from a key: addresses ascending, each with all its ids.
pub(super) fn grouped_rows<'a, K: TransactionKind, T: Table<Value: ChunkIds>>(
    mut cursor: TableCursor<'a, K, T>,
    first: Option<(T::Key, T::Value)>,
    within: impl Fn(&T::Key) -> bool + 'a,
    address_of: impl Fn(&T::Key) -> Address + 'a,
) -> LevelRows<'a> {
    let mut pending = first.filter(|(k, _)| within(k));
    Box::new(std::iter::from_fn(move || {
        let (key, chunk) = pending.take()?;
        let address = address_of(&key);
        let mut ids = chunk.into_ids();
        loop {
            match cursor.next_entry() {
                Err(e) => return Some(Err(e)),
                Ok(Some((k, c))) if within(&k) && address_of(&k) == address => ids.extend(c.into_ids()),
                Ok(next) => {
                    pending = next.filter(|(k, _)| within(k));
                    return Some(Ok((address, ids)));
                }
            }
        }
    }))
}
