//! The mainnet-shaped generator: the same seed gives the same recording byte for byte, and
//! replaying it with every built-in classifier indexes it whole (nothing missing from the
//! recording), with every kind of thing the shape names present, and `check` passes.

use std::time::Duration;

use ots_indexer::{
    classify::capture::capture,
    db::{tables::*, AccessMode, Db},
    index::{
        check::{check, dump_hash},
        journal::unwind_to,
        BatchStats,
    },
    source::{
        fixture::Fixture,
        synthetic::{Shape, SyntheticChain},
    },
    sync::{Indexer, SyncConfig},
};

fn classifiers() -> Vec<Box<dyn ots_classifiers::Classifier>> {
    ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect()
}

/// Writes the generated chain of `seed` with `transactions` as a recording `name` in `dir`.
pub(crate) async fn generate(
    dir: &std::path::Path,
    name: &str,
    seed: u64,
    transactions: u64,
) -> std::path::PathBuf {
    let out = dir.join(name);
    let chain = SyntheticChain::new(seed, transactions, Shape::MAINNET);
    capture(&chain, &classifiers(), (0, chain.last_block()), &out).await.expect("generate");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_chain_is_deterministic_and_indexes_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = generate(dir.path(), "a.rec.zst", 7, 12_000).await;
    let b = generate(dir.path(), "b.rec.zst", 7, 12_000).await;
    let c = generate(dir.path(), "c.rec.zst", 8, 12_000).await;
    let bytes = |p: &std::path::Path| std::fs::read(p).expect("read");
    assert_eq!(bytes(&a), bytes(&b), "same seed, same recording");
    assert_ne!(bytes(&a), bytes(&c), "another seed, another chain");

    // A short reorg window: most of the chain's ids reach the large tables.
    let (db, head, written) = index(&a, &dir.path().join("db"), 16, 16).await;

    let txn = db.begin_read().expect("read");
    let report = check(&txn).expect("check passes");
    assert!(report.appearances > 12_000, "{report:?}");
    for (name, entries) in [
        ("ERC20 tokens", txn.stats::<OtsERC20>().expect("stats").entries),
        ("ERC721 tokens", txn.stats::<OtsERC721>().expect("stats").entries),
        ("EIP-1167 clones", txn.stats::<OtsERC1167>().expect("stats").entries),
        ("ERC20 transfer index", txn.stats::<OtsERC20TransferIndex>().expect("stats").entries),
        ("ERC721 transfer index", txn.stats::<OtsERC721TransferIndex>().expect("stats").entries),
        ("ERC1155 transfer index", txn.stats::<OtsERC1155TransferIndex>().expect("stats").entries),
        ("contract creators", txn.stats::<OtsContractCreators>().expect("stats").entries),
        ("withdrawals", txn.stats::<OtsWithdrawalsIndex>().expect("stats").entries),
    ] {
        assert!(entries > 0, "the generated chain has no {name}");
    }
    // As on mainnet, (holder, token) pairs are far fewer than transfers: holders come back.
    let pairs = txn.stats::<OtsERC20Holdings>().expect("stats").entries;
    assert!(pairs * 4 < written.transfer_logs, "{pairs} pairs for {} transfer logs", written.transfer_logs);

    // `check --hash`: another batching of the same chain hashes the same; one block less does not.
    drop(txn);
    let whole = dump_hash(&db).expect("hash");
    let (other, _, _) = index(&a, &dir.path().join("db2"), 200, 16).await;
    assert_eq!(dump_hash(&other).expect("hash"), whole);
    let w = other.begin_write().expect("write");
    unwind_to(&w, head - 1).expect("unwind");
    w.commit().expect("commit");
    assert_ne!(dump_hash(&other).expect("hash"), whole);
}

/// Indexes `recording` into a new database at `path` in batches of `batch_blocks`, with a
/// reorg window of `reorg_window` blocks.
pub(crate) async fn index(
    recording: &std::path::Path,
    path: &std::path::Path,
    batch_blocks: u64,
    reorg_window: u64,
) -> (Db, u64, BatchStats) {
    let db = Db::open(path, AccessMode::ReadWrite).expect("db");
    let fixture = Fixture::load(recording).expect("load");
    let head = fixture.block_count() - 1;
    let config = SyncConfig {
        batch_blocks,
        reorg_window,
        poll_interval: Duration::from_millis(10),
        ..Default::default()
    };
    let indexer = Indexer::open(db.clone(), fixture, classifiers(), config).await.expect("indexer");
    let progress = indexer.progress();
    indexer.sync_to(head).await.expect("every probe the classifiers make is in the recording");
    indexer.close().await.expect("close");
    (db, head, progress.get().written)
}

/// The party-token index is kept only where the operator asks for it: a new database goes
/// without it; `--party-token-index on` for a database that indexed blocks keeps it from the next
/// block on (and a start without the flag keeps what the database has); `off` drops it, the
/// reorg window's rows too. `check` passes throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_party_token_index_is_kept_only_where_asked_for() {
    use ots_indexer::{
        db::{codec::IndexKind, state},
        txid::TxId,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let recording = generate(dir.path(), "pairs.rec.zst", 7, 4_000).await;
    let head = Fixture::load(&recording).expect("load").block_count() - 1;
    let db = Db::open(&dir.path().join("pairs"), AccessMode::ReadWrite).expect("db");
    let sync = |keep: Option<bool>, to: u64| {
        let (db, recording) = (db.clone(), recording.clone());
        async move {
            let config = SyncConfig {
                batch_blocks: 8,
                reorg_window: 4,
                poll_interval: Duration::from_millis(10),
                party_token_index: keep,
                ..Default::default()
            };
            let fixture = Fixture::load(&recording).expect("load");
            let indexer = Indexer::open(db, fixture, classifiers(), config).await.expect("indexer");
            indexer.sync_to(to).await.expect("sync");
            indexer.close().await.expect("close");
        }
    };
    let pairs = || db.begin_read().expect("read").entries::<OtsPartyTokenCounter>().expect("count");
    let window_rows = || {
        let t = db.begin_read().expect("read");
        let rows = ots_indexer::index::recent::all(&t).expect("window").0;
        rows.ids.keys().filter(|(kind, _)| *kind == IndexKind::PartyToken).count()
    };
    let from = || state::read_party_token_from(&db.begin_read().expect("read")).expect("state");

    let half = head / 2;
    sync(None, half).await;
    assert_eq!((pairs(), from()), (0, state::PARTY_TOKEN_NOT_KEPT), "a new database goes without it");
    sync(Some(true), half + head / 4).await;
    assert_eq!(from(), TxId::first_of_block(half + 1).0, "kept from the block after the tip");
    assert!(
        pairs() > 0 && window_rows() > 0,
        "the blocks after it fill it: {} {} of {head}",
        pairs(),
        window_rows()
    );
    check(&db.begin_read().expect("read")).expect("check");
    sync(None, head).await;
    assert_eq!(from(), TxId::first_of_block(half + 1).0, "a start without the flag keeps it");
    let kept = pairs();
    sync(Some(false), head).await;
    assert_eq!(
        (pairs(), window_rows(), from()),
        (0, 0, state::PARTY_TOKEN_NOT_KEPT),
        "dropped, window rows too"
    );
    check(&db.begin_read().expect("read")).expect("check");
    assert!(kept > 0);
    // A database that keeps it from its start holds every pair: a party's list of a token it
    // moved is counted whole.
    let whole = Db::open(&dir.path().join("whole"), AccessMode::ReadWrite).expect("db");
    {
        let config = SyncConfig {
            batch_blocks: 8,
            reorg_window: 4,
            poll_interval: Duration::from_millis(10),
            party_token_index: Some(true),
            ..Default::default()
        };
        let indexer =
            Indexer::open(whole.clone(), Fixture::load(&recording).expect("load"), classifiers(), config)
                .await
                .expect("indexer");
        indexer.sync_to(head).await.expect("sync");
        indexer.close().await.expect("close");
    }
    let t = whole.begin_read().expect("read");
    assert_eq!(state::read_party_token_from(&t).expect("state"), 0);
    assert!(t.entries::<OtsPartyTokenCounter>().expect("count") > kept / 2);
    check(&t).expect("check");
}
