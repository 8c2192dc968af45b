//! What the explorer shows about a chain's contracts, gathered from an index built with every
//! built-in classifier and the node's own frames, in a form two nodes can be compared by: block
//! numbers and transaction hashes aside.

use std::time::Duration;

use alloy::primitives::Address;
use ots_indexer::{
    db::{AccessMode, Db},
    index::check::check,
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

/// A database indexed from `url` to its head with every built-in classifier and the frames
/// `auto` finds, checked; with the client it used.
pub async fn index_everything(url: &str) -> (tempfile::TempDir, Db, NodeClient) {
    index_with(url, TraceChoice::Auto, 3).await
}

/// As [`index_everything`], with frames from `traces` and `batch_blocks` blocks a batch.
pub async fn index_with(
    url: &str,
    traces: TraceChoice,
    batch_blocks: u64,
) -> (tempfile::TempDir, Db, NodeClient) {
    let client = NodeClient::connect(url, Duration::from_secs(60))
        .expect("node")
        .with_traces(traces)
        .await
        .expect("frames");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let classifiers =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    let config = SyncConfig { batch_blocks, ..SyncConfig::default() };
    let indexer = Indexer::open(db.clone(), client.clone(), classifiers, config).await.expect("indexer");
    indexer.sync_to(client.head().await.expect("head")).await.expect("sync");
    indexer.close().await.expect("close");
    check(&db.begin_read().expect("read")).expect("check");
    (dir, db, client)
}

/// Everything the explorer lists about contracts, for a chain indexed from `url` with every
/// built-in classifier and the node's own frames: each list's addresses (block numbers aside),
/// each listed contract's attributes and creator, and the history of each address in `who`
/// as (sender, nonce) pairs (transaction hashes differ between nodes).
pub async fn contract_world(url: &str, who: &[Address]) -> Value {
    let (_dir, db, client) = index_everything(url).await;
    let (api, server) = super::serve(&db, client).await;
    let world = world_of(&api, who).await;
    let _ = server.stop();
    world
}

/// [`contract_world`] from a server already running.
pub async fn world_of(api: &super::Client, who: &[Address]) -> Value {
    let mut world = serde_json::Map::new();
    let mut listed = std::collections::BTreeSet::new();
    for (list, list_method, count_method) in [
        ("AllContracts", "ots2_getAllContractsList", "ots2_getAllContractsCount"),
        ("ERC20", "ots2_getERC20List", "ots2_getERC20Count"),
        ("ERC721", "ots2_getERC721List", "ots2_getERC721Count"),
        ("ERC1155", "ots2_getERC1155List", "ots2_getERC1155Count"),
        ("ERC1167", "ots2_getERC1167List", "ots2_getERC1167Count"),
        ("ERC4626", "ots2_getERC4626List", "ots2_getERC4626Count"),
    ] {
        let page = api.call(list_method, json!([0, 500])).await;
        let mut rows: Vec<Value> = page["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(o) = r.as_object_mut() {
                    o.remove("blockNumber");
                }
                listed.insert(r["address"].as_str().expect("address").to_owned());
                r
            })
            .collect();
        rows.sort_by_key(|r| r["address"].to_string());
        let count = api.call(count_method, json!([])).await;
        world.insert(list.to_owned(), json!({"count": count, "rows": rows}));
    }
    let mut contracts = serde_json::Map::new();
    for address in &listed {
        let creator = api.call("ots_getContractCreator", json!([address])).await;
        let creation =
            if creator.is_null() { Value::Null } else { sender_and_nonce(api, &creator["hash"]).await };
        contracts.insert(
            address.clone(),
            json!({
                "attributes": api.call("ots2_getAddressAttributes", json!([address])).await,
                "creator": creator["creator"],
                "creation": creation,
            }),
        );
    }
    world.insert("contracts".into(), Value::Object(contracts));
    let mut histories = serde_json::Map::new();
    for address in who.iter().map(|a| format!("{a:#x}")).chain(listed.iter().cloned()) {
        let (mut block, mut history) = (0u64, Vec::new());
        loop {
            let page = api.call("ots_searchTransactionsBefore", json!([address, block, 25])).await;
            let txs = page["txs"].as_array().expect("txs").clone();
            for t in &txs {
                history.push(json!([t["from"], t["nonce"]]));
            }
            if page["lastPage"] == json!(true) {
                break;
            }
            let oldest = txs.last().expect("a page that is not the last holds transactions");
            block = u64::from_str_radix(
                oldest["blockNumber"].as_str().expect("hex").trim_start_matches("0x"),
                16,
            )
            .expect("hex");
        }
        histories.insert(address, Value::Array(history));
    }
    world.insert("histories".into(), Value::Object(histories));
    Value::Object(world)
}

pub async fn sender_and_nonce(api: &super::Client, hash: &Value) -> Value {
    let tx = api.call("eth_getTransactionByHash", json!([hash])).await;
    json!([tx["from"], tx["nonce"]])
}
