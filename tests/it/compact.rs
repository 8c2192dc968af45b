//! `ots-indexer compact` through the binary: the database comes out smaller and the same byte
//! for byte; a database another process has open is refused and left alone; the copy an
//! interrupted compact left behind is cleared.

use crate::common;

use std::{path::Path, process::Command};

use common::transfer_chain::{index, raw_tables};
use ots_indexer::db::{tables::TableId, AccessMode, Db};

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");
/// Bytes of the balance table and its ranking: one-block batches change rows all over them in
/// place (as the blocks leave the reorg window), so their pages split in the middle.
fn balances_bytes(db: &Db) -> u64 {
    let stats = db.begin_read().expect("read").table_stats().expect("stats");
    let balances = [TableId::OtsTokenBalances, TableId::OtsTokenHolderRanks];
    stats.iter().filter(|t| balances.contains(&t.table)).map(|t| t.bytes).sum()
}

fn compact(dir: &Path) -> std::process::Output {
    Command::new(BIN).args(["compact", "--datadir"]).arg(dir).output().expect("run ots-indexer")
}

#[test]
fn compact_rewrites_in_place_smaller_and_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    // One block per transaction, as at the tip: every table is written in place.
    index(&db, 0, 200, 1);
    let before = raw_tables(&db);
    let bytes_before = balances_bytes(&db);

    // Open here: compact must refuse and change nothing.
    let out = compact(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "compact ran beside an open database");
    assert!(stderr.contains("another process has the database open"), "stderr: {stderr}");
    assert_eq!(raw_tables(&db), before);
    drop(db);

    // What an interrupted compact leaves: a half-made copy beside the database.
    std::fs::create_dir(dir.path().join("compacting")).expect("mkdir");
    std::fs::write(dir.path().join("compacting/mdbx.dat"), b"half a copy").expect("write");

    let out = compact(dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "compact failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("OtsTokenBalances") && stdout.contains("smaller"), "stdout: {stdout}");
    assert!(!dir.path().join("compacting").exists(), "the scratch copy is left behind");
    let out = Command::new(BIN).args(["check", "--datadir"]).arg(dir.path()).output().expect("check");
    assert!(out.status.success(), "check: {}", String::from_utf8_lossy(&out.stderr));

    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("reopen");
    assert_eq!(raw_tables(&db), before, "compact changed an entry");
    let bytes_after = balances_bytes(&db);
    assert!(bytes_after * 10 < bytes_before * 9, "only {bytes_before} -> {bytes_after} bytes: {stdout}");

    // The compacted database takes more blocks as any other.
    index(&db, 200, 240, 20);
    let fresh_dir = tempfile::tempdir().expect("tempdir");
    let fresh = Db::open(fresh_dir.path(), AccessMode::ReadWrite).expect("fresh");
    index(&fresh, 0, 240, 20);
    assert_eq!(raw_tables(&db), raw_tables(&fresh));
}

#[test]
fn compact_without_a_database_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = compact(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("holds no database"), "stderr: {stderr}");
    assert!(std::fs::read_dir(dir.path()).expect("read dir").next().is_none(), "compact created files");
}
