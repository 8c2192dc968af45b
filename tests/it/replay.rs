//! A captured chain replays with no node into exactly the index the node gives.

use crate::common;

use std::{process::Command, time::Duration};

use common::{anvil::Anvil, workload};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    classify::capture::capture,
    db::{tables::TableId, AccessMode, Db},
    index::check::dump,
    source::{fixture::Fixture, NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};

const BIN: &str = env!("CARGO_BIN_EXE_ots-indexer");

fn full_dump(db: &Db) -> Vec<(&'static str, Vec<u8>, Vec<u8>)> {
    let mut all = dump(db).expect("dump");
    let txn = db.begin_read().expect("read");
    all.extend(
        txn.raw_entries(TableId::OtsUndoJournal)
            .expect("journal")
            .into_iter()
            .map(|(k, v)| ("journal", k, v)),
    );
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_gives_the_same_database_as_the_node() {
    let mut anvil = Anvil::start(&[]);
    workload::run(&anvil.url).await;
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("traces");
    let head = node.head().await.expect("head");
    let config = SyncConfig { batch_blocks: 4, concurrency: 4, ..Default::default() };

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("chain.rec.zst");
    let stats = capture(&node, &[Box::new(Erc20Classifier)], (0, head), &file).await.expect("capture");
    assert_eq!(stats.blocks, head + 1);
    // Two tokens and the junk contract get four probes, the two others three.
    assert_eq!(stats.probes, 4 * 3 + 3 * 2, "{stats:?}");

    let from_node = Db::open(&dir.path().join("node"), AccessMode::ReadWrite).expect("open");
    let indexer = Indexer::open(from_node.clone(), node, vec![Box::new(Erc20Classifier)], config.clone())
        .await
        .expect("open");
    indexer.sync_to(head).await.expect("sync from node");
    anvil.stop();

    let fixture = Fixture::load(&file).expect("load");
    assert_eq!(fixture.block_count() as u64, head + 1);
    let from_file = Db::open(&dir.path().join("file"), AccessMode::ReadWrite).expect("open");
    let indexer = Indexer::open(from_file.clone(), fixture, vec![Box::new(Erc20Classifier)], config)
        .await
        .expect("open");
    indexer.sync_to(head).await.expect("sync from file, node gone");
    assert!(full_dump(&from_node) == full_dump(&from_file), "replay differs from the node's index");

    // The same through the binary, with no node anywhere.
    let out = Command::new(BIN)
        .args([
            "sync",
            "--exit-at-head",
            "--classifiers",
            "erc20",
            "--rpc-url",
            "http://127.0.0.1:9",
            "--source",
        ])
        .arg(&file)
        .arg("--datadir")
        .arg(dir.path().join("cli"))
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let from_cli = Db::open(&dir.path().join("cli"), AccessMode::ReadWrite).expect("open");
    assert!(dump(&from_cli).expect("dump") == dump(&from_node).expect("dump"));

    // Garbage is refused clearly.
    let junk = dir.path().join("junk.gz");
    std::fs::write(&junk, b"not gzip").expect("write");
    let err = Fixture::load(&junk).expect_err("junk");
    assert!(
        err.to_string().contains("junk.gz") && err.to_string().contains("neither zstd nor gzip"),
        "{err}"
    );
}
