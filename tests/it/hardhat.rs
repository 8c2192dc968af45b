//! A second node implementation: Hardhat 2's node, which has no `eth_getBlockReceipts` (it fails
//! the whole JSON-RPC batch that asks for it), no `trace_` methods and no named tracers, only the
//! default struct-log tracer. The indexer must start on it, take receipts one transaction at a
//! time, rebuild call frames from struct logs, and index the standard workload, and contracts
//! made inside calls, exactly as it does from Anvil.

use crate::common;

use std::time::Duration;

use alloy::primitives::Address;
use common::{
    anvil::Anvil,
    contracts::{deploy_everything, deploy_factories},
    hardhat::Hardhat,
    workload,
    world::contract_world,
};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{AccessMode, Db},
    index::check::check,
    pending::{NoticeKind, PendingConfig, PendingPool},
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standard_workload_indexes_from_hardhat_as_from_anvil() {
    let node = Hardhat::start();
    let work = workload::run(&node.url).await;
    let expected = work.expected_transfer_txs();

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let client = NodeClient::connect(&node.url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("a node without tracers is usable");
    assert_eq!(
        client.trace_mode().name(),
        "debug_traceTransaction (struct logs)",
        "Hardhat 2 has no call tracer: frames come from struct logs"
    );
    let config = SyncConfig { batch_blocks: 4, ..SyncConfig::default() };
    let indexer = Indexer::open(db.clone(), client.clone(), vec![Box::new(Erc20Classifier)], config)
        .await
        .expect("indexer");
    let head = client.head().await.expect("head");
    indexer.sync_to(head).await.expect("indexes every block, block 0 included");
    indexer.close().await.expect("close");

    let (api, server) = common::serve(&db, client).await;
    assert_eq!(api.call("ots2_getERC20Count", json!([])).await, json!(work.tokens.len()));
    for (address, txs) in &expected {
        assert_eq!(
            api.call("ots2_getERC20TransferCount", json!([address])).await,
            json!(txs.len()),
            "transfers of {address}"
        );
    }
    // Every listed transaction is one that was sent, in order.
    let a3 = work.accounts[3];
    let page = api.call("ots2_getERC20TransferList", json!([a3, 0, 300])).await;
    let hashes: Vec<_> = page["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| serde_json::from_value::<alloy::primitives::B256>(r["hash"].clone()).expect("hash"))
        .collect();
    assert_eq!(&hashes, &expected[&a3]);
    check(&db.begin_read().expect("read")).expect("check");
    // Served from the node's eth_ methods: block pages work here too.
    let details = api.call("ots_getBlockDetails", json!([1])).await;
    assert_eq!(details["block"]["number"], json!("0x1"));
    assert!(details["block"]["transactionCount"].as_u64().expect("count") > 0);
    // The blocks-rewarded list takes its fees from receipts one transaction at a time here (no
    // eth_getBlockReceipts), as the UI's address page of the fee recipient asks it.
    let miner: alloy::primitives::Address =
        serde_json::from_value(details["block"]["miner"].clone()).expect("miner");
    let rewarded = api.call("ots2_getBlocksRewardedCount", json!([miner])).await;
    assert!(rewarded.as_u64().is_some_and(|n| n > 1), "{rewarded}");
    let page = api.call("ots2_getBlocksRewardedList", json!([miner, 0, 3])).await;
    let rows = page["results"].as_array().expect("results");
    assert_eq!(rows.len() as u64, rewarded.as_u64().expect("count").min(3), "{page}");
    let fees = |n: &Value| page["blocksSummary"][n.as_str().expect("hex")]["totalFees"].clone();
    assert!(rows.iter().all(|r| fees(&r["blockNumber"]).is_string()), "every block's fees: {page}");
    // The address pages come from our index here too (without frames: senders, recipients and
    // created contracts). Every nonce of the busiest sender finds its transaction, and its
    // history pages back to genesis holding each of them once, newest first.
    let a0 = work.accounts[0];
    let sent = client_nonce(&api, a0).await;
    let mut by_nonce = Vec::new();
    for nonce in 0..sent {
        let hash = api.call("ots_getTransactionBySenderAndNonce", json!([a0, nonce])).await;
        let tx = api.call("eth_getTransactionByHash", json!([hash])).await;
        assert_eq!((tx["from"].clone(), tx["nonce"].clone()), (json!(a0), json!(format!("{nonce:#x}"))));
        by_nonce.push(hash);
    }
    assert_eq!(api.call("ots_getTransactionBySenderAndNonce", json!([a0, sent])).await, Value::Null);
    let (mut block, mut history) = (0u64, Vec::new());
    loop {
        let page = api.call("ots_searchTransactionsBefore", json!([a0, block, 25])).await;
        let txs = page["txs"].as_array().expect("txs");
        history.extend(txs.iter().map(|t| t["hash"].clone()));
        if page["lastPage"] == json!(true) {
            break;
        }
        let oldest = txs.last().expect("a page that is not the last holds transactions");
        block =
            u64::from_str_radix(oldest["blockNumber"].as_str().expect("hex").trim_start_matches("0x"), 16)
                .expect("hex");
    }
    history.reverse();
    assert_eq!(history, by_nonce, "a0 only sends in this workload");
    for token in &work.tokens {
        assert_eq!(
            api.call("ots_getContractCreator", json!([token.address])).await,
            json!({"hash": token.tx, "creator": token.deployer}),
            "creator of {}",
            token.address
        );
    }
    // The transaction pages work from struct logs: a transfer moves no ether inside, its trace
    // is its one call, a success has no error and the planned revert has OpenZeppelin's
    // ERC20InsufficientBalance.
    let transfer = expected[&a3][0];
    assert_eq!(api.call("ots_getInternalOperations", json!([transfer])).await, json!([]));
    let trace = api.call("ots_traceTransaction", json!([transfer])).await;
    assert_eq!(trace.as_array().map(Vec::len), Some(1), "{trace}");
    assert_eq!(trace[0]["to"], json!(work.tokens[0].address));
    assert_eq!(api.call("ots_getTransactionError", json!([transfer])).await, json!("0x"));
    let reverted = work.sent.iter().find(|s| !s.should_succeed).expect("a planned revert").hash;
    let error = api.call("ots_getTransactionError", json!([reverted])).await;
    assert!(error.as_str().is_some_and(|e| e.starts_with("0xe450d38c")), "{error}");
    let _ = server.stop();

    // Pending transactions: Hardhat has no txpool_content and no subscription over HTTP, but
    // eth_pendingTransactions; with automine off a sent transaction is listed, and once mined
    // and indexed it is reported mined.
    let client = NodeClient::connect(&node.url, Duration::from_secs(30)).expect("node");
    let _: Value = client.raw("evm_setAutomine", json!([false])).await.expect("automine off");
    let config = PendingConfig { max: 100, poll: Duration::from_millis(100), ..Default::default() };
    let pool = PendingPool::start(client.clone(), db.clone(), config).await;
    assert_eq!(pool.status().source.as_deref(), Some("eth_pendingTransactions (polled)"));
    let mut notices = pool.subscribe();
    let (from, to) = (work.accounts[1], work.accounts[2]);
    let hash: alloy::primitives::B256 = client
        .raw("eth_sendTransaction", json!([{"from": from, "to": to, "value": "0x1"}]))
        .await
        .expect("send");
    let mut listed = Vec::new();
    for _ in 0..100 {
        listed = pool.of_address(&to, 10);
        if !listed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(listed.iter().map(|t| t.hash).collect::<Vec<_>>(), vec![hash]);
    let _: Value = client.raw("evm_mine", json!([])).await.expect("mine");
    let indexer =
        Indexer::open(db.clone(), client.clone(), vec![Box::new(Erc20Classifier)], SyncConfig::default())
            .await
            .expect("indexer again");
    indexer.sync_to(client.head().await.expect("head")).await.expect("index the new block");
    indexer.close().await.expect("close");
    let mined = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let n = notices.recv().await.expect("notices");
            if n.tx.hash == hash && matches!(n.kind, NoticeKind::Mined { .. }) {
                return n;
            }
        }
    })
    .await
    .expect("a mined notice");
    let receipt: Value = client.raw("eth_getTransactionReceipt", json!([hash])).await.expect("receipt");
    let NoticeKind::Mined { block, .. } = mined.kind else { unreachable!() };
    assert_eq!(json!(format!("{block:#x}")), receipt["blockNumber"]);
}

async fn client_nonce(api: &common::Client, who: alloy::primitives::Address) -> u64 {
    let n = api.call("eth_getTransactionCount", json!([who, "latest"])).await;
    u64::from_str_radix(n.as_str().expect("hex").trim_start_matches("0x"), 16).expect("hex")
}

/// Contracts made inside calls (factory CREATE and CREATE2, a token, clones, a Uniswap-style
/// pair, created-and-destroyed, creation undone by a revert) are seen on Hardhat's node through
/// struct-log frames exactly as on Anvil through its tracer; and without frames a late-found
/// clone still gets every class its code shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contracts_made_inside_calls_from_hardhat_equal_anvils() {
    let hardhat = Hardhat::start();
    let anvil = Anvil::start(&[]);
    let mut worlds = Vec::new();
    let mut deployed = Vec::new();
    for url in [&hardhat.url, &anvil.url] {
        let d = deploy_everything(url).await;
        let f = deploy_factories(url, d.asset, d.mkr).await;
        let mut who: Vec<Address> = d.accounts[..10].to_vec();
        who.extend([f.factory, f.pair_factory, d.factory]);
        worlds.push(contract_world(url, &who).await);
        deployed.push((d, f));
    }
    let (hardhat_world, anvil_world) = (&worlds[0], &worlds[1]);
    for part in ["AllContracts", "ERC20", "ERC721", "ERC1155", "ERC1167", "ERC4626", "contracts", "histories"]
    {
        assert_eq!(hardhat_world[part], anvil_world[part], "{part}: Hardhat (left) against Anvil (right)");
    }
    let all = hardhat_world["AllContracts"]["count"].as_u64().expect("count");
    assert!(all >= 20, "factory-made contracts are listed: {all}");
    assert_eq!(hardhat_world["ERC1167"]["count"], json!(3), "the three clones");
    let (d, f) = &deployed[0];
    let pair_history = &hardhat_world["histories"][format!("{:#x}", f.pair_factory)];
    assert_eq!(pair_history.as_array().map(Vec::len), Some(2), "deployed, then createPair: {pair_history}");
    common::contracts::late_clone_classes(&hardhat.url, d).await;
}

/// The State Diff tab on Hardhat's node, which has neither `trace_replayTransaction` nor the
/// prestate tracer: rebuilt from struct logs and the state around the block (here, as with
/// Hardhat's automine, each transaction is mined in a block of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_diff_on_hardhat_comes_from_struct_logs() {
    let node = Hardhat::start();
    let rpc = common::Client::new(&node.url);
    let sender: Address =
        serde_json::from_value(rpc.call("eth_accounts", json!([])).await[0].clone()).expect("account");
    let mut chain = workload::Chain::connect(&node.url);
    chain.per_block = usize::MAX;
    let deploy = chain.deploy_artifact(sender, "Counter").await;
    chain.mine().await;
    let counter: Address =
        serde_json::from_value(chain.receipt_of(deploy).await["contractAddress"].clone()).expect("counter");
    alloy::sol! { function increment() external; }
    let hash =
        chain.send_call(sender, counter, alloy::sol_types::SolCall::abi_encode(&incrementCall {})).await;
    chain.mine().await;
    let receipt = chain.receipt_of(hash).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let client = NodeClient::connect(&node.url, Duration::from_secs(30)).expect("node");
    let (api, server) = common::serve(&db, client).await;
    let answer = api.call("trace_replayTransaction", json!([hash, ["stateDiff"]])).await;
    let diff = &answer["stateDiff"];
    let (slot0, one) = (format!("0x{}", "0".repeat(64)), format!("0x{}1", "0".repeat(63)));
    assert_eq!(
        diff[format!("{counter:#x}")]["storage"][&slot0],
        json!({"*": {"from": slot0, "to": one}}),
        "{answer}"
    );
    let block = receipt["blockNumber"].as_str().expect("hex");
    let parent = format!("{:#x}", u64::from_str_radix(block.trim_start_matches("0x"), 16).expect("hex") - 1);
    let nonce = |at: &str| rpc.call("eth_getTransactionCount", json!([sender, at]));
    assert_eq!(
        diff[format!("{sender:#x}")]["nonce"],
        json!({"*": {"from": nonce(&parent).await, "to": nonce(block).await}}),
        "{answer}"
    );
    let _ = server.stop();
}
