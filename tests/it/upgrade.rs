//! `ots-indexer migrate`: a format-8 database, as the last format-8 release wrote it, upgrades in
//! place to exactly what a fresh index of the same chain holds, and a kill -9 during the upgrade
//! leaves a database that opens and upgrades on the next try.
//!
//! The format-8 database is `tests/fixtures/format8.mdbx.zst`, written by commit 3be58cb
//! (format 8) from the generated chain of seed 9 with 20,000 transactions:
//! `gen_chain 20000 9 chain.rec.zst`, then `ots-indexer sync --exit-at-head --batch-blocks 8
//! --reorg-window 64 --source chain.rec.zst`, then `compact`. Its reorg window is full (64 of
//! its 136 blocks), so every window table has rows to carry over.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use ots_indexer::{
    db::{
        state::{self, StateError, FORMAT_VERSION},
        tables::TableId,
        AccessMode, Db, DbError, DATA_FILE,
    },
    index::{
        check::{check, dump_hash},
        upgrade::{upgrade, Upgraded},
    },
};

use crate::synthetic::{generate, index};

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");

/// Unpacks the format-8 fixture into `dir`.
fn format_8_database(dir: &Path) -> PathBuf {
    let packed = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format8.mdbx.zst");
    let bytes = zstd::decode_all(std::fs::File::open(&packed).expect("fixture")).expect("unpack fixture");
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join(DATA_FILE), bytes).expect("write fixture");
    dir.to_path_buf()
}

/// A fresh format-9 index of the fixture's chain, made as the fixture was.
async fn fresh_index(dir: &Path) -> Db {
    let recording = generate(dir, "chain.rec.zst", 9, 20_000).await;
    index(&recording, &dir.join("fresh"), 8, 64).await.0
}

/// Every table but the indexer's state holds the same bytes in both, and `check --hash` agrees.
fn assert_same_tables(upgraded: &Db, fresh: &Db) {
    let (a, b) = (upgraded.begin_read().expect("read"), fresh.begin_read().expect("read"));
    for table in TableId::ALL.iter().filter(|t| **t != TableId::OtsIndexerState) {
        let (ours, theirs) = (a.raw_entries(*table).expect("scan"), b.raw_entries(*table).expect("scan"));
        assert!(ours == theirs, "{}: {} entries upgraded, {} fresh", table.name(), ours.len(), theirs.len());
    }
    check(&a).expect("the upgraded database passes check");
    drop((a, b));
    assert_eq!(dump_hash(upgraded).expect("hash"), dump_hash(fresh).expect("hash"));
}

fn format_of(datadir: &Path) -> u64 {
    let db = Db::open(datadir, AccessMode::ReadOnly);
    match db {
        Ok(db) => {
            state::read_state(&db.begin_read().expect("read")).expect("state").format_version.expect("format")
        }
        // Killed before the tables this build adds were created.
        Err(DbError::OtherFormat { found, .. }) => found,
        Err(e) => panic!("the database does not open after a kill: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_8_database_upgrades_in_place_to_a_fresh_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let datadir = format_8_database(&dir.path().join("old"));

    // Untouched, it is refused with the way forward, by readers and writers alike.
    let refused =
        Db::open(&datadir, AccessMode::ReadOnly).expect_err("a format-8 file lacks format-9 tables");
    assert!(matches!(refused, DbError::OtherFormat { found: 8, .. }), "{refused}");
    assert!(refused.to_string().contains("ots-indexer migrate"), "{refused}");
    // `compact`, whose copy holds only this build's tables, would lose the old names' rows.
    let compact = Command::new(BIN).args(["compact", "--datadir"]).arg(&datadir).output().expect("compact");
    assert!(!compact.status.success(), "compact of a format-8 database must be refused");
    assert!(String::from_utf8_lossy(&compact.stderr).contains("ots-indexer migrate"), "{compact:?}");
    let db = Db::open(&datadir, AccessMode::ReadWrite).expect("open");
    let state = state::read_state(&db.begin_read().expect("read")).expect("state");
    let refused = state::check_usable(&state).expect_err("format 8");
    assert!(matches!(refused, StateError::Upgradable { found: 8, expected: FORMAT_VERSION }), "{refused}");

    let done = upgrade(&db).expect("upgrade");
    let Upgraded::From { version: 8, renamed, .. } = done else { panic!("{done:?}") };
    assert!(
        renamed.iter().all(|(_, _, entries)| *entries > 0),
        "every renamed window table had rows: {renamed:?}"
    );
    assert_eq!(upgrade(&db).expect("again"), Upgraded::AlreadyCurrent);
    let fresh = fresh_index(dir.path()).await;
    for table in [TableId::OtsRecentHolderCounts, TableId::OtsRecentHolderRanks] {
        assert!(
            db.begin_read().expect("read").raw_entries(table).expect("scan").len() > 10,
            "{}",
            table.name()
        );
    }
    assert_same_tables(&db, &fresh);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_the_upgrade_leaves_a_database_that_upgrades_next_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let datadir = format_8_database(&dir.path().join("old"));
    let migrate = |datadir: &Path| {
        Command::new(BIN)
            .args(["migrate", "--log", "warn", "--datadir"])
            .arg(datadir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn migrate")
    };
    let mut killed_before_commit = 0;
    for delay_ms in [5, 10, 20, 30, 40, 60, 80, 110, 150] {
        if format_of(&datadir) == FORMAT_VERSION {
            break;
        }
        let mut child = migrate(&datadir);
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SIGKILL: no destructor, no commit runs.
        child.kill().expect("kill");
        child.wait().expect("wait");
        match format_of(&datadir) {
            8 => killed_before_commit += 1,
            9 => {}
            other => panic!("format {other} after a kill"),
        }
    }
    assert!(killed_before_commit > 0, "no kill landed before the upgrade committed");
    let out = migrate(&datadir).wait_with_output().expect("migrate");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(format_of(&datadir), FORMAT_VERSION);
    let db = Db::open(&datadir, AccessMode::ReadWrite).expect("open");
    let fresh = fresh_index(dir.path()).await;
    assert_same_tables(&db, &fresh);
}
