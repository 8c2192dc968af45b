//! The block pages of `ots_` and `erigon_getHeaderByNumber`, served by us from the node's `eth_`
//! methods, against Anvil's own `ots_` on the same chain, over HTTP, with `ots_` and `erigon_`
//! never forwarded. Identical but for the documented differences (docs/api.md), where we follow
//! Erigon: `logsBloom` null, `transactionCount` the block's total, page receipts without logs,
//! page transactions' input cut to the selector.

use crate::common;

use std::time::Duration;

use common::{anvil::Anvil, workload, Client};
use ots_indexer::{
    db::{AccessMode, Db},
    rpc::{self, ProxyPolicy, RpcContext, ServerOptions},
    source::NodeClient,
};
use serde_json::{json, Value};

/// Our server in front of the node at `url`, with `ots_` and `erigon_` never forwarded.
async fn serve_without_ots(url: &str) -> (tempfile::TempDir, Client, jsonrpsee::server::ServerHandle) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    let node = NodeClient::connect(url, Duration::from_secs(30)).expect("node");
    let options = ServerOptions {
        proxy: ProxyPolicy::new(&[], &["ots_".to_owned(), "erigon_".to_owned()]),
        ..ServerOptions::default()
    };
    let ctx = RpcContext::new(db, node);
    let (addr, server) =
        rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &options).await.expect("serve");
    (dir, Client::new(&format!("http://{addr}")), server)
}

fn erigon_block_details(mut anvil: Value) -> Value {
    anvil["block"]["logsBloom"] = Value::Null;
    anvil
}

fn erigon_page(mut anvil: Value, total: usize) -> Value {
    let full = &mut anvil["fullblock"];
    full["logsBloom"] = Value::Null;
    full["transactionCount"] = json!(total);
    for tx in full["transactions"].as_array_mut().expect("transactions") {
        let input: String = tx["input"].as_str().expect("input").chars().take(10).collect();
        tx["input"] = json!(input);
    }
    for r in anvil["receipts"].as_array_mut().expect("receipts") {
        r["logs"] = Value::Null;
        r["logsBloom"] = Value::Null;
    }
    anvil
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_pages_equal_anvils_but_for_erigons_differences() {
    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;
    let (_dir, ours, server) = serve_without_ots(&anvil.url).await;
    let theirs = Client::new(&anvil.url);

    // Nothing of ots_ reaches the node: a method we do not serve is refused, not forwarded.
    let (code, message) =
        ours.try_call("ots_getNothing", json!([work.tokens[0].address])).await.expect_err("denied");
    assert!(code != 0 && message.contains("ots_"), "{code} {message}");

    let head = ours.call("eth_blockNumber", json!([])).await;
    let head = u64::from_str_radix(head.as_str().expect("hex").trim_start_matches("0x"), 16).expect("hex");
    let busiest = work.sent.iter().map(|s| s.block).max().expect("blocks");
    for n in [0, 1, busiest, head] {
        let want = erigon_block_details(theirs.call("ots_getBlockDetails", json!([n])).await);
        assert_eq!(ours.call("ots_getBlockDetails", json!([n])).await, want, "details of block {n}");
        let hash = want["block"]["hash"].clone();
        assert_eq!(ours.call("ots_getBlockDetailsByHash", json!([hash])).await, want, "details of {hash}");

        let mut header = theirs.call("erigon_getHeaderByNumber", json!([n])).await;
        for key in ["transactions", "uncles", "withdrawals", "size", "totalDifficulty"] {
            header.as_object_mut().expect("header").remove(key);
        }
        assert_eq!(ours.call("erigon_getHeaderByNumber", json!([n])).await, header, "header {n}");
        assert_eq!(ours.call("ots_getHeaderByNumber", json!([n])).await, header, "ots header {n}");

        let total = want["block"]["transactionCount"].as_u64().expect("count") as usize;
        // Anvil pages from the block's start, Erigon from its end: the Erigon page is cut from
        // Anvil's whole block.
        let whole = erigon_page(theirs.call("ots_getBlockTransactions", json!([n, 0, 1000])).await, total);
        for (page, size) in [(0, 25), (1, 25), (3, 25), (0, 1000), (9, 25), (1, 7)] {
            let end = total.saturating_sub(page * size);
            let start = end.saturating_sub(size);
            let mut want = whole.clone();
            want["fullblock"]["transactions"] =
                json!(whole["fullblock"]["transactions"].as_array().expect("txs")[start..end]);
            want["receipts"] = json!(whole["receipts"].as_array().expect("receipts")[start..end]);
            let got = ours.call("ots_getBlockTransactions", json!([n, page, size])).await;
            assert_eq!(got, want, "block {n} page {page} of {size}");
            assert_eq!(got["fullblock"]["transactionCount"], json!(total));
        }
    }
    // Past the head: null, where Anvil answers an error.
    assert_eq!(ours.call("ots_getBlockDetails", json!([head + 1])).await, Value::Null);
    assert_eq!(ours.call("erigon_getHeaderByNumber", json!([head + 1])).await, Value::Null);
    // A page over the limit is refused clearly.
    let (code, message) =
        ours.try_call("ots_getBlockTransactions", json!([1, 0, 1001])).await.expect_err("cap");
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains("1000"), "{message}");

    let token = work.tokens[0].address;
    let eoa = work.accounts[1];
    for (address, block) in [(token, json!("latest")), (eoa, json!("latest")), (token, json!(0))] {
        assert_eq!(
            ours.call("ots_hasCode", json!([address, block])).await,
            theirs.call("ots_hasCode", json!([address, block])).await,
            "hasCode {address} at {block}"
        );
    }
    assert_eq!(ours.call("ots_hasCode", json!([token, "latest"])).await, json!(true));
    // The UI sends a null address on every address page: Erigon reads it as the zero address.
    assert_eq!(ours.call("ots_hasCode", json!([null, "latest"])).await, json!(false));
    let zero = alloy::primitives::Address::ZERO;
    assert_eq!(
        ours.call("ots_hasCode", json!([null, "latest"])).await,
        theirs.call("ots_hasCode", json!([zero, "latest"])).await
    );
    // A malformed one is still invalid params.
    let (code, _) = ours.try_call("ots_hasCode", json!(["0x12", "latest"])).await.expect_err("bad address");
    assert_eq!(code, -32602);
    let _ = server.stop();
}

alloy::sol! {
    interface InternalOps {
        function all(address to) external payable;
        function fail() external;
    }
}

/// The transaction pages, from the node's call tracer, against Anvil's own `ots_`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_pages_equal_anvils_but_for_erigons_differences() {
    use alloy::sol_types::SolCall;
    let anvil = Anvil::start(&[]);
    let mut chain = workload::Chain::connect(&anvil.url);
    let a = chain.accounts().await;
    let deploy = chain.deploy_artifact(a[0], "InternalOps").await;
    chain.mine().await;
    let ops: alloy::primitives::Address =
        serde_json::from_value(chain.receipt_of(deploy).await["contractAddress"].clone()).expect("address");
    let all = chain
        .call(
            "eth_sendTransaction",
            json!([{"from": a[0], "to": ops, "value": "0x400", "gas": "0x2dc6c0",
                    "data": alloy::primitives::Bytes::from(InternalOps::allCall { to: a[1] }.abi_encode())}]),
        )
        .await;
    let fail = chain
        .call(
            "eth_sendTransaction",
            json!([{"from": a[0], "to": ops, "gas": "0x2dc6c0",
                    "data": alloy::primitives::Bytes::from(InternalOps::failCall {}.abi_encode())}]),
        )
        .await;
    chain.mine().await;

    let (_dir, ours, server) = serve_without_ots(&anvil.url).await;
    let theirs = Client::new(&anvil.url);

    for hash in [&all, &fail, &json!(deploy)] {
        let mut want = theirs.call("ots_getInternalOperations", json!([hash])).await;
        // Anvil lists the top-level call that carries value, and a top-level creation; Erigon
        // lists neither (only the sender, a[0], makes those here).
        if let Some(list) = want.as_array_mut() {
            list.retain(|op| op["from"] != json!(a[0]));
        }
        assert_eq!(ours.call("ots_getInternalOperations", json!([hash])).await, want, "operations of {hash}");
        assert_eq!(
            ours.call("ots_getTransactionError", json!([hash])).await,
            theirs.call("ots_getTransactionError", json!([hash])).await,
            "error of {hash}"
        );
        let got = ours.call("ots_traceTransaction", json!([hash])).await;
        let want = theirs.call("ots_traceTransaction", json!([hash])).await;
        // Anvil leaves out CREATE, CREATE2 and SELFDESTRUCT entries; Erigon has them.
        let kept: Vec<Value> = got
            .as_array()
            .expect("entries")
            .iter()
            .filter(|e| !matches!(e["type"].as_str(), Some("CREATE" | "CREATE2" | "SELFDESTRUCT")))
            .cloned()
            .collect();
        assert_eq!(json!(kept), want, "trace of {hash}");
    }
    let ops_of_all = ours.call("ots_getInternalOperations", json!([all])).await;
    let kinds: Vec<u64> =
        ops_of_all.as_array().expect("ops").iter().map(|o| o["type"].as_u64().expect("type")).collect();
    assert_eq!(kinds, [0, 2, 3, 1], "a transfer, a CREATE, a CREATE2 and a selfdestruct");
    let error = ours.call("ots_getTransactionError", json!([fail])).await;
    assert!(error.as_str().expect("hex").starts_with("0x08c379a0"), "Error(string) of the revert: {error}");
    let _ = server.stop();
}
