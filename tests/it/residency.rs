//! Database pages this process reads through MDBX's memory map stop counting in its resident
//! memory once released: on request (`Db::release_mapped_pages`), after every batch the writer
//! commits, and every few thousand entries while a table is rewritten whole. Measured here as
//! the kernel reports it: the `Rss` of the data file's mapping in /proc/self/smaps.
#![cfg(target_os = "linux")]

use crate::common;

use std::path::Path;

use alloy::primitives::Address;
use common::transfer_chain::{index, raw_tables};
use ots_indexer::{
    db::{
        tables::{OtsERC20TransferCounter, OtsERC20TransferIndex},
        AccessMode, Db, DATA_FILE,
    },
    index::address_index::{append_ids, rewrite_with_appends},
};

/// KiB of `dir`'s data file resident in this process's memory map.
fn mapped_kib(dir: &Path) -> u64 {
    let file = dir.join(DATA_FILE);
    let file = file.to_str().expect("utf-8 path");
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let mut ours = false;
    let mut kib = 0;
    for line in smaps.lines() {
        let first = line.split_ascii_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: range, perms, offset, device, inode, path.
            ours = line.ends_with(file);
        } else if ours {
            if let Some(rss) = line.strip_prefix("Rss:") {
                kib += rss.trim().trim_end_matches("kB").trim().parse::<u64>().expect("Rss");
            }
        }
    }
    kib
}

fn fresh() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    (dir, db)
}

#[test]
fn released_pages_leave_the_resident_set_and_read_back_the_same() {
    let (dir, db) = fresh();
    index(&db, 0, 120, 40);
    let tables = raw_tables(&db);
    let read = mapped_kib(dir.path());
    assert!(read >= 1024, "reading every table mapped only {read} KiB");
    db.release_mapped_pages();
    assert_eq!(mapped_kib(dir.path()), 0);
    assert!(raw_tables(&db) == tables, "the tables read differently after the release");
    // A write transaction's release works the same way.
    let txn = db.begin_write().expect("write");
    let _ = txn.raw_entries(ots_indexer::db::tables::TableId::OtsERC20Holdings).expect("entries");
    assert!(mapped_kib(dir.path()) > 0);
    txn.release_mapped_pages();
    assert_eq!(mapped_kib(dir.path()), 0);
}

#[test]
fn a_committed_batch_leaves_no_page_mapped() {
    let (dir, db) = fresh();
    // Big batches (whole-table rewrites) and one-block batches (seeks in place) alike.
    index(&db, 0, 120, 40);
    assert_eq!(mapped_kib(dir.path()), 0, "after big batches");
    for n in 120..125 {
        index(&db, n, n + 1, 1);
        assert_eq!(mapped_kib(dir.path()), 0, "after the one-block batch {n}");
    }
}

#[test]
fn a_whole_table_rewrite_keeps_little_of_the_old_table_mapped() {
    type I = OtsERC20TransferIndex;
    type C = OtsERC20TransferCounter;
    let (dir, db) = fresh();
    let addresses: Vec<Address> =
        (0..200_000u64).map(|n| Address::left_padding_from(&(n + 1).to_be_bytes())).collect();
    let txn = db.begin_write().expect("write");
    for a in &addresses {
        append_ids::<I, C>(&txn, a, &[1]).expect("append");
    }
    txn.commit().expect("commit");
    db.release_mapped_pages();
    let table_kib = {
        let txn = db.begin_read().expect("read");
        (txn.stats::<I>().expect("stats").bytes + txn.stats::<C>().expect("stats").bytes) / 1024
    };

    let before = db.begin_read().expect("snapshot");
    let txn = db.begin_write().expect("write");
    let second = [2u64];
    rewrite_with_appends::<I, C, _>(&txn, &before, addresses.iter().map(|a| (*a, &second[..])))
        .expect("rewrite");
    // The whole old table was read; without the releases along the way it would all be mapped.
    let mapped = mapped_kib(dir.path());
    assert!(
        mapped * 2 < table_kib,
        "{mapped} KiB of the database mapped after rewriting {table_kib} KiB of tables"
    );
    txn.commit().expect("commit");
}
