//! Etherscan's actions that read the node beside the index, end to end on Anvil: internal
//! transactions (by hash and by block range, both sorts, every page size), a failed
//! transaction's status, contract creations (by a sender and by a factory), block rewards and
//! the countdown, the blocks a fee recipient was paid in, logs with topic operators, a token's
//! info and a holder's token balances. Every expected row is computed here from other node
//! answers than the server uses: Parity-style `trace_transaction` for the frames (the server
//! reads `callTracer` trees), receipts and headers for fees and times, `eth_getLogs` unfiltered
//! for the topic operators.

use crate::common;

use std::time::Duration;

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    sol,
    sol_types::SolCall,
};
use common::{anvil::Anvil, workload::Chain, Client};
use ots_indexer::{
    db::{AccessMode, Db},
    index::families::address_index::{page, IdList},
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

sol! {
    interface Ops {
        function all(address to) external payable;
        function fail() external;
        function make() external returns (address made);
        function makeInFailingCall() external;
        function mint(address to, uint256 id) external;
        function transferFrom(address from, address to, uint256 id) external;
        function ownerOf(uint256 id) external view returns (address);
    }
}

pub(crate) async fn get(http: &reqwest::Client, base: &str, query: &str) -> Value {
    let answer = http.get(format!("{base}/api?{query}")).send().await.expect("GET");
    assert_eq!(answer.status(), 200, "{query}");
    let text = answer.text().await.expect("body");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{query}: {e}: {text}"))
}

pub(crate) fn ok(result: &Value) -> Value {
    json!({"status": "1", "message": "OK", "result": result})
}

pub(crate) fn no_rows(message: &str) -> Value {
    json!({"status": "0", "message": message, "result": []})
}

pub(crate) fn refused(reason: &str) -> Value {
    json!({"status": "0", "message": "NOTOK", "result": reason})
}

pub(crate) fn number(v: &Value) -> u64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a hex string: {v}"));
    u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("hex")
}

pub(crate) fn wei(v: &Value) -> U256 {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// The gas tracker's answers against the node's fee history of its newest blocks (the node's
/// head is `head`), read here on its own.
pub(crate) async fn gas_tracker_matches_the_fee_history(
    http: &reqwest::Client,
    base: &str,
    theirs: &Client,
    head: u64,
    timestamp: &impl Fn(u64) -> u64,
) {
    let history = theirs.call("eth_feeHistory", json!(["0x5", "latest", [25.0, 50.0, 75.0]])).await;
    let next_base = wei(history["baseFeePerGas"].as_array().expect("base fees").last().expect("next"));
    let rewards = history["reward"].as_array().expect("rewards");
    let median = |p: usize| {
        let mut fees: Vec<U256> = rewards.iter().map(|r| wei(&r[p])).collect();
        fees.sort();
        fees[fees.len() / 2]
    };
    let ratios: Vec<String> = history["gasUsedRatio"]
        .as_array()
        .expect("ratios")
        .iter()
        .map(|r| r.as_f64().expect("ratio").to_string())
        .collect();
    assert_eq!(
        get(http, base, "module=gastracker&action=gasoracle").await,
        ok(&json!({
            "LastBlock": head.to_string(),
            "SafeGasPrice": in_gwei(next_base + median(0)),
            "ProposeGasPrice": in_gwei(next_base + median(1)),
            "FastGasPrice": in_gwei(next_base + median(2)),
            "suggestBaseFee": in_gwei(next_base),
            "gasUsedRatio": ratios.join(","),
        }))
    );
    // gasestimate: the mean block time over the share of the newest 20 blocks (or all, if
    // fewer) whose base fee and cheapest tenth of tips the price covers.
    let history = theirs.call("eth_feeHistory", json!(["0x14", "latest", [10.0]])).await;
    let oldest = number(&history["oldestBlock"]);
    let blocks = history["gasUsedRatio"].as_array().expect("ratios").len();
    let floors: Vec<U256> =
        (0..blocks).map(|b| wei(&history["baseFeePerGas"][b]) + wei(&history["reward"][b][0])).collect();
    let block_time = (timestamp(head) - timestamp(oldest)) as f64 / (head - oldest) as f64;
    for price in
        [U256::from(1_000_000_000_000u64), floors[blocks / 2], floors.iter().min().copied().expect("min")]
    {
        let accepting = floors.iter().filter(|&&f| f <= price).count();
        let seconds = format!("{:.0}", block_time * blocks as f64 / accepting as f64);
        assert_eq!(
            get(http, base, &format!("module=gastracker&action=gasestimate&gasprice={price}")).await,
            ok(&json!(seconds)),
            "{price} wei"
        );
    }
    if let Some(below) = floors.iter().min().and_then(|m| m.checked_sub(U256::from(1))) {
        assert_eq!(
            get(http, base, &format!("module=gastracker&action=gasestimate&gasprice={below}")).await,
            refused(&format!(
                "Error! No block of the newest {blocks} would have included a gas price of {below} wei"
            ))
        );
    }
    assert_eq!(
        get(http, base, "module=gastracker&action=gasestimate&gasprice=cheap").await,
        refused("Error! Missing Or invalid gasprice")
    );
    assert_eq!(
        get(http, base, "module=gastracker&action=gasprices").await,
        refused("Error! Missing Or invalid Action name")
    );
}

/// `wei` in gwei as Etherscan's gas tracker writes it: up to 9 decimals, no trailing zeros.
fn in_gwei(wei: U256) -> String {
    let (whole, fraction) = wei.div_rem(U256::from(1_000_000_000u64));
    if fraction.is_zero() {
        return whole.to_string();
    }
    format!("{whole}.{}", format!("{:09}", fraction.to::<u64>()).trim_end_matches('0'))
}

pub(crate) fn lower(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_ascii_lowercase()
}

/// `rows` (an answer's `result`) with only `fields` of each row.
pub(crate) fn shown(rows: &Value, fields: &[&str]) -> Vec<Value> {
    rows.as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| Value::Object(fields.iter().map(|&f| (f.to_owned(), r[f].clone())).collect()))
                .collect()
        })
        .unwrap_or_default()
}

/// The chain of the node at `url` indexed to its head with its call tracer, by every built-in
/// classifier: the node, the datadir (kept while the database is used), the database, the head.
async fn indexed_with_traces(url: &str, config: SyncConfig) -> (NodeClient, tempfile::TempDir, Db, u64) {
    let node = NodeClient::connect(url, Duration::from_secs(30))
        .expect("node")
        .with_traces(TraceChoice::Auto)
        .await
        .expect("tracer");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let classifiers =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("indexer");
    let head = node.head().await.expect("head");
    indexer.sync_to(head).await.expect("sync");
    (node, dir, db, head)
}

/// The internal rows of one transaction from Parity-style traces, with the fields compared.
async fn expected_internal(node: &Client, hash: &Value, block: u64, timestamp: u64) -> Vec<Value> {
    let traces = node.call("trace_transaction", json!([hash])).await;
    internal_rows(traces.as_array().expect("traces"), hash, block, timestamp)
}

/// The internal rows of one transaction from its Parity-style flat traces (Anvil's
/// `trace_transaction`, geth's `flatCallTracer`).
pub(crate) fn internal_rows(traces: &[Value], hash: &Value, block: u64, timestamp: u64) -> Vec<Value> {
    let failed: Vec<Vec<u64>> = traces
        .iter()
        .filter(|t| t.get("error").is_some_and(|e| !e.is_null()))
        .map(|t| serde_json::from_value(t["traceAddress"].clone()).expect("path"))
        .collect();
    let mut rows = Vec::new();
    for t in traces {
        let path: Vec<u64> = serde_json::from_value(t["traceAddress"].clone()).expect("path");
        if path.is_empty() {
            continue;
        }
        let action = &t["action"];
        let (kind, from, to, value, created) = match t["type"].as_str() {
            Some("call") if action["callType"] == "call" && !wei(&action["value"]).is_zero() => {
                ("call", lower(&action["from"]), lower(&action["to"]), wei(&action["value"]), String::new())
            }
            Some("create") => {
                let kind = if action["creationMethod"] == "create2" { "create2" } else { "create" };
                let made = t["result"].get("address").map(lower).unwrap_or_default();
                (kind, lower(&action["from"]), String::new(), wei(&action["value"]), made)
            }
            Some("suicide") => (
                "suicide",
                lower(&action["address"]),
                lower(&action["refundAddress"]),
                wei(&action["balance"]),
                String::new(),
            ),
            _ => continue,
        };
        let undone = failed.iter().any(|f| path.starts_with(f));
        rows.push(json!({
            "blockNumber": block.to_string(),
            "timeStamp": timestamp.to_string(),
            "hash": hash,
            "from": from,
            "to": to,
            "value": value.to_string(),
            "contractAddress": created,
            "type": kind,
            "traceId": path.iter().map(ToString::to_string).collect::<Vec<_>>().join("_"),
            "isError": if undone { "1" } else { "0" },
        }));
    }
    rows
}

/// `rows` without the fields the expected rows leave out (gas, input, errCode; `hash` and
/// `traceId` unless `keep_ids`).
pub(crate) fn compared(rows: &Value, keep_ids: bool) -> Vec<Value> {
    rows.as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    let mut r = r.clone();
                    let map = r.as_object_mut().expect("row");
                    for field in ["gas", "gasUsed", "input", "errCode"] {
                        assert!(map.remove(field).is_some_and(|v| v.is_string()), "{field} of {rows:?}");
                    }
                    if !keep_ids {
                        map.remove("hash");
                        map.remove("traceId");
                    }
                    r
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_backed_actions_match_independent_node_answers() {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let a = chain.accounts().await;
    let factory_deploy = chain.deploy_artifact(a[0], "Factory").await;
    let ops_deploy = chain.deploy_artifact(a[0], "InternalOps").await;
    let token_deploy = chain.deploy_token(a[0], "Logs Token", "LOG").await;
    let nft_deploy = chain.deploy_artifact(a[0], "DemoNft").await;
    chain.mine().await;
    let address_of = |receipt: Value| -> Address {
        serde_json::from_value(receipt["contractAddress"].clone()).expect("contract address")
    };
    let factory = address_of(chain.receipt_of(factory_deploy).await);
    let ops = address_of(chain.receipt_of(ops_deploy).await);
    let token = address_of(chain.receipt_of(token_deploy).await);
    let nft = address_of(chain.receipt_of(nft_deploy).await);
    for id in 1..=3u64 {
        chain.send_call(a[0], nft, Ops::mintCall { to: a[2], id: U256::from(id) }.abi_encode()).await;
    }
    let make = chain.send_call(a[0], factory, Ops::makeCall {}.abi_encode()).await;
    let undone = chain.send_call(a[0], factory, Ops::makeInFailingCallCall {}.abi_encode()).await;
    for (to, amount) in [(a[1], 700), (a[3], 300), (a[1], 5)] {
        chain.transfer(token, a[0], to, amount).await;
    }
    chain.mine().await;
    let moved = Ops::transferFromCall { from: a[2], to: a[3], id: U256::from(2) }.abi_encode();
    chain.send_call(a[2], nft, moved).await;
    chain.mine().await;
    let made: Address = {
        let receipt = chain.receipt_of(make).await;
        let log = &receipt["logs"][0]["data"];
        let data: Bytes = serde_json::from_value(log.clone()).expect("data");
        Address::from_slice(&data[12..32])
    };
    let send = |data: Vec<u8>, value: &str| json!([{"from": a[0], "to": ops, "value": value, "gas": "0x2dc6c0", "data": Bytes::from(data)}]);
    let all = chain.call("eth_sendTransaction", send(Ops::allCall { to: a[1] }.abi_encode(), "0x400")).await;
    let fail = chain.call("eth_sendTransaction", send(Ops::failCall {}.abi_encode(), "0x0")).await;
    chain.mine().await;
    chain.mine().await;

    let config =
        SyncConfig { batch_blocks: 2, poll_interval: Duration::from_millis(50), ..Default::default() };
    let (node, _dir, db, head) = indexed_with_traces(&anvil.url, config).await;
    let (client, server) = common::serve(&db, node).await;
    let base = client.url.clone();
    let http = reqwest::Client::new();
    let theirs = Client::new(&anvil.url);

    // Headers and receipts of every block, for the expectations.
    let mut headers = Vec::new();
    for n in 0..=head {
        headers.push(theirs.call("eth_getBlockByNumber", json!([format!("{n:#x}"), false])).await);
    }
    let timestamp = |n: u64| number(&headers[n as usize]["timestamp"]);
    let block_of = |receipt: &Value| number(&receipt["blockNumber"]);

    // txlistinternal by hash, and over the whole chain by block range.
    let mut every_row = Vec::new();
    for n in 0..=head {
        for hash in headers[n as usize]["transactions"].as_array().expect("hashes") {
            every_row.extend(expected_internal(&theirs, hash, n, timestamp(n)).await);
        }
    }
    assert!(every_row.iter().any(|r| r["type"] == "create2"), "{every_row:?}");
    assert!(every_row.iter().any(|r| r["type"] == "suicide"), "{every_row:?}");
    assert!(every_row.iter().any(|r| r["isError"] == "1"), "{every_row:?}");
    for hash in [json!(make), json!(undone), all.clone(), fail.clone()] {
        let receipt = theirs.call("eth_getTransactionReceipt", json!([hash])).await;
        let block = block_of(&receipt);
        let want = expected_internal(&theirs, &hash, block, timestamp(block)).await;
        let got = get(
            &http,
            &base,
            &format!("module=account&action=txlistinternal&txhash={}", hash.as_str().expect("hash")),
        )
        .await;
        if want.is_empty() {
            assert_eq!(got, no_rows("No transactions found"), "{hash}");
            continue;
        }
        assert_eq!((&got["status"], &got["message"]), (&json!("1"), &json!("OK")), "{got}");
        let want: Vec<Value> = want
            .into_iter()
            .map(|mut r| {
                let map = r.as_object_mut().expect("row");
                map.remove("hash");
                map.remove("traceId");
                r
            })
            .collect();
        assert_eq!(compared(&got["result"], false), want, "txlistinternal of {hash}");
    }
    let total = every_row.len();
    for sort in ["asc", "desc"] {
        let mut ordered = every_row.clone();
        if sort == "desc" {
            ordered.reverse();
        }
        for offset in [1, 2, 3, total] {
            for page in 1..=total.div_ceil(offset) + 1 {
                let query = format!(
                    "module=account&action=txlistinternal&startblock=0&endblock={head}&page={page}&offset={offset}&sort={sort}"
                );
                let got = get(&http, &base, &query).await;
                let start = (page - 1) * offset;
                if start >= total {
                    assert_eq!(got, no_rows("No transactions found"), "{query}");
                } else {
                    let want = ordered[start..(start + offset).min(total)].to_vec();
                    assert_eq!(compared(&got["result"], true), want, "{query}");
                }
            }
        }
    }

    // txlistinternal by address: the frames it is a party of, across its appearances. The
    // factory's contract is in no list of the index: its creation is `OtsContractCreators`'.
    let listed = page(&db.begin_read().expect("read"), IdList::InternalTxs, &made, 0, 10).expect("page");
    assert_eq!(listed, Vec::<u64>::new(), "{made} in the internal-transaction index");
    for who in [a[1], ops, factory, made] {
        let party = json!(format!("{who:#x}"));
        let want: Vec<Value> = every_row
            .iter()
            .filter(|r| r["from"] == party || r["to"] == party || r["contractAddress"] == party)
            .cloned()
            .collect();
        assert!(!want.is_empty(), "{who}");
        for sort in ["asc", "desc"] {
            let ordered: Vec<Value> =
                if sort == "asc" { want.clone() } else { want.iter().rev().cloned().collect() };
            for offset in [1, 2, want.len()] {
                for page in 1..=want.len().div_ceil(offset) {
                    let query = format!(
                        "module=account&action=txlistinternal&address={who}&page={page}&offset={offset}&sort={sort}"
                    );
                    let start = (page - 1) * offset;
                    let rows = ordered[start..(start + offset).min(want.len())].to_vec();
                    assert_eq!(compared(&get(&http, &base, &query).await["result"], true), rows, "{query}");
                }
            }
        }
    }
    let none = format!("module=account&action=txlistinternal&address={}&startblock=0&endblock=1", a[1]);
    assert_eq!(get(&http, &base, &none).await, no_rows("No transactions found"));

    // getstatus: the revert reason of the failed call; a success and an unknown hash are fine.
    let status = |hash: &str| format!("module=transaction&action=getstatus&txhash={hash}");
    assert_eq!(
        get(&http, &base, &status(fail.as_str().expect("hash"))).await,
        ok(&json!({"isError": "1", "errDescription": "nope"}))
    );
    for hash in [all.as_str().expect("hash").to_owned(), B256::repeat_byte(9).to_string()] {
        assert_eq!(
            get(&http, &base, &status(&hash)).await,
            ok(&json!({"isError": "0", "errDescription": ""}))
        );
    }

    // getcontractcreation: a contract its sender deployed, one a factory made, and an account.
    let creation_of = |receipt: &Value, contract: Address, factory: &str, code: Value| {
        let block = block_of(receipt);
        json!({
            "contractAddress": format!("{contract:#x}"),
            "contractCreator": format!("{:#x}", a[0]),
            "txHash": receipt["transactionHash"],
            "blockNumber": block.to_string(),
            "timestamp": timestamp(block).to_string(),
            "contractFactory": factory,
            "creationBytecode": code,
        })
    };
    let factory_tx = theirs.call("eth_getTransactionByHash", json!([factory_deploy])).await;
    let make_traces = theirs.call("trace_transaction", json!([make])).await;
    let init = make_traces
        .as_array()
        .expect("traces")
        .iter()
        .find(|t| t["type"] == "create")
        .map(|t| t["action"]["init"].clone())
        .expect("the factory's create");
    let want = json!([
        creation_of(&chain.receipt_of(factory_deploy).await, factory, "", factory_tx["input"].clone()),
        creation_of(&chain.receipt_of(make).await, made, &format!("{factory:#x}"), init),
    ]);
    let query =
        format!("module=contract&action=getcontractcreation&contractaddresses={factory},{},{made}", a[5]);
    assert_eq!(get(&http, &base, &query).await, ok(&want));
    assert_eq!(
        get(&http, &base, &format!("module=contract&action=getcontractcreation&contractaddresses={}", a[5]))
            .await,
        no_rows("No data found")
    );

    // getblockreward: what the block's transactions paid above the base fee.
    let all_receipt = theirs.call("eth_getTransactionReceipt", json!([all])).await;
    let reward_block = block_of(&all_receipt);
    let header = &headers[reward_block as usize];
    let base_fee = header.get("baseFeePerGas").map(wei).unwrap_or_default();
    let mut earned = U256::ZERO;
    for hash in header["transactions"].as_array().expect("hashes") {
        let r = theirs.call("eth_getTransactionReceipt", json!([hash])).await;
        earned += wei(&r["gasUsed"]) * (wei(&r["effectiveGasPrice"]) - base_fee);
    }
    assert!(!earned.is_zero());
    assert_eq!(
        get(&http, &base, &format!("module=block&action=getblockreward&blockno={reward_block}")).await,
        ok(&json!({
            "blockNumber": reward_block.to_string(),
            "timeStamp": timestamp(reward_block).to_string(),
            "blockMiner": lower(&header["miner"]),
            "blockReward": earned.to_string(),
            "uncles": [],
            "uncleInclusionReward": "0",
        }))
    );
    let countdown =
        get(&http, &base, &format!("module=block&action=getblockcountdown&blockno={}", head + 5)).await;
    assert_eq!(countdown["result"]["CurrentBlock"], head.to_string(), "{countdown}");
    assert_eq!(countdown["result"]["RemainingBlock"], "5", "{countdown}");
    assert_eq!(
        get(&http, &base, &format!("module=block&action=getblockcountdown&blockno={head}")).await,
        refused("Error! Block number already pass")
    );

    gas_tracker_matches_the_fee_history(&http, &base, &theirs, head, &timestamp).await;

    // The history actions: balances and supply at every block, as the node's state then says.
    let word = |v: Value| {
        let bytes: Bytes = serde_json::from_value(v).expect("bytes");
        if bytes.is_empty() {
            U256::ZERO
        } else {
            U256::from_be_slice(&bytes)
        }
    };
    let balance_of = format!("0x70a08231{:0>64}", alloy::primitives::hex::encode(a[1]));
    for n in 0..=head {
        let tag = format!("{n:#x}");
        let ether = wei(&theirs.call("eth_getBalance", json!([a[1], tag])).await);
        let held = word(theirs.call("eth_call", json!([{"to": token, "data": balance_of}, tag])).await);
        let supply = word(theirs.call("eth_call", json!([{"to": token, "data": "0x18160ddd"}, tag])).await);
        for (query, want) in [
            (format!("module=account&action=balancehistory&address={}&blockno={n}", a[1]), ether),
            (format!("module=account&action=tokenbalancehistory&contractaddress={token}&address={}&blockno={n}", a[1]), held),
            (format!("module=stats&action=tokensupplyhistory&contractaddress={token}&blockno={n}"), supply),
        ] {
            assert_eq!(get(&http, &base, &query).await, ok(&json!(want.to_string())), "{query}");
        }
    }
    let at = |n: u64| {
        format!(
            "module=account&action=tokenbalancehistory&contractaddress={token}&address={}&blockno={n}",
            a[1]
        )
    };
    assert_eq!(get(&http, &base, &at(0)).await, ok(&json!("0")), "before the token was created");
    assert_eq!(get(&http, &base, &at(head)).await, ok(&json!("705")), "after its transfers");
    let future = get(&http, &base, &at(head + 100)).await;
    assert_eq!(future["status"], "0", "a block the node does not have: {future}");
    assert_eq!(
        get(&http, &base, &format!("module=account&action=balancehistory&address={}&blockno=soon", a[1]))
            .await,
        refused("Error! Invalid block number")
    );

    // getblocknobytime: the index's block times against the node's headers, around every block.
    let times: Vec<u64> = (0..=head).map(timestamp).collect();
    let by_time = |t: u64, closest: &str| {
        format!("module=block&action=getblocknobytime&timestamp={t}&closest={closest}")
    };
    for t in times.iter().flat_map(|&t| [t.saturating_sub(1), t, t + 1]) {
        let before = (0..=head).rfind(|&n| times[n as usize] <= t);
        let after = (0..=head).find(|&n| times[n as usize] >= t);
        for (closest, want) in [("before", before), ("after", after)] {
            let want =
                want.map_or_else(|| refused("Error! No closest block found"), |n| ok(&json!(n.to_string())));
            assert_eq!(get(&http, &base, &by_time(t, closest)).await, want, "{closest} {t}");
        }
    }
    assert_eq!(get(&http, &base, &by_time(0, "before")).await, refused("Error! No closest block found"));
    assert_eq!(
        get(&http, &base, &by_time(times[head as usize] + 1, "after")).await,
        refused("Error! No closest block found")
    );
    assert_eq!(get(&http, &base, &by_time(u64::MAX, "before")).await, ok(&json!(head.to_string())));

    // getminedblocks: every block the fee recipient was paid in, newest first by default.
    let miner = lower(&headers[1]["miner"]);
    let mined: Vec<u64> = (0..=head).filter(|&n| lower(&headers[n as usize]["miner"]) == miner).collect();
    assert!(mined.len() > 3);
    let mut mined_rows = Vec::new();
    for &n in &mined {
        let h = &headers[n as usize];
        let base_fee = h.get("baseFeePerGas").map(wei).unwrap_or_default();
        let mut paid = U256::ZERO;
        for hash in h["transactions"].as_array().expect("hashes") {
            let r = theirs.call("eth_getTransactionReceipt", json!([hash])).await;
            paid += wei(&r["gasUsed"]) * (wei(&r["effectiveGasPrice"]) - base_fee);
        }
        mined_rows.push(json!({"blockNumber": n.to_string(), "timeStamp": timestamp(n).to_string(), "blockReward": paid.to_string()}));
    }
    for (sort, ordered) in
        [("", mined_rows.iter().rev().cloned().collect::<Vec<_>>()), ("&sort=asc", mined_rows.clone())]
    {
        for page in 1..=mined.len().div_ceil(2) {
            let query =
                format!("module=account&action=getminedblocks&address={miner}&page={page}&offset=2{sort}");
            let start = (page - 1) * 2;
            let want = json!(ordered[start..(start + 2).min(ordered.len())]);
            assert_eq!(get(&http, &base, &query).await, ok(&want), "{query}");
        }
    }
    assert_eq!(
        get(&http, &base, &format!("module=account&action=getminedblocks&address={}&blocktype=uncles", a[0]))
            .await,
        no_rows("No transactions found")
    );
    assert_eq!(
        get(&http, &base, &format!("module=account&action=txsBeaconWithdrawal&address={}", a[0])).await,
        no_rows("No transactions found"),
        "Anvil pays no withdrawals"
    );

    // getLogs: the token's Transfer logs, paged, and two topics joined by `or`.
    let transfer = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
    let logs = theirs
        .call("eth_getLogs", json!([{"fromBlock": "0x0", "toBlock": "latest", "address": token}]))
        .await;
    let logs = logs.as_array().expect("logs").clone();
    let as_row = |log: &Value| -> Value {
        let receipt_block = number(&log["blockNumber"]);
        json!({
            "address": log["address"], "topics": log["topics"], "data": log["data"],
            "blockNumber": log["blockNumber"], "blockHash": log["blockHash"],
            "timeStamp": headers[receipt_block as usize]["timestamp"],
            "logIndex": log["logIndex"], "transactionHash": log["transactionHash"],
            "transactionIndex": log["transactionIndex"],
        })
    };
    let with_gas = |rows: &Value| -> Vec<Value> {
        rows.as_array()
            .expect("rows")
            .iter()
            .map(|r| {
                let mut r = r.clone();
                let map = r.as_object_mut().expect("row");
                assert!(map.remove("gasPrice").is_some_and(|v| v.is_string()), "{map:?}");
                assert!(map.remove("gasUsed").is_some_and(|v| v.is_string()), "{map:?}");
                r
            })
            .collect()
    };
    let transfers: Vec<Value> = logs.iter().filter(|l| l["topics"][0] == transfer).map(as_row).collect();
    assert_eq!(transfers.len(), 4, "the mint and three transfers");
    for page in 1..=4 {
        let query = format!(
            "module=logs&action=getLogs&fromBlock=0&toBlock=latest&address={token}&topic0={transfer}&page={page}&offset=1"
        );
        let got = get(&http, &base, &query).await;
        assert_eq!(with_gas(&got["result"]), vec![transfers[page - 1].clone()], "{query}");
        let receipt =
            theirs.call("eth_getTransactionReceipt", json!([got["result"][0]["transactionHash"]])).await;
        assert_eq!(got["result"][0]["gasPrice"], receipt["effectiveGasPrice"]);
        assert_eq!(got["result"][0]["gasUsed"], receipt["gasUsed"]);
    }
    let word = |who: Address| format!("0x{:0>64}", alloy::primitives::hex::encode(who));
    let (from_a0, to_a3) = (word(a[0]), word(a[3]));
    let either: Vec<Value> = logs
        .iter()
        .filter(|l| l["topics"][1] == json!(from_a0) || l["topics"][2] == json!(to_a3))
        .map(as_row)
        .collect();
    let both: Vec<Value> = logs
        .iter()
        .filter(|l| l["topics"][1] == json!(from_a0) && l["topics"][2] == json!(to_a3))
        .map(as_row)
        .collect();
    assert!(either.len() > both.len() && !both.is_empty());
    for (opr, want) in [("or", either), ("and", both)] {
        let query = format!(
            "module=logs&action=getLogs&address={token}&topic1={from_a0}&topic2={to_a3}&topic1_2_opr={opr}"
        );
        assert_eq!(with_gas(&get(&http, &base, &query).await["result"]), want, "{query}");
    }
    assert_eq!(
        get(&http, &base, &format!("module=logs&action=getLogs&address={}", a[9])).await,
        no_rows("No records found")
    );

    // txlist: the transactions an address sent, received at top level or created, from every
    // block's transactions and receipts; an account paid only inside calls has none.
    let mut chain_txs = Vec::new();
    for n in 0..=head {
        for hash in headers[n as usize]["transactions"].as_array().expect("hashes") {
            let tx = theirs.call("eth_getTransactionByHash", json!([hash])).await;
            let receipt = theirs.call("eth_getTransactionReceipt", json!([hash])).await;
            chain_txs.push((tx, receipt));
        }
    }
    let tx_rows = |who: Address| -> Vec<Value> {
        let who = format!("{who:#x}");
        chain_txs
            .iter()
            .filter(|(t, r)| {
                [lower(&t["from"]), lower(&t["to"]), lower(&r["contractAddress"])].contains(&who)
            })
            .map(|(t, r)| {
                let input = t["input"].as_str().expect("input");
                json!({
                    "blockNumber": number(&t["blockNumber"]).to_string(), "hash": t["hash"],
                    "from": lower(&t["from"]), "to": lower(&t["to"]), "value": wei(&t["value"]).to_string(),
                    "contractAddress": lower(&r["contractAddress"]), "nonce": number(&t["nonce"]).to_string(),
                    "isError": if r["status"] == "0x1" { "0" } else { "1" },
                    "txreceipt_status": if r["status"] == "0x1" { "1" } else { "0" },
                    "gasUsed": number(&r["gasUsed"]).to_string(), "input": input,
                    "methodId": if input.len() >= 10 { &input[..10] } else { "0x" },
                    "timeStamp": timestamp(number(&t["blockNumber"])).to_string(),
                })
            })
            .collect()
    };
    let tx_fields = [
        "blockNumber",
        "hash",
        "from",
        "to",
        "value",
        "contractAddress",
        "nonce",
        "isError",
        "txreceipt_status",
        "gasUsed",
        "input",
        "methodId",
        "timeStamp",
    ];
    for who in [a[0], ops, factory] {
        let want = tx_rows(who);
        assert!(!want.is_empty());
        for sort in ["asc", "desc"] {
            let ordered: Vec<Value> =
                if sort == "asc" { want.clone() } else { want.iter().rev().cloned().collect() };
            for offset in [1, 2, 5, want.len()] {
                for page in 1..=want.len().div_ceil(offset) {
                    let query = format!(
                        "module=account&action=txlist&address={who}&page={page}&offset={offset}&sort={sort}"
                    );
                    let got = get(&http, &base, &query).await;
                    let start = (page - 1) * offset;
                    let rows = &ordered[start..(start + offset).min(ordered.len())];
                    assert_eq!(shown(&got["result"], &tx_fields), rows, "{query}");
                }
            }
        }
    }
    let later: Vec<Value> =
        tx_rows(a[0]).into_iter().filter(|r| r["blockNumber"] == json!(reward_block.to_string())).collect();
    let query = format!(
        "module=account&action=txlist&address={}&startblock={reward_block}&endblock={reward_block}",
        a[0]
    );
    assert_eq!(shown(&get(&http, &base, &query).await["result"], &tx_fields), later, "{query}");
    assert_eq!(
        get(&http, &base, &format!("module=account&action=txlist&address={}", a[1])).await,
        no_rows("No transactions found"),
        "a[1] is paid only inside calls"
    );

    // tokentx: one row per Transfer log, by holder, by token, by both.
    let token_rows = |holder: Option<Address>| -> Vec<Value> {
        logs.iter()
            .filter(|l| l["topics"][0] == transfer)
            .filter(|l| {
                holder.is_none_or(|h| l["topics"][1] == json!(word(h)) || l["topics"][2] == json!(word(h)))
            })
            .map(|l| {
                let topic = |i: usize| format!("0x{}", &l["topics"][i].as_str().expect("topic")[26..]);
                json!({
                    "hash": l["transactionHash"], "blockNumber": number(&l["blockNumber"]).to_string(),
                    "from": topic(1), "to": topic(2), "value": wei(&l["data"]).to_string(),
                    "contractAddress": format!("{token:#x}"), "tokenName": "Logs Token", "tokenSymbol": "LOG",
                    "tokenDecimal": "18",
                })
            })
            .collect()
    };
    let token_fields = [
        "hash",
        "blockNumber",
        "from",
        "to",
        "value",
        "contractAddress",
        "tokenName",
        "tokenSymbol",
        "tokenDecimal",
    ];
    for (filter, want) in [
        (format!("address={}", a[0]), token_rows(Some(a[0]))),
        (format!("address={}", a[1]), token_rows(Some(a[1]))),
        (format!("contractaddress={token}"), token_rows(None)),
        (format!("address={}&contractaddress={token}", a[3]), token_rows(Some(a[3]))),
    ] {
        assert!(!want.is_empty(), "{filter}");
        for sort in ["asc", "desc"] {
            let ordered: Vec<Value> =
                if sort == "asc" { want.clone() } else { want.iter().rev().cloned().collect() };
            for page in 1..=want.len() {
                let query =
                    format!("module=account&action=tokentx&{filter}&page={page}&offset=1&sort={sort}");
                let got = get(&http, &base, &query).await;
                assert_eq!(shown(&got["result"], &token_fields), vec![ordered[page - 1].clone()], "{query}");
            }
        }
    }
    assert_eq!(
        get(
            &http,
            &base,
            &format!("module=account&action=tokentx&address={}&contractaddress={factory}", a[0])
        )
        .await,
        no_rows("No transactions found")
    );
    assert_eq!(
        get(&http, &base, &format!("module=account&action=tokennfttx&address={}", a[5])).await,
        no_rows("No transactions found")
    );

    // tokeninfo and addresstokenbalance: the index's metadata, holders and balances.
    let info = get(&http, &base, &format!("module=token&action=tokeninfo&contractaddress={token}")).await;
    let row = &info["result"][0];
    assert_eq!(
        [&row["tokenName"], &row["symbol"], &row["divisor"], &row["tokenType"], &row["holdersCount"]],
        [&json!("Logs Token"), &json!("LOG"), &json!("18"), &json!("ERC20"), &json!("3")],
        "{info}"
    );
    assert_eq!(row["totalSupply"], "1000000000000000000000000", "{info}");
    assert_eq!(
        get(&http, &base, &format!("module=account&action=addresstokenbalance&address={}", a[1])).await,
        ok(&json!([{
            "TokenAddress": format!("{token:#x}"), "TokenName": "Logs Token", "TokenSymbol": "LOG",
            "TokenQuantity": "705", "TokenDivisor": "18",
        }]))
    );

    // ERC721: each holder's ids (against ownerOf), and tokennfttx's rows (against the logs).
    let mut owned: std::collections::BTreeMap<Address, Vec<Value>> = std::collections::BTreeMap::new();
    for id in 1..=3u64 {
        let call = Bytes::from(Ops::ownerOfCall { id: U256::from(id) }.abi_encode());
        let word: Bytes = serde_json::from_value(
            theirs.call("eth_call", json!([{"to": nft, "data": call}, "latest"])).await,
        )
        .expect("owner");
        owned
            .entry(Address::from_slice(&word[12..32]))
            .or_default()
            .push(json!({"TokenAddress": format!("{nft:#x}"), "TokenId": id.to_string()}));
    }
    assert_eq!(owned.len(), 2, "{owned:?}");
    for (holder, ids) in &owned {
        let query =
            format!("module=account&action=addresstokennftinventory&address={holder}&contractaddress={nft}");
        assert_eq!(get(&http, &base, &query).await, ok(&json!(ids)), "{query}");
        let second = format!("{query}&page=2&offset=1");
        let want = ids.get(1).map_or_else(|| no_rows("No tokens found"), |row| ok(&json!([row])));
        assert_eq!(get(&http, &base, &second).await, want, "{second}");
    }
    let none =
        format!("module=account&action=addresstokennftinventory&address={}&contractaddress={nft}", a[4]);
    assert_eq!(get(&http, &base, &none).await, no_rows("No tokens found"));
    let nft_logs =
        theirs.call("eth_getLogs", json!([{"fromBlock": "0x0", "toBlock": "latest", "address": nft}])).await;
    let nft_rows: Vec<Value> = nft_logs
        .as_array()
        .expect("logs")
        .iter()
        .filter(|l| l["topics"][1] == json!(word(a[2])) || l["topics"][2] == json!(word(a[2])))
        .map(|l| {
            let topic = |i: usize| format!("0x{}", &l["topics"][i].as_str().expect("topic")[26..]);
            json!({
                "hash": l["transactionHash"], "from": topic(1), "to": topic(2),
                "tokenID": wei(&l["topics"][3]).to_string(), "contractAddress": format!("{nft:#x}"),
                "tokenDecimal": "0",
            })
        })
        .collect();
    assert_eq!(nft_rows.len(), 4, "three mints and a transfer");
    let query = format!("module=account&action=tokennfttx&address={}", a[2]);
    let nft_fields = ["hash", "from", "to", "tokenID", "contractAddress", "tokenDecimal"];
    assert_eq!(shown(&get(&http, &base, &query).await["result"], &nft_fields), nft_rows, "{query}");

    // Refusals.
    let cases = [
        (
            "module=account&action=txlistinternal&startblock=5&endblock=4".to_owned(),
            "Error! startblock is after endblock",
        ),
        (
            "module=account&action=txlistinternal".to_owned(),
            "Error! Missing address, txhash, or startblock and endblock",
        ),
        ("module=account&action=txlistinternal&txhash=0x12".to_owned(), "Error! Invalid transaction hash"),
        ("module=block&action=getblockreward&blockno=x".to_owned(), "Error! Invalid block number"),
        (
            "module=block&action=getblocknobytime&timestamp=x&closest=before".to_owned(),
            "Error! Invalid timestamp",
        ),
        (
            "module=block&action=getblocknobytime&timestamp=1".to_owned(),
            "Error! Invalid closest value: before or after",
        ),
        ("module=block&action=nope".to_owned(), "Error! Missing Or invalid Action name"),
        ("module=account&action=tokentx".to_owned(), "Error! Missing address or contractaddress"),
        (
            format!("module=account&action=txlist&address={}&startblock=9&endblock=2", a[0]),
            "Error! startblock is after endblock",
        ),
        ("module=logs&action=getLogs&topic0=0x12".to_owned(), "Error! Invalid topic0: 32 bytes of hex"),
        (
            "module=logs&action=getLogs&offset=1001".to_owned(),
            "Error! offset: getLogs answers at most 1000 rows per page",
        ),
        (
            format!("module=account&action=getminedblocks&address={}&sort=up", a[0]),
            "Error! Invalid sort: asc or desc",
        ),
        (
            format!(
                "module=contract&action=getcontractcreation&contractaddresses={}",
                [factory; 6].map(|f| f.to_string()).join(",")
            ),
            "Error! Maximum of 5 addresses per call",
        ),
    ];
    for (query, reason) in cases {
        assert_eq!(get(&http, &base, &query).await, refused(reason), "{query}");
    }
    server.stop().expect("stop");
    server.stopped().await;
}

/// Waits until the index's tip is the node's head block.
async fn wait_for_head(db: &Db, node: &NodeClient) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let head = node.head().await.expect("head");
        let hash = node.block_hash(head).await.expect("hash").expect("head block");
        let tip =
            ots_indexer::db::state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
        if tip.map(|t| (t.number, t.hash)) == Some((head, hash)) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the index did not reach head {head} (at {tip:?})");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The holder ranking and the fee recipient's blocks, from the node alone.
async fn lists_from_the_node(
    theirs: &Client,
    token: Address,
    accounts: &[Address],
) -> (Vec<Value>, Vec<Value>) {
    let mut holders: Vec<(U256, Address)> = Vec::new();
    for &account in accounts {
        let data = Bytes::from([&[0x70, 0xa0, 0x82, 0x31][..], &[0u8; 12], account.as_slice()].concat());
        let answer = theirs.call("eth_call", json!([{"to": token, "data": data}, "latest"])).await;
        let balance = U256::from_be_slice(&serde_json::from_value::<Bytes>(answer).expect("bytes"));
        if !balance.is_zero() {
            holders.push((balance, account));
        }
    }
    holders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let holders = holders
        .iter()
        .map(|(b, h)| json!({"TokenHolderAddress": format!("{h:#x}"), "TokenHolderQuantity": b.to_string()}))
        .collect();
    let head = number(&theirs.call("eth_blockNumber", json!([])).await);
    let mut blocks = Vec::new();
    for n in (0..=head).rev() {
        let h = theirs.call("eth_getBlockByNumber", json!([format!("{n:#x}"), false])).await;
        let base_fee = h.get("baseFeePerGas").map(wei).unwrap_or_default();
        let mut paid = U256::ZERO;
        for hash in h["transactions"].as_array().expect("hashes") {
            let r = theirs.call("eth_getTransactionReceipt", json!([hash])).await;
            paid += wei(&r["gasUsed"]) * (wei(&r["effectiveGasPrice"]) - base_fee);
        }
        let time = number(&h["timestamp"]).to_string();
        blocks
            .push(json!({"blockNumber": n.to_string(), "timeStamp": time, "blockReward": paid.to_string()}));
    }
    (holders, blocks)
}

/// Every page of the holder list and of the fee recipient's blocks, read from the server.
async fn lists_from_the_server(
    http: &reqwest::Client,
    base: &str,
    token: Address,
    miner: &str,
) -> (Vec<Value>, Vec<Value>) {
    let mut lists = [Vec::new(), Vec::new()];
    let queries = [
        format!("module=token&action=tokenholderlist&contractaddress={token}&offset=2"),
        format!("module=account&action=getminedblocks&address={miner}&offset=2"),
    ];
    for (list, query) in lists.iter_mut().zip(queries) {
        for page in 1.. {
            let got = get(http, base, &format!("{query}&page={page}")).await;
            let rows = got["result"].as_array().expect("rows");
            if rows.is_empty() {
                break;
            }
            list.extend(rows.iter().cloned());
        }
    }
    let [holders, blocks] = lists;
    (holders, blocks)
}

/// A reorg while the server answers: every page of the holder list and of the fee recipient's
/// blocks, read after the index follows, is the chain after — balances moved by the replaced
/// blocks and the blocks' fees included — and again after a rollback shortens the chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_read_after_a_reorg_are_the_chain_after() {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let a = chain.accounts().await;
    let deployed = chain.deploy_token(a[0], "Reorg Token", "RRG").await;
    chain.mine().await;
    let token: Address =
        serde_json::from_value(chain.receipt_of(deployed).await["contractAddress"].clone()).expect("token");
    for round in 1..=6u64 {
        chain.transfer(token, a[0], a[(round % 4 + 1) as usize], 100 * round).await;
        chain.mine().await;
    }
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let classifiers =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    let config = SyncConfig {
        batch_blocks: 2,
        poll_interval: Duration::from_millis(20),
        reorg_window: 64,
        ..Default::default()
    };
    let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("indexer");
    let follower = common::follower::Follower::start(indexer);
    wait_for_head(&db, &node).await;
    let (client, server) = common::serve(&db, node.clone()).await;
    let base = client.url.clone();
    let http = reqwest::Client::new();
    let theirs = Client::new(&anvil.url);
    let miner = lower(&theirs.call("eth_getBlockByNumber", json!(["0x1", false])).await["miner"]);
    let watched = &a[..10];

    let before = lists_from_the_server(&http, &base, token, &miner).await;
    assert_eq!(before, lists_from_the_node(&theirs, token, watched).await, "before the reorg");

    // Replaces the last three blocks: other holders, other amounts, other fees.
    let replacement = json!([
        [Chain::transfer_request(token, a[0], a[7], 5_000), 0],
        [Chain::transfer_request(token, a[0], a[8], 3), 1],
        [Chain::transfer_request(token, a[0], a[9], 7), 2]
    ]);
    chain.reset_nonces();
    chain.call("anvil_reorg", json!([3, replacement])).await;
    wait_for_head(&db, &node).await;
    let after = lists_from_the_server(&http, &base, token, &miner).await;
    assert_ne!(after.0, before.0, "the reorg moved balances");
    assert_eq!(after, lists_from_the_node(&theirs, token, watched).await, "after the reorg");

    chain.call("anvil_rollback", json!([2])).await;
    wait_for_head(&db, &node).await;
    let rolled = lists_from_the_server(&http, &base, token, &miner).await;
    assert_eq!(rolled.1.len(), after.1.len() - 2, "two blocks fewer");
    assert_eq!(rolled, lists_from_the_node(&theirs, token, watched).await, "after the rollback");
    server.stop().expect("stop");
    server.stopped().await;
    follower.stop().await;
}

/// `txlistinternal` of an address walks its internal-transaction index: an account that sent
/// many plain transfers and was paid by a contract three times is traced for those three
/// transactions alone, not for every transaction it appears in — unless the index does not
/// reach back to the range's first block (as in a database upgraded from format 11), where the
/// walk traces each of its appearances and gives the same rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_internal_transactions_are_read_from_their_own_index() {
    use crate::common::fault_proxy::FaultProxy;
    use ots_indexer::{db::state, txid::TxId};

    /// Plain transfers the account sends before each payment.
    const SENT: usize = 14;
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let a = chain.accounts().await;
    let ops_deploy = chain.deploy_artifact(a[0], "InternalOps").await;
    chain.mine().await;
    let ops: Address =
        serde_json::from_value(chain.receipt_of(ops_deploy).await["contractAddress"].clone()).expect("ops");
    let payee = a[1];
    let mut paid = Vec::new();
    for round in 0..3 {
        for _ in 0..SENT {
            chain.send_value(payee, a[5], U256::from(1)).await;
        }
        let data = Bytes::from(Ops::allCall { to: payee }.abi_encode());
        let call = json!([{"from": a[0], "to": ops, "value": format!("{:#x}", 0x400 + round), "gas": "0x2dc6c0", "data": data}]);
        paid.push(chain.call("eth_sendTransaction", call).await);
        chain.mine().await;
    }
    let theirs = Client::new(&anvil.url);
    let mut want = Vec::new();
    for hash in &paid {
        let receipt = theirs.call("eth_getTransactionReceipt", json!([hash])).await;
        let block = number(&receipt["blockNumber"]);
        let header = theirs.call("eth_getBlockByNumber", json!([format!("{block:#x}"), false])).await;
        let party = json!(format!("{payee:#x}"));
        want.extend(
            expected_internal(&theirs, hash, block, number(&header["timestamp"]))
                .await
                .into_iter()
                .filter(|r| r["from"] == party || r["to"] == party || r["contractAddress"] == party),
        );
    }
    // The first call pays it by a call and a selfdestruct; the later ones revert (the CREATE2
    // salt is taken) and list their call as reverted.
    assert_eq!(want.len(), 4, "{want:?}");
    assert_eq!(want.iter().filter(|r| r["isError"] == "1").count(), 2, "{want:?}");

    let config = SyncConfig { batch_blocks: 2, reorg_window: 2, ..Default::default() };
    let (_node, _dir, db, head) = indexed_with_traces(&anvil.url, config).await;
    assert_eq!(state::read_internal_txs_from(&db.begin_read().expect("read")).expect("from"), 0);

    let http = reqwest::Client::new();
    for listed in [true, false] {
        if !listed {
            // As a database upgraded from format 11 holds it: no internal transaction below its tip.
            let txn = db.begin_write().expect("write");
            state::raise_internal_txs_from(&txn, TxId::first_of_block(head + 1).0).expect("raise");
            txn.commit().expect("commit");
        }
        let proxy = FaultProxy::start(&anvil.url).await;
        let (client, server) =
            common::serve(&db, NodeClient::connect(&proxy.url, Duration::from_secs(30)).expect("node")).await;
        let mut traced = None;
        for sort in ["asc", "desc"] {
            let ordered: Vec<Value> =
                if sort == "asc" { want.clone() } else { want.iter().rev().cloned().collect() };
            for (page, offset) in [(1, 100), (1, 4), (2, 4), (3, 2)] {
                let query = format!("module=account&action=txlistinternal&address={payee}&page={page}&offset={offset}&sort={sort}");
                let start = (page - 1) * offset;
                let rows = ordered[start..(start + offset).min(ordered.len())].to_vec();
                assert_eq!(compared(&get(&http, &client.url, &query).await["result"], true), rows, "{query}");
                // The first read of the whole list: what it traced.
                traced.get_or_insert_with(|| proxy.calls_of("debug_traceTransaction"));
            }
        }
        let traced = traced.unwrap_or_default();
        eprintln!(
            "txlistinternal of an account in {} transactions, {} with internal rows: {traced} traces (index: {listed})",
            3 * SENT + paid.len(),
            paid.len()
        );
        if listed {
            assert_eq!(traced, paid.len(), "only the transactions that paid it are traced");
        } else {
            assert!(traced >= 3 * SENT, "below the index every appearance is traced: {traced}");
        }
        server.stop().expect("stop");
        server.stopped().await;
    }
}

/// `txlistinternal` of an address counts the settled groups before a deep page from the index:
/// a payee paid twice in some transactions (a call and a selfdestruct) and once in others (the
/// same call reverted) — 130 transactions, 195 rows — gets its rows 160–169, nothing counted
/// before, by tracing the transactions of its page's own group alone, both sorts read against
/// rows computed from the node's traces; as a database upgraded from format 13 holds it (the
/// internal rows index from its tip on) the first group is traced to count it. The same for the
/// list of a block range, whose deep page passes the settled blocks before it by their counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_internal_rows_are_counted_by_the_index() {
    use crate::common::fault_proxy::FaultProxy;
    use ots_indexer::{db::state, txid::TxId};

    const PAIRS: usize = 65;
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let a = chain.accounts().await;
    let mut deploys = Vec::new();
    for k in 0..PAIRS {
        deploys.push(chain.deploy_artifact(a[0], "InternalOps").await);
        if k % 10 == 9 {
            chain.mine().await;
        }
    }
    chain.mine().await;
    let payee = a[1];
    let data = Bytes::from(Ops::allCall { to: payee }.abi_encode());
    let mut paid = Vec::new();
    for (k, deploy) in deploys.iter().enumerate() {
        let ops: Address =
            serde_json::from_value(chain.receipt_of(*deploy).await["contractAddress"].clone()).expect("ops");
        // Fresh: a call and a selfdestruct pay it; again: the CREATE2 salt is taken, and the
        // whole call reverts, its call to the payee listed as reverted.
        for _ in 0..2 {
            let call = json!([{"from": a[0], "to": ops, "value": "0x400", "gas": "0x2dc6c0", "data": data}]);
            paid.push(chain.call("eth_sendTransaction", call).await);
        }
        if k % 5 == 4 {
            chain.mine().await;
        }
    }
    chain.mine().await;
    let theirs = Client::new(&anvil.url);
    let party = json!(format!("{payee:#x}"));
    let mut want = Vec::new();
    for hash in &paid {
        let receipt = theirs.call("eth_getTransactionReceipt", json!([hash])).await;
        let block = number(&receipt["blockNumber"]);
        let header = theirs.call("eth_getBlockByNumber", json!([format!("{block:#x}"), false])).await;
        want.extend(
            expected_internal(&theirs, hash, block, number(&header["timestamp"]))
                .await
                .into_iter()
                .filter(|r| r["from"] == party || r["to"] == party || r["contractAddress"] == party),
        );
    }
    assert_eq!(want.len(), 3 * PAIRS, "two rows, then one, a pair");

    let config = SyncConfig { batch_blocks: 2, reorg_window: 2, ..Default::default() };
    let (_node, _dir, db, head) = indexed_with_traces(&anvil.url, config).await;
    let http = reqwest::Client::new();

    // By block range: every row of the chain, from the node's traces; a deep page passes the
    // settled blocks before it by the index's count of their rows, tracing its own blocks (and,
    // descending, the reorg window's) alone.
    let mut every_row = Vec::new();
    let mut transactions = 0;
    for block in 0..=head {
        let header = theirs.call("eth_getBlockByNumber", json!([format!("{block:#x}"), false])).await;
        for hash in header["transactions"].as_array().expect("hashes") {
            transactions += 1;
            every_row.extend(expected_internal(&theirs, hash, block, number(&header["timestamp"])).await);
        }
    }
    let total = every_row.len();
    assert!(total > 400, "{total} rows");
    for upgraded in [false, true] {
        if upgraded {
            let txn = db.begin_write().expect("write");
            state::set_internal_rows_from(&txn, TxId::first_of_block(head + 1).0).expect("upgraded");
            txn.commit().expect("commit");
        }
        for sort in ["asc", "desc"] {
            let proxy = FaultProxy::start(&anvil.url).await;
            let (client, server) =
                common::serve(&db, NodeClient::connect(&proxy.url, Duration::from_secs(30)).expect("node"))
                    .await;
            let ordered: Vec<Value> =
                if sort == "asc" { every_row.clone() } else { every_row.iter().rev().cloned().collect() };
            let (page, offset) = (total / 10 - 1, 10);
            let query = format!(
                "module=account&action=txlistinternal&startblock=0&endblock={head}&page={page}&offset={offset}&sort={sort}"
            );
            let start = (page - 1) * offset;
            assert_eq!(
                compared(&get(&http, &client.url, &query).await["result"], true),
                ordered[start..start + offset],
                "{query} ({upgraded})"
            );
            let traced = proxy.calls_of("debug_traceTransaction");
            eprintln!(
                "txlistinternal rows {start}-{} of {total} by block range ({sort}, upgraded from format 13: {upgraded}): {traced} of {transactions} transactions traced",
                start + offset - 1
            );
            if upgraded {
                assert!(traced >= 100, "without counts the blocks before the page are traced: {traced}");
            } else {
                assert!(traced <= 40, "the blocks before the page are counted, not traced: {traced}");
            }
            server.stop().expect("stop");
            server.stopped().await;
        }
        if upgraded {
            let txn = db.begin_write().expect("write");
            state::set_internal_rows_from(&txn, 0).expect("back");
            txn.commit().expect("commit");
        }
    }

    for upgraded in [false, true] {
        if upgraded {
            let txn = db.begin_write().expect("write");
            state::set_internal_rows_from(&txn, TxId::first_of_block(head + 1).0).expect("upgraded");
            txn.commit().expect("commit");
        }
        for sort in ["asc", "desc"] {
            // A server of its own for each read: nothing counted before.
            let proxy = FaultProxy::start(&anvil.url).await;
            let (client, server) =
                common::serve(&db, NodeClient::connect(&proxy.url, Duration::from_secs(30)).expect("node"))
                    .await;
            let ordered: Vec<Value> =
                if sort == "asc" { want.clone() } else { want.iter().rev().cloned().collect() };
            let query =
                format!("module=account&action=txlistinternal&address={payee}&page=17&offset=10&sort={sort}");
            assert_eq!(
                compared(&get(&http, &client.url, &query).await["result"], true),
                ordered[160..170],
                "{query}"
            );
            let traced = proxy.calls_of("debug_traceTransaction");
            eprintln!("txlistinternal rows 160-169 of {} ({sort}, upgraded from format 13: {upgraded}): {traced} traces", want.len());
            match (upgraded, sort) {
                // The first group's 150 rows counted by the index: the page's group alone (30
                // transactions) is traced, up to the page's end.
                (false, "asc") => assert!(traced <= 30, "the first group is counted, not traced: {traced}"),
                (true, "asc") => {
                    assert!(traced >= 100, "below the index's start the group is traced: {traced}")
                }
                // Descending, the page lies in the first group, which is read whole.
                _ => assert!(traced <= 130, "{traced}"),
            }
            server.stop().expect("stop");
            server.stopped().await;
        }
    }
}
