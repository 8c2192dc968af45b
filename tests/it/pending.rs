//! Pending transactions from a real Anvil with mining off: a transfer seen in the pool is listed
//! for its sender, recipient and token parties and pushed as `pending`; mined, it is pushed as
//! `mined` with the block and index the node gives, once the following indexer has the block;
//! a higher-fee transaction of the same nonce pushes `replaced`; `anvil_dropTransaction` pushes
//! `dropped`; a reorg takes a mined transaction back; a pool over its bound keeps the newest; a
//! new pool rebuilds from the node's; over ws:// the node's subscription feeds it. Bad input gets
//! the usual errors.

use crate::common;

use std::time::Duration;

use alloy::primitives::{Address, B256};
use common::{anvil::Anvil, workload::Chain, Client};
use jsonrpsee::{
    core::client::{Subscription, SubscriptionClientT},
    rpc_params,
    ws_client::{WsClient, WsClientBuilder},
};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{AccessMode, Db},
    pending::{PendingConfig, PendingPool},
    rpc::{self, server_defaults, RpcContext, ServerOptions},
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

const TICK: Duration = Duration::from_millis(100);

async fn next(sub: &mut Subscription<Value>, what: &str) -> Value {
    tokio::time::timeout(Duration::from_secs(20), sub.next())
        .await
        .unwrap_or_else(|_| panic!("no notification: {what}"))
        .unwrap_or_else(|| panic!("subscription ended: {what}"))
        .unwrap_or_else(|e| panic!("bad notification ({what}): {e}"))
}

/// The next notice about `hash` (notices of other transactions are skipped).
async fn notice_of(sub: &mut Subscription<Value>, hash: B256, what: &str) -> Value {
    loop {
        let n = next(sub, what).await;
        if n["hash"] == json!(hash) {
            return n;
        }
    }
}

struct Running {
    anvil: Anvil,
    _dir: tempfile::TempDir,
    db: Db,
    addr: String,
    server: jsonrpsee::server::ServerHandle,
    stop: tokio::sync::watch::Sender<bool>,
    follower: tokio::task::JoinHandle<(Indexer, Result<(), ots_indexer::sync::SyncError>)>,
    chain: Chain,
    token: Address,
    accounts: Vec<Address>,
}

async fn running(max: usize, ws_node: bool) -> Running {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let accounts = chain.accounts().await;
    let deploy = chain.deploy_token(accounts[0], "Pend", "PND").await;
    chain.mine().await;
    let token: Address =
        serde_json::from_value(chain.receipt_of(deploy).await["contractAddress"].clone()).expect("token");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let config = SyncConfig { poll_interval: Duration::from_millis(50), ..Default::default() };
    let indexer = Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], config)
        .await
        .expect("indexer");
    indexer.sync_to(node.head().await.expect("head")).await.expect("sync");
    let pool_node = if ws_node {
        NodeClient::open(&anvil.url.replace("http://", "ws://"), Duration::from_secs(30))
            .await
            .expect("ws node")
    } else {
        node.clone()
    };
    let pending =
        PendingPool::start(pool_node, db.clone(), PendingConfig { max, poll: TICK, ..Default::default() })
            .await;
    let ctx = RpcContext {
        pending: Some(pending),
        progress: Some(indexer.progress()),
        events: Some(indexer.events()),
        ..RpcContext::new(db.clone(), node)
    };
    let (addr, server) = rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &ServerOptions::default())
        .await
        .expect("serve");
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let follower = tokio::spawn(async move {
        let r = indexer.follow(stop_rx).await;
        (indexer, r)
    });
    Running {
        anvil,
        _dir: dir,
        db,
        addr: format!("127.0.0.1:{}", addr.port()),
        server,
        stop,
        follower,
        chain,
        token,
        accounts,
    }
}

impl Running {
    async fn ws(&self) -> WsClient {
        WsClientBuilder::default().build(format!("ws://{}", self.addr)).await.expect("ws connect")
    }

    fn http(&self) -> Client {
        Client::new(&format!("http://{}", self.addr))
    }

    async fn watch(&self, ws: &WsClient, address: Address) -> Subscription<Value> {
        ws.subscribe("ots2_subscribe", rpc_params!["pendingActivity", address], "ots2_unsubscribe")
            .await
            .expect("pendingActivity")
    }

    /// Sends `value` wei from `from` to `to` with `nonce` and a priority fee of `tip_gwei`.
    async fn send_eth(&self, from: Address, to: Address, nonce: u64, tip_gwei: u64) -> B256 {
        let tip = tip_gwei * 1_000_000_000;
        let tx = json!({
            "from": from, "to": to, "value": "0x1", "gas": "0x5208",
            "nonce": format!("{nonce:#x}"),
            "maxPriorityFeePerGas": format!("{tip:#x}"),
            "maxFeePerGas": format!("{:#x}", tip + 10_000_000_000),
        });
        serde_json::from_value(self.chain.call("eth_sendTransaction", json!([tx])).await).expect("hash")
    }

    async fn nonce(&self, who: Address) -> u64 {
        let n: Value = self.chain.call("eth_getTransactionCount", json!([who, "pending"])).await;
        u64::from_str_radix(n.as_str().expect("hex").trim_start_matches("0x"), 16).expect("nonce")
    }

    /// Polls `ots2_getPendingTransactions` until `check` holds.
    async fn listed_until(&self, who: Address, n: u64, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let client = self.http();
        for _ in 0..200 {
            let got = client.call("ots2_getPendingTransactions", json!([who, n])).await;
            let got = got.as_array().cloned().unwrap_or_default();
            if check(&got) {
                return got;
            }
            tokio::time::sleep(TICK).await;
        }
        panic!("the pending list of {who} never became as expected");
    }

    async fn finish(self) {
        self.stop.send(true).expect("stop");
        let (indexer, result) = self.follower.await.expect("follower");
        result.expect("the follower never failed");
        indexer.close().await.expect("close");
        self.server.stop().expect("stop server");
        drop(self.db);
        drop(self.anvil);
    }
}

fn hashes(list: &[Value]) -> Vec<B256> {
    list.iter().map(|e| serde_json::from_value(e["transaction"]["hash"].clone()).expect("hash")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_mined_replaced_dropped_and_reorged() {
    let mut run = running(1000, false).await;
    let ws = run.ws().await;
    let (a0, a1, a2, a3) = (run.accounts[0], run.accounts[1], run.accounts[2], run.accounts[3]);
    let client = run.http();

    // The source is named, and bad input gets the usual errors.
    let status = client.call("ots2_getIndexerStatus", json!([])).await;
    assert_eq!(status["pending"]["source"], json!("txpool_content (polled)"), "{status}");
    let (code, msg) =
        client.try_call("ots2_getPendingTransactions", json!(["0x12", 5])).await.expect_err("bad address");
    assert_eq!(code, -32602, "{msg}");
    let (code, msg) =
        client.try_call("ots2_getPendingTransactions", json!([a1, 1001])).await.expect_err("too many");
    assert_eq!(code, -32602);
    assert!(msg.contains("maximum page size 1000"), "{msg}");
    let err = ws
        .subscribe::<Value, _>("ots2_subscribe", rpc_params!["pendingActivity"], "ots2_unsubscribe")
        .await
        .expect_err("no address");
    assert!(err.to_string().contains("needs an address"), "{err}");
    // One connection past the subscription limit gets the limit's error; its subscriptions and
    // every other connection's go on (the watches below are on `ws`).
    let crowded = run.ws().await;
    let mut held = Vec::new();
    for _ in 0..server_defaults::MAX_SUBSCRIPTIONS {
        held.push(run.watch(&crowded, a2).await);
    }
    let err = crowded
        .subscribe::<Value, _>("ots2_subscribe", rpc_params!["pendingActivity", a1], "ots2_unsubscribe")
        .await
        .expect_err("one subscription too many");
    assert!(err.to_string().to_lowercase().contains("too many subscriptions"), "{err}");

    // A token transfer from a0 to a2, watched from the recipient's and the token's side.
    let mut of_a2 = run.watch(&ws, a2).await;
    let mut of_token = run.watch(&ws, run.token).await;
    let transfer = run.chain.transfer(run.token, a0, a2, 7).await;
    let seen = notice_of(&mut of_a2, transfer, "transfer pending").await;
    let _ = notice_of(&mut held[0], transfer, "a subscription held at the limit").await;
    drop(held);
    assert_eq!(seen["kind"], json!("pending"));
    assert_eq!(seen["transaction"]["hash"], json!(transfer));
    assert_eq!(seen["transfers"][0]["standard"], json!("ERC20"));
    assert_eq!(seen["transfers"][0]["from"], json!(a0));
    assert_eq!(seen["transfers"][0]["to"], json!(a2));
    assert_eq!(seen["transfers"][0]["value"], json!("0x7"));
    assert_eq!(notice_of(&mut of_token, transfer, "token side").await["kind"], json!("pending"));
    for who in [a0, a2, run.token] {
        let listed = run.listed_until(who, 10, |l| !l.is_empty()).await;
        assert_eq!(hashes(&listed), vec![transfer], "listed for {who}");
        assert!(listed[0]["firstSeen"].as_str().is_some_and(|s| s.starts_with("0x")));
    }
    assert!(client
        .call("ots2_getPendingTransactions", json!([a3, 10]))
        .await
        .as_array()
        .expect("list")
        .is_empty());

    // Mined: the notice names the block and index the node gives, once the index has the block.
    run.chain.mine().await;
    let mined = notice_of(&mut of_a2, transfer, "transfer mined").await;
    let receipt = run.chain.receipt_of(transfer).await;
    assert_eq!(mined["kind"], json!("mined"));
    assert_eq!(mined["blockNumber"], receipt["blockNumber"]);
    assert_eq!(mined["blockHash"], receipt["blockHash"]);
    assert_eq!(mined["transactionIndex"], receipt["transactionIndex"]);
    let indexed: Value = client.call("ots2_getIndexerStatus", json!([])).await;
    let block = u64::from_str_radix(mined["blockNumber"].as_str().expect("hex").trim_start_matches("0x"), 16)
        .expect("n");
    assert!(indexed["indexedBlock"].as_u64().expect("indexed") >= block, "mined before the index had it");
    run.listed_until(a2, 10, <[Value]>::is_empty).await;

    // Replaced by a higher fee for the same nonce.
    let mut of_a3 = run.watch(&ws, a3).await;
    let nonce = run.nonce(a1).await;
    let low = run.send_eth(a1, a3, nonce, 1).await;
    assert_eq!(notice_of(&mut of_a3, low, "low fee pending").await["kind"], json!("pending"));
    let high = run.send_eth(a1, a3, nonce, 3).await;
    let replaced = notice_of(&mut of_a3, low, "low fee replaced").await;
    assert_eq!(replaced["kind"], json!("replaced"), "{replaced}");
    assert_eq!(replaced["replacedBy"], json!(high));
    assert_eq!(notice_of(&mut of_a3, high, "high fee pending").await["kind"], json!("pending"));
    assert_eq!(hashes(&run.listed_until(a3, 10, |l| l.len() == 1).await), vec![high]);
    run.chain.mine().await;
    assert_eq!(notice_of(&mut of_a3, high, "high fee mined").await["kind"], json!("mined"));

    // Dropped from the pool by the node.
    let nonce = run.nonce(a1).await;
    let doomed = run.send_eth(a1, a3, nonce, 1).await;
    assert_eq!(notice_of(&mut of_a3, doomed, "doomed pending").await["kind"], json!("pending"));
    let _: Value = run.chain.call("anvil_dropTransaction", json!([doomed])).await;
    assert_eq!(notice_of(&mut of_a3, doomed, "doomed dropped").await["kind"], json!("dropped"));

    // A reorg unwinds a block with a reported transaction: what the node then says of it is
    // told again (Anvil leaves a reorged-out transaction out of its pool: dropped).
    let nonce = run.nonce(a1).await;
    let reorged = run.send_eth(a1, a3, nonce, 1).await;
    assert_eq!(notice_of(&mut of_a3, reorged, "reorged pending").await["kind"], json!("pending"));
    run.chain.mine().await;
    assert_eq!(notice_of(&mut of_a3, reorged, "reorged mined").await["kind"], json!("mined"));
    let _: Value = run.chain.call("anvil_reorg", json!([1, []])).await;
    run.chain.mine().await;
    let after = notice_of(&mut of_a3, reorged, "after the reorg").await;
    let on_node: Value = run.chain.call("eth_getTransactionByHash", json!([reorged])).await;
    assert_eq!(after["kind"], json!("dropped"), "{after}");
    assert!(on_node.is_null(), "dropped, yet the node has it: {on_node}");

    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_pool_keeps_the_newest_and_a_new_pool_rebuilds_from_the_node() {
    let run = running(3, false).await;
    let (a1, a4) = (run.accounts[1], run.accounts[4]);
    let nonce = run.nonce(a1).await;
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(run.send_eth(a1, a4, nonce + i, 1).await);
        // First-seen order is the order of the pool's ticks: one transaction per tick.
        tokio::time::sleep(TICK * 3).await;
    }
    let listed = run.listed_until(a4, 10, |l| l.len() == 3).await;
    assert_eq!(hashes(&listed), vec![sent[4], sent[3], sent[2]], "newest first, the oldest left");
    let status = run.http().call("ots2_getIndexerStatus", json!([])).await;
    assert_eq!(status["pending"]["transactions"], json!(3));
    assert_eq!(status["pending"]["max"], json!(3));
    assert!(status["pending"]["bytes"].as_u64().expect("bytes") > 0);

    // Another server on the same node (a restart) rebuilds from the node's pool.
    let node = NodeClient::connect(&run.anvil.url, Duration::from_secs(30)).expect("node");
    let fresh = PendingPool::start(
        node,
        run.db.clone(),
        PendingConfig { max: 100, poll: TICK, ..Default::default() },
    )
    .await;
    let mut rebuilt = Vec::new();
    for _ in 0..100 {
        rebuilt = fresh.of_address(&a4, 10);
        if rebuilt.len() == 5 {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
    let mut got: Vec<B256> = rebuilt.iter().map(|t| t.hash).collect();
    got.sort();
    let mut want = sent.clone();
    want.sort();
    assert_eq!(got, want);
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_node_feeds_the_pool_by_subscription() {
    let mut run = running(100, true).await;
    let ws = run.ws().await;
    let (a0, a5) = (run.accounts[0], run.accounts[5]);
    let status = run.http().call("ots2_getIndexerStatus", json!([])).await;
    assert_eq!(status["pending"]["source"], json!("eth_subscribe newPendingTransactions"), "{status}");
    let mut of_a5 = run.watch(&ws, a5).await;
    let transfer = run.chain.transfer(run.token, a0, a5, 3).await;
    let seen = notice_of(&mut of_a5, transfer, "pushed pending").await;
    assert_eq!(seen["kind"], json!("pending"));
    assert_eq!(seen["transfers"][0]["to"], json!(a5));
    run.chain.mine().await;
    let mined = notice_of(&mut of_a5, transfer, "pushed then mined").await;
    assert_eq!(mined["kind"], json!("mined"));
    assert_eq!(mined["blockNumber"], run.chain.receipt_of(transfer).await["blockNumber"]);
    run.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_down_at_start_up_is_asked_again() {
    let port = common::anvil::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(&url, Duration::from_secs(5)).expect("node");
    let config = PendingConfig { max: 10, poll: TICK, redetect: Duration::from_millis(200) };
    let pool = PendingPool::start(node, db, config).await;
    let status = pool.status();
    assert_eq!(status.source, None);
    let why = status.unavailable.expect("says why");
    assert!(why.contains("could not be reached"), "{why}");
    let anvil = Anvil::start_on(Some(port), &[]);
    let mut source = None;
    for _ in 0..100 {
        source = pool.status().source;
        if source.is_some() {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
    assert_eq!(source.as_deref(), Some("txpool_content (polled)"));
    assert_eq!(pool.unavailable(), None);
    drop(anvil);
}
