//! Typed transactions and cursors over the table registry.
//!
//! Every read decodes through the table's codecs and every error names the table and key, so a
//! damaged entry is reported where it is rather than as a wrong answer further on.

use std::{borrow::Cow, cell::Cell, marker::PhantomData, sync::Arc};

use signet_libmdbx::{
    tx::{Ro, Rw, TransactionKind, Tx},
    Cursor, Database, MdbxError, WriteFlags,
};

use super::{
    codec::{KeyCodec, ValueCodec},
    error::{hint_for, read_err, table_err, DbError, DbResult},
    residency::{release_mapped, MappedFile},
    tables::{DupSubKey, DupTable, Layout, Table, TableId},
};

/// A read-only transaction: a consistent snapshot, to be kept short.
pub type ReadTxn = Txn<Ro>;
/// The single read-write transaction.
pub type WriteTxn = Txn<Rw>;

/// A transaction with typed access to the registry's tables.
#[derive(Debug)]
pub struct Txn<K: TransactionKind> {
    tx: Tx<K>,
    tables: Arc<[Database]>,
    /// The data file, for `release_mapped_pages`.
    mapped: Option<MappedFile>,
    /// The tables this transaction emptied, one bit each by [`TableId::index`]: a table emptied
    /// and written again in one transaction was appended to in key order (every caller of
    /// [`Self::clear`] rewrites whole), so its pages are full.
    emptied: Cell<u128>,
}

const _: () = assert!(TableId::ALL.len() <= u128::BITS as usize);

fn decode_key<T: Table>(bytes: &[u8]) -> DbResult<T::Key> {
    T::Key::decode_key(bytes).map_err(|source| DbError::Decode {
        table: T::ID.name(),
        key: alloy_primitives::hex::encode(bytes),
        source,
    })
}

pub(super) fn decode_value<T: Table>(key: &[u8], bytes: &[u8]) -> DbResult<T::Value> {
    T::Value::decode_value(bytes).map_err(|source| DbError::Decode {
        table: T::ID.name(),
        key: alloy_primitives::hex::encode(key),
        source,
    })
}

impl<K: TransactionKind> Txn<K> {
    pub(crate) fn new(tx: Tx<K>, tables: Arc<[Database]>, mapped: Option<MappedFile>) -> Self {
        Self { tx, tables, mapped, emptied: Cell::new(0) }
    }

    /// Whether this transaction emptied `table` ([`Self::clear`]): the table's entries now are
    /// the ones it appended since, in key order.
    pub fn emptied(&self, table: TableId) -> bool {
        self.emptied.get() & (1 << table.index()) != 0
    }

    /// As `Db::release_mapped_pages`: for a long write that has just read through a large part
    /// of the database and will not read it again.
    pub fn release_mapped_pages(&self) {
        release_mapped(self.mapped.as_ref());
    }

    /// The snapshot this transaction reads: the id of the write transaction it sees committed
    /// last. Two read transactions with one id see the same data, so what is derived from one
    /// serves the other.
    pub fn snapshot_id(&self) -> DbResult<u64> {
        self.tx.id().map_err(|source| DbError::Txn {
            op: "id",
            hint: hint_for(&source),
            source: source.into(),
        })
    }

    fn db<T: Table>(&self) -> Database {
        self.tables[T::ID.index()]
    }

    /// The value at `key` (the first dup in a dupsort table).
    pub fn get<T: Table>(&self, key: &T::Key) -> DbResult<Option<T::Value>> {
        let k = key.encode_key();
        let raw: Option<Cow<'_, [u8]>> = self
            .tx
            .get(self.db::<T>().dbi(), k.as_ref())
            .map_err(|e| read_err("get", T::ID.name(), k.as_ref(), e))?;
        raw.map(|v| decode_value::<T>(k.as_ref(), &v)).transpose()
    }

    /// The value of `key` in `T` read as `V`, a codec of a prefix of `T`'s values (such as
    /// [`crate::db::codec::UndoRecordHash`]): a cheaper read of part of a large value.
    pub fn get_as<T: Table, V: ValueCodec>(&self, key: &T::Key) -> DbResult<Option<V>> {
        let k = key.encode_key();
        let raw: Option<Cow<'_, [u8]>> = self
            .tx
            .get(self.db::<T>().dbi(), k.as_ref())
            .map_err(|e| read_err("get", T::ID.name(), k.as_ref(), e))?;
        raw.map(|v| {
            V::decode_value(&v).map_err(|source| DbError::Decode {
                table: T::ID.name(),
                key: alloy_primitives::hex::encode(k.as_ref()),
                source,
            })
        })
        .transpose()
    }

    /// A cursor over table `T`.
    pub fn cursor<T: Table>(&self) -> DbResult<TableCursor<'_, K, T>> {
        let cursor =
            self.tx.cursor(self.db::<T>()).map_err(|e| table_err("open cursor", T::ID.name(), &[], e))?;
        Ok(TableCursor { cursor, walked: None, _table: PhantomData })
    }

    /// A cursor over table `T` for a walk through a large part of it (a batch's reads and
    /// rewrites): it lets go of the database pages mapped so far every `RELEASE_EVERY` entries
    /// it reads or writes, so that a walk keeps only a few MiB of the file counted in the
    /// process's resident memory (`Db::release_mapped_pages`). The API's reads use
    /// [`Txn::cursor`]: what they map is their cache.
    pub fn walking_cursor<T: Table>(&self) -> DbResult<TableCursor<'_, K, T>> {
        let mut cursor = self.cursor::<T>()?;
        cursor.walked = Some(Walked { entries: Cell::new(0), file: self.mapped });
        Ok(cursor)
    }

    /// Entries and bytes of every table of the registry.
    pub fn table_stats(&self) -> DbResult<Vec<TableStats>> {
        TableId::ALL.iter().map(|t| self.stats_of(*t)).collect()
    }

    /// Entries and bytes of table `T`.
    pub fn stats<T: Table>(&self) -> DbResult<TableStats> {
        self.stats_of(T::ID)
    }

    /// Entries and bytes of `table`.
    pub fn stats_of(&self, table: TableId) -> DbResult<TableStats> {
        let stat = self
            .tx
            .db_stat(&self.tables[table.index()])
            .map_err(|e| table_err("stat", table.name(), &[], e))?;
        let pages = stat.branch_pages() + stat.leaf_pages() + stat.overflow_pages();
        Ok(TableStats {
            table,
            entries: stat.entries() as u64,
            bytes: pages as u64 * u64::from(stat.page_size()),
        })
    }

    /// A cursor over `table` that reads and writes bytes as stored.
    pub(super) fn raw_cursor(&self, table: TableId) -> DbResult<Cursor<'_, K>> {
        self.tx.cursor(self.tables[table.index()]).map_err(|e| table_err("open cursor", table.name(), &[], e))
    }

    /// Every entry of `table` as raw bytes, in order (dups one by one).
    pub fn raw_entries(&self, table: TableId) -> DbResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.for_each_raw(table, |k, v| out.push((k.to_vec(), v.to_vec())))?;
        Ok(out)
    }

    /// Calls `f` with every entry of `table` as raw bytes, in order (dups one by one), without
    /// holding the table in memory.
    pub fn for_each_raw(&self, table: TableId, mut f: impl FnMut(&[u8], &[u8])) -> DbResult<()> {
        let mut cursor = self.raw_cursor(table)?;
        let mut next = cursor.first::<Cow<'_, [u8]>, Cow<'_, [u8]>>();
        loop {
            match next.map_err(|e| read_err("scan", table.name(), &[], e))? {
                Some((k, v)) => f(&k, &v),
                None => return Ok(()),
            }
            next = cursor.next();
        }
    }

    /// Number of entries (dups count one each) in table `T`.
    pub fn entries<T: Table>(&self) -> DbResult<u64> {
        let stat = self.tx.db_stat(&self.db::<T>()).map_err(|e| table_err("stat", T::ID.name(), &[], e))?;
        Ok(stat.entries() as u64)
    }
}

impl Txn<Rw> {
    /// Writes `value` at `key` (adds a dup in a dupsort table; replaces in a plain one).
    pub fn put<T: Table>(&self, key: &T::Key, value: &T::Value) -> DbResult<()> {
        let k = key.encode_key();
        self.tx
            .put(self.db::<T>(), k.as_ref(), value.encode_value(), WriteFlags::UPSERT)
            .map_err(|e| table_err("put", T::ID.name(), k.as_ref(), e))
    }

    /// Deletes `key` (with `Some(value)`, only that dup). Returns whether something was deleted.
    pub fn delete<T: Table>(&self, key: &T::Key, value: Option<&T::Value>) -> DbResult<bool> {
        let k = key.encode_key();
        let v = value.map(ValueCodec::encode_value);
        self.tx
            .del(self.db::<T>(), k.as_ref(), v.as_deref())
            .map_err(|e| table_err("delete", T::ID.name(), k.as_ref(), e))
    }

    /// Empties table `T`. Its pages stay readable by older snapshots (MVCC), so a snapshot
    /// taken before this can be copied back into it.
    pub fn clear<T: Table>(&self) -> DbResult<()> {
        self.tx.clear_db(self.db::<T>()).map_err(|e| table_err("clear", T::ID.name(), &[], e))?;
        self.emptied.set(self.emptied.get() | 1 << T::ID.index());
        Ok(())
    }

    /// Empties `table` (as [`Self::clear`], by id).
    pub(super) fn clear_raw(&self, table: TableId) -> DbResult<()> {
        self.tx.clear_db(self.tables[table.index()]).map_err(|e| table_err("clear", table.name(), &[], e))
    }

    /// Moves every entry of the table named `old` (a name an earlier format used) into `into`,
    /// which must have its layout, and drops `old`. Returns how many entries moved: 0 when the
    /// database has no table of that name.
    pub fn adopt_table(&self, old: &str, into: TableId) -> DbResult<u64> {
        let legacy = match self.tx.open_db(Some(old)) {
            Ok(db) => db,
            Err(MdbxError::NotFound) => return Ok(0),
            Err(e) => return Err(table_err("open table", into.name(), old.as_bytes(), e)),
        };
        let target = self.tables[into.index()];
        let mut moved = 0u64;
        {
            let mut cursor =
                self.tx.cursor(legacy).map_err(|e| table_err("open cursor", into.name(), &[], e))?;
            let mut next = cursor.first::<Cow<'_, [u8]>, Cow<'_, [u8]>>();
            while let Some((k, v)) = next.map_err(|e| read_err("scan", into.name(), old.as_bytes(), e))? {
                self.tx
                    .put(target, &k, &v, WriteFlags::UPSERT)
                    .map_err(|e| table_err("put", into.name(), &k, e))?;
                moved += 1;
                next = cursor.next();
            }
        }
        drop_table(&self.tx, legacy).map_err(|e| table_err("drop table", into.name(), old.as_bytes(), e))?;
        Ok(moved)
    }

    /// Commits every write of this transaction at once.
    pub fn commit(self) -> DbResult<()> {
        self.tx.commit().map_err(|source| DbError::Txn {
            op: "commit",
            hint: hint_for(&source),
            source: source.into(),
        })
    }

    /// Commits as [`Self::commit`] does, and says where the commit's time went.
    pub fn commit_timed(self) -> DbResult<CommitTimes> {
        let latency = self.tx.commit_with_latency().map_err(|source| DbError::Txn {
            op: "commit",
            hint: hint_for(&source),
            source: source.into(),
        })?;
        Ok(CommitTimes {
            gc: latency.gc_wallclock().as_secs_f64(),
            write: latency.write().as_secs_f64(),
            sync: latency.sync().as_secs_f64(),
            whole: latency.whole().as_secs_f64(),
        })
    }
}

/// Where a commit's seconds went, as MDBX measures them: a bulk stage's commit grows with the
/// pages the stage dirtied and with the free pages the database keeps track of.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CommitTimes {
    /// Updating the free-page records (MDBX's GC).
    pub gc: f64,
    /// Writing the dirty pages out.
    pub write: f64,
    /// Waiting for them to reach the disk.
    pub sync: f64,
    /// The whole commit.
    pub whole: f64,
}

/// Drops the table `db` from the database.
#[allow(unsafe_code)]
fn drop_table(tx: &Tx<Rw>, db: Database) -> Result<(), MdbxError> {
    // SAFETY: `db` was opened by `adopt_table` for this call alone and is dropped here: the
    // registry's handles never name it (no registry table has its name), its only cursor was
    // dropped before, and nothing uses the handle after this call.
    unsafe { tx.drop_db(db) }
}

/// Size of one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableStats {
    /// The table.
    pub table: TableId,
    /// Entries (each dup counts one).
    pub entries: u64,
    /// Bytes of its pages (branch, leaf and overflow).
    pub bytes: u64,
}

/// A walking cursor releases the mapped pages every this many entries: a few MiB of the file at
/// a time, and a release (0.2–3 ms) every few tens of milliseconds of a batch's work.
pub(super) const RELEASE_EVERY: u32 = 1 << 15;

/// What a walking cursor counts.
#[derive(Debug)]
struct Walked {
    entries: Cell<u32>,
    file: Option<MappedFile>,
}

/// A cursor with typed keys and values.
#[derive(Debug)]
pub struct TableCursor<'tx, K: TransactionKind, T: Table> {
    cursor: Cursor<'tx, K>,
    /// Set on a walking cursor ([`Txn::walking_cursor`]).
    walked: Option<Walked>,
    _table: PhantomData<T>,
}

/// Dups written per MDBX call by [`TableCursor::replace_dups`].
const REPLACE_DUPS_PER_CALL: usize = 4096;

type Entry<T> = (<T as Table>::Key, <T as Table>::Value);
type RawEntry<'tx> = Result<Option<(Cow<'tx, [u8]>, Cow<'tx, [u8]>)>, signet_libmdbx::ReadError>;

impl<'tx, K: TransactionKind, T: Table> TableCursor<'tx, K, T> {
    /// One more entry read or written: a walking cursor releases the mapped pages now and then.
    fn step(&self) {
        if let Some(walked) = &self.walked {
            let n = walked.entries.get() + 1;
            if n == RELEASE_EVERY {
                walked.entries.set(0);
                release_mapped(walked.file.as_ref());
            } else {
                walked.entries.set(n);
            }
        }
    }

    fn entry(&self, op: &'static str, raw: RawEntry<'tx>, key_hint: &[u8]) -> DbResult<Option<Entry<T>>> {
        self.step();
        match raw.map_err(|e| read_err(op, T::ID.name(), key_hint, e))? {
            None => Ok(None),
            Some((k, v)) => Ok(Some((decode_key::<T>(&k)?, decode_value::<T>(&k, &v)?))),
        }
    }

    fn value(
        &self,
        op: &'static str,
        raw: Result<Option<Cow<'tx, [u8]>>, signet_libmdbx::ReadError>,
        key: &[u8],
    ) -> DbResult<Option<T::Value>> {
        self.step();
        match raw.map_err(|e| read_err(op, T::ID.name(), key, e))? {
            None => Ok(None),
            Some(v) => Ok(Some(decode_value::<T>(key, &v)?)),
        }
    }

    /// The first entry.
    pub fn first(&mut self) -> DbResult<Option<Entry<T>>> {
        let raw = self.cursor.first();
        self.entry("first", raw, &[])
    }

    /// The last entry (the last dup of the last key).
    pub fn last(&mut self) -> DbResult<Option<Entry<T>>> {
        let raw = self.cursor.last();
        self.entry("last", raw, &[])
    }

    /// The next entry (next dup, or the first dup of the next key).
    pub fn next_entry(&mut self) -> DbResult<Option<Entry<T>>> {
        let raw = self.cursor.next();
        self.entry("next", raw, &[])
    }

    /// The previous entry.
    pub fn prev_entry(&mut self) -> DbResult<Option<Entry<T>>> {
        let raw = self.cursor.prev();
        self.entry("prev", raw, &[])
    }

    /// The first entry whose key is ≥ `key`.
    pub fn seek(&mut self, key: &T::Key) -> DbResult<Option<Entry<T>>> {
        let k = key.encode_key();
        let raw = self.cursor.set_range(k.as_ref());
        self.entry("seek", raw, k.as_ref())
    }

    /// The key of the first entry whose key is ≥ `key`, its value not decoded: a seek for where
    /// something ends, which lands on whatever comes next.
    pub fn seek_key(&mut self, key: &T::Key) -> DbResult<Option<T::Key>> {
        let k = key.encode_key();
        let raw = self.cursor.set_range::<Cow<'tx, [u8]>, Cow<'tx, [u8]>>(k.as_ref());
        self.step();
        match raw.map_err(|e| read_err("seek", T::ID.name(), k.as_ref(), e))? {
            None => Ok(None),
            Some((found, _)) => Ok(Some(decode_key::<T>(&found)?)),
        }
    }

    /// The first value (dup) at exactly `key`.
    pub fn seek_exact(&mut self, key: &T::Key) -> DbResult<Option<T::Value>> {
        let k = key.encode_key();
        let raw = self.cursor.set(k.as_ref());
        self.value("seek exact", raw, k.as_ref())
    }

    /// The first dup of the next key.
    pub fn next_key(&mut self) -> DbResult<Option<Entry<T>>> {
        let raw = self.cursor.next_nodup();
        self.entry("next key", raw, &[])
    }
}

/// Dup operations: only on tables that keep sorted duplicates.
impl<'tx, K: TransactionKind, T: DupTable> TableCursor<'tx, K, T> {
    /// The next dup of the current key.
    pub fn next_dup(&mut self) -> DbResult<Option<T::Value>> {
        let raw = self.cursor.next_dup::<Cow<'tx, [u8]>, Cow<'tx, [u8]>>().map(|o| o.map(|(_, v)| v));
        self.value("next dup", raw, &[])
    }

    /// The last dup of the current key.
    pub fn last_dup(&mut self) -> DbResult<Option<T::Value>> {
        let raw = self.cursor.last_dup();
        self.value("last dup", raw, &[])
    }

    /// Every dup at `key`, in order: a DupFixed table's a leaf page at a time (a holder of
    /// thousands of tokens is read in a few calls, not thousands).
    pub fn dups(&mut self, key: &T::Key) -> DbResult<Vec<T::Value>> {
        let Some(first) = self.seek_exact(key)? else { return Ok(Vec::new()) };
        // On the key's first dup, which opens its first page of dups.
        let page = match T::ID.layout() {
            Layout::DupFixed => self.dup_page()?,
            _ => None,
        };
        let size = first.encode_value().len();
        let Some(mut bytes) = page.filter(|p| p.len() >= size) else {
            let mut out = vec![first];
            while let Some(v) = self.next_dup()? {
                out.push(v);
            }
            return Ok(out);
        };
        let k = key.encode_key();
        let mut out = Vec::new();
        loop {
            for dup in bytes.chunks_exact(size) {
                out.push(decode_value::<T>(k.as_ref(), dup)?);
            }
            match self.next_dup_page()? {
                Some(next) if next.len() >= size => bytes = next,
                _ => return Ok(out),
            }
        }
    }

    /// The bytes of every dup on the leaf page that holds the cursor's current dup, from the
    /// page's first (MDBX's GET_MULTIPLE): a DupFixed table's dups, each of the table's one size.
    /// The cursor moves to the page's last dup.
    pub(super) fn dup_page(&mut self) -> DbResult<Option<Cow<'tx, [u8]>>> {
        self.step();
        self.cursor.get_multiple().map_err(|e| read_err("dup page", T::ID.name(), &[], e))
    }

    /// The bytes of the next leaf page of the current key's dups (MDBX's NEXT_MULTIPLE); `None`
    /// after its last.
    pub(super) fn next_dup_page(&mut self) -> DbResult<Option<Cow<'tx, [u8]>>> {
        self.step();
        let page = self.cursor.next_multiple::<Cow<'tx, [u8]>, Cow<'tx, [u8]>>();
        Ok(page.map_err(|e| read_err("next dup page", T::ID.name(), &[], e))?.map(|(_, v)| v))
    }

    /// The previous dup of the current key.
    pub fn prev_dup(&mut self) -> DbResult<Option<T::Value>> {
        let raw = self.cursor.prev_dup::<Cow<'tx, [u8]>, Cow<'tx, [u8]>>().map(|o| o.map(|(_, v)| v));
        self.value("prev dup", raw, &[])
    }

    /// Positions at exactly `key` with dup `value`; returns whether it is there.
    pub fn seek_both(&mut self, key: &T::Key, value: &T::Value) -> DbResult<bool> {
        let k = key.encode_key();
        let found: Option<Cow<'tx, [u8]>> = self
            .cursor
            .get_both(k.as_ref(), &value.encode_value())
            .map_err(|e| read_err("seek both", T::ID.name(), k.as_ref(), e))?;
        Ok(found.is_some())
    }

    /// Number of dups at the cursor's current key.
    pub fn dup_count(&self) -> DbResult<usize> {
        self.cursor.dup_count().map_err(|e| table_err("count dups", T::ID.name(), &[], e))
    }
}

impl<'tx, K: TransactionKind, T: DupSubKey> TableCursor<'tx, K, T> {
    /// The first dup at `key` whose sub-key is `sub` or later (MDBX's GET_BOTH_RANGE).
    pub fn seek_sub_key(&mut self, key: &T::Key, sub: &T::SubKey) -> DbResult<Option<T::Value>> {
        let k = key.encode_key();
        let raw = self.cursor.get_both_range(k.as_ref(), &T::seek_bytes(sub));
        self.value("seek dup", raw, k.as_ref())
    }

    /// The first dup at `key` whose sub-key is exactly `sub`.
    pub fn seek_sub_key_exact(&mut self, key: &T::Key, sub: &T::SubKey) -> DbResult<Option<T::Value>> {
        Ok(self.seek_sub_key(key, sub)?.filter(|v| T::sub_key(v) == *sub))
    }
}

impl<T: Table> TableCursor<'_, Rw, T> {
    /// Deletes the entry under the cursor (one dup in a dupsort table).
    pub fn delete_current(&mut self) -> DbResult<()> {
        self.cursor.del().map_err(|e| table_err("delete", T::ID.name(), &[], e))
    }

    /// Deletes `key` (in a dupsort table, its first dup), moving the cursor there. Returns
    /// whether something was deleted. A cursor that walks keys in order finds each one near the
    /// last.
    pub fn delete(&mut self, key: &T::Key) -> DbResult<bool> {
        let found = self.seek_exact(key)?.is_some();
        if found {
            self.delete_current()?;
        }
        Ok(found)
    }

    /// Writes an entry that sorts after every entry of the table (in a dupsort table: a key after
    /// the last key, or a dup after the last dup of the last key). MDBX then splits a full page
    /// at its end, not in its middle, so pages written this way stay full. An entry out of order
    /// is an error and writes nothing.
    pub fn append(&mut self, key: &T::Key, value: &T::Value) -> DbResult<()> {
        let k = key.encode_key();
        let flags = match T::ID.layout() {
            Layout::Plain => WriteFlags::APPEND,
            Layout::DupSort | Layout::DupFixed => WriteFlags::APPEND | WriteFlags::APPEND_DUP,
        };
        self.cursor
            .put(k.as_ref(), &value.encode_value(), flags)
            .map_err(|e| table_err("append", T::ID.name(), k.as_ref(), e))?;
        self.step();
        Ok(())
    }

    /// Writes through the cursor (adds a dup in a dupsort table).
    pub fn put(&mut self, key: &T::Key, value: &T::Value) -> DbResult<()> {
        let k = key.encode_key();
        self.cursor
            .put(k.as_ref(), &value.encode_value(), WriteFlags::UPSERT)
            .map_err(|e| table_err("put", T::ID.name(), k.as_ref(), e))?;
        self.step();
        Ok(())
    }
}

/// Dup writes: only on tables that keep sorted duplicates.
impl<T: DupTable> TableCursor<'_, Rw, T> {
    /// Deletes dup `value` of `key`, moving the cursor there. Returns whether it was there.
    pub fn delete_dup(&mut self, key: &T::Key, value: &T::Value) -> DbResult<bool> {
        let found = self.seek_both(key, value)?;
        if found {
            self.delete_current()?;
        }
        Ok(found)
    }

    /// Adds `values` as dups of `key` in one call (a DupFixed table: every value encodes to the
    /// same size). They are written in the table's order, which MDBX takes fastest. Returns how
    /// many were added.
    pub fn put_dups(&mut self, key: &T::Key, values: &[T::Value]) -> DbResult<usize> {
        let k = key.encode_key();
        let encoded: Vec<Vec<u8>> = values.iter().map(ValueCodec::encode_value).collect();
        let Some(size) = encoded.first().map(Vec::len) else { return Ok(0) };
        if encoded.iter().any(|v| v.len() != size) {
            return Err(table_err("put dups", T::ID.name(), k.as_ref(), MdbxError::BadValSize));
        }
        let mut sorted: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
        sorted.sort_unstable();
        let bytes = sorted.concat();
        self.cursor
            .put_multiple(k.as_ref(), &bytes, size)
            .map_err(|e| table_err("put dups", T::ID.name(), k.as_ref(), e))
    }

    /// Makes `values` the only dups of `key` (a DupFixed table): deletes the old ones, then adds
    /// these in a few large calls. `values` must be in the table's order (their encodings
    /// ascending) and unique.
    pub fn replace_dups(&mut self, key: &T::Key, values: &[T::Value]) -> DbResult<()> {
        let k = key.encode_key();
        let mut bytes = Vec::new();
        let mut size = 0;
        for v in values {
            let encoded = v.encode_value();
            size = encoded.len();
            debug_assert!(
                bytes.len() < size || bytes[bytes.len() - size..] < encoded[..],
                "dups out of order"
            );
            bytes.extend_from_slice(&encoded);
        }
        if bytes.len() != size * values.len() {
            return Err(table_err("replace dups", T::ID.name(), k.as_ref(), MdbxError::BadValSize));
        }
        // Not MDBX_MULTIPLE|MDBX_ALLDUPS: in this libmdbx it keeps old dups of a key with a
        // nested tree and inserts out of order (found by the compaction test).
        self.cursor
            .del_all_dups_of(k.as_ref())
            .map_err(|e| table_err("replace dups", T::ID.name(), k.as_ref(), e))?;
        // In slices: MDBX reserves dirty-page room for a whole call up front, and a token's
        // ranking in one call can ask for more than the transaction's dirty-page limit.
        for slice in bytes.chunks(size.max(1) * REPLACE_DUPS_PER_CALL) {
            self.cursor
                .put_multiple(k.as_ref(), slice, size)
                .map_err(|e| table_err("replace dups", T::ID.name(), k.as_ref(), e))?;
        }
        Ok(())
    }
}
