//! `ots-indexer migrate`: a format-8 database, as the last format-8 release wrote it, upgrades in
//! place (through format 9, to format 10 with the block times its chain's source gives, to
//! format 11 with received marks from its tip on, to format 12 with the internal-transaction
//! index from its tip on, to format 13 with the transfer rows index from its tip on, and to
//! format 14 with the token transfers and internal rows indexes from its tip on) to exactly what
//! a fresh index of the same chain holds without the received marks, internal transactions,
//! transfer rows, token transfers and internal rows of the blocks it had indexed, and a kill -9 during the
//! upgrade leaves a database that opens and upgrades on the next try. Without a source, or with
//! another chain's, the upgrade is refused and the database is unchanged; from format 10 none is
//! needed.
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
        tables::{
            OtsInternalTxCounter, OtsPartyTokenCounter, OtsTokenTransfersCounter, OtsTransferRowsCounter,
            TableId,
        },
        AccessMode, Db, DbError, DATA_FILE,
    },
    index::{
        check::{check, dump_hash},
        upgrade::{upgrade, UpgradeError, Upgraded},
    },
    source::synthetic::{Shape, SyntheticChain},
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

/// The fixture's chain, as a source of its blocks.
fn fixture_chain() -> SyntheticChain {
    SyntheticChain::new(9, 20_000, Shape::MAINNET)
}

/// A fresh index of the fixture's chain, made as the fixture was, with the received marks and the
/// internal transactions format 10 did not keep taken out.
async fn fresh_index(dir: &Path) -> Db {
    let recording = generate(dir, "chain.rec.zst", 9, 20_000).await;
    let db = index(&recording, &dir.join("fresh"), 8, 64).await.0;
    without_received_marks(&db);
    let internal = db.begin_read().expect("read").entries::<OtsInternalTxCounter>().expect("count");
    assert!(internal > 0, "the chain's factories create contracts in inner frames");
    without_internal_txs(&db);
    let rows = db.begin_read().expect("read").entries::<OtsTransferRowsCounter>().expect("count");
    assert!(rows > 0, "the chain's routers move several tokens of a party in one transaction");
    without_transfer_rows(&db);
    let moves = db.begin_read().expect("read").entries::<OtsTokenTransfersCounter>().expect("count");
    assert!(moves > 0, "the chain's tokens move");
    without_token_transfers(&db);
    // A database this build makes keeps no party-token index unless asked to: an upgraded one
    // neither.
    let pairs = db.begin_read().expect("read").entries::<OtsPartyTokenCounter>().expect("count");
    assert_eq!(pairs, 0, "not kept by default");
    db
}

/// Empties the transfer rows index, and deletes the reorg window's rows of it (format 12 had
/// none).
fn without_transfer_rows(db: &Db) {
    use ots_indexer::db::{codec::IndexKind, tables::OtsTransferRowsIndex};
    let txn = db.begin_write().expect("write");
    txn.clear::<OtsTransferRowsIndex>().expect("clear");
    txn.clear::<OtsTransferRowsCounter>().expect("clear");
    delete_window_rows(&txn, IndexKind::TransferRows);
    txn.commit().expect("commit");
}

/// Empties the token transfers and internal rows indexes and the internal rows by block, and
/// deletes the reorg window's rows of them (format 13 had none).
fn without_token_transfers(db: &Db) {
    use ots_indexer::db::{
        codec::IndexKind,
        tables::{
            OtsInternalRowsByBlock, OtsInternalRowsCounter, OtsInternalRowsIndex, OtsTokenTransfersIndex,
        },
    };
    let txn = db.begin_write().expect("write");
    txn.clear::<OtsInternalRowsByBlock>().expect("clear");
    txn.clear::<OtsTokenTransfersIndex>().expect("clear");
    txn.clear::<OtsTokenTransfersCounter>().expect("clear");
    txn.clear::<OtsInternalRowsIndex>().expect("clear");
    txn.clear::<OtsInternalRowsCounter>().expect("clear");
    delete_window_rows(&txn, IndexKind::TokenTransfers);
    delete_window_rows(&txn, IndexKind::InternalRows);
    txn.commit().expect("commit");
}

/// Empties the internal-transaction index (the chain's factories create contracts in inner
/// frames), and deletes the reorg window's rows of it.
fn without_internal_txs(db: &Db) {
    use ots_indexer::db::{codec::IndexKind, tables::OtsInternalTxIndex};
    let txn = db.begin_write().expect("write");
    txn.clear::<OtsInternalTxIndex>().expect("clear");
    txn.clear::<OtsInternalTxCounter>().expect("clear");
    delete_window_rows(&txn, IndexKind::InternalTxs);
    txn.commit().expect("commit");
}

/// Takes out the received marks, leaving the lists as format 10 wrote them: each list packed
/// again with only its sent marks (chunks split where those alone put them), and the reorg
/// window's received rows deleted.
fn without_received_marks(db: &Db) {
    use ots_indexer::db::{
        codec::{pack_chunks, IndexKind, KeyCodec, ListKey, PackedIds, Role, ValueCodec},
        tables::OtsAppearances,
    };
    let txn = db.begin_write().expect("write");
    let mut lists: Vec<(alloy_primitives::Address, Vec<u64>, Vec<Role>)> = Vec::new();
    for (key, value) in txn.raw_entries(TableId::OtsAppearances).expect("scan") {
        let key = ListKey::decode_key(&key).expect("key");
        let chunk = PackedIds::decode_value(&value).expect("value").unpack(key.last).expect("unpack");
        let roles = chunk.roles.iter().map(|&r| if r == Role::Sent { r } else { Role::Other });
        match lists.last_mut().filter(|(a, ..)| *a == key.address) {
            Some((_, ids, marks)) => {
                ids.extend(chunk.ids);
                marks.extend(roles);
            }
            None => lists.push((key.address, chunk.ids, roles.collect())),
        }
    }
    txn.clear::<OtsAppearances>().expect("clear");
    for (address, ids, roles) in lists {
        for (last, packed) in pack_chunks(0, 0, &ids, &roles) {
            txn.put::<OtsAppearances>(&ListKey { address, last }, &packed).expect("put");
        }
    }
    delete_window_rows(&txn, IndexKind::Received);
    txn.commit().expect("commit");
}

/// Deletes the reorg window's list rows of `kind` (both tables of them).
fn delete_window_rows(txn: &ots_indexer::db::WriteTxn, kind: ots_indexer::db::codec::IndexKind) {
    use ots_indexer::db::{
        codec::{BlockNumber, KeyCodec, ListId, RecentId, RecentKey, ValueCodec},
        tables::{OtsRecentIds, OtsRecentIdsByAddress},
    };
    for (key, value) in txn.raw_entries(TableId::OtsRecentIds).expect("scan") {
        let row = RecentId::decode_value(&value).expect("row");
        if row.kind == kind {
            let block = BlockNumber::decode_key(&key).expect("block");
            txn.delete::<OtsRecentIds>(&block, Some(&row)).expect("delete");
            let by_address = RecentKey { kind: row.kind, address: row.address };
            txn.delete::<OtsRecentIdsByAddress>(&by_address, Some(&ListId(row.id))).expect("delete");
        }
    }
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

/// What `ots-indexer migrate` without a source printed, once it succeeded on `datadir`.
fn migrate_without_source(datadir: &Path) -> String {
    let done = Command::new(BIN)
        .args(["migrate", "--log", "warn", "--datadir"])
        .arg(datadir)
        .stdin(Stdio::null())
        .output()
        .expect("migrate");
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    String::from_utf8_lossy(&done.stdout).into_owned()
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

    // Format 10's block times come from the chain: without a source, or from another chain, the
    // upgrade is refused with the way forward, and nothing changes.
    let before = dump_hash(&db).expect("hash");
    let refused = upgrade(&db, None).await.expect_err("no source");
    assert!(matches!(refused, UpgradeError::NeedsSource { found: 8 }), "{refused}");
    assert!(refused.to_string().contains("--rpc-url"), "{refused}");
    let other = SyntheticChain::new(10, 100, Shape::MAINNET);
    let refused = upgrade(&db, Some(&other)).await.expect_err("another chain");
    assert!(matches!(refused, UpgradeError::OtherChain { .. }), "{refused}");
    let short = SyntheticChain::new(9, 100, Shape::MAINNET);
    let refused = upgrade(&db, Some(&short)).await.expect_err("a source behind the database");
    assert!(matches!(refused, UpgradeError::SourceBehind { .. }), "{refused}");
    assert_eq!(dump_hash(&db).expect("hash"), before);
    let state = state::read_state(&db.begin_read().expect("read")).expect("state");
    assert_eq!(state.format_version, Some(8));

    let chain = fixture_chain();
    let done = upgrade(&db, Some(&chain)).await.expect("upgrade");
    let Upgraded::From { version: 8, renamed, block_times, .. } = done else { panic!("{done:?}") };
    assert!(
        renamed.iter().all(|(_, _, entries)| *entries > 0),
        "every renamed window table had rows: {renamed:?}"
    );
    assert_eq!(block_times, 136, "genesis and the fixture's 135 blocks");
    assert_eq!(upgrade(&db, None).await.expect("again"), Upgraded::AlreadyCurrent);
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
    let recording = generate(dir.path(), "chain.rec.zst", 9, 20_000).await;
    let migrate = |datadir: &Path| {
        Command::new(BIN)
            .args(["migrate", "--log", "warn", "--datadir"])
            .arg(datadir)
            .arg("--source")
            .arg(&recording)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn migrate")
    };
    let mut killed_before_commit = 0;
    for delay_ms in [5, 10, 20, 40, 80, 150, 250, 400, 600, 900] {
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
            FORMAT_VERSION => {}
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_9_database_takes_its_block_times_from_the_node_headers() {
    use crate::common::{anvil::Anvil, workload::Chain};
    use ots_indexer::{
        db::{codec::StateKey, tables::OtsIndexerState},
        source::{NodeClient, TraceChoice},
        sync::{Indexer, SyncConfig},
    };
    use serde_json::json;

    // More blocks than one batch of headers holds, some sharing a second.
    let anvil = Anvil::start(&[]);
    let chain = Chain::connect(&anvil.url);
    let _: serde_json::Value = chain.call("anvil_mine", json!(["0x4d3", "0x0"])).await;
    let _: serde_json::Value = chain.call("anvil_mine", json!(["0x20", "0x3"])).await;
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("tracer");
    let dir = tempfile::tempdir().expect("tempdir");
    let head = node.head().await.expect("head");
    let indexed_hash = {
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
        let classifiers =
            ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
        let config = SyncConfig { batch_blocks: 200, ..Default::default() };
        let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("indexer");
        indexer.sync_to(head).await.expect("sync");
        drop(indexer);
        let indexed = dump_hash(&db).expect("hash");
        // What format 9 held: the same tables without the block times.
        let txn = db.begin_write().expect("write");
        assert_eq!(txn.entries::<ots_indexer::db::tables::OtsBlockTimes>().expect("count"), head + 1);
        txn.clear::<ots_indexer::db::tables::OtsBlockTimes>().expect("clear");
        txn.put::<OtsIndexerState>(&StateKey("format_version".into()), &9u64.to_be_bytes().to_vec())
            .expect("put");
        txn.commit().expect("commit");
        indexed
    };
    assert_eq!(format_of(dir.path()), 9);

    let migrate = |extra: &[&str]| {
        Command::new(BIN)
            .args(["migrate", "--log", "warn", "--datadir"])
            .arg(dir.path())
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("migrate")
    };
    let refused = migrate(&[]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("--rpc-url") && said.contains("unchanged"), "{said}");
    assert_eq!(format_of(dir.path()), 9);

    let done = migrate(&["--rpc-url", &anvil.url]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let said = String::from_utf8_lossy(&done.stdout);
    assert!(said.contains(&format!("upgraded format version 9 -> {FORMAT_VERSION}")), "{said}");
    let times = said.lines().find(|l| l.contains("OtsBlockTimes")).unwrap_or_default();
    assert!(times.trim_end().ends_with(&format!(" {} entries", head + 1)), "{said}");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    check(&db.begin_read().expect("read")).expect("the upgraded database passes check");
    assert_eq!(dump_hash(&db).expect("hash"), indexed_hash, "the node's headers give the indexed times");
}

/// A format-10 database needs no source: its lists keep their bytes, and the received marks hold
/// from the first block past its tip, which the state records and `migrate` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_10_database_upgrades_without_a_source() {
    use ots_indexer::{
        db::{codec::StateKey, tables::OtsIndexerState},
        txid::TxId,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = fresh_index(dir.path()).await;
    let tip = state::read_tip(&db.begin_read().expect("read")).expect("tip").expect("indexed");
    let txn = db.begin_write().expect("write");
    txn.put::<OtsIndexerState>(&StateKey("format_version".into()), &10u64.to_be_bytes().to_vec())
        .expect("put");
    txn.commit().expect("commit");
    let before = dump_hash(&db).expect("hash");
    drop(db);
    let datadir = dir.path().join("fresh");
    assert_eq!(format_of(&datadir), 10);
    {
        let db = Db::open(&datadir, AccessMode::ReadOnly).expect("open");
        let state = state::read_state(&db.begin_read().expect("read")).expect("state");
        let refused = state::check_usable(&state).expect_err("format 10").to_string();
        assert!(
            refused.contains("ots-indexer migrate --datadir") && !refused.contains("--rpc-url"),
            "{refused}"
        );
    }

    let said = migrate_without_source(&datadir);
    assert!(said.contains(&format!("upgraded format version 10 -> {FORMAT_VERSION}")), "{said}");
    assert!(said.contains(&format!("received marks from block {}", tip + 1)), "{said}");
    assert!(said.contains(&format!("internal transactions indexed from block {}", tip + 1)), "{said}");
    assert!(!said.contains("OtsBlockTimes"), "{said}");
    let db = Db::open(&datadir, AccessMode::ReadWrite).expect("open");
    let t = db.begin_read().expect("read");
    assert_eq!(state::read_received_marks_from(&t).expect("marks"), TxId::first_of_block(tip + 1).0);
    assert_eq!(state::read_internal_txs_from(&t).expect("internal"), TxId::first_of_block(tip + 1).0);
    check(&t).expect("the upgraded database passes check");
    drop(t);
    assert_eq!(dump_hash(&db).expect("hash"), before, "the tables are not touched");
    drop(db);
    // `status` says where the marks start; a database indexed by this build has no such entry.
    let status = |datadir: &Path| -> serde_json::Value {
        let out = Command::new(BIN)
            .args(["status", "--json", "--log", "warn", "--datadir"])
            .arg(datadir)
            .stdin(Stdio::null())
            .output()
            .expect("status");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("status JSON")
    };
    assert_eq!(status(&datadir)["receivedMarksFromBlock"], serde_json::json!(tip + 1));
    assert_eq!(status(&datadir)["internalTxsFromBlock"], serde_json::json!(tip + 1));
    let fresh = generate(dir.path(), "small.rec.zst", 3, 500).await;
    let new = dir.path().join("new");
    drop(index(&fresh, &new, 8, 4).await);
    let said = status(&new);
    assert!(
        said.get("receivedMarksFromBlock").is_none() && said.get("internalTxsFromBlock").is_none(),
        "{said}"
    );

    // A format-11 database (received marks everywhere) gains the internal-transaction index from
    // its tip on, its tables untouched (the index's tables emptied, as format 11 had none).
    let tip = {
        let db = Db::open(&new, AccessMode::ReadWrite).expect("open");
        without_internal_txs(&db);
        without_transfer_rows(&db);
        without_token_transfers(&db);
        let txn = db.begin_write().expect("write");
        txn.put::<OtsIndexerState>(&StateKey("format_version".into()), &11u64.to_be_bytes().to_vec())
            .expect("put");
        txn.commit().expect("commit");
        state::read_tip(&db.begin_read().expect("read")).expect("tip").expect("indexed")
    };
    let said = migrate_without_source(&new);
    assert!(said.contains(&format!("upgraded format version 11 -> {FORMAT_VERSION}")), "{said}");
    assert!(!said.contains("received marks"), "{said}");
    let said = status(&new);
    assert!(said.get("receivedMarksFromBlock").is_none(), "{said}");
    assert_eq!(said["internalTxsFromBlock"], serde_json::json!(tip + 1));
    assert_eq!(said["transferRowsFromBlock"], serde_json::json!(tip + 1));

    // A format-12 database gains the transfer rows index from its tip on, and nothing else
    // changes (its tables emptied, as format 12 had none).
    let (tip, before) = {
        let fresh = generate(dir.path(), "twelve.rec.zst", 4, 500).await;
        let twelve = dir.path().join("twelve");
        let db = index(&fresh, &twelve, 8, 4).await.0;
        without_transfer_rows(&db);
        without_token_transfers(&db);
        let txn = db.begin_write().expect("write");
        txn.put::<OtsIndexerState>(&StateKey("format_version".into()), &12u64.to_be_bytes().to_vec())
            .expect("put");
        txn.commit().expect("commit");
        let tip = state::read_tip(&db.begin_read().expect("read")).expect("tip").expect("indexed");
        (tip, dump_hash(&db).expect("hash"))
    };
    let twelve = dir.path().join("twelve");
    let said = migrate_without_source(&twelve);
    assert!(said.contains(&format!("upgraded format version 12 -> {FORMAT_VERSION}")), "{said}");
    assert!(said.contains(&format!("token-list rows counted by the index from block {}", tip + 1)), "{said}");
    assert!(!said.contains("received marks") && !said.contains("internal transactions"), "{said}");
    let said = status(&twelve);
    assert!(said.get("internalTxsFromBlock").is_none(), "{said}");
    assert_eq!(said["transferRowsFromBlock"], serde_json::json!(tip + 1));
    assert_eq!(said["tokenTransfersFromBlock"], serde_json::json!(tip + 1));
    let db = Db::open(&twelve, AccessMode::ReadWrite).expect("open");
    check(&db.begin_read().expect("read")).expect("the upgraded database passes check");
    assert_eq!(dump_hash(&db).expect("hash"), before, "the tables are not touched");
    drop(db);

    // A format-13 database gains the token transfers index from its tip on, and nothing else
    // changes (its tables emptied, as format 13 had none).
    let (tip, before) = {
        let fresh = generate(dir.path(), "thirteen.rec.zst", 5, 500).await;
        let thirteen = dir.path().join("thirteen");
        let db = index(&fresh, &thirteen, 8, 4).await.0;
        without_token_transfers(&db);
        let txn = db.begin_write().expect("write");
        txn.put::<OtsIndexerState>(&StateKey("format_version".into()), &13u64.to_be_bytes().to_vec())
            .expect("put");
        txn.commit().expect("commit");
        let tip = state::read_tip(&db.begin_read().expect("read")).expect("tip").expect("indexed");
        (tip, dump_hash(&db).expect("hash"))
    };
    let thirteen = dir.path().join("thirteen");
    let said = migrate_without_source(&thirteen);
    assert!(said.contains(&format!("upgraded format version 13 -> {FORMAT_VERSION}")), "{said}");
    assert!(said.contains(&format!("token transfers indexed from block {}", tip + 1)), "{said}");
    assert!(said.contains(&format!("internal rows counted by the index from block {}", tip + 1)), "{said}");
    assert!(!said.contains("token-list rows counted"), "{said}");
    let said = status(&thirteen);
    assert!(said.get("transferRowsFromBlock").is_none(), "{said}");
    assert_eq!(said["tokenTransfersFromBlock"], serde_json::json!(tip + 1));
    assert_eq!(said["internalRowsFromBlock"], serde_json::json!(tip + 1));
    let db = Db::open(&thirteen, AccessMode::ReadWrite).expect("open");
    check(&db.begin_read().expect("read")).expect("the upgraded database passes check");
    assert_eq!(dump_hash(&db).expect("hash"), before, "the tables are not touched");

    drop(db);

    // A format-14 database gains the party-token index's tables, empty and not kept (as a new
    // database's), and nothing else changes.
    let before = {
        let fresh = generate(dir.path(), "fourteen.rec.zst", 6, 500).await;
        let fourteen = dir.path().join("fourteen");
        let db = index(&fresh, &fourteen, 8, 4).await.0;
        let txn = db.begin_write().expect("write");
        txn.put::<OtsIndexerState>(&StateKey("format_version".into()), &14u64.to_be_bytes().to_vec())
            .expect("put");
        // Format 14 had no such entry.
        txn.delete::<OtsIndexerState>(&StateKey("party_token_from".into()), None).expect("delete");
        txn.commit().expect("commit");
        dump_hash(&db).expect("hash")
    };
    let fourteen = dir.path().join("fourteen");
    let said = migrate_without_source(&fourteen);
    assert!(said.contains(&format!("upgraded format version 14 -> {FORMAT_VERSION}")), "{said}");
    assert!(
        said.contains("party-token index not kept: `run` or `sync` with `--party-token-index on`"),
        "{said}"
    );
    assert!(!said.contains("a token's own"), "{said}");
    let said = status(&fourteen);
    assert!(said.get("tokenTransfersFromBlock").is_none(), "{said}");
    assert!(said.get("partyTokenFromBlock").is_none(), "{said}");
    assert_eq!(said["partyTokenIndex"], serde_json::json!(false));
    let db = Db::open(&fourteen, AccessMode::ReadWrite).expect("open");
    check(&db.begin_read().expect("read")).expect("the upgraded database passes check");
    assert_eq!(dump_hash(&db).expect("hash"), before, "the tables are not touched");
    drop(db);

    // A format-15 database gains the address indexes' young levels, empty, and keeps its
    // choice of the party-token index.
    let relabelled = dir.path().join("fourteen");
    migrate_relabelled(&relabelled, 15, before);
    assert_eq!(status(&relabelled)["partyTokenIndex"], serde_json::json!(false));
    // A format-16 database gains the appearance lists' young level, empty.
    migrate_relabelled(&relabelled, 16, before);
    // A format-17 database has every holder ranking whole: it is a format-18 one as it stands.
    migrate_relabelled(&relabelled, 17, before);
    // A format-18 database gains the address totals' staged segments, empty.
    migrate_relabelled(&relabelled, 18, before);
    // A format-19 database gains the address indexes' staged segments, empty.
    migrate_relabelled(&relabelled, 19, before);
    // A format-20 database gains the appearance lists' staged segments and nonce runs, empty.
    migrate_relabelled(&relabelled, 20, before);
    // A format-21 database gains the holdings' staged segments, empty.
    migrate_relabelled(&relabelled, 21, before);
    // A format-22 database gains the ERC721 owners' staged segments, empty.
    migrate_relabelled(&relabelled, 22, before);
    // A format-23 database keys its address indexes' staged segments by ordinal: with none
    // (its catch-up ended), nothing changes.
    migrate_relabelled(&relabelled, 23, before);
}

/// Labels the current-format database at `datadir` as of format `version` (whose tables it
/// has), migrates it, and checks that the migration upgraded it without touching the tables
/// (`before`: their hash).
fn migrate_relabelled(datadir: &Path, version: u64, before: alloy_primitives::B256) {
    use ots_indexer::db::{codec::StateKey, tables::OtsIndexerState};
    let db = Db::open(datadir, AccessMode::ReadWrite).expect("open");
    let txn = db.begin_write().expect("write");
    txn.put::<OtsIndexerState>(&StateKey("format_version".into()), &version.to_be_bytes().to_vec())
        .expect("put");
    txn.commit().expect("commit");
    drop(db);
    let said = migrate_without_source(datadir);
    assert!(said.contains(&format!("upgraded format version {version} -> {FORMAT_VERSION}")), "{said}");
    assert_eq!(format_of(datadir), FORMAT_VERSION);
    let db = Db::open(datadir, AccessMode::ReadWrite).expect("open");
    check(&db.begin_read().expect("read")).expect("the upgraded database passes check");
    assert_eq!(dump_hash(&db).expect("hash"), before, "the tables are not touched");
}
