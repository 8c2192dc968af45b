//! Live push over WebSocket: `ots2_subscribe` sees each block a following indexer commits (only
//! once it is committed), the activity of one address, a `removed` notice after `anvil_reorg`;
//! unsubscribing works; a subscriber that stops reading is dropped while the others go on.

use crate::common;

use std::time::Duration;

use alloy::primitives::{Address, B256};
use common::{anvil::Anvil, workload::Chain};
use jsonrpsee::{
    core::client::{ClientT, Subscription, SubscriptionClientT},
    rpc_params,
    ws_client::{WsClient, WsClientBuilder},
};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{AccessMode, Db},
    rpc::{self, RpcContext, ServerOptions},
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn next(sub: &mut Subscription<Value>, what: &str) -> Value {
    tokio::time::timeout(Duration::from_secs(20), sub.next())
        .await
        .unwrap_or_else(|_| panic!("no notification: {what}"))
        .unwrap_or_else(|| panic!("subscription ended: {what}"))
        .unwrap_or_else(|e| panic!("bad notification ({what}): {e}"))
}

/// Skips block notifications up to `number`, returning that block's.
async fn block_notification(sub: &mut Subscription<Value>, number: u64) -> Value {
    loop {
        let n = next(sub, &format!("block {number}")).await;
        if n["blockNumber"] == json!(format!("{number:#x}")) {
            return n;
        }
    }
}

struct Running {
    anvil: Anvil,
    _dir: tempfile::TempDir,
    addr: String,
    server: jsonrpsee::server::ServerHandle,
    stop: tokio::sync::watch::Sender<bool>,
    follower: tokio::task::JoinHandle<(Indexer, Result<(), ots_indexer::sync::SyncError>)>,
    chain: Chain,
    token: Address,
    accounts: Vec<Address>,
}

async fn running(options: ServerOptions) -> Running {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let accounts = chain.accounts().await;
    let deploy = chain.deploy_token(accounts[0], "Live", "LIVE").await;
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
    let ctx = RpcContext {
        progress: Some(indexer.progress()),
        events: Some(indexer.events()),
        ..RpcContext::new(db.clone(), node)
    };
    let (addr, server) =
        rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &options).await.expect("serve");
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let follower = tokio::spawn(async move {
        let r = indexer.follow(stop_rx).await;
        (indexer, r)
    });
    Running {
        anvil,
        _dir: dir,
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

    async fn finish(self) {
        self.stop.send(true).expect("stop");
        let (indexer, result) = self.follower.await.expect("follower");
        result.expect("the follower never failed");
        indexer.close().await.expect("close");
        self.server.stop().expect("stop server");
        drop(self.anvil);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_activity_unsubscribe_and_reorg() {
    let mut run = running(ServerOptions::default()).await;
    let ws = run.ws().await;
    let (a0, a1, a5) = (run.accounts[0], run.accounts[1], run.accounts[5]);

    // Bad subscriptions are refused with a reason.
    for (params, needle) in [
        (rpc_params!["newHeads"], "unknown subscription"),
        (rpc_params!["addressActivity"], "needs an address"),
    ] {
        let err = ws
            .subscribe::<Value, _>("ots2_subscribe", params, "ots2_unsubscribe")
            .await
            .expect_err("refused");
        assert!(err.to_string().contains(needle), "{err}");
    }

    let mut blocks: Subscription<Value> = ws
        .subscribe("ots2_subscribe", rpc_params!["newIndexedBlocks"], "ots2_unsubscribe")
        .await
        .expect("sub");
    let mut mine: Subscription<Value> = ws
        .subscribe("ots2_subscribe", rpc_params!["addressActivity", a1], "ots2_unsubscribe")
        .await
        .expect("sub");
    let quiet: Subscription<Value> = ws
        .subscribe("ots2_subscribe", rpc_params!["addressActivity", a5], "ots2_unsubscribe")
        .await
        .expect("sub");

    let head = run.chain.call("eth_blockNumber", json!([])).await;
    let head = u64::from_str_radix(head.as_str().expect("hex").trim_start_matches("0x"), 16).expect("hex");
    let before: Value = ws.request("ots2_getERC20TransferCount", rpc_params![a1]).await.expect("count");
    let token = run.token;
    let sent = run.chain.transfer(token, a0, a1, 5).await;
    run.chain.mine().await;

    let block = block_notification(&mut blocks, head + 1).await;
    assert_eq!(block["transferLogs"], json!(1), "{block}");
    // Sent only after the commit: the index already answers with the new transfer.
    let after: Value = ws.request("ots2_getERC20TransferCount", rpc_params![a1]).await.expect("count");
    assert_eq!(after.as_u64(), before.as_u64().map(|n| n + 1));
    let receipt = run.chain.receipt_of(sent).await;
    assert_eq!(block["hash"], receipt["blockHash"]);

    let activity = next(&mut mine, "activity of a1").await;
    assert_eq!(activity["kind"], json!("erc20Transfer"), "{activity}");
    assert_eq!(activity["blockNumber"], json!(format!("{:#x}", head + 1)));
    assert_eq!(activity["transactionIndex"], receipt["transactionIndex"]);
    let tx_index =
        u64::from_str_radix(receipt["transactionIndex"].as_str().expect("hex").trim_start_matches("0x"), 16)
            .expect("hex");
    assert_eq!(activity["txId"], json!(((head + 1) << 20) | tx_index));

    // Unsubscribing one leaves the others.
    quiet.unsubscribe().await.expect("unsubscribe");

    // A reorg of depth 1: the replaced block is announced as removed, then the new one.
    let replaced: B256 = serde_json::from_value(block["hash"].clone()).expect("hash");
    let replacement = json!([[Chain::transfer_request(token, a0, a1, 9), 0]]);
    run.chain.call("anvil_reorg", json!([1, replacement])).await;
    let removed = loop {
        let n = next(&mut blocks, "removed notice").await;
        if n.get("removed").is_some() {
            break n;
        }
    };
    assert_eq!(removed["blocks"], json!([{"blockNumber": format!("{:#x}", head + 1), "hash": replaced}]));
    let again = block_notification(&mut blocks, head + 1).await;
    assert_ne!(again["hash"], json!(replaced));
    let removed_for_a1 = next(&mut mine, "removed notice for a1").await;
    assert_eq!(removed_for_a1["removed"], json!(true));
    let redone = next(&mut mine, "a1's transfer in the new block").await;
    assert_eq!(redone["blockHash"], again["hash"]);

    drop((blocks, mine, ws));
    run.finish().await;
}

/// Opens a WebSocket by hand with a tiny receive buffer and subscribes `SUBS` times (more than
/// the kernel's socket buffers hold), then never reads.
const SUBS: u64 = 50;

async fn stalled_subscriber(addr: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(2048).expect("rcvbuf");
    let mut stream = socket.connect(addr.parse().expect("addr")).await.expect("connect");
    let handshake = format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(handshake.as_bytes()).await.expect("handshake");
    let mut answer = [0u8; 1024];
    let n = stream.read(&mut answer).await.expect("handshake answer");
    assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 101"), "upgrade refused");
    for id in 0..SUBS {
        let request =
            json!({"jsonrpc": "2.0", "id": id, "method": "ots2_subscribe", "params": ["newIndexedBlocks"]})
                .to_string();
        // A masked text frame with an all-zero mask: the payload goes as it is.
        let mut frame = vec![0x81u8, 0x80 | 126];
        frame.extend_from_slice(&u16::try_from(request.len()).expect("short").to_be_bytes());
        frame.extend_from_slice(&[0, 0, 0, 0]);
        frame.extend_from_slice(request.as_bytes());
        stream.write_all(&frame).await.expect("subscribe");
    }
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_stops_reading_is_dropped_and_others_go_on() {
    let run = running(ServerOptions { max_pending_messages: 8, ..Default::default() }).await;
    let mut stalled = stalled_subscriber(&run.addr).await;
    // The client keeps what it has not handed to the test yet; room for every block.
    let ws = WsClientBuilder::default()
        .max_buffer_capacity_per_subscription(100_000)
        .build(format!("ws://{}", run.addr))
        .await
        .expect("ws connect");
    let mut healthy: Subscription<Value> = ws
        .subscribe("ots2_subscribe", rpc_params!["newIndexedBlocks"], "ots2_unsubscribe")
        .await
        .expect("sub");
    tokio::time::sleep(Duration::from_millis(200)).await;

    let head = run.chain.call("eth_blockNumber", json!([])).await;
    let head = u64::from_str_radix(head.as_str().expect("hex").trim_start_matches("0x"), 16).expect("hex");
    let blocks = 1500u64;
    run.chain.call("anvil_mine", json!([format!("{blocks:#x}")])).await;
    // The healthy subscriber sees every block.
    let mut seen = 0u64;
    while seen < blocks {
        let n = next(&mut healthy, "a healthy subscriber keeps getting blocks").await;
        if n.get("blockNumber").is_some() {
            seen += 1;
        }
    }
    assert_eq!(seen, blocks);
    let _ = head;
    // Past the grace a stalled subscriber gets.
    tokio::time::sleep(rpc::subscriptions::SLOW_SUBSCRIBER_GRACE + Duration::from_secs(1)).await;

    // The stalled one, read now: some notifications, then the notice that it was dropped, and
    // far fewer than every block.
    let mut received = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        // A quiet spell ends the read: long enough that a loaded machine's server writes what it
        // queued (one CI run saw the notice missing after 2 s of quiet).
        match tokio::time::timeout(Duration::from_secs(8), stalled.read(&mut chunk)).await {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => received.extend_from_slice(&chunk[..n]),
            Ok(Err(e)) => panic!("read: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&received);
    assert!(text.contains("dropped: this subscriber"), "no drop notice in {} bytes", received.len());
    let delivered = text.matches("\"blockNumber\"").count() as u64;
    assert!(
        delivered < blocks * SUBS,
        "the stalled subscriber got all {delivered} notifications: nothing was dropped"
    );

    drop((healthy, ws));
    run.finish().await;
}
