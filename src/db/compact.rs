//! The compacting copy: every table rewritten in key order into a new database, pages full.
//!
//! Batches lengthen values at keys spread over the whole table (the last chunk of every address
//! they touch). MDBX splits a page that overflows in the middle, so such tables settle at pages
//! about two thirds full. Appending in key order splits at the end instead — the page left
//! behind stays full — so the copy is about a third smaller. The bytes are copied as stored: the
//! copy is the same database, entry for entry.

use std::{borrow::Cow, path::Path, time::Instant};

use signet_libmdbx::{MdbxError, WriteFlags};
use tracing::info;

use super::{
    error::{read_err, table_err, DbError, DbResult},
    tables::{Layout, TableId},
    AccessMode, Db,
};

/// Keys and values written per transaction of the copy: bounds the dirty pages it holds.
const COMMIT_EVERY_BYTES: usize = 64 << 20;

/// One table, before and after the copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableCopy {
    /// The table.
    pub table: TableId,
    /// Entries copied (each dup counts one).
    pub entries: u64,
    /// Bytes of its pages in the source.
    pub bytes_before: u64,
    /// Bytes of its pages in the copy.
    pub bytes_after: u64,
    /// Seconds spent writing the copy (puts and commits, not reading the source): a plain
    /// sorted insert of exactly these entries, the floor for any writer of this table.
    pub insert_seconds: f64,
}

/// Copies every table of `source` (one read snapshot of it) into a new database at `dest`, which
/// must not exist yet. Returns each table's entries and sizes; fails if any table's entry count
/// differs afterwards.
pub fn compact_into(source: &Db, dest: &Path) -> DbResult<Vec<TableCopy>> {
    if dest.exists() {
        return Err(DbError::Open {
            path: dest.to_path_buf(),
            source: MdbxError::Other(17).into(),
            hint: " (a compacting copy is written to a directory that does not exist yet)",
        });
    }
    let target = Db::open(dest, AccessMode::ReadWrite)?;
    let snapshot = source.begin_read()?;
    let mut copies = Vec::with_capacity(TableId::ALL.len());
    for before in snapshot.table_stats()? {
        let table = before.table;
        // Dupsort tables: a new key must sort after the last one (APPEND), a dup after the last
        // dup of its key (APPENDDUP); either way the copy only ever writes at the end.
        let flags = match table.layout() {
            Layout::Plain => WriteFlags::APPEND,
            Layout::DupSort | Layout::DupFixed => WriteFlags::APPEND | WriteFlags::APPEND_DUP,
        };
        let mut reader = snapshot.raw_cursor(table)?;
        let mut next = reader.first::<Cow<'_, [u8]>, Cow<'_, [u8]>>();
        let mut entries = 0u64;
        let mut done = false;
        let mut insert_seconds = 0.0;
        // Read a slice of the table, then write it: the write alone is timed.
        let mut slice: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        while !done {
            slice.clear();
            let mut pending = 0usize;
            while pending < COMMIT_EVERY_BYTES {
                let read = std::mem::replace(&mut next, Ok(None));
                let Some((key, value)) = read.map_err(|e| read_err("copy", table.name(), &[], e))? else {
                    done = true;
                    break;
                };
                pending += key.len() + value.len();
                slice.push((key.into_owned(), value.into_owned()));
                next = reader.next();
            }
            let started = Instant::now();
            let txn = target.begin_write()?;
            {
                let mut writer = txn.raw_cursor(table)?;
                for (key, value) in &slice {
                    writer.put(key, value, flags).map_err(|e| table_err("append", table.name(), key, e))?;
                }
            }
            txn.commit()?;
            insert_seconds += started.elapsed().as_secs_f64();
            entries += slice.len() as u64;
        }
        if entries != before.entries {
            return Err(DbError::Corrupt {
                table: table.name(),
                key: String::new(),
                reason: format!("the copy read {entries} entries where the table counts {}", before.entries),
            });
        }
        copies.push(TableCopy { table, entries, bytes_before: before.bytes, bytes_after: 0, insert_seconds });
        info!(target: "ots::db", table = table.name(), entries, "table copied");
    }
    let after = target.begin_read()?.table_stats()?;
    for (copy, after) in copies.iter_mut().zip(after) {
        if after.entries != copy.entries {
            return Err(DbError::Corrupt {
                table: copy.table.name(),
                key: String::new(),
                reason: format!("the copy holds {} entries, the source {}", after.entries, copy.entries),
            });
        }
        copy.bytes_after = after.bytes;
    }
    Ok(copies)
}
