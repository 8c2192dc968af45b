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
