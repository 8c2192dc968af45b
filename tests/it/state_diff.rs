//! `trace_replayTransaction [hash, ["stateDiff"]]` (the Otterscan UI's State Diff tab) through our
//! server in front of Anvil, which has no `trace_replayTransaction`: the diff is rebuilt from
//! Anvil's prestate tracer, and its values are those the node reports before and after; on a node
//! without the prestate tracer, from struct logs and the state around the block.

use crate::common;

use std::time::Duration;

use alloy_primitives::{Address, B256};
use common::{anvil::Anvil, Client};
use ots_indexer::{
    db::{AccessMode, Db},
    rpc::{self, RpcContext, ServerOptions, TxFrames},
    source::NodeClient,
};
use serde_json::{json, Value};

alloy::sol! {
    interface Counter {
        function increment() external;
    }
    interface InternalOps {
        function all(address to) external payable;
        function fail() external pure;
    }
}
use alloy::sol_types::SolCall;

async fn mined(node: &Client, tx: Value) -> (B256, u64) {
    let hash: B256 =
        serde_json::from_value(node.call("eth_sendTransaction", json!([tx])).await).expect("hash");
    node.call("evm_mine", json!([])).await;
    let receipt = node.call("eth_getTransactionReceipt", json!([hash])).await;
    assert_eq!(receipt["status"], json!("0x1"));
    let block =
        u64::from_str_radix(receipt["blockNumber"].as_str().expect("hex").trim_start_matches("0x"), 16);
    (hash, block.expect("hex"))
}

fn balance_at(v: &Value) -> String {
    v.as_str().expect("hex").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_diff_is_rebuilt_from_the_prestate_tracer() {
    let anvil = Anvil::start(&[]);
    let node = Client::new(&anvil.url);
    let (code, _) =
        node.try_call("trace_replayTransaction", json!([B256::ZERO, ["stateDiff"]])).await.expect_err("none");
    assert_eq!(code, -32601, "Anvil has no trace_replayTransaction: the fallback is what is tested");

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    let client = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let ctx = RpcContext::new(db, client);
    let (addr, server) = rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &ServerOptions::default())
        .await
        .expect("serve");
    let ours = Client::new(&format!("http://{addr}"));

    let accounts: Vec<Address> =
        serde_json::from_value(node.call("eth_accounts", json!([])).await).expect("accounts");
    let sender = accounts[0];
    let fresh = Address::repeat_byte(0x5d);
    let (pay, block) =
        mined(&node, json!({"from": sender, "to": fresh, "value": "0x1234", "gas": "0x5208"})).await;
    let answer = ours.call("trace_replayTransaction", json!([pay, ["stateDiff"]])).await;
    assert_eq!((answer["output"].clone(), answer["trace"].clone()), (json!("0x"), json!([])));
    let diff = &answer["stateDiff"];
    let key = |a: Address| format!("{a:#x}");
    assert_eq!(diff[key(fresh)]["balance"], json!({"+": "0x1234"}), "{diff}");
    let at = |n: u64| json!(format!("{n:#x}"));
    let before = node.call("eth_getBalance", json!([sender, at(block - 1)])).await;
    let after = node.call("eth_getBalance", json!([sender, at(block)])).await;
    assert_eq!(
        diff[key(sender)]["balance"],
        json!({"*": {"from": balance_at(&before), "to": balance_at(&after)}}),
        "{diff}"
    );
    assert_eq!(diff[key(sender)]["nonce"], json!({"*": {"from": "0x0", "to": "0x1"}}), "{diff}");
    assert_eq!(diff[key(sender)]["code"], json!("="));

    // A storage write: the counter's slot 0 goes from 0 to 1.
    let artifacts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/build/artifacts.json");
    let arts: Value =
        serde_json::from_str(&std::fs::read_to_string(artifacts).expect("artifacts")).expect("json");
    let (deploy, _) =
        mined(&node, json!({"from": sender, "data": arts["Counter"]["bytecode"], "gas": "0x2dc6c0"})).await;
    let counter: Address = serde_json::from_value(
        node.call("eth_getTransactionReceipt", json!([deploy])).await["contractAddress"].clone(),
    )
    .expect("address");
    let born = ours.call("trace_replayTransaction", json!([deploy, ["stateDiff"]])).await;
    assert!(born["stateDiff"][key(counter)]["code"]["+"].as_str().is_some_and(|c| c.len() > 2), "{born}");
    let data = alloy_primitives::hex::encode_prefixed(Counter::incrementCall {}.abi_encode());
    let (increment, _) =
        mined(&node, json!({"from": sender, "to": counter, "data": data, "gas": "0x30000"})).await;
    let answer = ours.call("trace_replayTransaction", json!([increment, ["stateDiff"]])).await;
    let storage = &answer["stateDiff"][key(counter)]["storage"];
    let slot0 = format!("0x{}", "0".repeat(64));
    let one = format!("0x{}1", "0".repeat(63));
    assert_eq!(storage[&slot0], json!({"*": {"from": slot0, "to": one}}), "{answer}");

    // What cannot be rebuilt says so; a bad mode is a bad parameter.
    let (code, message) =
        ours.try_call("trace_replayTransaction", json!([pay, ["vmTrace"]])).await.expect_err("no vmTrace");
    assert!(code == -32601 && message.contains("stateDiff"), "{code} {message}");
    assert!(ots_ui_shows_not_supported(&message), "{message}");
    let (code, _) =
        ours.try_call("trace_replayTransaction", json!([pay, ["everything"]])).await.expect_err("bad");
    assert_eq!(code, -32602);
    let _ = server.stop();
}

/// Serves `db` in front of `url`, taking state diffs from struct logs when `struct_logs`.
async fn server(db: &Db, url: &str, struct_logs: bool) -> (Client, jsonrpsee::server::ServerHandle) {
    let client = NodeClient::connect(url, Duration::from_secs(30)).expect("node");
    let frames = if struct_logs { TxFrames::StructLogs } else { TxFrames::Auto };
    let ctx = RpcContext { tx_frames: frames, ..RpcContext::new(db.clone(), client) };
    let (addr, server) = rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &ServerOptions::default())
        .await
        .expect("serve");
    (Client::new(&format!("http://{addr}")), server)
}

/// The creation code of testbed artifact `name`, as hex.
fn creation_code(name: &str) -> Value {
    let artifacts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/build/artifacts.json");
    let arts: Value =
        serde_json::from_str(&std::fs::read_to_string(artifacts).expect("artifacts")).expect("json");
    arts[name]["bytecode"].clone()
}

/// On a node without the prestate tracer the state diff comes from struct logs and the state
/// around the block: on Anvil, which has both, every kind of transaction — a payment to a new
/// account, creations at the top and inside calls, storage writes, ether moved inside, a
/// selfdestruct, a creation undone by a revert, a reverted transaction — gets the same diff both
/// ways; a transaction that shares its block gets an error saying why instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_diff_from_struct_logs_equals_the_prestate_tracers() {
    let anvil = Anvil::start(&["--steps-tracing"]);
    let node = Client::new(&anvil.url);
    let accounts: Vec<Address> =
        serde_json::from_value(node.call("eth_accounts", json!([])).await).expect("accounts");
    let sender = accounts[0];
    let address_of = |receipt: Value| -> Address {
        serde_json::from_value(receipt["contractAddress"].clone()).expect("created")
    };
    let mut txs = Vec::new();
    let (pay, _) =
        mined(&node, json!({"from": sender, "to": Address::repeat_byte(0x5d), "value": "0x1234"})).await;
    txs.push(pay);
    let mut deployed = Vec::new();
    for name in ["Counter", "Factory", "InternalOps"] {
        let (hash, _) =
            mined(&node, json!({"from": sender, "data": creation_code(name), "gas": "0x7a1200"})).await;
        deployed.push(address_of(node.call("eth_getTransactionReceipt", json!([hash])).await));
        txs.push(hash);
    }
    let (counter, factory, ops) = (deployed[0], deployed[1], deployed[2]);
    let hex = alloy_primitives::hex::encode_prefixed;
    let increment = hex(Counter::incrementCall {}.abi_encode());
    for _ in 0..2 {
        txs.push(
            mined(&node, json!({"from": sender, "to": counter, "data": increment, "gas": "0x30000"})).await.0,
        );
    }
    for data in common::contracts::factory_calls() {
        txs.push(
            mined(&node, json!({"from": sender, "to": factory, "data": hex(data), "gas": "0x7a1200"}))
                .await
                .0,
        );
    }
    let all = hex(InternalOps::allCall { to: accounts[3] }.abi_encode());
    txs.push(
        mined(&node, json!({"from": sender, "to": ops, "value": "0x400", "data": all, "gas": "0x7a1200"}))
            .await
            .0,
    );
    // A reverted transaction still pays its fee and spends its nonce.
    let fail = hex(InternalOps::failCall {}.abi_encode());
    let reverted: B256 = serde_json::from_value(
        node.call(
            "eth_sendTransaction",
            json!([{"from": sender, "to": ops, "data": fail, "gas": "0x30000"}]),
        )
        .await,
    )
    .expect("hash");
    node.call("evm_mine", json!([])).await;
    txs.push(reverted);

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    let (prestate, s1) = server(&db, &anvil.url, false).await;
    let (struct_logs, s2) = server(&db, &anvil.url, true).await;
    for hash in &txs {
        let expected = prestate.call("trace_replayTransaction", json!([hash, ["stateDiff"]])).await;
        let rebuilt = struct_logs.call("trace_replayTransaction", json!([hash, ["stateDiff"]])).await;
        assert_eq!(rebuilt, expected, "{hash}: struct logs (left) against the prestate tracer (right)");
    }
    assert_eq!(
        struct_logs.call("trace_replayTransaction", json!([B256::repeat_byte(1), ["stateDiff"]])).await,
        Value::Null
    );

    // Two transactions in one block: the state around the block is not either one's.
    let mut shared = Vec::new();
    for to in [accounts[4], accounts[5]] {
        let tx = json!({"from": accounts[2], "to": to, "value": "0x1"});
        shared.push(node.call("eth_sendTransaction", json!([tx])).await);
    }
    node.call("evm_mine", json!([])).await;
    let (code, message) = struct_logs
        .try_call("trace_replayTransaction", json!([shared[0], ["stateDiff"]]))
        .await
        .expect_err("shared");
    assert!(code == -32601 && message.contains("1 other transaction"), "{code} {message}");
    assert!(ots_ui_shows_not_supported(&message), "the State Diff tab says not supported: {message}");
    assert!(prestate.call("trace_replayTransaction", json!([shared[0], ["stateDiff"]])).await["stateDiff"]
        .is_object());
    let _ = (s1.stop(), s2.stop());
}

/// Whether ethers (the Otterscan UI's client) turns this error message into its
/// `UNSUPPORTED_OPERATION`, on which the UI shows its "not supported" notice instead of asking
/// again: a message that reads "the method … does not exist".
fn ots_ui_shows_not_supported(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.find("the method ").is_some_and(|at| m[at..].contains(" does not exist"))
}
