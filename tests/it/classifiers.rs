//! Every built-in classifier on real OpenZeppelin contracts and on the real-world quirks, on
//! Anvil: each list, count, attribute set and implementation over HTTP equals what was
//! deployed, in the spec's order; the same after an unwind and a re-index; and a recorded copy
//! of the chain replays into the same database.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, U256},
    sol_types::SolCall,
};
use common::{
    anvil::Anvil,
    contracts::{deploy_everything, hex_u64, Deployed, Multi},
    Client,
};
use ots_indexer::{
    classify::capture::capture,
    db::{
        codec::{AttributeBit, BlockNumber},
        tables::OtsTransferProbes,
        AccessMode, Db,
    },
    index::{
        attributes::attributes,
        check::{check, dump},
        journal::unwind_to,
    },
    source::{fixture::Fixture, NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

/// `(block, address)` rows in the spec's order: by block, then by address bytes.
fn ordered(mut rows: Vec<(u64, Address)>) -> Vec<(u64, Address)> {
    rows.sort();
    rows
}

async fn listed(client: &Client, method: &'static str) -> (Vec<(u64, Address)>, Vec<Value>) {
    let page = client.call(method, json!([0, 500])).await;
    let results = page["results"].as_array().expect("results").clone();
    let rows: Vec<(u64, Address)> = results
        .iter()
        .map(|r| (hex_u64(&r["blockNumber"]), serde_json::from_value(r["address"].clone()).expect("address")))
        .collect();
    for (block, _) in &rows {
        assert!(page["blocksSummary"][format!("{block:#x}")].is_object(), "{method}: no summary of {block}");
    }
    (rows, results)
}

fn row(results: &[Value], address: Address) -> &Value {
    results.iter().find(|r| r["address"] == json!(address)).unwrap_or_else(|| panic!("{address} not listed"))
}

/// `late`: blocks 3 and 4 (the transfers and late classifications) are indexed.
/// ERC1155 balances per (holder, id) equal `balanceOf` at the head; holders are counted and
/// ranked by their units over all ids.
async fn check_erc1155_balances(client: &Client, node: &NodeClient, d: &Deployed) {
    let (a4, a9) = (d.accounts[4], d.accounts[9]);
    let on_chain = |holder: Address, id: u64| {
        let data = Multi::balanceOfCall { account: holder, id: U256::from(id) }.abi_encode();
        let request = json!({"to": d.multi, "data": alloy::primitives::Bytes::from(data)});
        async move {
            let answer: alloy::primitives::Bytes =
                node.raw("eth_call", (request, "latest")).await.expect("balanceOf");
            U256::from_be_slice(&answer)
        }
    };
    for (holder, held) in [(a4, vec![(2u64, 1u64), (7, 10)]), (a9, vec![(1, 3), (2, 2)])] {
        let listed = client.call("ots2_getERC1155Balances", json!([d.multi, holder])).await;
        let want: Vec<Value> = held
            .iter()
            .map(|&(id, b)| json!({"tokenId": format!("{id:#x}"), "balance": format!("{b:#x}")}))
            .collect();
        assert_eq!(listed, json!(want), "ERC1155 balances of {holder}");
        for (id, balance) in held {
            assert_eq!(on_chain(holder, id).await, U256::from(balance), "balanceOf({holder}, {id})");
        }
    }
    assert_eq!(client.call("ots2_getERC1155Balances", json!([d.multi, d.accounts[0]])).await, json!([]));
    assert_eq!(client.call("ots2_getTokenHolderCount", json!([d.multi])).await, json!(2));
    assert_eq!(
        client.call("ots2_getTokenHolders", json!([d.multi, 0, 10])).await,
        json!({"total": 2, "results": [{"holder": a4, "balance": "0xb"}, {"holder": a9, "balance": "0x5"}]})
    );
}

async fn check_lists(client: &Client, d: &Deployed, late: bool) {
    let [b1, b2, b3, b4] = d.blocks;
    let counts = |method: &'static str| client.call(method, json!([]));

    let all = ordered(
        [d.asset, d.mkr, d.usdt, d.nft, d.multi, d.implementation, d.factory, d.plain_nft, d.fake]
            .map(|a| (b1, a))
            .into_iter()
            .chain([d.vault, d.clone, d.clone_create2, d.clone_initialised].map(|a| (b2, a)))
            .collect(),
    );
    assert_eq!(listed(client, "ots2_getAllContractsList").await.0, all);
    assert_eq!(counts("ots2_getAllContractsCount").await, json!(all.len()));

    let mut erc20 = vec![(b1, d.asset), (b1, d.mkr), (b1, d.usdt), (b2, d.vault), (b2, d.clone_initialised)];
    if late {
        erc20.push((b4, d.clone));
    }
    let (rows, results) = listed(client, "ots2_getERC20List").await;
    assert_eq!(rows, ordered(erc20.clone()));
    assert_eq!(counts("ots2_getERC20Count").await, json!(erc20.len()));
    let mkr = row(&results, d.mkr);
    assert_eq!(
        (&mkr["name"], &mkr["symbol"], &mkr["decimals"]),
        (&json!("Maker"), &json!("MKR"), &json!(18))
    );
    let usdt = row(&results, d.usdt);
    assert_eq!(
        (&usdt["name"], &usdt["symbol"], &usdt["decimals"]),
        (&json!("Tether USD"), &json!("USDT"), &json!(6))
    );
    assert_eq!(row(&results, d.clone_initialised)["symbol"], json!("CLA"));
    if late {
        assert_eq!(row(&results, d.clone)["name"], json!("Late"));
    }

    let mut erc721 = vec![(b1, d.nft)];
    if late {
        erc721.push((b3, d.plain_nft));
    }
    let (rows, results) = listed(client, "ots2_getERC721List").await;
    assert_eq!(rows, erc721);
    assert_eq!(counts("ots2_getERC721Count").await, json!(erc721.len()));
    assert_eq!(
        (&row(&results, d.nft)["name"], &row(&results, d.nft)["symbol"]),
        (&json!("Demo NFT"), &json!("DNFT"))
    );
    if late {
        assert_eq!(row(&results, d.plain_nft)["symbol"], json!("PNFT"));
    }

    let (rows, results) = listed(client, "ots2_getERC1155List").await;
    assert_eq!(rows, vec![(b1, d.multi)]);
    assert_eq!(row(&results, d.multi)["name"], json!("<ERROR>"), "OpenZeppelin ERC1155 has no name()");
    assert_eq!(counts("ots2_getERC1155Count").await, json!(1));

    let proxies = ordered(vec![(b2, d.clone), (b2, d.clone_create2), (b2, d.clone_initialised)]);
    let (rows, results) = listed(client, "ots2_getERC1167List").await;
    assert_eq!(rows, proxies);
    assert!(results.iter().all(|r| r["implementation"] == json!(d.implementation)));
    assert_eq!(counts("ots2_getERC1167Count").await, json!(3));

    let (rows, results) = listed(client, "ots2_getERC4626List").await;
    assert_eq!(rows, vec![(b2, d.vault)]);
    let vault = row(&results, d.vault);
    assert_eq!(vault["asset"], json!(d.asset));
    assert_eq!(vault["totalAssets"], json!(0));
    assert_eq!((&vault["name"], &vault["decimals"]), (&json!("Demo Vault"), &json!(18)));
    assert_eq!(counts("ots2_getERC4626Count").await, json!(1));

    let attrs = |a: Address| client.call("ots2_getAddressAttributes", json!([a]));
    assert_eq!(attrs(d.nft).await, json!({"erc165": true, "erc721": true}));
    assert_eq!(attrs(d.multi).await, json!({"erc165": true, "erc1155": true}));
    assert_eq!(attrs(d.vault).await, json!({"erc20": true}));
    assert_eq!(attrs(d.clone_create2).await, json!({"erc1167": true}));
    assert_eq!(attrs(d.clone_initialised).await, json!({"erc20": true, "erc1167": true}));
    assert_eq!(attrs(d.fake).await, json!({}));
    assert_eq!(attrs(d.factory).await, json!({}));
    let plain = if late { json!({"erc721": true}) } else { json!({}) };
    assert_eq!(attrs(d.plain_nft).await, plain);
    let clone = if late { json!({"erc20": true, "erc1167": true}) } else { json!({"erc1167": true}) };
    assert_eq!(attrs(d.clone).await, clone);

    let implementation = |a: Address| client.call("ots2_getERC1167Impl", json!([a]));
    assert_eq!(implementation(d.clone).await, json!(d.implementation));
    for not_a_proxy in [d.asset, d.accounts[3]] {
        let (code, message) =
            client.try_call("ots2_getERC1167Impl", json!([not_a_proxy])).await.expect_err("not a proxy");
        assert_eq!(code, -32000);
        assert!(message.contains("not an ERC1167 minimal proxy"), "{message}");
    }

    // Transfers of quirky tokens are indexed; fake Transfer logs are not.
    let transfers = |a: Address| client.call("ots2_getERC20TransferCount", json!([a]));
    assert_eq!(transfers(d.accounts[1]).await, json!(u64::from(late)), "MKR-style token");
    assert_eq!(transfers(d.accounts[2]).await, json!(u64::from(late)), "USDT-style token");
    assert_eq!(transfers(d.accounts[5]).await, json!(0), "not a token");
    assert_eq!(transfers(d.accounts[6]).await, json!(0), "not a token");
    assert_eq!(transfers(d.accounts[8]).await, json!(u64::from(late)), "clone initialised later");

    // ERC721 transfers (mints here) and holdings, from a declared and an undeclared ERC721.
    let nft_transfers = |a: Address| client.call("ots2_getERC721TransferCount", json!([a]));
    assert_eq!(nft_transfers(d.accounts[3]).await, json!(u64::from(late)), "DemoNft mint");
    assert_eq!(nft_transfers(d.accounts[7]).await, json!(u64::from(late)), "PlainNft mint");
    assert_eq!(nft_transfers(d.accounts[4]).await, json!(0), "ERC1155 has no Transfer logs");
    let list = client.call("ots2_getERC721TransferList", json!([d.accounts[7], 0, 10])).await;
    assert_eq!(list["results"].as_array().map(Vec::len), Some(usize::from(late)));
    if late {
        let tx = &list["results"][0];
        assert_eq!(tx["receipt"]["to"], json!(d.plain_nft));
        assert_eq!(hex_u64(&tx["receipt"]["blockNumber"]), b3);
        assert_eq!(
            tx["transfers"],
            json!([{"token": d.plain_nft, "from": Address::ZERO, "to": d.accounts[7], "tokenId": "0x2a"}]),
            "per-transfer detail of an ERC721 mint"
        );
        assert_ne!(tx["transaction"]["transactionIndex"], json!("0x0"), "the real index, not ots2's 0");
    }
    let holdings = client.call("ots2_getERC721Holdings", json!([d.accounts[3]])).await;
    let held: Vec<Value> = holdings.as_array().expect("array").clone();
    assert_eq!(held.len(), usize::from(late));
    if late {
        assert_eq!(held[0]["address"], json!(d.nft));
        assert_eq!(held[0]["ethTx"].as_u64().map(|id| id >> 20), Some(b3), "TxId of the mint");
    }
    // ERC1155: TransferSingle (mint, a move) and TransferBatch; the operator is not indexed.
    let multi_transfers = |a: Address| client.call("ots2_getERC1155TransferCount", json!([a]));
    assert_eq!(multi_transfers(d.accounts[4]).await, json!(2 * u64::from(late)), "mint and move");
    assert_eq!(multi_transfers(d.accounts[9]).await, json!(2 * u64::from(late)), "batch mint and move");
    assert_eq!(multi_transfers(Address::ZERO).await, json!(2 * u64::from(late)), "two mints");
    assert_eq!(multi_transfers(d.accounts[0]).await, json!(0), "the operator is not indexed");
    let list = client.call("ots2_getERC1155TransferList", json!([d.accounts[9], 0, 10])).await;
    assert_eq!(list["results"].as_array().map(Vec::len), Some(2 * usize::from(late)));
    if late {
        let (a0, a4, a9) = (d.accounts[0], d.accounts[4], d.accounts[9]);
        let one = |operator, from, to, id: &str, value: &str| json!({"token": d.multi, "operator": operator, "from": from, "to": to, "tokenId": id, "value": value});
        assert_eq!(
            list["results"][0]["transfers"],
            json!([one(a0, Address::ZERO, a9, "0x1", "0x3"), one(a0, Address::ZERO, a9, "0x2", "0x3")]),
            "a TransferBatch mint, one entry per id"
        );
        assert_eq!(
            list["results"][1]["transfers"],
            json!([one(a0, a9, a4, "0x2", "0x1")]),
            "a TransferSingle move"
        );
    }
    let held = client.call("ots2_getERC1155Holdings", json!([d.accounts[9]])).await;
    assert_eq!(held.as_array().map(Vec::len), Some(usize::from(late)));
    if late {
        assert_eq!(held[0]["address"], json!(d.multi));
    }
    // Owners and holders of ERC721 ids.
    let owner = |t: Address, id: u64| client.call("ots2_getERC721Owner", json!([t, format!("{id:#x}")]));
    let (nft_owner, plain_owner) =
        if late { (json!(d.accounts[3]), json!(d.accounts[7])) } else { (json!(null), json!(null)) };
    assert_eq!(owner(d.nft, 1).await, nft_owner);
    assert_eq!(owner(d.plain_nft, 42).await, plain_owner);
    assert_eq!(owner(d.nft, 2).await, json!(null), "never minted");
    assert_eq!(client.call("ots2_getTokenHolderCount", json!([d.nft])).await, json!(u64::from(late)));
    let mkr_holders = client.call("ots2_getERC20Holdings", json!([d.accounts[1]])).await;
    let expected =
        if late { json!([{"address": d.mkr, "ethTx": mkr_holders[0]["ethTx"]}]) } else { json!([]) };
    assert_eq!(mkr_holders, expected);
}

fn config() -> SyncConfig {
    SyncConfig {
        batch_blocks: 2,
        concurrency: 4,
        poll_interval: Duration::from_millis(50),
        ..Default::default()
    }
}

fn all_classifiers() -> Vec<Box<dyn ots_classifiers::Classifier>> {
    ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_builtin_classifier_on_real_contracts() {
    let mut anvil = Anvil::start(&[]);
    let deployed = deploy_everything(&anvil.url).await;
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("traces");
    let head = node.head().await.expect("head");
    assert_eq!(head, deployed.blocks[3]);

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(&dir.path().join("node"), AccessMode::ReadWrite).expect("open db");
    let indexer =
        Indexer::open(db.clone(), node.clone(), all_classifiers(), config()).await.expect("indexer");
    indexer.sync_to(head).await.expect("sync");
    check(&db.begin_read().expect("read")).expect("a clean index passes check");
    {
        // The metadata bit (not exposed by getAddressAttributes, as in ots2).
        let txn = db.begin_read().expect("read");
        assert!(attributes(&txn, &deployed.nft).expect("attrs").has(AttributeBit::Erc721Metadata));
        assert!(!attributes(&txn, &deployed.plain_nft).expect("attrs").has(AttributeBit::Erc721Metadata));
        assert!(attributes(&txn, &deployed.vault).expect("attrs").has(AttributeBit::Erc4626));
    }
    let clean = dump(&db).expect("dump");

    let (client, server) = common::serve(&db, node.clone()).await;
    check_lists(&client, &deployed, true).await;
    check_erc1155_balances(&client, &node, &deployed).await;

    // Unwind to block 2: the late classifications go, with their metadata and attributes.
    let txn = db.begin_write().expect("write");
    unwind_to(&txn, deployed.blocks[1]).expect("unwind");
    txn.commit().expect("commit");
    check_lists(&client, &deployed, false).await;
    indexer.sync_to(head).await.expect("re-index");
    check_lists(&client, &deployed, true).await;
    assert!(dump(&db).expect("dump") == clean, "re-index differs from a clean index");

    // Recorded and replayed with no node: the same database.
    let file = dir.path().join("chain.rec.zst");
    capture(&node, &all_classifiers(), (0, head), &file).await.expect("capture");
    anvil.stop();
    let replayed = Db::open(&dir.path().join("file"), AccessMode::ReadWrite).expect("open");
    let fixture = Fixture::load(&file).expect("load");
    let indexer = Indexer::open(replayed.clone(), fixture, all_classifiers(), config()).await.expect("open");
    indexer.sync_to(head).await.expect("replay");
    assert!(dump(&replayed).expect("dump") == clean, "replay differs");
    server.stop().ok();

    // `check` notices a failed re-probe recorded for a token.
    let txn = db.begin_write().expect("write");
    txn.put::<OtsTransferProbes>(&deployed.mkr, &BlockNumber(3)).expect("tamper");
    txn.commit().expect("commit");
    let err = check(&db.begin_read().expect("read")).expect_err("tampered").to_string();
    assert!(err.contains("OtsTransferProbes") && err.contains("token"), "{err}");
}

/// Without call frames (a node with no tracer) a clone made inside a factory is found only
/// through its first Transfer log, blocks after its creation: it then gets every class its code
/// shows, not only the token's; and a clone never indexed still answers its implementation from
/// its code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_found_late_without_frames_gets_every_class() {
    let anvil = Anvil::start(&[]);
    let d = deploy_everything(&anvil.url).await;
    common::contracts::late_clone_classes(&anvil.url, &d).await;
}
