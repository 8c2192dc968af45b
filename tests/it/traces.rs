//! Call frames from a real node's tracers: contracts created inside transactions (factories,
//! CREATE2, created-and-destroyed) are found with `trace_block` and with
//! `debug_traceBlockByNumber`, and only top-level ones without traces.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, B256},
    sol,
    sol_types::SolCall,
};
use common::{anvil::Anvil, workload::Chain};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{tables::*, AccessMode, Db},
    index::matches::match_page,
    source::{traces::TraceMode, NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

sol! {
    function make() returns (address);
    function make2(bytes32 salt) returns (address);
    function makeToken(string name, string symbol) returns (address);
    function makeAndDestroy();
    function makeInFailingCall();
}

fn made_addresses(receipt: &Value) -> Vec<Address> {
    receipt["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .filter(|l| l["topics"].as_array().is_some_and(|t| t.len() == 1))
        .map(|l| {
            let data = l["data"].as_str().expect("data");
            data[data.len() - 40..].parse().expect("address")
        })
        .collect()
}

async fn index(url: &str, choice: TraceChoice) -> (tempfile::TempDir, Db, TraceMode) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(url, Duration::from_secs(30))
        .expect("node")
        .with_traces(choice)
        .await
        .expect("tracer");
    let mode = node.trace_mode();
    let head = node.head().await.expect("head");
    let config = SyncConfig { batch_blocks: 10, concurrency: 2, ..Default::default() };
    let indexer = Indexer::open(db, node, vec![Box::new(Erc20Classifier)], config).await.expect("indexer");
    indexer.sync_to(head).await.expect("sync");
    let db = indexer.db().clone();
    (dir, db, mode)
}

fn contracts(db: &Db) -> (Vec<Address>, Vec<Address>) {
    let txn = db.begin_read().expect("read");
    let all = match_page::<OtsAllContracts, OtsAllContractsCounter, _>(&txn, 0, 500).expect("all");
    let erc20 = match_page::<OtsERC20, OtsERC20Counter, _>(&txn, 0, 500).expect("erc20");
    (all.into_iter().map(|(_, a)| a).collect(), erc20.into_iter().map(|(_, a)| a).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contracts_created_inside_transactions_need_traces() {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let from = chain.accounts().await[0];
    let deploy = chain.deploy_artifact(from, "Factory").await;
    chain.mine().await;
    let factory: Address =
        serde_json::from_value(chain.receipt_of(deploy).await["contractAddress"].clone()).expect("factory");
    let calls: Vec<Vec<u8>> = vec![
        makeCall {}.abi_encode(),
        make2Call { salt: B256::repeat_byte(7) }.abi_encode(),
        makeTokenCall { name: "Made Token".into(), symbol: "MADE".into() }.abi_encode(),
        makeAndDestroyCall {}.abi_encode(),
        makeInFailingCallCall {}.abi_encode(),
    ];
    let mut hashes = Vec::new();
    for data in calls {
        hashes.push(chain.send_call(from, factory, data).await);
    }
    chain.mine().await;
    let mut made = Vec::new();
    for h in &hashes {
        let r = chain.receipt_of(*h).await;
        assert_eq!(r["status"], json!("0x1"));
        made.extend(made_addresses(&r));
    }
    assert_eq!(made.len(), 4, "four contracts survive: {made:?}");
    let token = made[2];

    let mut expected: Vec<Address> = made.clone();
    expected.sort_unstable(); // one block: the match table orders by address bytes
    let mut with_factory = vec![factory];
    with_factory.extend(&expected);

    for choice in [TraceChoice::Auto, TraceChoice::Parity, TraceChoice::Geth] {
        let (_dir, db, mode) = index(&anvil.url, choice).await;
        assert_ne!(mode, TraceMode::None, "anvil traces");
        let (all, erc20) = contracts(&db);
        assert_eq!(all, with_factory, "{mode:?}");
        assert_eq!(erc20, vec![token], "{mode:?}");
    }
    let (_dir, db, mode) = index(&anvil.url, TraceChoice::None).await;
    assert_eq!(mode, TraceMode::None);
    // Without frames only the factory is a new contract; the token it made is still found, as a
    // Transfer emitter re-probed in the block of its first Transfer (its mint).
    assert_eq!(contracts(&db), (vec![factory], vec![token]));
}
