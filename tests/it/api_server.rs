//! The API server as a block explorer and a public deployment see it: one URL over HTTP and
//! WebSocket, our methods and the node's behind it, the deny-list, batches, CORS, every limit,
//! and thousands of malformed requests that must each get a well-formed JSON-RPC error.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, B256},
    transports::http::reqwest,
};
use common::{anvil::Anvil, fault_proxy::FaultProxy, workload::Chain, Client};
use jsonrpsee::{
    core::client::{ClientT, SubscriptionClientT},
    rpc_params,
    ws_client::WsClientBuilder,
};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{
        codec::{ChunkKey, IdChunk, LAST_CHUNK},
        tables::OtsERC20TransferIndex,
        AccessMode, Db,
    },
    rpc::{self, ProxyPolicy, RpcContext, ServerOptions},
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

/// A chain with one token and a handful of transfers, indexed.
struct Indexed {
    anvil: Anvil,
    _dir: tempfile::TempDir,
    db: Db,
    token: Address,
    accounts: Vec<Address>,
}

async fn indexed_chain() -> Indexed {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let accounts = chain.accounts().await;
    let deploy = chain.deploy_token(accounts[0], "Served Token", "SRV").await;
    chain.mine().await;
    let receipt = chain.receipt_of(deploy).await;
    let token: Address = serde_json::from_value(receipt["contractAddress"].clone()).expect("token address");
    for i in 1..=6u64 {
        chain.transfer(token, accounts[0], accounts[1 + (i as usize % 3)], i).await;
        chain.mine().await;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let indexer =
        Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], SyncConfig::default())
            .await
            .expect("indexer");
    let head = node.head().await.expect("head");
    indexer.sync_to(head).await.expect("sync");
    indexer.close().await.expect("close");
    Indexed { anvil, _dir: dir, db, token, accounts }
}

async fn start_server(
    db: &Db,
    node_url: &str,
    options: &ServerOptions,
) -> (String, jsonrpsee::server::ServerHandle) {
    let node = NodeClient::connect(node_url, Duration::from_secs(30)).expect("node");
    let ctx = RpcContext::new(db.clone(), node);
    let (addr, handle) = rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, options).await.expect("serve");
    (format!("127.0.0.1:{}", addr.port()), handle)
}

/// Posts `body` as it is; returns the HTTP status and the body.
async fn post(http: &reqwest::Client, addr: &str, body: impl Into<reqwest::Body>) -> (u16, String) {
    let answer = http
        .post(format!("http://{addr}"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the server answers");
    let status = answer.status().as_u16();
    (status, answer.text().await.expect("a body"))
}

fn error_of(v: &Value) -> (i64, String) {
    let e = &v["error"];
    (e["code"].as_i64().expect("error code"), e["message"].as_str().expect("error message").to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_url_serves_ours_and_forwards_the_rest() {
    let chain = indexed_chain().await;
    let (addr, server) = start_server(&chain.db, &chain.anvil.url, &ServerOptions::default()).await;
    let client = Client::new(&format!("http://{addr}"));
    let node = Client::new(&chain.anvil.url);

    // Ours.
    assert_eq!(client.call("ots2_getERC20TransferCount", json!([chain.accounts[0]])).await, json!(7));
    assert_eq!(client.call("ots_getApiLevel", json!([])).await, json!(8));
    // The node's, unchanged.
    for (method, params) in [
        ("eth_blockNumber", json!([])),
        ("eth_chainId", json!([])),
        ("net_version", json!([])),
        ("web3_clientVersion", json!([])),
        ("eth_getBlockByNumber", json!(["0x2", false])),
        // An `ots_` method we do not serve yet (block pages are ours: tests/it/ots_blocks.rs).
        ("ots_getContractCreator", json!([chain.token])),
    ] {
        assert_eq!(
            client.try_call(method, params.clone()).await,
            node.try_call(method, params).await,
            "{method}"
        );
    }
    // A node error passes through with the node's code and message.
    let ours = client.try_call("eth_getBlockByNumber", json!(["not a block"])).await;
    let theirs = node.try_call("eth_getBlockByNumber", json!(["not a block"])).await;
    assert!(ours.is_err());
    assert_eq!(ours, theirs);

    // Denied, with a message that says so and how to change it; nothing reached the node.
    let head = node.call("eth_blockNumber", json!([])).await;
    for method in [
        "anvil_mine",
        "evm_mine",
        "debug_traceTransaction",
        "eth_sendTransaction",
        "eth_sign",
        "admin_peers",
        "personal_listAccounts",
        "eth_subscribe",
    ] {
        let (code, message) = client.try_call(method, json!([])).await.expect_err(method);
        assert_eq!(code, -32601, "{method}");
        assert!(message.contains(method), "{method}: {message}");
    }
    let (_, message) = client.try_call("anvil_mine", json!([])).await.expect_err("denied");
    assert!(message.contains("deny-list") && message.contains("--proxy-allow anvil_mine"), "{message}");
    assert_eq!(node.call("eth_blockNumber", json!([])).await, head, "a denied anvil_mine must not mine");
    // A method neither we nor the node know: the node's own "not found".
    let (code, _) = client.try_call("eth_noSuchMethod", json!([])).await.expect_err("unknown");
    assert_eq!(code, -32601);

    // The same URL over WebSocket.
    let ws = WsClientBuilder::default().build(format!("ws://{addr}")).await.expect("ws connect");
    let count: Value =
        ws.request("ots2_getERC20TransferCount", rpc_params![chain.accounts[0]]).await.expect("ws count");
    assert_eq!(count, json!(7));
    let chain_id: Value = ws.request("eth_chainId", rpc_params![]).await.expect("ws forwarded");
    assert_eq!(chain_id, node.call("eth_chainId", json!([])).await);
    let page: Value =
        ws.request("ots2_getERC20TransferList", rpc_params![chain.accounts[0], 0, 2]).await.expect("ws page");
    assert_eq!(page["results"].as_array().map(Vec::len), Some(2));
    let denied = ws.request::<Value, _>("anvil_mine", rpc_params![]).await.expect_err("denied over ws");
    assert!(denied.to_string().contains("deny-list"), "{denied}");
    // A subscription to the node is refused, not silently swallowed.
    let sub = ws.subscribe::<Value, _>("eth_subscribe", rpc_params!["newHeads"], "eth_unsubscribe").await;
    assert!(sub.is_err(), "eth_subscribe must be refused");

    server.stop().expect("stop");
    server.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_flags_adjust_the_deny_list() {
    let chain = indexed_chain().await;
    let node = Client::new(&chain.anvil.url);
    let options = ServerOptions {
        proxy: ProxyPolicy::new(&["evm_mine".to_owned()], &["net_".to_owned(), "eth_chainId".to_owned()]),
        ..Default::default()
    };
    let (addr, server) = start_server(&chain.db, &chain.anvil.url, &options).await;
    let client = Client::new(&format!("http://{addr}"));
    let before = node.call("eth_blockNumber", json!([])).await;
    client.call("evm_mine", json!([])).await;
    assert_ne!(node.call("eth_blockNumber", json!([])).await, before, "allowed evm_mine reached the node");
    assert!(
        client.try_call("anvil_mine", json!([])).await.is_err(),
        "the rest of the namespace stays denied"
    );
    assert!(client.try_call("net_version", json!([])).await.is_err());
    assert!(client.try_call("eth_chainId", json!([])).await.is_err());
    assert!(client.try_call("eth_blockNumber", json!([])).await.is_ok());
    server.stop().expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_limits_and_cors() {
    let chain = indexed_chain().await;
    let options = ServerOptions { max_batch_len: 5, max_request_bytes: 4096, ..Default::default() };
    let (addr, server) = start_server(&chain.db, &chain.anvil.url, &options).await;
    let http = reqwest::Client::new();

    // A batch mixing ours, forwarded, denied, unknown and malformed entries answers each in place.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "ots2_getERC20TransferCount", "params": [chain.accounts[0]]},
        {"jsonrpc": "2.0", "id": 2, "method": "eth_chainId", "params": []},
        {"jsonrpc": "2.0", "id": 3, "method": "anvil_mine", "params": []},
        {"jsonrpc": "2.0", "id": 4, "method": "ots2_getERC20TransferCount", "params": ["0x12"]},
        {"jsonrpc": "2.0", "method": "eth_chainId", "params": []}
    ]);
    let (status, body) = post(&http, &addr, batch.to_string()).await;
    assert_eq!(status, 200, "{body}");
    let answers: Vec<Value> = serde_json::from_str(&body).expect("a JSON array");
    assert_eq!(answers.len(), 4, "the notification gets no answer: {body}");
    let by_id =
        |id: i64| answers.iter().find(|a| a["id"] == json!(id)).unwrap_or_else(|| panic!("id {id}: {body}"));
    assert_eq!(by_id(1)["result"], json!(7));
    assert!(by_id(2)["result"].is_string());
    assert_eq!(error_of(by_id(3)).0, -32601);
    let (code, message) = error_of(by_id(4));
    assert_eq!(code, -32602, "a bad address is an invalid parameter");
    assert!(!message.is_empty());

    // Batch length.
    let six: Vec<Value> = (0..6)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "ots_getApiLevel", "params": []}))
        .collect();
    let (status, body) = post(&http, &addr, json!(six).to_string()).await;
    let v: Value = serde_json::from_str(&body).expect("JSON");
    let (_, message) = error_of(&v);
    assert!(status == 200 && message.to_lowercase().contains("batch"), "{status} {body}");

    // Body size: 413 with a JSON-RPC error body.
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "ots_getApiLevel", "params": ["x".repeat(5000)]});
    let (status, body) = post(&http, &addr, big.to_string()).await;
    assert_eq!(status, 413, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert!(error_of(&v).1.contains("4096") || error_of(&v).1.to_lowercase().contains("too big"), "{body}");

    // Page size.
    let (status, body) = post(
        &http,
        &addr,
        json!({"jsonrpc": "2.0", "id": 7, "method": "ots2_getERC20TransferList", "params": [chain.accounts[0], 0, 1001]})
            .to_string(),
    )
    .await;
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(status, 200);
    assert!(error_of(&v).1.contains("1000"), "{body}");

    // CORS: any origin by default, and the preflight a browser sends first.
    let pre = http
        .request(reqwest::Method::OPTIONS, format!("http://{addr}"))
        .header("origin", "http://localhost:5173")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .expect("preflight");
    assert!(pre.status().is_success(), "preflight {}", pre.status());
    assert_eq!(pre.headers().get("access-control-allow-origin").and_then(|v| v.to_str().ok()), Some("*"));
    server.stop().expect("stop");

    let only = ServerOptions {
        cors: rpc::Cors::parse("https://explorer.example").expect("cors"),
        ..Default::default()
    };
    let (addr, server) = start_server(&chain.db, &chain.anvil.url, &only).await;
    for (origin, allowed) in [("https://explorer.example", true), ("https://evil.example", false)] {
        let answer = http
            .post(format!("http://{addr}"))
            .header("origin", origin)
            .header("content-type", "application/json")
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ots_getApiLevel", "params": []}).to_string())
            .send()
            .await
            .expect("post");
        let header = answer
            .headers()
            .get("access-control-allow-origin")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        assert_eq!(header.as_deref() == Some(origin), allowed, "{origin}: {header:?}");
    }
    server.stop().expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_or_dead_nodes_and_connection_limits() {
    let chain = indexed_chain().await;
    let proxy = FaultProxy::start(&chain.anvil.url).await;
    let options =
        ServerOptions { request_timeout: Duration::from_secs(1), max_connections: 2, ..Default::default() };
    let (addr, server) = start_server(&chain.db, &proxy.url, &options).await;
    let client = Client::new(&format!("http://{addr}"));
    proxy.slow_down(Duration::from_secs(3));
    let (code, message) = client.try_call("eth_blockNumber", json!([])).await.expect_err("times out");
    assert_eq!(code, -32000);
    assert!(message.contains("--request-timeout"), "{message}");
    // A list page that needs the node times out the same way; a count (index only) does not.
    let (_, message) = client
        .try_call("ots2_getERC20TransferList", json!([chain.accounts[0], 0, 5]))
        .await
        .expect_err("times out");
    assert!(message.contains("--request-timeout"), "{message}");
    assert_eq!(client.call("ots2_getERC20TransferCount", json!([chain.accounts[0]])).await, json!(7));
    proxy.slow_down(Duration::ZERO);

    // Connections: two WebSocket clients hold both; a third is refused, then let in once one leaves.
    let a = WsClientBuilder::default().build(format!("ws://{addr}")).await.expect("first");
    let b = WsClientBuilder::default().build(format!("ws://{addr}")).await.expect("second");
    assert!(WsClientBuilder::default().build(format!("ws://{addr}")).await.is_err(), "third connection");
    drop(a);
    let mut third = None;
    for _ in 0..50 {
        if let Ok(c) = WsClientBuilder::default().build(format!("ws://{addr}")).await {
            third = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let third = third.expect("a freed slot is reusable");
    let level: Value = third.request("ots_getApiLevel", rpc_params![]).await.expect("level");
    assert_eq!(level, json!(8));
    drop((b, third));
    server.stop().expect("stop");

    // A node that is down: forwarded calls and pages fail with a message naming the node.
    let (addr, server) = start_server(&chain.db, "http://127.0.0.1:9", &ServerOptions::default()).await;
    let client = Client::new(&format!("http://{addr}"));
    let (code, message) = client.try_call("eth_blockNumber", json!([])).await.expect_err("node down");
    assert_eq!(code, -32000);
    assert!(message.contains("node"), "{message}");
    assert_eq!(client.call("ots2_getERC20TransferCount", json!([chain.accounts[0]])).await, json!(7));
    server.stop().expect("stop");
}

/// A small deterministic generator, so a failure names a reproducible case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

fn weird_value(rng: &mut Rng) -> Value {
    match rng.below(16) {
        0 => json!(null),
        1 => json!(-1),
        2 => json!(u64::MAX),
        3 => json!(1e300),
        4 => json!("0x"),
        5 => json!("0xZZ"),
        6 => json!(format!("0x{}", "f".repeat(rng.below(80)))),
        7 => json!("0x000000000000000000000000000000000000000g"),
        8 => json!([1, [2, [3]]]),
        9 => json!({"a": {"b": []}}),
        10 => json!(true),
        11 => json!(-0.5),
        12 => json!("18446744073709551616"),
        13 => json!(rng.next()),
        14 => json!("0x00000000000000000000000000000000000000001"),
        _ => json!("\u{0}\u{ffff}é"),
    }
}

fn malformed_request(rng: &mut Rng, ours: &[&str], account: Address) -> Vec<u8> {
    let method = *rng.pick(ours);
    let params: Value = match rng.below(6) {
        0 => json!([]),
        1 => json!([weird_value(rng)]),
        2 => json!([account, weird_value(rng), weird_value(rng)]),
        3 => json!([weird_value(rng), 0, 25]),
        4 => weird_value(rng),
        _ => json!([account, rng.next(), rng.next()]),
    };
    let id: Value = match rng.below(5) {
        0 => json!(rng.next()),
        1 => json!("an id"),
        2 => json!(null),
        3 => json!([1]),
        _ => json!({"x": 1}),
    };
    let version = *rng.pick(&["2.0", "2.0", "2.0", "1.0", ""]);
    let request = json!({"jsonrpc": version, "id": id, "method": method, "params": params});
    let text = request.to_string();
    match rng.below(8) {
        // Truncated JSON.
        0 => text.as_bytes()[..rng.below(text.len().max(1))].to_vec(),
        // A byte replaced.
        1 => {
            let mut bytes = text.into_bytes();
            let at = rng.below(bytes.len());
            bytes[at] = *rng.pick(b"{}[]\",:0x\\");
            bytes
        }
        // A batch of such requests, sometimes empty.
        2 => {
            let n = rng.below(4);
            let entries: Vec<String> = (0..n).map(|_| request.to_string()).collect();
            format!("[{}]", entries.join(",")).into_bytes()
        }
        // Not an object.
        3 => weird_value(rng).to_string().into_bytes(),
        _ => text.into_bytes(),
    }
}

/// Every answer to a malformed request is JSON-RPC: an object with `error.code` and a non-empty
/// `error.message`, or (for a batch) an array of such answers or results.
fn check_answer(raw: &[u8], status: u16, body: &str) {
    let request = String::from_utf8_lossy(raw);
    let request = request.as_ref();
    assert!(matches!(status, 200 | 400 | 413), "HTTP {status} for {request}: {body}");
    if body.is_empty() {
        // Only a batch of notifications gets no body.
        assert_eq!(status, 200, "{request}");
        return;
    }
    let v: Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}) for {request}: {body}"));
    if v.is_null() {
        // jsonrpsee reads a request whose id is not a string, a number or null as a
        // notification, and a notification gets no answer (`null` over HTTP); documented.
        let sent: Value =
            serde_json::from_slice(raw).unwrap_or_else(|_| panic!("null answer to non-JSON {request}"));
        let is_notification = |e: &Value| {
            e.is_object() && !matches!(e.get("id"), Some(Value::String(_) | Value::Number(_) | Value::Null))
        };
        let all = match &sent {
            Value::Array(entries) => !entries.is_empty() && entries.iter().all(is_notification),
            one => is_notification(one),
        };
        assert!(all, "null answer to {request}");
        return;
    }
    let answers = match &v {
        Value::Array(a) => a.clone(),
        other => vec![other.clone()],
    };
    for a in answers {
        assert_eq!(a["jsonrpc"], json!("2.0"), "{request}: {body}");
        if a.get("result").is_some() {
            continue;
        }
        let (code, message) = error_of(&a);
        assert!((-32768..=-32000).contains(&code) || code == -32602, "code {code} for {request}");
        assert!(!message.is_empty(), "empty message for {request}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_malformed_requests_get_json_rpc_errors() {
    let chain = indexed_chain().await;
    // Forwarding is switched off, so that every answer is the server's own.
    let options = ServerOptions { proxy: ProxyPolicy::new(&[], &["*".to_owned()]), ..Default::default() };
    let (addr, server) = start_server(&chain.db, &chain.anvil.url, &options).await;
    let http = reqwest::Client::new();
    let ours = [
        "ots2_getERC20TransferList",
        "ots2_getERC20TransferCount",
        "ots2_getERC721TransferList",
        "ots2_getERC20Holdings",
        "ots2_getAllContractsList",
        "ots2_getERC20List",
        "ots2_getERC4626List",
        "ots2_getAddressAttributes",
        "ots2_getERC1167Impl",
        "ots2_getWithdrawalsList",
        "ots2_getBlocksRewardedList",
        "ots2_getTokenHolders",
        "ots2_getERC721Owner",
        "ots_getApiLevel",
        "eth_blockNumber",
        "no_suchMethod",
        "",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut sent = 0;
    while sent < 10_000 {
        let requests: Vec<Vec<u8>> =
            (0..50).map(|_| malformed_request(&mut rng, &ours, chain.accounts[1])).collect();
        let answers = futures::future::join_all(requests.iter().map(|r| post(&http, &addr, r.clone()))).await;
        for (request, (status, body)) in requests.iter().zip(answers) {
            check_answer(request, status, &body);
        }
        sent += requests.len();
    }
    // Still serving, and the index still answers exactly.
    let client = Client::new(&format!("http://{addr}"));
    assert_eq!(client.call("ots2_getERC20TransferCount", json!([chain.accounts[0]])).await, json!(7));
    let list = client.call("ots2_getERC20TransferList", json!([chain.accounts[0], 0, 10])).await;
    let hashes: Vec<B256> = list["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| serde_json::from_value(r["hash"].clone()).expect("hash"))
        .collect();
    assert_eq!(hashes.len(), 7);
    let _ = chain.token;
    server.stop().expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integrity_checkers_answer_null_or_name_the_broken_key() {
    let chain = indexed_chain().await;
    let (addr, server) = start_server(&chain.db, &chain.anvil.url, &ServerOptions::default()).await;
    let client = Client::new(&format!("http://{addr}"));
    assert_eq!(client.call("ots2_transferIntegrityChecker", json!([])).await, Value::Null);
    assert_eq!(client.call("ots2_holdingsIntegrityChecker", json!([])).await, Value::Null);

    // An index chunk with no counter (the chain is young: its ids wait in the reorg window, and
    // the table itself holds none of them).
    let txn = chain.db.begin_write().expect("write");
    let key = ChunkKey { address: chain.accounts[0], chunk: LAST_CHUNK };
    txn.put::<OtsERC20TransferIndex>(&key, &IdChunk(vec![1])).expect("tamper");
    txn.commit().expect("commit");
    let (code, message) =
        client.try_call("ots2_transferIntegrityChecker", json!([])).await.expect_err("broken");
    assert_eq!(code, -32000);
    assert!(message.contains("OtsERC20Transfer"), "{message}");
    assert_eq!(
        client.call("ots2_holdingsIntegrityChecker", json!([])).await,
        Value::Null,
        "holdings untouched"
    );
    server.stop().expect("stop");
}

/// Writes `head` and then `body` whole, as a client that only reads once it has sent
/// everything, and returns what the server answered.
fn send_whole_then_read(addr: &str, head: &str, body: &[u8]) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_a_12_mb_body_whole_reads_the_413_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    // No node is needed: the request never reaches a method.
    let (addr, server) = start_server(&db, "http://127.0.0.1:1", &ServerOptions::default()).await;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ots_getApiLevel","params":["{}"]}}"#,
        "x".repeat(12 << 20)
    );

    let with_length = format!(
        "POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut chunked_body = Vec::new();
    for chunk in body.as_bytes().chunks(1 << 16) {
        chunked_body.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        chunked_body.extend_from_slice(chunk);
        chunked_body.extend_from_slice(b"\r\n");
    }
    chunked_body.extend_from_slice(b"0\r\n\r\n");
    let chunked = format!(
        "POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    for (head, body) in [(with_length, body.into_bytes()), (chunked, chunked_body)] {
        let addr = addr.clone();
        let answer = tokio::task::spawn_blocking(move || send_whole_then_read(&addr, &head, &body))
            .await
            .expect("join")
            .expect("the client sends its whole body and reads an answer");
        assert!(answer.starts_with("HTTP/1.1 413"), "{}", &answer[..answer.len().min(300)]);
        assert!(answer.contains("-32007") && answer.contains("Request is too big"), "{answer}");
    }

    // A body within the limit is still served.
    let client = Client::new(&format!("http://{addr}"));
    assert_eq!(client.call("ots_getApiLevel", json!([])).await, json!(8));
    let _ = server.stop();
}
