//! geth itself (`geth --dev`, built by the test bed at a pinned version): the indexer takes its
//! call frames from geth's own `callTracer` (`debug_traceBlockByNumber`; geth refuses to trace
//! genesis, which must not hide the tracer), finds contracts made inside calls, serves the
//! `ots_` transaction pages from the call tracer and from struct logs alike (geth has both), and
//! follows a reorg made with `debug_setHead` to an index equal to a clean one; and the standard
//! workload gives the explorer the same answers on geth as on Anvil; pending activity comes from
//! geth's `txpool_content` and `newPendingTransactions`.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    sol,
    sol_types::{SolCall, SolValue},
};
use common::{
    anvil::Anvil,
    contracts::Makers,
    geth::{Dev, Geth},
    workload::{self, Faucet},
    world, Client,
};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{AccessMode, Db},
    index::check::{check, dump_hash},
    pending::{Notice, NoticeKind, PendingConfig, PendingPool},
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
    let dev = Dev::of(&geth).await;
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
    let client = call_traced(&geth.url).await;
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
    // geth puts the transactions of the blocks it dropped back into its pool and may mine them
    // a moment later: both indexes stop at the same block, whatever geth does after.
    let target = client.head().await.expect("head");
    indexer.sync_to(target).await.expect("follows the reorg");
    indexer.close().await.expect("close");
    check(&db.begin_read().expect("read")).expect("check after the reorg");
    let clean_dir = tempfile::tempdir().expect("tempdir");
    let clean = Db::open(clean_dir.path(), AccessMode::ReadWrite).expect("open");
    let fresh =
        Indexer::open(clean.clone(), client.clone(), vec![Box::new(Erc20Classifier)], SyncConfig::default())
            .await
            .expect("indexer");
    fresh.sync_to(target).await.expect("clean index");
    fresh.close().await.expect("close");
    let hash = |db: &Db| dump_hash(db).expect("hash");
    assert_eq!(hash(&db), hash(&clean), "after debug_setHead the index equals a clean one");
}

/// Removes, at any depth, what differs between two nodes mining the same transactions into
/// different blocks under different fork rules: where they land, and the fees (geth 1.17's dev
/// chain charges more gas for the same transfer than Anvil 1.7's: 48,853 against 34,453).
fn without_node_dependent(mut v: Value) -> Value {
    const PLACED: [&str; 8] = [
        "blockNumber",
        "timestamp",
        "blockHash",
        "transactionIndex",
        "firstActiveBlock",
        "lastActiveBlock",
        "ethTx",
        "feesPaid",
    ];
    fn strip(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.retain(|k, _| !PLACED.contains(&k.as_str()));
                o.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// Every answer of ours the explorer shows for the standard workload: the contract world, each
/// transaction's pages, each token's holders and each account's token pages and summary.
async fn explorer_answers(api: &Client, work: &workload::Workload) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("world".into(), world::world_of(api, &work.accounts).await);
    let mut pages = serde_json::Map::new();
    for sent in &work.sent {
        let hash = json!([sent.hash]);
        pages.insert(
            format!("{:#x}", sent.hash),
            json!({
                "internal": api.call("ots_getInternalOperations", hash.clone()).await,
                "trace": api.call("ots_traceTransaction", hash.clone()).await,
                "error": api.call("ots_getTransactionError", hash).await,
            }),
        );
    }
    out.insert("transactions".into(), Value::Object(pages));
    let mut tokens = serde_json::Map::new();
    for token in &work.tokens {
        tokens.insert(
            format!("{:#x}", token.address),
            api.call("ots2_getTokenHolders", json!([token.address, 0, 100])).await,
        );
    }
    out.insert("holders".into(), Value::Object(tokens));
    let mut accounts = serde_json::Map::new();
    for a in &work.accounts {
        let list = api.call("ots2_getERC20TransferList", json!([a, 0, 1000])).await;
        let rows: Vec<Value> = list["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| json!([r["hash"], r["transfers"]]))
            .collect();
        accounts.insert(
            format!("{a:#x}"),
            without_node_dependent(json!({
                "transfers": api.call("ots2_getERC20TransferCount", json!([a])).await,
                "list": rows,
                "holdings": api.call("ots2_getERC20Holdings", json!([a])).await,
                "summary": api.call("ots2_getAddressSummary", json!([a])).await,
                "firstNonce": api.call("ots_getTransactionBySenderAndNonce", json!([a, 0])).await,
            })),
        );
    }
    out.insert("accounts".into(), Value::Object(accounts));
    Value::Object(out)
}

/// The standard workload, signed with the test's own keys so that its transactions are the
/// same bytes (and hashes) on both nodes, run on geth and on Anvil with one chain id: indexed
/// with each node's own call tracer, every answer the explorer needs is equal but for block
/// numbers and timestamps (geth seals a block per transaction, the workload mines 100 per block
/// on Anvil).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_workload_on_geth_answers_as_on_anvil() {
    let geth = Geth::start();
    let anvil = Anvil::start(&["--chain-id", "1337"]);
    let dev: Address =
        serde_json::from_value(Client::new(&geth.url).call("eth_accounts", json!([])).await[0].clone())
            .expect("dev account");
    let mut answers = Vec::new();
    let mut sent = Vec::new();
    for (url, seals_itself, faucet) in
        [(&geth.url, true, Faucet::Unlocked(dev)), (&anvil.url, false, Faucet::SetBalance)]
    {
        let work = workload::run_with_local_keys(url, 1337, seals_itself, faucet).await;
        let (_dir, db, client) = world::index_everything(url).await;
        let (api, server) = common::serve(&db, client).await;
        answers.push(explorer_answers(&api, &work).await);
        sent.push(work.sent.iter().map(|s| s.hash).collect::<Vec<_>>());
        let _ = server.stop();
    }
    assert_eq!(sent[0], sent[1], "the same signed transactions on both nodes");
    assert!(sent[0].len() > 800, "the whole workload: {}", sent[0].len());
    let (on_geth, on_anvil) = (&answers[0], &answers[1]);
    for part in ["world", "transactions", "holders", "accounts"] {
        let (g, a) = (&on_geth[part], &on_anvil[part]);
        let (Some(g), Some(a)) = (g.as_object(), a.as_object()) else { panic!("{part} is a map") };
        assert_eq!(g.keys().collect::<Vec<_>>(), a.keys().collect::<Vec<_>>(), "{part}: the same keys");
        for (key, value) in g {
            // One field at a time: a whole account's answers would bury the difference.
            match (value.as_object(), a[key].as_object()) {
                (Some(g), Some(a)) if g.len() == a.len() => {
                    for (field, v) in g {
                        assert_eq!(v, &a[field], "{part} {key} {field}: geth (left) against Anvil (right)");
                    }
                }
                _ => assert_eq!(value, &a[key], "{part} {key}: geth (left) against Anvil (right)"),
            }
        }
    }
    let world = &on_geth["world"];
    assert_eq!(world["ERC20"]["count"], json!(2), "{}", world["ERC20"]);
    assert_eq!(world["AllContracts"]["count"], json!(5), "{}", world["AllContracts"]);
}

/// The next notice about `hash` of the kind `wanted` picks, within 20 s.
async fn notice_of(
    notices: &mut tokio::sync::broadcast::Receiver<std::sync::Arc<Notice>>,
    hash: B256,
    wanted: impl Fn(&NoticeKind) -> bool,
) -> NoticeKind {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let n = notices.recv().await.expect("notices");
            if n.tx.hash == hash && wanted(&n.kind) {
                return n.kind.clone();
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no such notice about {hash}"))
}

/// Pending activity from geth, from `txpool_content` over HTTP and from `newPendingTransactions`
/// with full transactions over WebSocket. geth --dev seals what is executable at once, so a
/// transaction is held in the pool by a nonce gap: listed for its parties, replaced by a
/// higher-priced one of its nonce, and reported mined once the gap is filled and the block
/// indexed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_activity_from_geth() {
    let geth = Geth::start();
    let node = Client::new(&geth.url);
    let dev: Address =
        serde_json::from_value(node.call("eth_accounts", json!([])).await[0].clone()).expect("dev account");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let http = NodeClient::connect(&geth.url, Duration::from_secs(30)).expect("node");
    let ws = NodeClient::open(&geth.url.replace("http://", "ws://"), Duration::from_secs(30))
        .await
        .expect("ws node");
    let config = PendingConfig { max: 100, poll: Duration::from_millis(100), ..Default::default() };
    let polled = PendingPool::start(http.clone(), db.clone(), config).await;
    let pushed = PendingPool::start(ws, db.clone(), config).await;
    assert_eq!(polled.status().source.as_deref(), Some("txpool_content (polled)"));
    assert_eq!(pushed.status().source.as_deref(), Some("eth_subscribe newPendingTransactions"));
    let (mut from_poll, mut from_push) = (polled.subscribe(), pushed.subscribe());

    let nonce = |n: u64| format!("{n:#x}");
    let next: U256 =
        serde_json::from_value(node.call("eth_getTransactionCount", json!([dev, "latest"])).await)
            .expect("nonce");
    let next = next.to::<u64>();
    let (a, b) = (Address::repeat_byte(0xa1), Address::repeat_byte(0xb2));
    let send = |to: Address, n: u64, price: u64| {
        let node = node.clone();
        let tx = json!({"from": dev, "to": to, "value": "0x1", "nonce": nonce(n), "gas": "0x5208",
                        "gasPrice": format!("{price:#x}")});
        async move {
            serde_json::from_value::<B256>(node.call("eth_sendTransaction", json!([tx])).await).expect("hash")
        }
    };
    // Held by the gap at `next`: queued in geth's pool, which only txpool_content shows.
    let held = send(a, next + 1, 2_000_000_000).await;
    notice_of(&mut from_poll, held, |k| matches!(k, NoticeKind::Pending)).await;
    assert_eq!(polled.of_address(&a, 10).iter().map(|t| t.hash).collect::<Vec<_>>(), vec![held]);
    let bumped = send(b, next + 1, 4_000_000_000).await;
    let replaced = notice_of(&mut from_poll, held, |k| matches!(k, NoticeKind::Replaced { .. })).await;
    assert!(matches!(replaced, NoticeKind::Replaced { by: Some(h) } if h == bumped), "{replaced:?}");
    assert_eq!(polled.of_address(&b, 10).iter().map(|t| t.hash).collect::<Vec<_>>(), vec![bumped]);
    assert!(polled.of_address(&a, 10).is_empty());

    // The gap filled, both are executable: announced over WebSocket and sealed at once.
    let filler = send(a, next, 2_000_000_000).await;
    for hash in [filler, bumped] {
        notice_of(&mut from_push, hash, |k| matches!(k, NoticeKind::Pending)).await;
    }
    let mut receipt = Value::Null;
    for _ in 0..100 {
        // A fresh geth answers "transaction indexing is in progress" for a moment.
        match node.try_call("eth_getTransactionReceipt", json!([bumped])).await {
            Ok(r) if !r.is_null() => {
                receipt = r;
                break;
            }
            Ok(_) => {}
            Err((_, message)) => assert!(message.contains("indexing is in progress"), "{message}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let indexer =
        Indexer::open(db.clone(), http.clone(), vec![Box::new(Erc20Classifier)], SyncConfig::default())
            .await
            .expect("indexer");
    indexer.sync_to(http.head().await.expect("head")).await.expect("index");
    indexer.close().await.expect("close");
    for notices in [&mut from_poll, &mut from_push] {
        let NoticeKind::Mined { block, index, .. } =
            notice_of(notices, bumped, |k| matches!(k, NoticeKind::Mined { .. })).await
        else {
            unreachable!()
        };
        assert_eq!(json!(format!("{block:#x}")), receipt["blockNumber"]);
        assert_eq!(json!(format!("{index:#x}")), receipt["transactionIndex"]);
    }
}

/// geth refuses a JSON-RPC batch of more than 1,000 calls whole ("batch too large"), and an API
/// page of a thousand rows asks the node for more than that: the client's batches stay under
/// every common node's cap, shrink to a smaller one when the node refuses them, and come back
/// in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_the_nodes_cap_is_answered_whole_and_in_order() {
    let geth = Geth::start();
    let one =
        |i: u32| json!({"jsonrpc": "2.0", "id": i, "method": "web3_sha3", "params": [format!("{i:#010x}")]});
    let refused: Value = reqwest::Client::new()
        .post(&geth.url)
        .json(&(0..1_001).map(one).collect::<Vec<_>>())
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert!(refused.to_string().contains("batch too large"), "geth's cap is real: {refused}");

    sha3_batch_in_order(&geth.url, 2_500).await;

    // A node whose cap is below the client's batches: it refuses them whole, and the client
    // halves its batches until they pass.
    let small = Geth::start_with(&["--rpc.batch-request-limit", "7"]);
    sha3_batch_in_order(&small.url, 250).await;
    sha3_batch_in_order(&small.url, 30).await;

    // A node that caps a batch's answers by size answers the calls past the cap with an error
    // ("response too large"): smaller batches fit.
    let narrow = Geth::start_with(&["--rpc.batch-response-max-size", "2000"]);
    sha3_batch_in_order(&narrow.url, 250).await;

    // With its call tracer a block is asked for in a batch of three calls: a node that takes two
    // refuses each whole, and the block's calls go out as plain requests instead of being asked
    // again for ever.
    let two = Geth::start_with(&["--rpc.batch-request-limit", "2"]);
    let dev = Dev::of(&two).await;
    for i in 0..3u64 {
        dev.send(Some(Address::repeat_byte(0x42)), 1 + i, Bytes::new()).await;
    }
    let client = call_traced(&two.url).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let indexer =
        Indexer::open(db.clone(), client.clone(), vec![Box::new(Erc20Classifier)], SyncConfig::default())
            .await
            .expect("indexer");
    let head = client.head().await.expect("head");
    assert!(head >= 3, "geth sealed a block per transaction: {head}");
    tokio::time::timeout(Duration::from_secs(60), indexer.sync_to(head))
        .await
        .expect("no endless retry")
        .expect("indexed");
    indexer.close().await.expect("close");
    check(&db.begin_read().expect("read")).expect("check");
}

/// A client of the geth at `url` that takes call frames from its `callTracer`, as
/// `--traces auto` finds it.
async fn call_traced(url: &str) -> NodeClient {
    let client = NodeClient::connect(url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("tracer");
    assert_eq!(client.trace_mode().name(), "debug_traceBlockByNumber");
    client
}

/// `calls` `web3_sha3` calls through the client's batches come back whole and in order.
async fn sha3_batch_in_order(url: &str, calls: u32) {
    let node = NodeClient::connect(url, Duration::from_secs(30)).expect("node");
    let batch: Vec<(&'static str, Value)> =
        (0..calls).map(|i| ("web3_sha3", json!([format!("{i:#010x}")]))).collect();
    let answers = node.batch(&batch).await.expect("answered");
    assert_eq!(answers.len(), batch.len());
    for (i, answer) in (0..calls).zip(&answers) {
        let expected = alloy::primitives::keccak256(i.to_be_bytes());
        assert_eq!(answer, &json!(format!("{expected:#x}")), "call {i} of {calls}");
    }
}
