//! End to end on a real node: Anvil runs real OpenZeppelin ERC20s, the indexer indexes the
//! chain into real MDBX, and a real JSON-RPC client checks every count and every page over HTTP
//! against what the workload sent.

use crate::common;

use std::time::Duration;

use alloy::primitives::{Address, B256, U256};
use common::{anvil::Anvil, workload, Client};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{AccessMode, Db},
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

fn hex_u64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex string").trim_start_matches("0x"), 16).expect("hex")
}

async fn check_page(
    client: &Client,
    work: &workload::Workload,
    address: Address,
    expected: &[B256],
    idx: usize,
    count: usize,
) {
    let page = client.call("ots2_getERC20TransferList", json!([address, idx, count])).await;
    let want: Vec<B256> = expected.iter().skip(idx).take(count).copied().collect();
    let results = page["results"].as_array().expect("results array");
    let got: Vec<B256> =
        results.iter().map(|r| r["hash"].as_str().expect("hash").parse().expect("B256")).collect();
    assert_eq!(got, want, "{address}: page idx={idx} count={count}");
    for r in results {
        assert_eq!(r["transaction"]["hash"], r["hash"]);
        assert_eq!(r["receipt"]["transactionHash"], r["hash"]);
        assert_eq!(r["receipt"]["transactionIndex"], r["transaction"]["transactionIndex"]);
        let block = r["receipt"]["blockNumber"].as_str().expect("block").to_owned();
        let summary = &page["blocksSummary"][&block];
        assert_eq!(summary["blockNumber"].as_str(), Some(block.as_str()), "summary of {block}");
        assert!(summary["timestamp"].as_u64().expect("numeric timestamp") >= 1_700_000_000);
        // Per-transfer detail: exactly the workload's transfers of this tx that involve `address`.
        let hash: B256 = serde_json::from_value(r["hash"].clone()).expect("hash");
        let sent = work.sent.iter().find(|s| s.hash == hash).expect("a sent transaction");
        let want: Vec<(Address, Address, Address)> = sent
            .transfers
            .iter()
            .copied()
            .filter(|&(_, from, to)| from == address || to == address)
            .collect();
        let got: Vec<(Address, Address, Address)> = r["transfers"]
            .as_array()
            .expect("transfers array")
            .iter()
            .map(|t| {
                assert!(t["value"].is_string() && t.get("tokenId").is_none(), "{t}");
                let a = |f: &str| serde_json::from_value::<Address>(t[f].clone()).expect("address");
                (a("token"), a("from"), a("to"))
            })
            .collect();
        assert_eq!(got, want, "transfers of {hash} for {address}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erc20_index_matches_what_was_sent() {
    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    // Small batches, so that address lists grow across several write transactions.
    let config = SyncConfig {
        batch_blocks: 3,
        concurrency: 4,
        poll_interval: Duration::from_millis(50),
        // Blocks of about 100 transfers: batches also end on the log limit.
        batch_max_logs: 150,
        ..Default::default()
    };
    let indexer = Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], config)
        .await
        .expect("indexer");
    let head = node.head().await.expect("head");
    indexer.sync_to(head).await.expect("sync");

    let (client, server) = common::serve(&db, node).await;

    assert_eq!(client.call("ots_getApiLevel", json!([])).await, json!(8));

    // Contract lists, in the spec's order: by block, then by address bytes.
    let contracts = work.contracts_in_index_order();
    assert_eq!(client.call("ots2_getAllContractsCount", json!([])).await, json!(contracts.len()));
    let all = client.call("ots2_getAllContractsList", json!([0, 500])).await;
    let listed: Vec<Address> = all["results"]
        .as_array()
        .expect("array")
        .iter()
        .map(|r| serde_json::from_value(r["address"].clone()).expect("address"))
        .collect();
    assert_eq!(listed, contracts.iter().map(|d| d.address).collect::<Vec<_>>());
    for (r, d) in all["results"].as_array().expect("array").iter().zip(&contracts) {
        assert_eq!(hex_u64(&r["blockNumber"]), d.block);
    }
    for (idx, contract) in contracts.iter().enumerate() {
        let one = client.call("ots2_getAllContractsList", json!([idx, 1])).await;
        assert_eq!(one["results"][0]["address"], json!(contract.address), "contract #{idx}");
    }

    assert_eq!(client.call("ots2_getERC20Count", json!([])).await, json!(2));
    let tokens = client.call("ots2_getERC20List", json!([0, 25])).await;
    let rows = tokens["results"].as_array().expect("array");
    assert_eq!(rows.len(), 2);
    for (row, (deployed, (name, symbol))) in
        rows.iter().zip(work.tokens.iter().zip([("Demo Token", "DEMO"), ("Second Token", "SCND")]))
    {
        assert_eq!(row["address"], json!(deployed.address));
        assert_eq!(hex_u64(&row["blockNumber"]), deployed.block);
        assert_eq!(
            (row["name"].as_str(), row["symbol"].as_str(), row["decimals"].as_u64()),
            (Some(name), Some(symbol), Some(18))
        );
        let key = format!("{:#x}", deployed.block);
        assert_eq!(tokens["blocksSummary"][&key]["blockNumber"], json!(key));
    }
    let second_only = client.call("ots2_getERC20List", json!([1, 25])).await;
    assert_eq!(second_only["results"][0]["address"], json!(work.tokens[1].address));
    assert_eq!(client.call("ots2_getERC20List", json!([2, 25])).await["results"], json!([]));

    for d in &work.tokens {
        assert_eq!(
            client.call("ots2_getAddressAttributes", json!([d.address])).await,
            json!({"erc20": true})
        );
    }
    for d in &work.others {
        assert_eq!(
            client.call("ots2_getAddressAttributes", json!([d.address])).await,
            json!({}),
            "{}",
            d.kind
        );
    }

    // Every account: count and every page, as the Otterscan UI pages (reverse, 25 at a time),
    // plus whole-list and edge pages.
    let expected = work.expected_transfer_txs();
    let holdings_expected = work.expected_holdings();
    assert!(holdings_expected[&work.accounts[0]].len() == 2, "account 0 moved both tokens");
    let counts: Vec<usize> = [2, 3, 4, 0].iter().map(|&i| expected[&work.accounts[i]].len()).collect();
    assert_eq!(&counts[..3], &[1, 256, 257]);
    assert!(counts[3] >= 600, "account 0 has {} transfers", counts[3]);
    let mut addresses: Vec<Address> = work.accounts.clone();
    addresses.push(Address::ZERO);
    addresses.extend(work.tokens.iter().chain(&work.others).map(|d| d.address));
    for address in addresses {
        let want = expected.get(&address).cloned().unwrap_or_default();
        let n = want.len();
        let count = client.call("ots2_getERC20TransferCount", json!([address])).await;
        assert_eq!(count, json!(n), "count of {address}");
        let mut page = 1;
        loop {
            let idx = n as i64 - 25 * page;
            let (idx, count) = if idx < 0 { (0, (idx + 25).max(0) as usize) } else { (idx as usize, 25) };
            check_page(&client, &work, address, &want, idx, count).await;
            if idx == 0 {
                break;
            }
            page += 1;
        }
        check_page(&client, &work, address, &want, 0, n.max(1)).await;
        check_page(&client, &work, address, &want, n, 10).await;
        if n > 0 {
            check_page(&client, &work, address, &want, n - 1, 5).await;
        }
        // Holdings: every token it ever moved, with its first transaction, by token.
        let holdings: Vec<Value> = holdings_expected
            .get(&address)
            .map(|h| h.iter().map(|(token, id)| json!({"address": token, "ethTx": id})).collect())
            .unwrap_or_default();
        assert_eq!(
            client.call("ots2_getERC20Holdings", json!([address])).await,
            json!(holdings),
            "{address}"
        );
        assert_eq!(client.call("ots2_getERC721Holdings", json!([address])).await, json!([]));
        // The same a page at a time, with the total.
        for (idx, count) in [(0, 1), (1, 1), (0, 1000), (holdings.len() as u64, 3)] {
            let page = client.call("ots2_getERC20HoldingsPage", json!([address, idx, count])).await;
            let want: Vec<Value> = holdings.iter().skip(idx as usize).take(count as usize).cloned().collect();
            assert_eq!(page, json!({"total": holdings.len(), "results": want}), "{address} {idx} {count}");
        }
        let (code, _) = client
            .try_call("ots2_getERC20HoldingsPage", json!([address, 0, 1001]))
            .await
            .expect_err("over the limit");
        assert_eq!(code, -32602);
    }

    // Balances from Transfer logs equal `balanceOf` at the head; holders rank by balance.
    let node_client = Client::new(&anvil.url);
    for token in &work.tokens {
        let mut holders: Vec<(U256, Address)> = Vec::new();
        for (holder, tokens) in &holdings_expected {
            if *holder == Address::ZERO || !tokens.iter().any(|(t, _)| *t == token.address) {
                continue;
            }
            let mut data = vec![0x70, 0xa0, 0x82, 0x31];
            data.extend_from_slice(&[0u8; 12]);
            data.extend_from_slice(holder.as_slice());
            let call = json!([{"to": token.address, "data": alloy::primitives::Bytes::from(data)}, "latest"]);
            let answer: alloy::primitives::Bytes =
                serde_json::from_value(node_client.call("eth_call", call).await).expect("balanceOf");
            let balance = U256::from_be_slice(&answer);
            if !balance.is_zero() {
                holders.push((balance, *holder));
            }
        }
        // Largest first, ties by address.
        holders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let want: Vec<Value> = holders.iter().map(|(b, h)| json!({"holder": h, "balance": b})).collect();
        assert!(want.len() > 8, "{} holders", want.len());
        let count = client.call("ots2_getTokenHolderCount", json!([token.address])).await;
        assert_eq!(count, json!(want.len()));
        let all = client.call("ots2_getTokenHolders", json!([token.address, 0, 1000])).await;
        assert_eq!(all, json!({"total": want.len(), "results": want}), "holders of {}", token.address);
        let page = client.call("ots2_getTokenHolders", json!([token.address, 3, 4])).await;
        assert_eq!(page["results"], json!(want[3..7]));
    }

    // Bad input: clear JSON-RPC errors.
    let a0 = work.accounts[0];
    let err =
        client.try_call("ots2_getERC20TransferList", json!([a0, 0, 1001])).await.expect_err("over the limit");
    assert_eq!(err.0, -32602);
    assert!(err.1.contains("maximum page size 1000"), "{err:?}");
    let err = client.try_call("ots2_getERC20List", json!([0, 501])).await.expect_err("over 500");
    assert_eq!(err, (-32000, "maximum allowed results: 500".to_owned()));
    let err =
        client.try_call("ots2_getERC20TransferCount", json!(["0x1234"])).await.expect_err("bad address");
    assert_eq!(err.0, -32602, "{err:?}");
    let err =
        client.try_call("ots2_getERC20TransferList", json!([a0, -1, 5])).await.expect_err("negative idx");
    assert_eq!(err.0, -32602, "{err:?}");
    let err = client.try_call("ots2_getERC20TransferList", json!([a0, "0x0", 5])).await.expect_err("hex idx");
    assert_eq!(err.0, -32602, "{err:?}");
    let err = client.try_call("ots2_noSuchMethod", json!([])).await.expect_err("unknown");
    assert_eq!(err.0, -32601, "{err:?}");

    server.stop().expect("stop");
    server.stopped().await;
    indexer.close().await.expect("close");
}
