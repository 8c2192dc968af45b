//! The bulk write path on a real node: the standard workload on Anvil indexed through bulk
//! stages (every block older than a 2-block reorg window) and batch by batch gives equal tables,
//! and the API answers alike over HTTP.

use crate::common;

use std::time::Duration;

use common::{anvil::Anvil, serve, workload};
use ots_indexer::{
    db::{AccessMode, Db},
    index::check::{check, dump_hash},
    source::{NodeClient, TraceChoice},
    sync::{Indexer, StageLimits, SyncConfig, WritePath},
};
use serde_json::json;

async fn index(url: &str, path: &std::path::Path, write_path: WritePath) -> (Db, NodeClient, u64) {
    let node = NodeClient::connect(url, Duration::from_secs(10))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("tracer");
    let head = node.head().await.expect("head");
    let db = Db::open(path, AccessMode::ReadWrite).expect("db");
    // Small buffers: the stage's rows spill into run files and are merged back.
    let stage = StageLimits { buffer_bytes: 16 << 10, journal: true, ..Default::default() };
    let config = SyncConfig { batch_blocks: 3, reorg_window: 2, write_path, stage, ..Default::default() };
    let classifiers =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("indexer");
    let progress = indexer.progress();
    indexer.sync_to(head).await.expect("sync");
    indexer.close().await.expect("close");
    (db, node, progress.get().stages)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_workload_indexes_alike_through_bulk_stages() {
    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (batches, node, stages) =
        index(&anvil.url, &dir.path().join("batches"), WritePath::Incremental).await;
    assert_eq!(stages, 0);
    let (bulk, _, stages) = index(&anvil.url, &dir.path().join("bulk"), WritePath::Bulk).await;
    assert_eq!(stages, 1, "every block older than the window went through one stage");
    let hash = |db: &Db| {
        check(&db.begin_read().expect("read")).expect("check passes");
        dump_hash(db).expect("hash")
    };
    assert_eq!(hash(&bulk), hash(&batches), "bulk stages and batches give the same tables");

    let (from_batches, _s1) = serve(&batches, node.clone()).await;
    let (from_bulk, _s2) = serve(&bulk, node).await;
    let demo = work.tokens[0].address;
    for (method, params) in [
        ("ots2_getERC20TransferList", json!([work.accounts[0], 0, 50])),
        ("ots2_getERC20TransferCount", json!([work.accounts[4]])),
        ("ots2_getTokenHolders", json!([demo, 0, 25])),
        ("ots2_getAllContractsList", json!([0, 50])),
        ("ots_searchTransactionsBefore", json!([work.accounts[3], 0, 25])),
    ] {
        assert_eq!(
            from_bulk.call(method, params.clone()).await,
            from_batches.call(method, params).await,
            "{method}"
        );
    }
}
