//! Repacking a table inside a write transaction: every entry spilled in key order to a file,
//! the table emptied, the entries appended back. The table holds the same entries afterwards,
//! its pages full, as `compact` leaves them (see `compact` for why appending fills pages).
//!
//! A merge that inserts keys among a table's existing ones splits pages in their middle and
//! leaves them about two thirds full; a repack undoes that at the cost of one sequential read
//! and one sequential append of the table, and a file as large as its entries for the while.

use std::{
    fs::File,
    io::{BufReader, BufWriter, Read, Write},
    path::{Path, PathBuf},
};

use signet_libmdbx::WriteFlags;

use super::{
    error::{table_err, DbError, DbResult},
    tables::{Layout, TableId},
    WriteTxn,
};
use crate::etl::EtlError;

/// Rewrites `table` in `txn` with its pages full, spilling its entries to a file in `dir`
/// (removed afterwards, also on an error). Returns the entries it holds.
pub fn repack(txn: &WriteTxn, table: TableId, dir: &Path) -> DbResult<u64> {
    let path = dir.join(format!("repack-{}.bin", table.name()));
    let result = repack_through(txn, table, &path);
    let _ = std::fs::remove_file(&path);
    result
}

fn repack_through(txn: &WriteTxn, table: TableId, path: &Path) -> DbResult<u64> {
    let io = |error: std::io::Error| DbError::from(EtlError::Io { path: PathBuf::from(path), error });
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io)?);
    let mut written = 0u64;
    let mut failed: Option<std::io::Error> = None;
    txn.for_each_raw(table, |key, value| {
        if failed.is_some() {
            return;
        }
        match write_framed(&mut out, key).and_then(|()| write_framed(&mut out, value)) {
            Ok(()) => written += 1,
            Err(e) => failed = Some(e),
        }
    })?;
    if let Some(error) = failed {
        return Err(io(error));
    }
    out.into_inner().map_err(|e| io(e.into_error()))?.sync_data().map_err(io)?;
    txn.clear_raw(table)?;
    let flags = match table.layout() {
        Layout::Plain => WriteFlags::APPEND,
        Layout::DupSort | Layout::DupFixed => WriteFlags::APPEND | WriteFlags::APPEND_DUP,
    };
    let mut input = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    let mut writer = txn.raw_cursor(table)?;
    let (mut key, mut value) = (Vec::new(), Vec::new());
    for _ in 0..written {
        read_framed(&mut input, &mut key).map_err(io)?;
        read_framed(&mut input, &mut value).map_err(io)?;
        writer.put(&key, &value, flags).map_err(|e| table_err("append", table.name(), &key, e))?;
    }
    drop(writer);
    let held = txn.stats_of(table)?.entries;
    if held != written {
        return Err(DbError::Corrupt {
            table: table.name(),
            key: String::new(),
            reason: format!("repacked {written} entries, the table holds {held}"),
        });
    }
    Ok(written)
}

/// Writes `bytes` after their length (4 bytes, little-endian).
fn write_framed(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "an entry over 4 GiB"))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(bytes)
}

/// Reads one byte string [`write_framed`] wrote into `into`.
fn read_framed(input: &mut impl Read, into: &mut Vec<u8>) -> std::io::Result<()> {
    let mut len = [0u8; 4];
    input.read_exact(&mut len)?;
    into.resize(u32::from_le_bytes(len) as usize, 0);
    input.read_exact(into)
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{Address, U256};

    use super::*;
    use crate::db::{
        codec::{Rank, TokenIdKey},
        tables::{OtsERC721Owners, OtsTokenHolderRanks},
        AccessMode, Db,
    };

    /// Keys spread over the table in an order no page split at its end: a multiplicative
    /// permutation of `0..n`.
    fn scattered(n: u64) -> impl Iterator<Item = u64> {
        (0..n).map(move |i| (i * 7_919) % n)
    }

    fn owner_key(i: u64) -> TokenIdKey {
        TokenIdKey { token: Address::with_last_byte((i % 7) as u8), id: U256::from(i) }
    }

    fn rank(i: u64) -> Rank {
        Rank { balance: U256::from(i * 3 + 1), holder: Address::with_last_byte((i % 251) as u8) }
    }

    /// A database whose owner and rank tables were filled out of key order (pages split in their
    /// middle, as a stage's merge leaves them).
    fn swollen_db(dir: &Path) -> Db {
        let db = Db::open(dir, AccessMode::ReadWrite).expect("open");
        let txn = db.begin_write().expect("write");
        for i in scattered(20_000) {
            txn.put::<OtsERC721Owners>(&owner_key(i), &Address::with_last_byte((i % 200) as u8))
                .expect("put");
            txn.put::<OtsTokenHolderRanks>(&Address::with_last_byte((i % 5) as u8), &rank(i)).expect("put");
        }
        txn.commit().expect("commit");
        db
    }

    #[test]
    fn a_repacked_table_holds_the_same_entries_in_fewer_pages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = swollen_db(&dir.path().join("db"));
        for table in [TableId::OtsERC721Owners, TableId::OtsTokenHolderRanks] {
            let before = db.begin_read().expect("read").raw_entries(table).expect("entries");
            let txn = db.begin_write().expect("write");
            let swollen = txn.stats_of(table).expect("stats");
            assert_eq!(repack(&txn, table, dir.path()).expect("repack"), before.len() as u64);
            let packed = txn.stats_of(table).expect("stats");
            txn.commit().expect("commit");
            assert_eq!(
                db.begin_read().expect("read").raw_entries(table).expect("entries"),
                before,
                "{table:?}"
            );
            assert!(
                packed.bytes * 6 < swollen.bytes * 5,
                "{table:?}: {} bytes, {} before",
                packed.bytes,
                swollen.bytes
            );
            assert!(
                !dir.path().join(format!("repack-{}.bin", table.name())).exists(),
                "the spill file is removed"
            );
        }
    }

    #[test]
    fn a_spill_that_cannot_be_written_fails_with_its_path_and_leaves_the_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = swollen_db(&dir.path().join("db"));
        let table = TableId::OtsERC721Owners;
        let before = db.begin_read().expect("read").raw_entries(table).expect("entries");
        let txn = db.begin_write().expect("write");
        let missing = dir.path().join("no-such-dir");
        let err = repack(&txn, table, &missing).expect_err("the spill directory does not exist");
        assert!(err.to_string().contains("no-such-dir"), "{err}");
        assert_eq!(txn.raw_entries(table).expect("entries"), before);
    }
}
