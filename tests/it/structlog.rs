//! Call frames rebuilt from the default struct-log tracer equal the call tracer's: on a real Anvil
//! that keeps struct logs (`--steps-tracing`), every transaction of the standard workload, plus
//! factories (CREATE, CREATE2, a token made inside a call, create-and-destroy, a creation undone
//! by a reverted call), internal ether moves, a selfdestruct of a contract made in the same
//! transaction, a revert with a reason and CREATE2 lifetimes, gets the same
//! `ots_getInternalOperations`, `ots_traceTransaction` and `ots_getTransactionError` from a
//! server that reads struct logs as from one that reads `callTracer`.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, Bytes, B256},
    sol,
    sol_types::SolCall,
};
use common::{anvil::Anvil, contracts::factory_calls, workload, Client};
use ots_indexer::{
    db::{AccessMode, Db},
    rpc::{self, RpcContext, ServerOptions, TxFrames},
    source::NodeClient,
};
use serde_json::{json, Value};

sol! {
    function all(address to) external payable;
    function fail() external pure;
    function make(bytes32 salt, bool remove) external;
}

async fn serve(url: &str, frames: TxFrames) -> (tempfile::TempDir, Client, jsonrpsee::server::ServerHandle) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    let node = NodeClient::connect(url, Duration::from_secs(60)).expect("node");
    let ctx = RpcContext { tx_frames: frames, ..RpcContext::new(db, node) };
    let (addr, server) = rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &ServerOptions::default())
        .await
        .expect("serve");
    (dir, Client::new(&format!("http://{addr}")), server)
}

fn address_of(receipt: &Value) -> Address {
    serde_json::from_value(receipt["contractAddress"].clone()).expect("contract address")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn struct_log_frames_equal_the_call_tracers() {
    let anvil = Anvil::start(&["--steps-tracing"]);
    let work = workload::run(&anvil.url).await;
    let mut chain = workload::Chain::connect(&anvil.url);
    let (a0, a1) = (work.accounts[0], work.accounts[1]);
    let deploys = [
        chain.deploy_artifact(a0, "Factory").await,
        chain.deploy_artifact(a0, "InternalOps").await,
        chain.deploy_artifact(a0, "Recreator").await,
    ];
    chain.mine().await;
    let mut at = Vec::new();
    for d in deploys {
        at.push(address_of(&chain.receipt_of(d).await));
    }
    let (factory, ops, recreator) = (at[0], at[1], at[2]);
    for data in factory_calls() {
        chain.send_call(a0, factory, data).await;
    }
    let salt = B256::repeat_byte(9);
    chain.send_call(a1, recreator, makeCall { salt, remove: true }.abi_encode()).await;
    chain.send_call(a0, ops, failCall {}.abi_encode()).await;
    let all = chain
        .call(
            "eth_sendTransaction",
            json!([{"from": a0, "to": ops, "value": "0x400", "gas": "0x2dc6c0",
                    "data": Bytes::from(allCall { to: a1 }.abi_encode())}]),
        )
        .await;
    chain.mine().await;
    chain.send_call(a1, recreator, makeCall { salt, remove: false }.abi_encode()).await;
    chain.mine().await;

    let (_d1, tracer, s1) = serve(&anvil.url, TxFrames::Auto).await;
    let (_d2, logs, s2) = serve(&anvil.url, TxFrames::StructLogs).await;
    let head = chain.call("eth_blockNumber", json!([])).await;
    let head = u64::from_str_radix(head.as_str().expect("hex").trim_start_matches("0x"), 16).expect("head");
    let (mut txs, mut with_frames, mut failed) = (0, 0, 0);
    for n in 1..=head {
        let block = chain.call("eth_getBlockByNumber", json!([format!("{n:#x}"), false])).await;
        for hash in block["transactions"].as_array().expect("transactions") {
            txs += 1;
            for method in ["ots_getInternalOperations", "ots_traceTransaction", "ots_getTransactionError"] {
                let want = tracer.call(method, json!([hash])).await;
                let got = logs.call(method, json!([hash])).await;
                assert_eq!(got, want, "{method} of {hash} (block {n})");
                if method == "ots_traceTransaction" && want.as_array().is_some_and(|a| a.len() > 1) {
                    with_frames += 1;
                }
                if method == "ots_getTransactionError" && want != json!("0x") {
                    failed += 1;
                }
            }
        }
    }
    assert!(
        txs > 500 && with_frames >= 8 && failed >= 2,
        "{txs} transactions, {with_frames} with frames, {failed} failed"
    );
    let ops_of_all = logs.call("ots_getInternalOperations", json!([all])).await;
    let kinds: Vec<u64> =
        ops_of_all.as_array().expect("ops").iter().map(|o| o["type"].as_u64().expect("type")).collect();
    assert_eq!(kinds, [0, 2, 3, 1], "a transfer, a CREATE, a CREATE2 and a selfdestruct: {ops_of_all}");
    let _ = (s1.stop(), s2.stop());
}
