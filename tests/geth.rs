//! geth itself (`geth --dev`, built by the test bed at a pinned version): the indexer takes its
//! call frames from geth's own `callTracer` (`debug_traceBlockByNumber`; geth refuses to trace
//! genesis, which must not hide the tracer), finds contracts made inside calls, serves the
//! `ots_` transaction pages from the call tracer and from struct logs alike (geth has both), and
//! follows a reorg made with `debug_setHead` to an index equal to a clean one.

mod common;

use std::time::Duration;

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    sol,
    sol_types::{SolCall, SolValue},
};
use common::{contracts::Makers, geth::Geth, Client};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{AccessMode, Db},
    index::check::{check, dump_hash},
    rpc::{self, RpcContext, ServerOptions, TxFrames},
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

sol! {
    function all(address to) external payable;
    function fail() external pure;
    function transfer(address to, uint256 value) returns (bool);
}

/// The creation code of testbed artifact `name`.
fn bytecode(name: &str) -> Bytes {
    let path = common::anvil::testbed_dir().join("build/artifacts.json");
    let artifacts: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("artifacts")).expect("json");
    serde_json::from_value(artifacts[name]["bytecode"].clone()).expect("hex")
}

/// geth's one unlocked account, sending and waiting for each transaction's receipt (the dev
/// chain seals a block per transaction).
struct Dev {
    node: Client,
    from: Address,
}

impl Dev {
    async fn send(&self, to: Option<Address>, value: u64, data: Bytes) -> (B256, Value) {
        let mut tx =
            json!({"from": self.from, "value": format!("{value:#x}"), "data": data, "gas": "0x7a1200"});
        if let Some(to) = to {
            tx["to"] = json!(to);
        }
        let hash: B256 =
            serde_json::from_value(self.node.call("eth_sendTransaction", json!([tx])).await).expect("hash");
        for _ in 0..200 {
            // A fresh geth answers "transaction indexing is in progress" for a moment.
            match self.node.try_call("eth_getTransactionReceipt", json!([hash])).await {
                Ok(receipt) if !receipt.is_null() => return (hash, receipt),
                Ok(_) => {}
                Err((_, message)) => assert!(message.contains("indexing is in progress"), "{message}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{hash} was never mined");
    }

    async fn deploy(&self, name: &str, args: Vec<u8>) -> Address {
        let mut code = bytecode(name).to_vec();
        code.extend(args);
        let (_, receipt) = self.send(None, 0, code.into()).await;
        serde_json::from_value(receipt["contractAddress"].clone()).expect("created")
    }
}

/// The address in the factory's `Made(address)` log (a made token logs its mint first).
fn made(receipt: &Value, factory: Address) -> Address {
    let log = receipt["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .find(|l| l["address"] == json!(factory))
        .expect("Made(address)");
    let data = log["data"].as_str().expect("data");
    data[data.len() - 40..].parse().expect("address")
}

async fn serve(db: &Db, url: &str, frames: TxFrames) -> (Client, jsonrpsee::server::ServerHandle) {
    let node = NodeClient::connect(url, Duration::from_secs(30)).expect("node");
    let ctx = RpcContext { tx_frames: frames, ..RpcContext::new(db.clone(), node) };
    let (addr, server) = rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &ServerOptions::default())
        .await
        .expect("serve");
    (Client::new(&format!("http://{addr}")), server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn geth_dev_indexes_with_its_call_tracer_and_follows_set_head() {
    let geth = Geth::start();
    let node = Client::new(&geth.url);
    let from: Address =
        serde_json::from_value(node.call("eth_accounts", json!([])).await[0].clone()).expect("dev account");
    let dev = Dev { node: node.clone(), from };
    let eoa = Address::repeat_byte(0x42);

    let factory = dev.deploy("Factory", Vec::new()).await;
    let ops = dev.deploy("InternalOps", Vec::new()).await;
    let supply = U256::from(10u64).pow(U256::from(24));
    let token = dev
        .deploy("DemoToken", ("Geth Token".to_owned(), "GTH".to_owned(), supply).abi_encode_params())
        .await;
    let mut txs = Vec::new();
    let mut inside = Vec::new();
    for data in [
        Makers::makeCall {}.abi_encode(),
        Makers::make2Call { salt: B256::repeat_byte(7) }.abi_encode(),
        Makers::makeTokenCall { name: "Made Token".into(), symbol: "MADE".into() }.abi_encode(),
    ] {
        let (hash, receipt) = dev.send(Some(factory), 0, data.into()).await;
        inside.push(made(&receipt, factory));
        txs.push(hash);
    }
    let (destroyed, _) = dev.send(Some(factory), 0, Makers::makeAndDestroyCall {}.abi_encode().into()).await;
    txs.push(destroyed);
    txs.push(dev.send(Some(factory), 0, Makers::makeInFailingCallCall {}.abi_encode().into()).await.0);
    txs.push(
        dev.send(Some(token), 0, transferCall { to: eoa, value: U256::from(5) }.abi_encode().into()).await.0,
    );
    let (all_tx, _) = dev.send(Some(ops), 0x400, allCall { to: eoa }.abi_encode().into()).await;
    txs.push(all_tx);
    let (failed, receipt) = dev.send(Some(ops), 0, failCall {}.abi_encode().into()).await;
    assert_eq!(receipt["status"], json!("0x0"));
    txs.push(failed);

    // geth's callTracer is found although geth will not trace its genesis block.
    let client = NodeClient::connect(&geth.url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("tracer");
    assert_eq!(client.trace_mode().name(), "debug_traceBlockByNumber");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let config = SyncConfig { batch_blocks: 4, reorg_window: 64, ..SyncConfig::default() };
    let indexer = Indexer::open(db.clone(), client.clone(), vec![Box::new(Erc20Classifier)], config)
        .await
        .expect("indexer");
    indexer.sync_to(client.head().await.expect("head")).await.expect("sync");
    check(&db.begin_read().expect("read")).expect("check");

    let (tracer, s1) = serve(&db, &geth.url, TxFrames::Auto).await;
    let (logs, s2) = serve(&db, &geth.url, TxFrames::StructLogs).await;
    // Contracts made inside calls are listed; the made token is an ERC20.
    let all = tracer.call("ots2_getAllContractsList", json!([0, 100])).await;
    let listed: Vec<Value> =
        all["results"].as_array().expect("rows").iter().map(|r| r["address"].clone()).collect();
    for contract in [factory, ops, token, inside[0], inside[1], inside[2]] {
        assert!(listed.contains(&json!(contract)), "{contract} listed: {listed:?}");
    }
    assert_eq!(tracer.call("ots2_getERC20Count", json!([])).await, json!(2), "DemoToken and the made token");
    assert_eq!(
        tracer.call("ots_getContractCreator", json!([inside[2]])).await["creator"],
        json!(factory),
        "a factory-made token's creator is the factory"
    );
    let history = tracer.call("ots_searchTransactionsBefore", json!([inside[1], 0, 25])).await;
    assert_eq!(history["txs"].as_array().map(Vec::len), Some(1), "the CREATE2 counter's creation: {history}");
    // The transaction pages: geth's call tracer and our struct-log rebuild agree on every one.
    for hash in &txs {
        for method in ["ots_getInternalOperations", "ots_traceTransaction", "ots_getTransactionError"] {
            let want = tracer.call(method, json!([hash])).await;
            assert_eq!(logs.call(method, json!([hash])).await, want, "{method} of {hash}");
        }
    }
    let kinds: Vec<u64> = tracer
        .call("ots_getInternalOperations", json!([all_tx]))
        .await
        .as_array()
        .expect("ops")
        .iter()
        .map(|o| o["type"].as_u64().expect("type"))
        .collect();
    assert_eq!(kinds, [0, 2, 3, 1], "a transfer, a CREATE, a CREATE2 and a selfdestruct");
    let error = tracer.call("ots_getTransactionError", json!([failed])).await;
    assert!(error.as_str().is_some_and(|e| e.starts_with("0x08c379a0")), "{error}");
    assert_eq!(tracer.call("ots_getTransactionError", json!([all_tx])).await, json!("0x"));
    let _ = (s1.stop(), s2.stop());

    // A reorg: geth's head set back three blocks, and new blocks built on top.
    let head = client.head().await.expect("head");
    let _: Value = node.call("debug_setHead", json!([format!("{:#x}", head - 3)])).await;
    for i in 0..4u64 {
        dev.send(Some(eoa), 1 + i, Bytes::new()).await;
    }
    indexer.sync_to(client.head().await.expect("head")).await.expect("follows the reorg");
    indexer.close().await.expect("close");
    check(&db.begin_read().expect("read")).expect("check after the reorg");
    let clean_dir = tempfile::tempdir().expect("tempdir");
    let clean = Db::open(clean_dir.path(), AccessMode::ReadWrite).expect("open");
    let fresh =
        Indexer::open(clean.clone(), client.clone(), vec![Box::new(Erc20Classifier)], SyncConfig::default())
            .await
            .expect("indexer");
    fresh.sync_to(client.head().await.expect("head")).await.expect("clean index");
    fresh.close().await.expect("close");
    let hash = |db: &Db| dump_hash(&db.begin_read().expect("read")).expect("hash");
    assert_eq!(hash(&db), hash(&clean), "after debug_setHead the index equals a clean one");
}
