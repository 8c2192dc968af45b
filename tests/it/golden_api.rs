//! Every method of ours, over HTTP and over WebSocket with real JSON-RPC clients, against golden
//! answers on a fixed Anvil chain (the standard workload). Block timestamps follow Anvil's clock,
//! so timestamps, block hashes and run-dependent status figures are masked before comparing.
//! `UPDATE_GOLDEN=1 cargo test --test golden_api` rewrites `tests/golden/api.json` after a
//! deliberate change of an answer.

use crate::common;

use std::{path::PathBuf, time::Duration};

use alloy::primitives::Address;
use common::{anvil::Anvil, workload, Client};
use jsonrpsee::{core::client::ClientT, core::params::ArrayParams, ws_client::WsClientBuilder};
use ots_indexer::{
    db::{AccessMode, Db},
    rpc::{self, RpcContext, ServerOptions},
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Map, Value};

/// Keys whose values depend on when the chain was mined or on the machine.
const MASKED: &[&str] = &[
    "timestamp",
    "blockTimestamp",
    "blockHash",
    "indexedHash",
    "blocksPerSecond",
    "fileBytes",
    "usedBytes",
    "tables",
    "headBlock",
    "lag",
];

fn mask(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, inner) in map.iter_mut() {
                if MASKED.contains(&k.as_str()) {
                    *inner = json!("<masked>");
                } else {
                    mask(inner);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask),
        _ => {}
    }
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/api.json")
}

/// Every method with parameters that exercise it on the workload chain.
fn calls(work: &workload::Workload) -> Vec<(&'static str, Value)> {
    let (token, second) = (work.tokens[0].address, work.tokens[1].address);
    let (a0, a2, a3) = (work.accounts[0], work.accounts[2], work.accounts[3]);
    let other = work.others[0].address;
    let coinbase: Address = "0x0000000000000000000000000000000000000000".parse().expect("address");
    vec![
        ("ots_getApiLevel", json!([])),
        ("ots2_getAllContractsCount", json!([])),
        ("ots2_getAllContractsList", json!([0, 3])),
        ("ots2_getAllContractsList", json!([1, 500])),
        ("ots2_getAllContractsList", json!([0, 501])),
        ("ots2_getERC20Count", json!([])),
        ("ots2_getERC20List", json!([0, 25])),
        ("ots2_getERC721Count", json!([])),
        ("ots2_getERC721List", json!([0, 25])),
        ("ots2_getERC1155Count", json!([])),
        ("ots2_getERC1155List", json!([0, 25])),
        ("ots2_getERC1167Count", json!([])),
        ("ots2_getERC1167List", json!([0, 25])),
        ("ots2_getERC1167Impl", json!([token])),
        ("ots2_getERC4626Count", json!([])),
        ("ots2_getERC4626List", json!([0, 25])),
        ("ots2_getAddressAttributes", json!([token])),
        ("ots2_getAddressAttributes", json!([other])),
        ("ots2_getERC20TransferCount", json!([a2])),
        ("ots2_getERC20TransferList", json!([a2, 0, 25])),
        ("ots2_getERC20TransferCount", json!([a3])),
        ("ots2_getERC20TransferList", json!([a3, 254, 3])),
        ("ots2_getERC20TransferList", json!([a3, 0, 1001])),
        ("ots2_getERC721TransferCount", json!([a0])),
        ("ots2_getERC721TransferList", json!([a0, 0, 25])),
        ("ots2_getERC1155TransferCount", json!([a0])),
        ("ots2_getERC1155TransferList", json!([a0, 0, 25])),
        ("ots2_getERC20Holdings", json!([a0])),
        ("ots2_getERC721Holdings", json!([a0])),
        ("ots2_getERC1155Holdings", json!([a0])),
        ("ots2_getERC20HoldingsPage", json!([a0, 0, 1])),
        ("ots2_getERC20HoldingsPage", json!([a0, 0, 1001])),
        ("ots2_getAddressSummary", json!([a0])),
        ("ots2_getAddressSummary", json!([a2])),
        ("ots2_getAddressSummary", json!(["0x12"])),
        ("ots2_getBlocksRewardedCount", json!([coinbase])),
        ("ots2_getBlocksRewardedList", json!([coinbase, 0, 2])),
        ("ots2_getWithdrawalsCount", json!([a0])),
        ("ots2_getWithdrawalsList", json!([a0, 0, 25])),
        ("ots2_getTokenHolderCount", json!([second])),
        ("ots2_getTokenHolders", json!([second, 0, 5])),
        ("ots2_getERC721Owner", json!([token, "0x1"])),
        ("ots2_getERC1155Balances", json!([token, a0])),
        ("ots2_getIndexerStatus", json!([])),
        ("ots2_getAddressLabels", json!([token])),
        ("ots2_transferIntegrityChecker", json!([])),
        ("ots2_holdingsIntegrityChecker", json!([])),
        ("ots2_getERC20TransferCount", json!(["0x12"])),
        ("ots2_noSuchMethod", json!([])),
    ]
}

fn answer_of(result: Result<Value, (i64, String)>) -> Value {
    match result {
        Ok(mut v) => {
            mask(&mut v);
            json!({"result": v})
        }
        Err((code, message)) => json!({"error": {"code": code, "message": message}}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_over_http_and_ws_matches_the_golden_answers() {
    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let indexer = Indexer::open(
        db.clone(),
        node.clone(),
        ots_classifiers::Registry::builtin()
            .resolve(&ots_classifiers::BUILTIN_NAMES.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
            .expect("classifiers"),
        SyncConfig::default(),
    )
    .await
    .expect("indexer");
    indexer.sync_to(node.head().await.expect("head")).await.expect("sync");
    indexer.close().await.expect("close");
    let ctx = RpcContext::new(db.clone(), node);
    let (addr, server) = rpc::serve("127.0.0.1:0".parse().expect("addr"), ctx, &ServerOptions::default())
        .await
        .expect("serve");
    let http = Client::new(&format!("http://{addr}"));
    let ws = WsClientBuilder::default().build(format!("ws://{addr}")).await.expect("ws");

    let mut answers = Map::new();
    for (method, params) in calls(&work) {
        let key = format!("{method} {params}");
        let over_http = answer_of(http.try_call(method, params.clone()).await);
        let mut ws_params = ArrayParams::new();
        for p in params.as_array().expect("array params") {
            ws_params.insert(p).expect("param");
        }
        let over_ws = answer_of(match ws.request::<Value, _>(method, ws_params).await {
            Ok(v) => Ok(v),
            Err(jsonrpsee::core::ClientError::Call(e)) => Err((i64::from(e.code()), e.message().to_owned())),
            Err(e) => panic!("{key} over ws: {e}"),
        });
        assert_eq!(over_http, over_ws, "{key}: HTTP and WebSocket differ");
        answers.insert(key, over_http);
    }
    let got = Value::Object(answers);
    let path = golden_path();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        std::fs::write(&path, serde_json::to_string_pretty(&got).expect("json") + "\n")
            .expect("write golden");
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    let want: Value = serde_json::from_str(&text).expect("golden file is JSON");
    for (key, expected) in want.as_object().expect("object") {
        assert_eq!(got.get(key), Some(expected), "{key}: answer differs from {}", path.display());
    }
    assert_eq!(got.as_object().map(Map::len), want.as_object().map(Map::len), "calls added or removed");
    server.stop().expect("stop");
}
