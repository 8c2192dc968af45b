//! The tables do not depend on how blocks are batched. Written one block per transaction, 20
//! per transaction and all at once, a chain gives the same bytes in every table. One block per
//! transaction changes few of a token's thousands of holders, so its ranking is moved holder by
//! holder; big batches change most of them, so it is rewritten whole: both ways must agree.

use crate::common;

use common::transfer_chain::{index, raw_tables};
use ots_indexer::{
    db::{AccessMode, Db},
    index::check::check,
};

#[test]
fn batch_size_changes_no_byte() {
    let mut tables = Vec::new();
    for per_batch in [1, 20, 300] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
        // Built up in big batches first, so that one-block batches then meet thousands of holders.
        index(&db, 0, 200, 100);
        index(&db, 200, 300, per_batch);
        check(&db.begin_read().expect("read")).unwrap_or_else(|e| panic!("{per_batch} per batch: {e}"));
        tables.push((per_batch, raw_tables(&db)));
    }
    let (_, first) = &tables[0];
    for (per_batch, other) in &tables[1..] {
        for (i, (a, b)) in first.iter().zip(other).enumerate() {
            assert!(
                a == b,
                "table {} differs with {per_batch} blocks per batch",
                ots_indexer::db::tables::TableId::ALL[i].name()
            );
        }
    }
}

/// With every MDBX reader slot taken (API clients, say), a batch can open no read snapshot: it
/// resolves its balances inside the write transaction and writes every table in place, and the
/// tables come out the same.
#[test]
fn a_batch_without_a_reader_slot_writes_the_same_tables() {
    let reference = tempfile::tempdir().expect("tempdir");
    let reference = Db::open(reference.path(), AccessMode::ReadWrite).expect("db");
    index(&reference, 0, 60, 20);

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    index(&db, 0, 20, 20);
    let mut held = Vec::new();
    while let Ok(reader) = db.begin_read() {
        held.push(reader);
        assert!(held.len() <= 4096, "reader slots never ran out");
    }
    index(&db, 20, 60, 20);
    drop(held);
    check(&db.begin_read().expect("read")).expect("consistent");
    assert!(raw_tables(&db) == raw_tables(&reference), "the tables differ from those of the usual path");
}
