//! The bulk write path against the incremental one: the same chain indexed both ways gives equal
//! tables (`check --hash`), whatever the stage limits; a stage killed with SIGKILL while it
//! gathers or merges leaves the last committed state, and a restart carries on from it.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use alloy_primitives::Address;
use ots_indexer::{
    classify::capture::capture,
    db::{
        state,
        tables::{
            OtsERC721Owners, OtsHoldingsStaged, OtsOwnersStaged, OtsRecentBalances, OtsStagedTotals, TableId,
        },
        AccessMode, Db, TableStats,
    },
    etl::RUN_DIR_NAME,
    index::{
        check::{check, dump_hash},
        families::{
            address_index::{self, levels::any_unfolded, IdList},
            appearances, balances, holdings,
        },
        journal::unwind_to,
    },
    source::{
        fixture::Fixture,
        synthetic::{Shape, SyntheticChain},
    },
    status::Progress,
    sync::{
        stage_journal::STAGE_JOURNAL_FILE, Indexer, RunBudget, RunCompression, StageLimits, SyncConfig,
        WritePath,
    },
};

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");

fn classifiers() -> Vec<Box<dyn ots_classifiers::Classifier>> {
    ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect()
}

async fn generate(dir: &Path, transactions: u64) -> PathBuf {
    let out = dir.join("chain.rec");
    let chain = SyntheticChain::new(11, transactions, Shape::MAINNET);
    capture(&chain, &classifiers(), (0, chain.last_block()), &out).await.expect("generate");
    out
}

/// Indexes `recording` into a new database at `path`; returns it, the head and the loop's
/// progress (the stages run, …).
async fn index(recording: &Path, path: &Path, config: SyncConfig) -> (Db, u64, Progress) {
    index_to(recording, path, config, None).await
}

/// Indexes `recording` into the database at `path` (new or not) up to block `to` (the head when
/// `None`); returns it, the head and the loop's progress.
async fn index_to(recording: &Path, path: &Path, config: SyncConfig, to: Option<u64>) -> (Db, u64, Progress) {
    let db = Db::open(path, AccessMode::ReadWrite).expect("db");
    let fixture = Fixture::load(recording).expect("load");
    let head = fixture.block_count() - 1;
    let indexer = Indexer::open(db.clone(), fixture, classifiers(), config).await.expect("indexer");
    let progress = indexer.progress();
    indexer.sync_to(to.unwrap_or(head)).await.expect("indexes");
    indexer.close().await.expect("close");
    assert!(!path.join(RUN_DIR_NAME).exists(), "a committed stage leaves no run files");
    (db, head, progress.get())
}

fn config(write_path: WritePath, stage: StageLimits) -> SyncConfig {
    SyncConfig { batch_blocks: 40, reorg_window: 16, write_path, stage, ..Default::default() }
}

fn hash(db: &Db) -> alloy_primitives::B256 {
    check(&db.begin_read().expect("read")).expect("check passes");
    dump_hash(db).expect("hash")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_stages_give_the_tables_batches_give() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recording = generate(dir.path(), 100_000).await;
    let (incremental, head, progress) = index(
        &recording,
        &dir.path().join("incremental"),
        config(WritePath::Incremental, StageLimits::default()),
    )
    .await;
    assert_eq!(progress.stages, 0);
    let want = hash(&incremental);

    // One stage, rows in memory until the merge.
    let (one, _, progress) =
        index(&recording, &dir.path().join("one"), config(WritePath::Bulk, StageLimits::default())).await;
    assert_eq!((progress.stages, progress.compressed_stages), (1, 0));
    assert_eq!(hash(&one), want, "one bulk stage");

    // Many stages, every buffer spilled into runs merged back: tiny buffers and stage limits.
    let tiny = StageLimits {
        buffer_bytes: 64 << 10,
        max_run_bytes: RunBudget::Fixed(512 << 10),
        max_time: Duration::from_secs(600),
        ..Default::default()
    };
    let (many, _, progress) =
        index(&recording, &dir.path().join("many"), config(WritePath::Bulk, tiny)).await;
    let stages = progress.stages;
    assert!(stages >= 3, "{stages} stages");
    // The first stage ended on its run files' bound: every later one compressed its runs.
    assert_eq!(progress.compressed_stages, stages - 1, "{stages} stages");
    assert_eq!(hash(&many), want, "many bulk stages with spilled, compressed runs");
    // The same with plain run files: the same tables.
    let plain = StageLimits { compress_runs: RunCompression::Never, ..tiny };
    let (many_plain, _, progress) =
        index(&recording, &dir.path().join("many-plain"), config(WritePath::Bulk, plain)).await;
    assert_eq!(progress.compressed_stages, 0);
    assert!(progress.stages >= stages, "{} plain stages, {stages} compressed", progress.stages);
    assert_eq!(hash(&many_plain), want, "many bulk stages with spilled, plain runs");
    drop(many_plain);

    // Stages of a fixed number of blocks (`--stage-max-blocks`), shorter than a batch: each
    // holds exactly that many, but the last.
    let by_blocks = StageLimits { max_blocks: 25, ..Default::default() };
    let (fixed, _, progress) =
        index(&recording, &dir.path().join("fixed"), config(WritePath::Bulk, by_blocks)).await;
    let stages = progress.stages;
    let bulk_blocks = head + 1 - 16;
    assert!(
        (bulk_blocks.div_ceil(25)..=bulk_blocks.div_ceil(25) + 1).contains(&stages),
        "{stages} stages of 25 blocks for {bulk_blocks} blocks"
    );
    assert_eq!(hash(&fixed), want, "stages of 25 blocks");

    // The same stages with every table, however small, packed once the catch-up's last stage
    // has committed (its stages leave their in-place merges swollen): the same entries, in
    // fewer pages.
    let repacking = StageLimits { repack_from_bytes: 0, ..by_blocks };
    let (packed, _, _) =
        index(&recording, &dir.path().join("packed"), config(WritePath::Bulk, repacking)).await;
    assert_eq!(hash(&packed), want, "stages of 25 blocks, swollen tables repacked");
    let bytes = |db: &Db| -> u64 {
        let txn = db.begin_read().expect("read");
        txn.stats_of(TableId::OtsTokenBalances).expect("stats").bytes
    };
    let (swollen, repacked) = (bytes(&fixed), bytes(&packed));
    assert!(repacked * 10 < swollen * 9, "repacked {repacked} bytes, merged in place {swollen}");
    // Each packed as the catch-up ended (the batches of the window's blocks after it split some
    // pages again), denser than the stages left it.
    let (txn, unpacked) = (packed.begin_read().expect("read"), fixed.begin_read().expect("read"));
    let per_entry = |s: &TableStats| s.bytes as f64 / s.entries.max(1) as f64;
    let record = state::read_packed(&txn, TableId::OtsTokenBalances).expect("record").expect("recorded");
    let split = unpacked.stats_of(TableId::OtsTokenBalances).expect("stats");
    assert!(per_entry(&record) < per_entry(&split), "packed {record:?}, left by the stages {split:?}");
    // The address totals' later stages staged their sums (format 19): the catch-up's end summed
    // them in, rewriting the table whole, so the stages left it no more swollen than a repack
    // would.
    // So did the holdings' (format 22): the end folded their new pairs in, rewriting the tables.
    for table in [TableId::OtsAddressTotals, TableId::OtsERC20Holdings] {
        let (left, repacked) =
            (unpacked.stats_of(table).expect("stats"), txn.stats_of(table).expect("stats"));
        assert!(
            per_entry(&left) <= per_entry(&repacked) * 1.05,
            "{table:?}: left {left:?}, repacked {repacked:?}"
        );
    }
    assert_eq!(unpacked.entries::<OtsStagedTotals>().expect("entries"), 0, "no segment left");
    assert_eq!(unpacked.entries::<OtsHoldingsStaged>().expect("entries"), 0, "no holdings segment left");
    assert_eq!(unpacked.entries::<OtsOwnersStaged>().expect("entries"), 0, "no owners' segment left");
    // So did the address indexes' (format 20): their segments were folded into the main tables.
    for table in [TableId::OtsERC20TransferIndexStaged, TableId::OtsTransferRowsIndexStaged] {
        assert_eq!(unpacked.stats_of(table).expect("stats").entries, 0, "{table:?} folded");
    }
    drop((txn, unpacked));
    drop((fixed, packed));

    // Batch by batch half way (a full reorg window of balances, lists and totals kept apart),
    // then stages: the first lets that window leave before it begins.
    let resumed = dir.path().join("resumed");
    let (half, head, _) = index_to(
        &recording,
        &resumed,
        config(WritePath::Incremental, StageLimits::default()),
        Some(head / 2),
    )
    .await;
    assert!(half.begin_read().expect("read").entries::<OtsRecentBalances>().expect("entries") > 0);
    drop(half);
    let (resumed, _, progress) =
        index_to(&recording, &resumed, config(WritePath::Bulk, StageLimits::default()), None).await;
    assert_eq!(progress.stages, 1);
    assert_eq!(hash(&resumed), want, "batches, then a stage");

    // The newest window went batch by batch: unwinding into it works on both, alike.
    for db in [&incremental, &many] {
        let txn = db.begin_write().expect("write");
        unwind_to(&txn, head - 8).expect("unwind inside the window");
        txn.commit().expect("commit");
    }
    assert_eq!(hash(&many), hash(&incremental), "unwound alike");
    // A stage's own blocks cannot be unwound: it kept no undo rows.
    let txn = many.begin_write().expect("write");
    assert!(unwind_to(&txn, head - 40).is_err(), "unwinding a stage's blocks is refused");
}

/// A stage fetches at most 250 blocks at a time, and a recording keeps only that many (and a few)
/// behind the newest asked for while it runs; the batch after it is longer (400 blocks) and gets
/// the recording's longer memory back: the whole chain indexes from the recording and checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_in_short_batches_then_a_long_batch_from_a_recording() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recording = generate(dir.path(), 100_000).await;
    let window = 400;
    let config = SyncConfig {
        batch_blocks: 1000,
        reorg_window: window,
        write_path: WritePath::Bulk,
        ..Default::default()
    };
    let (db, head, progress) = index(&recording, &dir.path().join("db"), config).await;
    assert_eq!(progress.stages, 1);
    assert!(head > window + 250, "the stage takes more than one 250-block batch (head {head})");
    let txn = db.begin_read().expect("read");
    assert_eq!(state::read_state(&txn).expect("state").checkpoint.map(|c| c.number), Some(head));
    check(&txn).expect("check passes");
}

/// Runs `sync --source` in bulk mode until `ready` holds of a line it logs, then kills it with
/// SIGKILL; returns whether `ready` was seen before the run ended by itself.
fn kill_when(recording: &Path, datadir: &Path, ready: impl Fn(&str) -> bool) -> bool {
    kill_with(recording, datadir, &[], ready)
}

/// [`kill_when`] with more flags.
fn kill_with(recording: &Path, datadir: &Path, flags: &[&str], ready: impl Fn(&str) -> bool) -> bool {
    let mut child = Command::new(BIN)
        .args(["sync", "--exit-at-head", "--write-path", "bulk", "--reorg-window", "16"])
        .args(flags)
        .args([
            "--batch-blocks",
            "20",
            "--stage-buffer-mib",
            "1",
            "--log",
            "ots=debug",
            "--log-format",
            "json",
        ])
        .arg("--source")
        .arg(recording)
        .arg("--datadir")
        .arg(datadir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sync");
    let stderr = child.stderr.take().expect("stderr");
    let mut seen = false;
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("line");
        if ready(&line) {
            seen = true;
            child.kill().expect("kill -9");
            break;
        }
    }
    child.wait().expect("wait");
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_stage_gathers_its_journal_again_not_the_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (recording, clean, _) = recording_and_clean_index(dir.path()).await;
    let datadir = dir.path().join("journalled");
    let journal = datadir.join(STAGE_JOURNAL_FILE);
    let on = ["--stage-journal", "on"];
    let indexed_to = |line: &str| -> Option<u64> {
        let event = serde_json::from_str::<serde_json::Value>(line).ok()?;
        (event["fields"]["message"] == "indexed batch").then(|| event["fields"]["to"].as_u64()).flatten()
    };

    // Killed while the stage gathers, batches in: nothing committed, the batches journalled.
    assert!(kill_with(&recording, &datadir, &on, |line| indexed_to(line).is_some_and(|to| to >= 60)));
    assert_eq!(checkpoint(&datadir), None, "a stage killed while gathering committed nothing");
    let journalled = std::fs::metadata(&journal).map_or(0, |m| m.len());
    assert!(journalled > 1000, "the stage journalled its batches ({journalled} bytes)");
    let status = status_json(&datadir);
    assert_eq!(status["stage"]["journalBytes"].as_u64(), Some(journalled), "{status}");

    // The next start takes them from the journal, then goes on from the node; the journal goes
    // once the stage commits, and the tables equal a clean index's.
    let lines = std::sync::Mutex::new(Vec::new());
    assert!(!kill_with(&recording, &datadir, &on, |line| {
        lines.lock().expect("lines").push(line.to_owned());
        false
    }));
    let lines = lines.into_inner().expect("lines");
    let resumed = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| {
            e["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("bulk stage resumed from its journal"))
        })
        .expect("the restart says it resumed from the journal");
    assert!(resumed["fields"]["blocks"].as_u64().is_some_and(|b| b >= 61), "{resumed}");
    assert!(!journal.exists(), "the committed stage removed its journal");
    let db = Db::open(&datadir, AccessMode::ReadWrite).expect("db");
    assert_eq!(hash(&db), hash(&clean));

    // Without journalling (a recording's default), a journal left behind is removed.
    drop(db);
    std::fs::write(&journal, b"left by an earlier run").expect("write");
    assert!(!kill_with(&recording, &datadir, &[], |_| false));
    assert!(!journal.exists(), "a run without journalling removes a stale journal");
}

/// A stage's commit does not wait for the disk (`db::durability`): killed after one, the database
/// reads as committed, also to a read-only open (the first after the kill syncs what the killed
/// writer left unsynced), and the catch-up goes on from there to the tables a clean index has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_after_an_unsynced_stage_commit_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (recording, clean, head) = recording_and_clean_index(dir.path()).await;
    let datadir = dir.path().join("unsynced");
    let committed_to = |line: &str| -> Option<u64> {
        let event = serde_json::from_str::<serde_json::Value>(line).ok()?;
        let fields = &event["fields"];
        (fields["message"] == "bulk stage committed").then(|| fields["to"].as_u64()).flatten()
    };
    let small_stages = ["--stage-max-blocks", "40"];
    assert!(
        kill_with(&recording, &datadir, &small_stages, |line| committed_to(line).is_some_and(|to| to >= 79))
    );
    let after = checkpoint(&datadir).expect("the stages' commits survive the kill");
    assert!((79..head).contains(&after), "checkpoint {after} after a kill past block 79");
    let status = status_json(&datadir);
    assert_eq!(status["indexedBlock"].as_u64(), Some(after), "{status}");

    assert!(!kill_with(&recording, &datadir, &small_stages, |_| false));
    let db = Db::open(&datadir, AccessMode::ReadWrite).expect("db");
    assert_eq!(hash(&db), hash(&clean));
}

/// A 30,000-transaction recording in `dir`, its batch-by-batch index and its head.
async fn recording_and_clean_index(dir: &Path) -> (PathBuf, Db, u64) {
    let recording = generate(dir, 30_000).await;
    let (clean, head, _) =
        index(&recording, &dir.join("clean"), config(WritePath::Incremental, StageLimits::default())).await;
    (recording, clean, head)
}

/// `status --json` of the database at `datadir`, read by another process.
fn status_json(datadir: &Path) -> serde_json::Value {
    let status = Command::new(BIN)
        .args(["status", "--json", "--rpc-url", "http://127.0.0.1:9", "--log", "error"])
        .arg("--datadir")
        .arg(datadir)
        .output()
        .expect("status");
    serde_json::from_slice(&status.stdout).expect("status JSON")
}

fn checkpoint(datadir: &Path) -> Option<u64> {
    let db = Db::open(datadir, AccessMode::ReadOnly).expect("db");
    let txn = db.begin_read().expect("read");
    check(&txn).expect("check passes after the kill");
    state::read_state(&txn).expect("state").checkpoint.map(|c| c.number)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_stage_loses_only_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (recording, clean, head) = recording_and_clean_index(dir.path()).await;
    let datadir = dir.path().join("killed");

    // Killed while the first stage gathers, early in it and after runs spilled: nothing committed.
    let runs = datadir.join(RUN_DIR_NAME);
    let early_batch = |line: &str| {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { return false };
        let fields = &event["fields"];
        fields["message"] == "indexed batch"
            && fields["to"].as_u64().is_some_and(|to| to < 100)
            && std::fs::read_dir(&runs).is_ok_and(|mut d| d.next().is_some())
    };
    assert!(kill_when(&recording, &datadir, early_batch), "the stage spilled runs early");
    assert_eq!(checkpoint(&datadir), None, "a stage killed while gathering committed nothing");
    assert!(runs.exists(), "its run files are left for the next start to remove");
    let status = status_json(&datadir);
    assert_eq!(status["stage"]["phase"], "running", "{status}");
    assert!(status["stage"]["runBytes"].as_u64().is_some_and(|b| b > 0), "{status}");

    // Killed as it merges: all of the stage or none of it, never a part.
    assert!(kill_when(&recording, &datadir, |line| line.contains("bulk stage merging")));
    let after = checkpoint(&datadir);
    assert!(after.is_none() || after == Some(head - 16), "checkpoint {after:?} after a kill in the merge");

    // A restart runs the stage again and finishes; the tables equal a clean index's.
    assert!(!kill_when(&recording, &datadir, |_| false));
    assert!(!runs.exists(), "the finished stage removed its run files");
    let db = Db::open(&datadir, AccessMode::ReadWrite).expect("db");
    assert_eq!(hash(&db), hash(&clean));
}

/// `--party-token-index` through the binary: off for a new database, `on` keeps it from the next
/// block on (and `check` passes), a start without the flag keeps it, `off` drops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_party_token_index_follows_the_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recording = generate(dir.path(), 3_000).await;
    let datadir = dir.path().join("db");
    let sync = |flags: &[&str], to: u64| {
        let out = Command::new(BIN)
            .args(["sync", "--exit-at-block", &to.to_string(), "--reorg-window", "4", "--log", "warn"])
            .args(flags)
            .arg("--source")
            .arg(&recording)
            .arg("--datadir")
            .arg(&datadir)
            .output()
            .expect("sync");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let head = Fixture::load(&recording).expect("load").block_count() - 1;
    sync(&[], head / 2);
    assert_eq!(status_json(&datadir)["partyTokenIndex"], serde_json::json!(false));
    sync(&["--party-token-index", "on"], head);
    let said = status_json(&datadir);
    assert_eq!(said["partyTokenIndex"], serde_json::json!(true), "{said}");
    assert_eq!(said["partyTokenFromBlock"], serde_json::json!(head / 2 + 1), "{said}");
    let entries = |said: &serde_json::Value| {
        said["tables"]
            .as_array()
            .expect("tables")
            .iter()
            .find(|t| t["name"] == "OtsPartyTokenCounter")
            .expect("table")["entries"]
            .as_u64()
            .expect("entries")
    };
    assert!(entries(&said) > 0, "{said}");
    sync(&[], head);
    assert_eq!(status_json(&datadir)["partyTokenIndex"], serde_json::json!(true));
    sync(&["--party-token-index", "off"], head);
    let said = status_json(&datadir);
    assert_eq!((said["partyTokenIndex"].clone(), entries(&said)), (serde_json::json!(false), 0), "{said}");
    check(&Db::open(&datadir, AccessMode::ReadOnly).expect("db").begin_read().expect("read")).expect("check");
}

/// The addresses in the keys of `tables` (each at its byte offset there), each once, ascending.
fn addresses_in(txn: &ots_indexer::db::ReadTxn, tables: [(TableId, usize); 2]) -> Vec<Address> {
    let mut addresses: Vec<Address> = tables
        .into_iter()
        .flat_map(|(t, at)| txn.raw_entries(t).expect("entries").into_iter().map(move |(k, _)| (k, at)))
        .map(|(k, at)| Address::from_slice(&k[at..at + 20]))
        .collect();
    addresses.sort();
    addresses.dedup();
    addresses
}

/// What the lists say of the addresses in `tables` (a counter table, keys being the addresses,
/// and a staged table, keys a segment and then the address): each address's count, all its ids,
/// and the rank of each id and the one after it.
fn lists_read(db: &Db, list: IdList, tables: [TableId; 2]) -> Vec<(Address, u64, Vec<u64>, Vec<u64>)> {
    let txn = db.begin_read().expect("read");
    addresses_in(&txn, [(tables[0], 0), (tables[1], 8)])
        .into_iter()
        .map(|a| {
            let n = address_index::count(&txn, list, &a).expect("count");
            let ids = address_index::page(&txn, list, &a, 0, n).expect("page");
            let ranks = ids
                .iter()
                .flat_map(|&id| [id, id + 1])
                .map(|id| address_index::rank(&txn, list, &a, id).expect("rank"))
                .collect();
            (a, n, ids, ranks)
        })
        .collect()
}

/// What the appearance lists say of every address they hold (raw keys of both levels): counts,
/// ends, all ids newest first and oldest first, the rank of each id and the one after it, the
/// roles among them, and the transaction of each nonce the address sent.
type AppearancesRead = (Address, appearances::ListCounts, Option<(u64, u64)>, Vec<u64>, Vec<u64>, Vec<u64>);

fn appearances_read(db: &Db) -> Vec<(AppearancesRead, String, Vec<Option<u64>>)> {
    let txn = db.begin_read().expect("read");
    addresses_in(&txn, [(TableId::OtsAppearances, 0), (TableId::OtsAppearancesStaged, 8)])
        .into_iter()
        .map(|a| {
            let counts = appearances::counts(&txn, &a).expect("counts");
            let ends = appearances::ends(&txn, &a).expect("ends");
            let newest = appearances::before(&txn, &a, u64::MAX, usize::MAX).expect("before").ids;
            let oldest = appearances::after(&txn, &a, 0, 3).expect("after").ids;
            let ranks = newest
                .iter()
                .flat_map(|&id| [id, id + 1])
                .map(|id| appearances::rank(&txn, &a, id).expect("rank"));
            let roles = format!("{:?}", appearances::roles_among(&txn, &a, &newest).expect("roles"));
            let nonces = (0..counts.sent + 1)
                .map(|n| appearances::sent_with_nonce(&txn, &a, n).expect("nonce").map(|t| t.0))
                .collect();
            ((a, counts, ends, newest.clone(), oldest, ranks.collect()), roles, nonces)
        })
        .collect()
}

/// The holders in `db`'s ERC20 table and holdings segments.
fn holders_in(db: &Db) -> Vec<Address> {
    addresses_in(
        &db.begin_read().expect("read"),
        [(TableId::OtsERC20Holdings, 0), (TableId::OtsHoldingsStaged, 10)],
    )
}

/// What the holdings say of `holders`: each one's tokens of every kind, and a page of its ERC20
/// ones.
fn holdings_read(db: &Db, holders: &[Address]) -> Vec<(Address, Vec<String>, String)> {
    use ots_indexer::decode::TokenKind;
    let txn = db.begin_read().expect("read");
    holders
        .iter()
        .copied()
        .map(|a| {
            let kinds = [TokenKind::Erc20, TokenKind::Erc721, TokenKind::Erc1155]
                .map(|kind| format!("{:?}", holdings::of(&txn, kind, &a).expect("of")));
            let page = holdings::page(&txn, TokenKind::Erc20, &a, 1, 2).expect("page");
            (a, kinds.to_vec(), format!("{page:?}"))
        })
        .collect()
}

/// What `db` says of the ERC721 owners `one` (the same chain in one stage) holds: each id's
/// owner, and each of the first owners' ids of its token.
fn owners_read(db: &Db, one: &Db) -> Vec<String> {
    let owners: Vec<_> = {
        let txn = one.begin_read().expect("read");
        let mut cursor = txn.cursor::<OtsERC721Owners>().expect("cursor");
        let mut all = Vec::new();
        let mut next = cursor.first().expect("first");
        while let Some((key, owner)) = next {
            all.push((key, owner));
            next = cursor.next_entry().expect("next");
        }
        all
    };
    assert!(owners.len() > 10, "{} owners", owners.len());
    let txn = db.begin_read().expect("read");
    let mut read: Vec<String> = owners
        .iter()
        .map(|(key, _)| format!("{:?}", balances::owner(&txn, key.token, key.id).expect("owner")))
        .collect();
    read.extend(
        owners.iter().take(50).map(|(key, owner)| {
            format!("{:?}", balances::owned_ids(&txn, key.token, *owner).expect("owned"))
        }),
    );
    read
}

/// A catch-up of many small stages appends its later stages' ids to the address indexes' and the
/// appearance lists' staged segments (with the senders' nonce runs), the pairs they touch to
/// the holdings' segments and the owners they set to the owners' segments: killed before its end folds
/// them, they read (nonces too), check and hash as what one stage writes; the incremental path's
/// first batch folds them, leaving the tables batches alone write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_stages_append_segments_that_read_as_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recording = generate(dir.path(), 30_000).await;
    let head = Fixture::load(&recording).expect("load").block_count() - 1;
    let stages_only = |limits| SyncConfig { reorg_window: 0, ..config(WritePath::Bulk, limits) };
    let leveled_dir = dir.path().join("leveled");
    // The catch-up is killed after a late stage's commit that left both kinds of segment, before
    // the catch-up's end folds them. A stage or two may commit before the kill lands: then the
    // catch-up goes on from there until a kill finds both.
    let young_ends = |datadir: &Path| {
        let db = Db::open(datadir, AccessMode::ReadOnly).expect("db");
        let txn = db.begin_read().expect("read");
        any_unfolded(&txn).expect("young") && appearances::levels::any_older(&txn).expect("older")
    };
    let late_and_young = |line: &str| {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { return false };
        let fields = &event["fields"];
        fields["message"] == "bulk stage committed"
            && fields["to"].as_u64().is_some_and(|to| to + 60 >= head)
            && young_ends(&leveled_dir)
    };
    loop {
        assert!(kill_with(&recording, &leveled_dir, &["--stage-max-blocks", "5"], late_and_young));
        if young_ends(&leveled_dir) {
            break;
        }
        assert!(
            checkpoint(&leveled_dir).is_some_and(|c| c + 20 < head),
            "no stage left both kinds of segment"
        );
    }
    let stop = checkpoint(&leveled_dir).expect("a checkpoint");
    let leveled = Db::open(&leveled_dir, AccessMode::ReadWrite).expect("db");
    let segments = leveled.begin_read().expect("read").stats_of(TableId::OtsERC20TransferIndexStaged);
    assert!(segments.expect("stats").entries > 0, "the stages left segments");
    let (one, _, progress) =
        index_to(&recording, &dir.path().join("one"), stages_only(StageLimits::default()), Some(stop)).await;
    assert_eq!(progress.stages, 1);
    assert_eq!(hash(&leveled), hash(&one), "segments hash as their folded tables");
    let runs = leveled.begin_read().expect("read").stats_of(TableId::OtsNonceRunsStaged);
    assert!(runs.expect("stats").entries > 0, "the stages left nonce runs");
    for (list, tables) in [
        (IdList::Erc20Transfers, [TableId::OtsERC20TransferCounter, TableId::OtsERC20TransferIndexStaged]),
        (IdList::TransferRows, [TableId::OtsTransferRowsCounter, TableId::OtsTransferRowsIndexStaged]),
        (IdList::InternalTxs, [TableId::OtsInternalTxCounter, TableId::OtsInternalTxIndexStaged]),
        (IdList::TokenTransfers, [TableId::OtsTokenTransfersCounter, TableId::OtsTokenTransfersIndexStaged]),
    ] {
        let read = lists_read(&leveled, list, tables);
        assert!(!read.is_empty(), "{list:?}");
        assert_eq!(read, lists_read(&one, list, tables), "{list:?} reads alike");
    }
    let read = appearances_read(&leveled);
    assert!(read.len() > 10, "{} addresses", read.len());
    assert_eq!(read, appearances_read(&one), "the appearances read alike");
    let staged_holdings = leveled.begin_read().expect("read").stats_of(TableId::OtsHoldingsStaged);
    assert!(staged_holdings.expect("stats").entries > 0, "the stages left holdings segments");
    let holders = holders_in(&leveled);
    assert!(holders.len() > 10, "{} holders", holders.len());
    assert_eq!(holdings_read(&leveled, &holders), holdings_read(&one, &holders), "the holdings read alike");
    let staged_owners = leveled.begin_read().expect("read").stats_of(TableId::OtsOwnersStaged);
    assert!(staged_owners.expect("stats").entries > 0, "the stages left owners' segments");
    assert_eq!(owners_read(&leveled, &one), owners_read(&one, &one), "the owners read alike");
    drop(leveled);

    // Batches from there to the head: the first folds every young level.
    let (leveled, _, _) =
        index_to(&recording, &leveled_dir, config(WritePath::Incremental, StageLimits::default()), None)
            .await;
    assert!(!any_unfolded(&leveled.begin_read().expect("read")).expect("young"));
    assert!(!appearances::levels::any_older(&leveled.begin_read().expect("read")).expect("older"));
    assert_eq!(leveled.begin_read().expect("read").entries::<OtsHoldingsStaged>().expect("entries"), 0);
    assert_eq!(leveled.begin_read().expect("read").entries::<OtsOwnersStaged>().expect("entries"), 0);
    let (batches, _, _) = index(
        &recording,
        &dir.path().join("batches"),
        config(WritePath::Incremental, StageLimits::default()),
    )
    .await;
    assert_eq!(hash(&leveled), hash(&batches), "stages with segments, then batches");
}
