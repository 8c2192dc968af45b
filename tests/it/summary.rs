//! `ots2_getAddressSummary` on the standard workload plus ether moved every way (a plain send, an
//! internal call, CREATE and CREATE2 with value, selfdestruct payouts, a reverted call with
//! value) and contracts removed in their creating transaction and in a later one, against a real
//! Anvil. Every field is computed here independently, from the node's blocks, receipts and
//! `callTracer` traces (the indexer takes its frames from `trace_block`); the same chain indexed
//! without a tracer says so and counts the top level only; a reorg unwinds the totals to those
//! of a clean index.

use crate::common;

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use alloy::{
    primitives::{Address, B256, U256},
    sol,
    sol_types::SolCall,
};
use common::{anvil::Anvil, workload, Client};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{AccessMode, Db},
    index::check::dump_hash,
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

sol! {
    function all(address to) external payable;
    function fail() external pure;
    function makeAndDestroy() external;
    function destroy(address to) external;
    function balanceOf(address who) external view returns (uint256);
    function make(bytes32 salt, bool remove) external;
}

/// What the test expects of one address.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Expected {
    txs: BTreeSet<(u64, u64)>,
    sent: u64,
    received_top: u64,
    eth_in: U256,
    eth_out: U256,
    fees: U256,
}

fn quantity(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex").trim_start_matches("0x"), 16).expect("quantity")
}

fn wei(v: &Value) -> U256 {
    v.as_str().map_or(U256::ZERO, |s| s.parse().expect("wei"))
}

fn addr(v: &Value) -> Option<Address> {
    v.as_str().and_then(|s| s.parse().ok())
}

/// Walks a `callTracer` frame: every party appears; a successful CALL, CREATE(2) or SELFDESTRUCT
/// with value moves it, unless a frame around it reverted.
fn walk(frame: &Value, parent_ok: bool, at: (u64, u64), model: &mut BTreeMap<Address, Expected>) {
    let ok = parent_ok && frame.get("error").is_none();
    let kind = frame["type"].as_str().unwrap_or_default();
    let from = addr(&frame["from"]);
    let to = addr(&frame["to"]);
    for party in [from, to].into_iter().flatten() {
        model.entry(party).or_default().txs.insert(at);
    }
    let value = wei(&frame["value"]);
    if ok && !value.is_zero() && matches!(kind, "CALL" | "CREATE" | "CREATE2" | "SELFDESTRUCT") {
        if let (Some(from), Some(to)) = (from, to) {
            model.entry(from).or_default().eth_out += value;
            model.entry(to).or_default().eth_in += value;
        }
    }
    for child in frame["calls"].as_array().into_iter().flatten() {
        walk(child, ok, at, model);
    }
}

/// The model of the whole chain, from the node alone.
async fn model_of(chain: &workload::Chain, head: u64) -> BTreeMap<Address, Expected> {
    let mut model: BTreeMap<Address, Expected> = BTreeMap::new();
    for n in 0..=head {
        let tag = format!("{n:#x}");
        let block = chain.call("eth_getBlockByNumber", json!([tag, true])).await;
        let receipts = chain.call("eth_getBlockReceipts", json!([tag])).await;
        let traces = chain.call("debug_traceBlockByNumber", json!([tag, {"tracer": "callTracer"}])).await;
        let txs = block["transactions"].as_array().cloned().unwrap_or_default();
        for (i, tx) in txs.iter().enumerate() {
            let at = (n, i as u64);
            let receipt = &receipts[i];
            let from = addr(&tx["from"]).expect("from");
            let sender = model.entry(from).or_default();
            sender.txs.insert(at);
            sender.sent += 1;
            sender.fees += U256::from(quantity(&receipt["gasUsed"]))
                * U256::from(quantity(&receipt["effectiveGasPrice"]));
            let recipient = addr(&tx["to"]).or_else(|| addr(&receipt["contractAddress"]));
            if let Some(to) = recipient.filter(|to| *to != from) {
                let r = model.entry(to).or_default();
                r.txs.insert(at);
                r.received_top += 1;
            }
            walk(&traces[i]["result"], true, at, &mut model);
        }
    }
    model
}

async fn index(
    url: &str,
    traces: TraceChoice,
) -> (tempfile::TempDir, Db, Client, jsonrpsee::server::ServerHandle) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(url, Duration::from_secs(30))
        .expect("node")
        .with_traces(traces)
        .await
        .expect("traces");
    let indexer =
        Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], SyncConfig::default())
            .await
            .expect("indexer");
    indexer.sync_to(node.head().await.expect("head")).await.expect("sync");
    indexer.close().await.expect("close");
    let (client, server) = common::serve(&db, node).await;
    (dir, db, client, server)
}

async fn send(
    chain: &workload::Chain,
    from: Address,
    to: Option<Address>,
    value: u64,
    data: Vec<u8>,
) -> B256 {
    let mut tx = json!({"from": from, "value": format!("{value:#x}"), "data": alloy::primitives::Bytes::from(data), "gas": "0x2dc6c0"});
    if let Some(to) = to {
        tx["to"] = json!(to);
    }
    serde_json::from_value(chain.call("eth_sendTransaction", json!([tx])).await).expect("hash")
}

async fn receipt(chain: &workload::Chain, hash: B256) -> Value {
    chain.call("eth_getTransactionReceipt", json!([hash])).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_equal_what_the_node_says() {
    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;
    let mut chain = workload::Chain::connect(&anvil.url);
    let (a0, a26, a27) = (work.accounts[0], work.accounts[26], work.accounts[27]);

    // Ether every way: a plain send; an internal call, CREATE and CREATE2 with value and a
    // selfdestruct payout (of a contract created in the same transaction: its code goes); a
    // reverted call with value (moves nothing, pays its fee); a contract created with value and
    // destroyed in a later transaction (after Cancun its code stays); a contract created and
    // destroyed by a factory in one transaction.
    let ops_deploy = chain.deploy_artifact(a0, "InternalOps").await;
    let factory_deploy = chain.deploy_artifact(a0, "Factory").await;
    chain.mine().await;
    let ops = addr(&receipt(&chain, ops_deploy).await["contractAddress"]).expect("ops");
    let factory = addr(&receipt(&chain, factory_deploy).await["contractAddress"]).expect("factory");
    let plain = send(&chain, a0, Some(a26), 1_000_000, Vec::new()).await;
    let internal = send(&chain, a0, Some(ops), 4_000, allCall { to: a27 }.abi_encode()).await;
    let reverted = send(&chain, a0, Some(ops), 500, failCall {}.abi_encode()).await;
    let payer_deploy = send(&chain, a26, None, 700, hex_code("Payer")).await;
    let ephemeral_tx = send(&chain, a26, Some(factory), 0, makeAndDestroyCall {}.abi_encode()).await;
    chain.mine().await;
    let payer = addr(&receipt(&chain, payer_deploy).await["contractAddress"]).expect("payer");
    let payer_destroy = send(&chain, a26, Some(payer), 0, destroyCall { to: a27 }.abi_encode()).await;
    // Two lifetimes at one CREATE2 address: created and removed in one transaction, then
    // created again in a later one.
    let recreator_deploy = send(&chain, a26, None, 0, hex_code("Recreator")).await;
    chain.mine().await;
    let recreator = addr(&receipt(&chain, recreator_deploy).await["contractAddress"]).expect("recreator");
    let salt = B256::repeat_byte(7);
    let first_life =
        send(&chain, a26, Some(recreator), 0, makeCall { salt, remove: true }.abi_encode()).await;
    chain.mine().await;
    let second_life =
        send(&chain, a27, Some(recreator), 0, makeCall { salt, remove: false }.abi_encode()).await;
    chain.mine().await;
    for hash in [plain, internal, ephemeral_tx, payer_destroy, first_life, second_life] {
        assert_eq!(receipt(&chain, hash).await["status"], json!("0x1"), "{hash}");
    }
    assert_eq!(receipt(&chain, reverted).await["status"], json!("0x0"));

    let head = quantity(&chain.call("eth_blockNumber", json!([])).await);
    let model = model_of(&chain, head).await;
    let (_dir, _db, api, server) = index(&anvil.url, TraceChoice::Auto).await;

    let expected_transfers = work.expected_transfer_txs();
    for (address, want) in &model {
        if address.is_zero() {
            continue;
        }
        let got = api.call("ots2_getAddressSummary", json!([address])).await;
        let what = format!("summary of {address}: {got}");
        assert_eq!(got["callFrames"], json!("all"), "{what}");
        let t = &got["transactions"];
        assert_eq!(quantity(&t["all"]), want.txs.len() as u64, "{what}");
        assert_eq!(quantity(&t["sent"]), want.sent, "{what}");
        assert_eq!(quantity(&t["received"]), want.received_top, "{what}");
        assert_eq!(
            quantity(&t["internalOnly"]),
            want.txs.len() as u64 - want.sent - want.received_top,
            "{what}"
        );
        let e = &got["ether"];
        assert_eq!(wei(&e["received"]), want.eth_in, "{what}");
        assert_eq!(wei(&e["sent"]), want.eth_out, "{what}");
        assert_eq!(wei(&e["feesPaid"]), want.fees, "{what}");
        let blocks: Vec<u64> = want.txs.iter().map(|(b, _)| *b).collect();
        assert_eq!(got["firstActiveBlock"], json!(format!("{:#x}", blocks[0])), "{what}");
        assert_eq!(got["lastActiveBlock"], json!(format!("{:#x}", blocks[blocks.len() - 1])), "{what}");
        let transfers = expected_transfers.get(address).map_or(0, Vec::len) as u64;
        assert_eq!(quantity(&got["tokens"]["erc20Transfers"]), transfers, "{what}");
        let mut held = 0;
        for token in &work.tokens {
            let data = alloy::primitives::Bytes::from(balanceOfCall { who: *address }.abi_encode());
            let balance =
                chain.call("eth_call", json!([{"to": token.address, "data": data}, "latest"])).await;
            if !wei(&balance).is_zero() {
                held += 1;
            }
        }
        assert_eq!(quantity(&got["tokens"]["erc20Held"]), held, "{what}");
        // The workload has no NFTs and Anvil no consensus-layer withdrawals.
        for field in ["erc721Transfers", "erc1155Transfers", "erc721Held", "erc1155Held"] {
            assert_eq!(quantity(&got["tokens"][field]), 0, "{field}: {what}");
        }
        assert_eq!((wei(&e["withdrawn"]), quantity(&e["withdrawals"])), (U256::ZERO, 0), "{what}");
    }
    // The node's own accounting: the receiver of the internal moves got a quarter of the value
    // by call and the payer's 1,000 wei by selfdestruct.
    let a27_summary = api.call("ots2_getAddressSummary", json!([a27])).await;
    assert_eq!(wei(&a27_summary["ether"]["received"]), U256::from(1_000 + 1_000 + 700));

    // Lifetimes: removed in the creating transaction (by the factory, and inside `all`), kept
    // when destroyed later (EIP-6780), none for an account.
    let made = receipt(&chain, ephemeral_tx).await["logs"][0]["data"].clone();
    let ephemeral: Address = Address::from_slice(&hex_bytes(&made)[12..32]);
    let summary = api.call("ots2_getAddressSummary", json!([ephemeral])).await;
    assert_eq!(summary["contract"]["creator"], json!(factory), "{summary}");
    assert_eq!(summary["contract"]["creation"]["transactionHash"], json!(ephemeral_tx));
    assert_eq!(summary["contract"]["removal"]["transactionHash"], json!(ephemeral_tx), "{summary}");
    assert_eq!(summary["contract"]["lifetimes"], json!("0x1"));
    let summary = api.call("ots2_getAddressSummary", json!([payer])).await;
    assert_eq!(summary["contract"]["creator"], json!(a26));
    assert_eq!(
        summary["contract"]["removal"],
        Value::Null,
        "destroyed after Cancun in a later transaction: {summary}"
    );
    let code = chain.call("eth_getCode", json!([payer, "latest"])).await;
    assert_ne!(code, json!("0x"), "the node agrees the code stays");
    let inner_payer = Address::create(&ops, 1);
    let summary = api.call("ots2_getAddressSummary", json!([inner_payer])).await;
    assert_eq!(summary["contract"]["creator"], json!(ops), "{summary}");
    assert_eq!(summary["contract"]["removal"]["transactionHash"], json!(internal), "{summary}");
    assert_eq!(api.call("ots2_getAddressSummary", json!([a26])).await["contract"], Value::Null);
    let made = receipt(&chain, second_life).await["logs"][0]["data"].clone();
    let mortal = Address::from_slice(&hex_bytes(&made)[12..32]);
    let first_made = receipt(&chain, first_life).await["logs"][0]["data"].clone();
    assert_eq!(Address::from_slice(&hex_bytes(&first_made)[12..32]), mortal, "one CREATE2 address");
    assert_ne!(chain.call("eth_getCode", json!([mortal, "latest"])).await, json!("0x"), "alive again");
    let summary = api.call("ots2_getAddressSummary", json!([mortal])).await;
    assert_eq!(summary["contract"]["lifetimes"], json!("0x2"), "{summary}");
    assert_eq!(summary["contract"]["creator"], json!(recreator), "{summary}");
    assert_eq!(summary["contract"]["creation"]["transactionHash"], json!(second_life), "{summary}");
    assert_eq!(summary["contract"]["removal"], Value::Null, "the current lifetime goes on: {summary}");
    let creator = api.call("ots_getContractCreator", json!([mortal])).await;
    assert_eq!(creator["hash"], json!(second_life), "the current lifetime's creation: {creator}");

    // Bad input.
    let (code, message) =
        api.try_call("ots2_getAddressSummary", json!(["0xnot"])).await.expect_err("bad address");
    assert_eq!(code, -32602, "{message}");
    let _ = server.stop();

    // Without a tracer: said so, the top level only.
    let (_dir2, _db2, bare, bare_server) = index(&anvil.url, TraceChoice::None).await;
    let got = bare.call("ots2_getAddressSummary", json!([a27])).await;
    assert_eq!(got["callFrames"], json!("none"), "{got}");
    assert_eq!(wei(&got["ether"]["received"]), U256::ZERO, "no frames, no internal moves: {got}");
    assert_eq!(got["transactions"]["internalOnly"], json!("0x0"));
    let got = bare.call("ots2_getAddressSummary", json!([a26])).await;
    assert_eq!(wei(&got["ether"]["received"]), U256::from(1_000_000));
    let _ = bare_server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reorg_unwinds_the_totals_to_a_clean_index() {
    let anvil = Anvil::start(&[]);
    let chain = workload::Chain::connect(&anvil.url);
    let accounts = chain.accounts().await;
    for i in 0..4u64 {
        send(&chain, accounts[1], Some(accounts[2]), 1_000 + i, Vec::new()).await;
        chain.mine().await;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("traces");
    let indexer =
        Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], SyncConfig::default())
            .await
            .expect("indexer");
    indexer.sync_to(node.head().await.expect("head")).await.expect("sync");
    // Replace the last two blocks with one that sends elsewhere, then one more block.
    let other = json!({"from": accounts[3], "to": accounts[2], "value": "0x7", "gas": "0x5208"});
    let _: Value = chain.call("anvil_reorg", json!([2, [[other, 0]]])).await;
    chain.mine().await;
    indexer.sync_to(node.head().await.expect("head")).await.expect("follows the reorg");
    indexer.close().await.expect("close");
    let (_clean_dir, clean, clean_api, clean_server) = index(&anvil.url, TraceChoice::Auto).await;
    let (api, server) = common::serve(&db, node).await;
    for who in [accounts[1], accounts[2], accounts[3]] {
        assert_eq!(
            api.call("ots2_getAddressSummary", json!([who])).await,
            clean_api.call("ots2_getAddressSummary", json!([who])).await,
            "summary of {who} after the reorg"
        );
    }
    let hash = |db: &Db| dump_hash(db).expect("hash");
    assert_eq!(hash(&db), hash(&clean), "every table equals a clean index's");
    let _ = (server.stop(), clean_server.stop());
}

fn hex_bytes(v: &Value) -> Vec<u8> {
    alloy::primitives::hex::decode(v.as_str().expect("hex")).expect("hex")
}

/// The creation code of testbed artifact `name`.
fn hex_code(name: &str) -> Vec<u8> {
    let path = common::anvil::testbed_dir().join("build/artifacts.json");
    let artifacts: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("artifacts")).expect("json");
    hex_bytes(&artifacts[name]["bytecode"])
}
