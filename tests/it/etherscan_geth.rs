//! Etherscan's list actions on geth (`geth --dev`, one block a transaction, indexed with its
//! own `callTracer`): the standard workload, then an ERC721, an ERC1155 and a contract that
//! pays out by CALL, CREATE, CREATE2 and SELFDESTRUCT. Every list's rows are computed here from
//! geth's blocks, receipts, logs and its `flatCallTracer` (another tracer than the server's) and
//! compared row for row across page sizes and both sorts; block times and the blocks the dev
//! account was paid in likewise.

use crate::common;
use crate::etherscan_node::{
    compared, gas_tracker_matches_the_fee_history, get, internal_rows, lower, number, shown, wei,
};

use alloy::{
    primitives::{Address, Bytes, U256},
    sol,
    sol_types::SolCall,
};
use common::{
    geth::Geth,
    workload::{self, Chain, Faucet},
    world, Client,
};
use serde_json::{json, Value};

sol! {
    interface Calls {
        function all(address to) external payable;
        function make() external returns (address made);
        function mint(address to, uint256 id) external;
        function transferFrom(address from, address to, uint256 id) external;
        function mint(address to, uint256 id, uint256 amount) external;
        function mintBatch(address to, uint256[] ids, uint256[] amounts) external;
        function move(address from, address to, uint256 id, uint256 amount) external;
    }
}

const CHAIN_ID: u64 = 1337;
const TRANSFER: &str = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
const TRANSFER_SINGLE: &str = "0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62";
const TRANSFER_BATCH: &str = "0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb";

/// `rows` (a list's rows, oldest first) read back from the server page by page, in both sorts,
/// for each page size, compared on `fields`.
async fn every_page(http: &reqwest::Client, base: &str, query: &str, want: &[Value], fields: &[&str]) {
    assert!(!want.is_empty(), "{query}: no rows to compare");
    for sort in ["asc", "desc"] {
        let ordered: Vec<Value> =
            if sort == "asc" { want.to_vec() } else { want.iter().rev().cloned().collect() };
        for offset in [1, 3, 50, want.len()] {
            // Past 20 pages a page size is sampled, not walked whole: the walk is what costs.
            let pages = want.len().div_ceil(offset);
            for page in (1..=pages).filter(|&p| p <= 20 || p == pages || p % 17 == 0) {
                let asked = format!("{query}&page={page}&offset={offset}&sort={sort}");
                let start = (page - 1) * offset;
                let rows = &ordered[start..(start + offset).min(ordered.len())];
                assert_eq!(shown(&get(http, base, &asked).await["result"], fields), rows, "{asked}");
            }
        }
    }
}

/// A 32-byte topic or word as the address in its last 20 bytes, lower-case.
fn address_word(word: &str) -> String {
    format!("0x{}", &word[word.len() - 40..])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_actions_on_geth_match_its_blocks_receipts_and_flat_traces() {
    let geth = Geth::start();
    let theirs = Client::new(&geth.url);
    let dev: Address =
        serde_json::from_value(theirs.call("eth_accounts", json!([])).await[0].clone()).expect("dev");
    let work = workload::run_with_local_keys(&geth.url, CHAIN_ID, true, Faucet::Unlocked(dev)).await;
    let a = work.accounts.clone();

    // What the standard workload lacks: NFTs and value moved inside calls.
    let mut chain = Chain::with_local_keys(&geth.url, CHAIN_ID, workload::workload_keys(), true);
    let address_of = |receipt: Value| -> Address {
        serde_json::from_value(receipt["contractAddress"].clone()).expect("contract address")
    };
    let deploys = [
        chain.deploy_artifact(a[0], "DemoNft").await,
        chain.deploy_artifact(a[0], "DemoMulti").await,
        chain.deploy_artifact(a[0], "InternalOps").await,
        chain.deploy_artifact(a[0], "Factory").await,
    ];
    chain.mine().await;
    let mut made = Vec::new();
    for hash in deploys {
        made.push(address_of(chain.receipt_of(hash).await));
    }
    let [nft, multi, ops, factory] = made[..] else { panic!("four contracts") };
    for id in 1..=3u64 {
        chain.send_call(a[0], nft, Calls::mint_0Call { to: a[2], id: U256::from(id) }.abi_encode()).await;
    }
    chain
        .send_call(
            a[2],
            nft,
            Calls::transferFromCall { from: a[2], to: a[3], id: U256::from(2) }.abi_encode(),
        )
        .await;
    chain
        .send_call(
            a[0],
            multi,
            Calls::mint_1Call { to: a[2], id: U256::from(7), amount: U256::from(5) }.abi_encode(),
        )
        .await;
    let batch = Calls::mintBatchCall {
        to: a[3],
        ids: vec![U256::from(1), U256::from(2)],
        amounts: vec![U256::from(10), U256::from(20)],
    };
    chain.send_call(a[0], multi, batch.abi_encode()).await;
    let moved = Calls::moveCall { from: a[3], to: a[4], id: U256::from(2), amount: U256::from(5) };
    chain.send_call(a[0], multi, moved.abi_encode()).await;
    chain.send_call(a[0], factory, Calls::makeCall {}.abi_encode()).await;
    let all = Bytes::from(Calls::allCall { to: a[1] }.abi_encode());
    chain.send_with_value(a[0], Some(ops), U256::from(1024), all, Vec::new(), true).await;
    chain.mine().await;

    let (_dir, db, client) = world::index_everything(&geth.url).await;
    let (api, server) = common::serve(&db, client).await;
    let (http, base) = (reqwest::Client::new(), api.url.clone());

    // Every block, receipt, log and flat trace of the chain, from geth.
    let head = number(&theirs.call("eth_blockNumber", json!([])).await);
    let (mut headers, mut txs, mut logs, mut internal) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for n in 0..=head {
        let block = theirs.call("eth_getBlockByNumber", json!([format!("{n:#x}"), true])).await;
        let receipts = theirs.call("eth_getBlockReceipts", json!([format!("{n:#x}")])).await;
        let time = number(&block["timestamp"]);
        for (t, r) in block["transactions"]
            .as_array()
            .expect("transactions")
            .iter()
            .zip(receipts.as_array().expect("receipts"))
        {
            txs.push((t.clone(), r.clone(), time));
            logs.extend(r["logs"].as_array().expect("logs").iter().map(|l| (l.clone(), time)));
            let traces =
                theirs.call("debug_traceTransaction", json!([t["hash"], {"tracer": "flatCallTracer"}])).await;
            internal.extend(internal_rows(traces.as_array().expect("flat traces"), &t["hash"], n, time));
        }
        headers.push(block);
    }
    let times: Vec<u64> = headers.iter().map(|h| number(&h["timestamp"])).collect();

    // txlist of the busiest senders and recipients, a token and a contract.
    let tx_fields = [
        "blockNumber",
        "timeStamp",
        "hash",
        "nonce",
        "from",
        "to",
        "value",
        "contractAddress",
        "isError",
        "txreceipt_status",
        "gasUsed",
        "input",
    ];
    for who in [a[0], a[1], a[5], work.tokens[0].address, ops] {
        let me = format!("{who:#x}");
        let want: Vec<Value> = txs
            .iter()
            .filter(|(t, r, _)| [lower(&t["from"]), lower(&t["to"]), lower(&r["contractAddress"])].contains(&me))
            .map(|(t, r, time)| {
                let ok = r["status"] == "0x1";
                json!({
                    "blockNumber": number(&t["blockNumber"]).to_string(), "timeStamp": time.to_string(),
                    "hash": t["hash"], "nonce": number(&t["nonce"]).to_string(), "from": lower(&t["from"]),
                    "to": lower(&t["to"]), "value": wei(&t["value"]).to_string(),
                    "contractAddress": lower(&r["contractAddress"]), "isError": if ok { "0" } else { "1" },
                    "txreceipt_status": if ok { "1" } else { "0" }, "gasUsed": number(&r["gasUsed"]).to_string(),
                    "input": t["input"],
                })
            })
            .collect();
        every_page(&http, &base, &format!("module=account&action=txlist&address={who}"), &want, &tx_fields)
            .await;
    }

    // The token lists, one row per movement (a TransferBatch a row per id), by holder and token.
    let (mut fungible, mut nfts, mut multis) = (Vec::new(), Vec::new(), Vec::new());
    for (l, time) in &logs {
        let topics: Vec<&str> =
            l["topics"].as_array().expect("topics").iter().map(|t| t.as_str().expect("topic")).collect();
        let data = l["data"].as_str().expect("data").trim_start_matches("0x");
        let word = |i: usize| U256::from_str_radix(&data[64 * i..64 * (i + 1)], 16).expect("word");
        let row = |from: &str, to: &str| {
            json!({
                "blockNumber": number(&l["blockNumber"]).to_string(), "timeStamp": time.to_string(),
                "hash": l["transactionHash"], "from": address_word(from), "to": address_word(to),
                "contractAddress": lower(&l["address"]),
            })
        };
        let token = l["address"].as_str().expect("address").parse::<Address>().expect("address");
        match topics.first().copied() {
            Some(TRANSFER) if topics.len() == 3 && work.tokens.iter().any(|t| t.address == token) => {
                let mut r = row(topics[1], topics[2]);
                r["value"] = json!(word(0).to_string());
                fungible.push(r);
            }
            Some(TRANSFER) if topics.len() == 4 && token == nft => {
                let mut r = row(topics[1], topics[2]);
                r["tokenID"] = json!(U256::from_str_radix(topics[3].trim_start_matches("0x"), 16)
                    .expect("id")
                    .to_string());
                nfts.push(r);
            }
            Some(TRANSFER_SINGLE) if token == multi => {
                let mut r = row(topics[2], topics[3]);
                r["tokenID"] = json!(word(0).to_string());
                r["tokenValue"] = json!(word(1).to_string());
                multis.push(r);
            }
            Some(TRANSFER_BATCH) if token == multi => {
                // (ids offset, values offset), then each array's length and items.
                let ids_at = (word(0) / U256::from(32)).to::<usize>();
                let values_at = (word(1) / U256::from(32)).to::<usize>();
                for i in 0..word(ids_at).to::<usize>() {
                    let mut r = row(topics[2], topics[3]);
                    r["tokenID"] = json!(word(ids_at + 1 + i).to_string());
                    r["tokenValue"] = json!(word(values_at + 1 + i).to_string());
                    multis.push(r);
                }
            }
            _ => {}
        }
    }
    let party = |rows: &[Value], who: Address| -> Vec<Value> {
        let who = json!(format!("{who:#x}"));
        rows.iter().filter(|r| r["from"] == who || r["to"] == who).cloned().collect()
    };
    let of_token = |rows: &[Value], token: Address| -> Vec<Value> {
        let token = json!(format!("{token:#x}"));
        rows.iter().filter(|r| r["contractAddress"] == token).cloned().collect()
    };
    let common_fields = ["blockNumber", "timeStamp", "hash", "from", "to", "contractAddress"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        common_fields.iter().chain(extra).copied().collect()
    };
    let demo = work.tokens[0].address;
    for (query, want) in [
        (format!("address={}", a[0]), party(&fungible, a[0])),
        (format!("address={}", a[7]), party(&fungible, a[7])),
        (format!("contractaddress={}", work.tokens[1].address), of_token(&fungible, work.tokens[1].address)),
        (format!("address={}&contractaddress={demo}", a[5]), of_token(&party(&fungible, a[5]), demo)),
    ] {
        every_page(&http, &base, &format!("module=account&action=tokentx&{query}"), &want, &with(&["value"]))
            .await;
    }
    for (query, want) in [
        (format!("address={}", a[2]), party(&nfts, a[2])),
        (format!("contractaddress={nft}"), nfts.clone()),
        (format!("address={}&contractaddress={nft}", a[3]), party(&nfts, a[3])),
    ] {
        every_page(
            &http,
            &base,
            &format!("module=account&action=tokennfttx&{query}"),
            &want,
            &with(&["tokenID"]),
        )
        .await;
    }
    assert_eq!(multis.len(), 4, "a mint, a batch of two, a move");
    for (query, want) in [
        (format!("address={}", a[3]), party(&multis, a[3])),
        (format!("contractaddress={multi}"), multis.clone()),
    ] {
        let fields = with(&["tokenID", "tokenValue"]);
        every_page(&http, &base, &format!("module=account&action=token1155tx&{query}"), &want, &fields).await;
    }

    // txlistinternal: by a party, and over the chain by block range.
    assert!(
        ["call", "create", "create2", "suicide"].iter().all(|k| internal.iter().any(|r| r["type"] == *k)),
        "{internal:?}"
    );
    let internal_fields = [
        "blockNumber",
        "timeStamp",
        "hash",
        "from",
        "to",
        "value",
        "contractAddress",
        "type",
        "traceId",
        "isError",
    ];
    let whole = format!("module=account&action=txlistinternal&startblock=0&endblock={head}");
    let kept = |rows: &Value| Value::Array(compared(rows, true));
    every_page(&http, &base, &whole, &internal, &internal_fields).await;
    for who in [a[1], ops, factory] {
        let me = json!(format!("{who:#x}"));
        let want: Vec<Value> = internal
            .iter()
            .filter(|r| r["from"] == me || r["to"] == me || r["contractAddress"] == me)
            .cloned()
            .collect();
        let query = format!("module=account&action=txlistinternal&address={who}");
        every_page(&http, &base, &query, &want, &internal_fields).await;
        let all_rows = get(&http, &base, &format!("{query}&offset={}", want.len())).await;
        assert_eq!(
            kept(&all_rows["result"]),
            Value::Array(want.clone()),
            "{query}: every field but gas and input"
        );
    }

    // getblocknobytime around every block.
    for t in times.iter().flat_map(|&t| [t.saturating_sub(1), t, t + 1]) {
        let before = (0..=head).rfind(|&n| times[n as usize] <= t);
        let after = (0..=head).find(|&n| times[n as usize] >= t);
        for (closest, want) in [("before", before), ("after", after)] {
            let got = get(
                &http,
                &base,
                &format!("module=block&action=getblocknobytime&timestamp={t}&closest={closest}"),
            )
            .await;
            let want = want.map_or_else(|| json!("Error! No closest block found"), |n| json!(n.to_string()));
            assert_eq!(got["result"], want, "{closest} {t}");
        }
    }

    // gasoracle and gasestimate from geth's fee history.
    gas_tracker_matches_the_fee_history(&http, &base, &theirs, head, &|n| times[n as usize]).await;

    // getminedblocks: the dev account is paid every block's tips, newest first.
    let base_fee = |h: &Value| h.get("baseFeePerGas").map(wei).unwrap_or_default();
    let mined: Vec<Value> = (0..=head)
        .rev()
        .filter(|&n| lower(&headers[n as usize]["miner"]) == format!("{dev:#x}"))
        .map(|n| {
            let h = &headers[n as usize];
            let paid: U256 = txs
                .iter()
                .filter(|(t, _, _)| number(&t["blockNumber"]) == n)
                .map(|(_, r, _)| wei(&r["gasUsed"]) * (wei(&r["effectiveGasPrice"]) - base_fee(h)))
                .sum();
            json!({"blockNumber": n.to_string(), "timeStamp": times[n as usize].to_string(), "blockReward": paid.to_string()})
        })
        .collect();
    assert!(mined.len() > 100, "geth's dev account seals every block");
    let query = format!("module=account&action=getminedblocks&address={dev}");
    let got = get(&http, &base, &format!("{query}&offset={}", mined.len())).await;
    assert_eq!(got["result"], json!(mined), "{query}");

    server.stop().expect("stop");
    server.stopped().await;
}
