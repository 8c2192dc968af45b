//! The mainnet-shaped generator: the same seed gives the same recording byte for byte, and
//! replaying it with every built-in classifier indexes it whole (nothing missing from the
//! recording), with every kind of thing the shape names present, and `check` passes.

use std::time::Duration;

use ots_indexer::{
    classify::capture::capture,
    db::{tables::*, AccessMode, Db},
    index::check::check,
    source::{
        fixture::Fixture,
        synthetic::{Shape, SyntheticChain},
    },
    sync::{Indexer, SyncConfig},
};

fn classifiers() -> Vec<Box<dyn ots_classifiers::Classifier>> {
    ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect()
}

async fn generate(dir: &std::path::Path, name: &str, seed: u64) -> std::path::PathBuf {
    let out = dir.join(name);
    let chain = SyntheticChain::new(seed, 12_000, Shape::MAINNET);
    capture(&chain, &classifiers(), (0, chain.last_block()), &out, flate2::Compression::fast())
        .await
        .expect("generate");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_chain_is_deterministic_and_indexes_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = generate(dir.path(), "a.jsonl.gz", 7).await;
    let b = generate(dir.path(), "b.jsonl.gz", 7).await;
    let c = generate(dir.path(), "c.jsonl.gz", 8).await;
    let bytes = |p: &std::path::Path| std::fs::read(p).expect("read");
    assert_eq!(bytes(&a), bytes(&b), "same seed, same recording");
    assert_ne!(bytes(&a), bytes(&c), "another seed, another chain");

    let db = Db::open(&dir.path().join("db"), AccessMode::ReadWrite).expect("db");
    let fixture = Fixture::load(&a).expect("load");
    let head = fixture.block_count() - 1;
    let config =
        SyncConfig { batch_blocks: 16, poll_interval: Duration::from_millis(10), ..Default::default() };
    let indexer = Indexer::open(db.clone(), fixture, classifiers(), config).await.expect("indexer");
    indexer.sync_to(head).await.expect("every probe the classifiers make is in the recording");
    indexer.close().await.expect("close");

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
}
