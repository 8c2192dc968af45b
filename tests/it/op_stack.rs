//! An OP Stack chain: Anvil in its OP Stack mode (`--optimism`, chain id 10) running the standard
//! workload and then deposits (type `0x7e`): a plain one minting to an account, one minting
//! and calling a contract with value, one that creates a contract, and one that fails (its mint
//! stands). The contract pages equal plain Anvil's for the same workload; deposits appear in
//! their parties' histories, under sender and nonce and on block pages with the chain's own
//! fields; every address's summary equals what the node's blocks, receipts and traces say, and
//! that reconciles with `eth_getBalance`.

use crate::common;

use std::collections::BTreeMap;

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    sol,
    sol_types::SolCall,
};
use common::{
    anvil::{bytecode, Anvil},
    workload, world,
};
use ots_indexer::{
    classify::capture::capture,
    db::{AccessMode, Db},
    index::check::{check, dump_hash},
    source::fixture::Fixture,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

sol! {
    function all(address to) external payable;
    function fail() external pure;
}

fn quantity(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex").trim_start_matches("0x"), 16).expect("quantity")
}

fn wei(v: &Value) -> U256 {
    match v.as_str() {
        Some(s) if s.starts_with("0x") => U256::from_str_radix(&s[2..], 16).expect("hex wei"),
        Some(s) => s.parse().expect("wei"),
        None => U256::ZERO,
    }
}

fn addr(v: &Value) -> Option<Address> {
    v.as_str().and_then(|s| s.parse().ok())
}

/// A deposit from `from`, minting `mint` wei to it and sending `value` of it to `to` (or into a
/// new contract made of `data`).
async fn deposit(
    chain: &workload::Chain,
    source: u8,
    from: Address,
    to: Option<Address>,
    (mint, value): (u64, u64),
    data: Bytes,
) -> B256 {
    let mut tx = json!({
        "from": from, "value": format!("{value:#x}"), "data": data, "gas": "0x2dc6c0",
        "sourceHash": B256::repeat_byte(source), "mint": format!("{mint:#x}"), "isSystemTx": false,
    });
    if let Some(to) = to {
        tx["to"] = json!(to);
    }
    serde_json::from_value(chain.call("eth_sendTransaction", json!([tx])).await).expect("hash")
}

/// Each address's ether received, sent and paid in fees, from the node's blocks, receipts and
/// `callTracer` traces: a successful value move at any depth (inside no failed frame) moves it;
/// a deposit's mint is received by its sender whatever became of the deposit and it pays no
/// fee; any other transaction pays gas used × effective gas price plus its receipt's L1 fee.
async fn ether_model(chain: &workload::Chain, head: u64) -> BTreeMap<Address, [U256; 3]> {
    fn walk(frame: &Value, parent_ok: bool, model: &mut BTreeMap<Address, [U256; 3]>) {
        let ok = parent_ok && frame.get("error").is_none();
        let value = wei(&frame["value"]);
        let moves = matches!(frame["type"].as_str(), Some("CALL" | "CREATE" | "CREATE2" | "SELFDESTRUCT"));
        if let (true, true, false, Some(from), Some(to)) =
            (ok, moves, value.is_zero(), addr(&frame["from"]), addr(&frame["to"]))
        {
            model.entry(to).or_default()[0] += value;
            model.entry(from).or_default()[1] += value;
        }
        for child in frame["calls"].as_array().into_iter().flatten() {
            walk(child, ok, model);
        }
    }
    let mut model: BTreeMap<Address, [U256; 3]> = BTreeMap::new();
    for n in 1..=head {
        let tag = format!("{n:#x}");
        let block = chain.call("eth_getBlockByNumber", json!([tag, true])).await;
        let receipts = chain.call("eth_getBlockReceipts", json!([tag])).await;
        let traces = chain.call("debug_traceBlockByNumber", json!([tag, {"tracer": "callTracer"}])).await;
        for (i, tx) in block["transactions"].as_array().expect("txs").iter().enumerate() {
            let from = addr(&tx["from"]).expect("from");
            let receipt = &receipts[i];
            if tx["type"] == json!("0x7e") {
                model.entry(from).or_default()[0] += wei(&tx["mint"]);
            } else {
                let gas = U256::from(quantity(&receipt["gasUsed"]));
                model.entry(from).or_default()[2] +=
                    gas * wei(&receipt["effectiveGasPrice"]) + wei(&receipt["l1Fee"]);
            }
            walk(&traces[i]["result"], true, &mut model);
        }
    }
    model
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_op_stack_chain_is_indexed_as_plain_anvils_plus_its_deposits() {
    let op = Anvil::start(&["--optimism", "--chain-id", "10"]);
    let plain = Anvil::start(&[]);
    let work = workload::run(&op.url).await;
    workload::run(&plain.url).await;
    let who: Vec<Address> = work.accounts[..6].to_vec();

    // The pages the two chains share: every contract list, attribute, creator and history.
    let op_world = world::contract_world(&op.url, &who).await;
    let plain_world = world::contract_world(&plain.url, &who).await;
    assert_eq!(op_world, plain_world, "the OP Stack chain's contract pages equal plain Anvil's");

    let mut chain = workload::Chain::connect(&op.url);
    let (a5, a6, a8) = (work.accounts[5], work.accounts[6], work.accounts[8]);
    let ops_deploy = chain.deploy_artifact(a5, "InternalOps").await;
    chain.mine().await;
    let ops = addr(&chain.receipt_of(ops_deploy).await["contractAddress"]).expect("ops");
    // Deposits from dev accounts that have sent nothing yet, so their first nonce is 0 (Anvil
    // reports every deposit's nonce as 0, where op-geth reports the nonce it used; and an
    // impersonated sender's deposits get other hashes in full blocks than in receipts).
    let mut fresh = Vec::new();
    for who in &work.accounts {
        if quantity(&chain.call("eth_getTransactionCount", json!([who, "latest"])).await) == 0 {
            fresh.push(*who);
        }
    }
    assert!(fresh.len() >= 4, "the workload leaves four accounts unused: {fresh:?}");
    let [d1, d2, d3, d4] = [fresh[0], fresh[1], fresh[2], fresh[3]];
    let plain_deposit = deposit(&chain, 1, d1, Some(a6), (1_000_000, 250_000), Bytes::new()).await;
    let call_deposit =
        deposit(&chain, 2, d2, Some(ops), (10_000, 4_000), allCall { to: a8 }.abi_encode().into()).await;
    let create_deposit = deposit(&chain, 3, d3, None, (5_000, 700), bytecode("Payer")).await;
    let failed_deposit =
        deposit(&chain, 4, d4, Some(ops), (2_000, 500), failCall {}.abi_encode().into()).await;
    chain.mine().await;
    // A second deposit of d1's: Anvil says nonce 0 again, where d1's account counts on to 1.
    let repeat_deposit = deposit(&chain, 5, d1, Some(a6), (300, 100), Bytes::new()).await;
    chain.mine().await;
    let status = |r: &Value| r["status"].clone();
    for hash in [plain_deposit, call_deposit, create_deposit] {
        assert_eq!(status(&chain.receipt_of(hash).await), json!("0x1"), "{hash}");
    }
    assert_eq!(status(&chain.receipt_of(failed_deposit).await), json!("0x0"));
    let created = addr(&chain.receipt_of(create_deposit).await["contractAddress"]).expect("created");

    let (dir, db, client) = world::index_everything(&op.url).await;
    let (api, server) = common::serve(&db, client.clone()).await;
    let head = quantity(&chain.call("eth_blockNumber", json!([])).await);

    // Every address's ether, as the node's own data says, and as its balance bears out.
    let model = ether_model(&chain, head).await;
    assert!(model.len() > 10, "the model covers the workload's parties");
    for (address, [received, sent, fees]) in &model {
        let got = api.call("ots2_getAddressSummary", json!([address])).await;
        let e = &got["ether"];
        let what = format!("summary of {address}: {got}");
        assert_eq!(
            (wei(&e["received"]), wei(&e["sent"]), wei(&e["feesPaid"])),
            (*received, *sent, *fees),
            "{what}"
        );
        let balance = |block: String| chain.call("eth_getBalance", json!([address, block]));
        let (before, now) = (wei(&balance("0x0".into()).await), wei(&balance(format!("{head:#x}")).await));
        assert_eq!(
            before + received,
            now + sent + fees,
            "{address}: genesis balance + received = balance now + sent + fees"
        );
    }
    let minted = api.call("ots2_getAddressSummary", json!([d4])).await;
    assert_eq!(wei(&minted["ether"]["received"]), U256::from(2_000), "a failed deposit's mint stands");

    // Deposits in their parties' histories, with the chain's own fields passed through.
    for (party, hash) in [
        (d1, plain_deposit),
        (a6, plain_deposit),
        (d2, call_deposit),
        (a8, call_deposit),
        (d3, create_deposit),
        (created, create_deposit),
        (d4, failed_deposit),
        (ops, failed_deposit),
    ] {
        let page = api.call("ots_searchTransactionsBefore", json!([party, 0, 25])).await;
        let i = page["txs"]
            .as_array()
            .expect("txs")
            .iter()
            .position(|t| t["hash"] == json!(hash))
            .unwrap_or_else(|| panic!("{hash} in the history of {party}: {page}"));
        let (tx, receipt) = (&page["txs"][i], &page["receipts"][i]);
        assert_eq!(tx["type"], json!("0x7e"));
        assert!(tx["sourceHash"].is_string() && tx["mint"].is_string(), "deposit fields: {tx}");
        assert!(receipt["depositNonce"].is_string(), "deposit receipt fields: {receipt}");
    }

    // Under sender and nonce, and on its block's pages.
    for hash in [plain_deposit, call_deposit, create_deposit, failed_deposit] {
        let tx = chain.call("eth_getTransactionByHash", json!([hash])).await;
        let found =
            api.call("ots_getTransactionBySenderAndNonce", json!([tx["from"], quantity(&tx["nonce"])])).await;
        assert_eq!(found, json!(hash), "sender and nonce of {tx}");
        let block = tx["blockNumber"].clone();
        let page = api.call("ots_getBlockTransactions", json!([quantity(&block), 0, 25])).await;
        let listed = page["fullblock"]["transactions"].as_array().expect("txs");
        let i = listed.iter().position(|t| t["hash"] == json!(hash)).expect("listed on its block's page");
        assert_eq!(listed[i]["type"], json!("0x7e"), "{page}");
        assert_eq!(
            (listed[i]["sourceHash"].clone(), listed[i]["mint"].clone()),
            (tx["sourceHash"].clone(), tx["mint"].clone())
        );
        assert!(page["receipts"][i]["depositReceiptVersion"].is_string(), "{page}");
        let details = api.call("ots_getBlockDetails", json!([quantity(&block)])).await;
        assert_eq!(details["totalFees"], json!("0x0"), "deposits pay no fee: {details}");
    }

    // Etherscan's lists show deposits as their parties' transactions, paying no fee.
    let http = reqwest::Client::new();
    let scan = |query: String| {
        let url = format!("{}/api?{query}", api.url);
        let http = http.clone();
        async move {
            let got: Value = http.get(&url).send().await.expect("GET").json().await.expect("JSON");
            assert_eq!(got["status"], json!("1"), "{url}: {got}");
            got["result"].clone()
        }
    };
    let row_of = |rows: &Value, hash: B256| {
        rows.as_array().expect("rows").iter().find(|r| r["hash"] == json!(hash)).cloned().expect("listed")
    };
    for (party, hash, failed) in [
        (d1, plain_deposit, false),
        (d1, repeat_deposit, false),
        (created, create_deposit, false),
        (d4, failed_deposit, true),
    ] {
        let row = row_of(&scan(format!("module=account&action=txlist&address={party}")).await, hash);
        assert_eq!(row["gasPrice"], json!("0"), "{row}");
        assert_eq!(
            (row["isError"].clone(), row["txreceipt_status"].clone()),
            (json!(if failed { "1" } else { "0" }), json!(if failed { "0" } else { "1" })),
            "{row}"
        );
        let status = scan(format!("module=transaction&action=gettxreceiptstatus&txhash={hash}")).await;
        assert_eq!(status["status"], row["txreceipt_status"]);
    }
    let created_row =
        row_of(&scan(format!("module=account&action=txlist&address={created}")).await, create_deposit);
    assert_eq!(
        (created_row["to"].clone(), created_row["contractAddress"].clone()),
        (json!(""), json!(format!("{created:#x}")))
    );
    // The deposit's call moves ether and creates contracts below it: its internal transactions,
    // by hash and in its block's range, are the same frames.
    let by_hash = scan(format!("module=account&action=txlistinternal&txhash={call_deposit}")).await;
    let block = quantity(&chain.receipt_of(call_deposit).await["blockNumber"]);
    let in_block =
        scan(format!("module=account&action=txlistinternal&startblock={block}&endblock={block}")).await;
    let of_deposit: Vec<Value> = in_block
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["hash"] == json!(call_deposit))
        .map(|r| {
            let mut r = r.clone();
            let fields = r.as_object_mut().expect("row");
            fields.remove("hash");
            fields.remove("traceId");
            r
        })
        .collect();
    assert!(!of_deposit.is_empty(), "{in_block}");
    assert_eq!(by_hash, json!(of_deposit));

    // A deposit whose nonce goes back counts as its sender's next, as the account does.
    assert_eq!(quantity(&chain.call("eth_getTransactionCount", json!([d1, "latest"])).await), 2);
    let second = api.call("ots_getTransactionBySenderAndNonce", json!([d1, 1])).await;
    assert_eq!(second, json!(repeat_deposit), "d1's second deposit under nonce 1");
    check(&db.begin_read().expect("read")).expect("check");

    // A recording keeps deposits (their mint too): replayed with no node, the same tables.
    let builtins = || -> Vec<Box<dyn ots_classifiers::Classifier>> {
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect()
    };
    let file = dir.path().join("op.rec.zst");
    capture(&client, &builtins(), (0, head), &file).await.expect("capture");
    let replayed = Db::open(&dir.path().join("replayed"), AccessMode::ReadWrite).expect("open");
    let config = SyncConfig { batch_blocks: 3, ..SyncConfig::default() };
    let indexer = Indexer::open(replayed.clone(), Fixture::load(&file).expect("load"), builtins(), config)
        .await
        .expect("open");
    indexer.sync_to(head).await.expect("replay");
    assert_eq!(
        dump_hash(&replayed).expect("hash"),
        dump_hash(&db).expect("hash"),
        "replay equals the node's index"
    );
    let _ = server.stop();
}
