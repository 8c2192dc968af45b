//! A second node implementation: Hardhat 2's node, which has no `eth_getBlockReceipts` (it fails
//! the whole JSON-RPC batch that asks for it), no `trace_` methods and no named tracers. The
//! indexer must start on it, take receipts one transaction at a time, and index the standard
//! workload exactly as it does from Anvil.

mod common;

use std::time::Duration;

use common::{hardhat::Hardhat, workload};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{AccessMode, Db},
    index::check::check,
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_workload_indexes_from_hardhat_as_from_anvil() {
    let node = Hardhat::start();
    let work = workload::run(&node.url).await;
    let expected = work.expected_transfer_txs();

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let client = NodeClient::connect(&node.url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("a node without tracers is usable");
    assert_eq!(client.trace_mode().name(), "none", "Hardhat 2 has no call tracer");
    let config = SyncConfig { batch_blocks: 4, ..SyncConfig::default() };
    let indexer = Indexer::open(db.clone(), client.clone(), vec![Box::new(Erc20Classifier)], config)
        .await
        .expect("indexer");
    let head = client.head().await.expect("head");
    indexer.sync_to(head).await.expect("indexes every block, block 0 included");
    indexer.close().await.expect("close");

    let (api, server) = common::serve(&db, client).await;
    assert_eq!(api.call("ots2_getERC20Count", json!([])).await, json!(work.tokens.len()));
    for (address, txs) in &expected {
        assert_eq!(
            api.call("ots2_getERC20TransferCount", json!([address])).await,
            json!(txs.len()),
            "transfers of {address}"
        );
    }
    // Every listed transaction is one that was sent, in order.
    let a3 = work.accounts[3];
    let page = api.call("ots2_getERC20TransferList", json!([a3, 0, 300])).await;
    let hashes: Vec<_> = page["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| serde_json::from_value::<alloy::primitives::B256>(r["hash"].clone()).expect("hash"))
        .collect();
    assert_eq!(&hashes, &expected[&a3]);
    check(&db.begin_read().expect("read")).expect("check");
    // Served from the node's eth_ methods: block pages work here too.
    let details = api.call("ots_getBlockDetails", json!([1])).await;
    assert_eq!(details["block"]["number"], json!("0x1"));
    assert!(details["block"]["transactionCount"].as_u64().expect("count") > 0);
    // What needs a call tracer says so, instead of failing obscurely.
    let (code, message) =
        api.try_call("ots_getInternalOperations", json!([expected[&a3][0]])).await.expect_err("no tracer");
    assert!(code != 0 && message.contains("call tracer"), "{code} {message}");
    let _ = server.stop();
}
