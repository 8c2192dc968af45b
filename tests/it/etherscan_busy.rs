//! Etherscan caps every list at 10,000 rows (`page × offset`); this API does not. On Anvil, an
//! account sends more than 10,000 transactions and more than 10,000 token transfers (a batcher
//! moving its tokens 420 at a time): `txlist` and `tokentx` pages past row 10,000, both sorts,
//! several page sizes, equal the rows computed here from the node's blocks, receipts and logs —
//! the later pages read partly from the row counts earlier pages left (`etherscan::marks`), and
//! after a restart of `serve` from the counts it kept in the datadir (`walk-marks`).

use crate::common;
use crate::etherscan_node::{get, lower, number, shown, wei};

use std::{
    sync::{atomic::Ordering, Arc},
    time::Duration,
};

use alloy::{
    primitives::{Address, U256},
    sol,
    sol_types::SolCall,
};
use common::{
    anvil::Anvil,
    fault_proxy::{Fault, FaultProxy},
    workload::Chain,
    Client,
};
use jsonrpsee::server::ServerHandle;
use ots_indexer::{
    db::{state, AccessMode, Db},
    rpc::{
        self,
        etherscan::marks_file::{self, MarksFile},
        RpcContext, ServerOptions,
    },
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

sol! {
    function approve(address spender, uint256 value) returns (bool);
    function transfer(address to, uint256 value) returns (bool);
    function batchTransfer(address token, address[] to, uint256[] amounts);
}

/// Plain value transfers the busy account sends.
const SENT: u64 = 10_050;
/// Batches of token transfers it makes, and transfers per batch.
const BATCHES: usize = 25;
const PER_BATCH: usize = 420;
/// Single token transfers it makes to one collector, a transaction each.
const COLLECTED: usize = 250;

/// Sends `count` value transfers from `from` to `to` in JSON-RPC batches, nonces from `nonce`.
async fn send_many(url: &str, from: Address, to: Address, nonce: u64, count: u64) {
    let http = reqwest::Client::new();
    let mut next = nonce;
    while next < nonce + count {
        let batch: Vec<Value> = (next..(nonce + count).min(next + 500))
            .map(|n| {
                json!({"jsonrpc": "2.0", "id": n, "method": "eth_sendTransaction",
                    "params": [{"from": from, "to": to, "value": "0x1", "gas": "0x5208", "nonce": format!("{n:#x}")}]})
            })
            .collect();
        next += batch.len() as u64;
        let answers: Vec<Value> =
            http.post(url).json(&batch).send().await.expect("send").json().await.expect("answers");
        assert!(answers.iter().all(|a| a.get("result").is_some()), "{answers:?}");
    }
}

/// Mines until the pool is empty.
async fn mine_all(node: &Client, from: Address) {
    loop {
        let _: Value = node.call("evm_mine", json!([])).await;
        let mined = node.call("eth_getTransactionCount", json!([from, "latest"])).await;
        let pending = node.call("eth_getTransactionCount", json!([from, "pending"])).await;
        if mined == pending {
            return;
        }
    }
}

/// The pages of `query` (a list action without `page`, `offset`, `sort`) that hold rows past
/// 10,000, and its first page, against `want` (the list in ascending order).
async fn check_deep_pages(http: &reqwest::Client, base: &str, query: &str, want: &[Value], fields: &[&str]) {
    assert!(want.len() > 10_000, "{query}: only {} rows", want.len());
    for sort in ["asc", "desc"] {
        let ordered: Vec<Value> =
            if sort == "asc" { want.to_vec() } else { want.iter().rev().cloned().collect() };
        for (page, offset) in [(1, 100), (101, 100), (2, 5_000), (3, 5_000), (2, 10_000), (1_001, 10)] {
            let start = (page - 1) * offset;
            let rows = &ordered[start.min(ordered.len())..(start + offset).min(ordered.len())];
            let asked = format!("{query}&page={page}&offset={offset}&sort={sort}");
            let got = get(http, base, &asked).await;
            assert_eq!(got["status"], "1", "{asked}: {}", got["message"]);
            assert_eq!(shown(&got["result"], fields), rows, "{asked}");
        }
        // Past the end: no rows, as Etherscan answers.
        let past = format!("{query}&page={}&offset=100&sort={sort}", want.len() / 100 + 2);
        assert_eq!(get(http, base, &past).await["result"], json!([]), "{past}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_past_row_ten_thousand_match_the_node() {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let a = chain.accounts().await;
    let busy = a[0];
    let token_deploy = chain.deploy_token(busy, "Busy Token", "BSY").await;
    let batcher_deploy = chain.deploy_artifact(busy, "Batcher").await;
    chain.mine().await;
    let address_of = |receipt: Value| -> Address {
        serde_json::from_value(receipt["contractAddress"].clone()).expect("contract address")
    };
    let token = address_of(chain.receipt_of(token_deploy).await);
    let batcher = address_of(chain.receipt_of(batcher_deploy).await);
    chain.send_call(busy, token, approveCall { spender: batcher, value: U256::MAX }.abi_encode()).await;
    chain.mine().await;
    let recipients: Vec<Address> = (0..PER_BATCH).map(|i| a[1 + i % 20]).collect();
    for batch in 0..BATCHES {
        let amounts = (0..PER_BATCH).map(|i| U256::from(1 + batch * PER_BATCH + i)).collect();
        let call = batchTransferCall { token, to: recipients.clone(), amounts };
        chain.send_call(busy, batcher, call.abi_encode()).await;
    }
    // The collector's `tokentx` spans several groups of transactions, a row each, in blocks of
    // 40 transfers (so that the logs of one group's blocks are fewer than two groups' are).
    let node_client = Client::new(&anvil.url);
    mine_all(&node_client, busy).await;
    let collector = a[22];
    for i in 0..COLLECTED {
        let call = transferCall { to: collector, value: U256::from(i + 1) };
        chain.send_call(busy, token, call.abi_encode()).await;
        if i % 40 == 39 {
            mine_all(&node_client, busy).await;
        }
    }
    mine_all(&node_client, busy).await;
    let nonce = number(&node_client.call("eth_getTransactionCount", json!([busy, "latest"])).await);
    send_many(&anvil.url, busy, a[21], nonce, SENT).await;
    mine_all(&node_client, busy).await;

    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let head = node.head().await.expect("head");
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open db");
    let classifiers =
        ots_classifiers::BUILTIN_NAMES.iter().filter_map(|n| ots_classifiers::builtin(n)).collect();
    // A short reorg window leaves most blocks settled: deep pages then skip the groups of
    // transactions earlier pages counted, and still cross the window's own ids.
    // The party-token index kept: an address's list of one token is counted by it.
    let config =
        SyncConfig { batch_blocks: 4, reorg_window: 2, party_token_index: Some(true), ..Default::default() };
    let indexer = Indexer::open(db.clone(), node.clone(), classifiers, config).await.expect("indexer");
    indexer.sync_to(head).await.expect("sync");
    // The walks' counts kept in a file, as `serve` and `run` keep them in the datadir.
    let marks_path = dir.path().join(marks_file::FILE_NAME);
    let chain = state::read_state(&db.begin_read().expect("read")).expect("state").chain.expect("bound");
    let marks = MarksFile::open(&marks_path, chain);
    let (client, server) = serve_with(&db, node.clone(), Some(marks.clone())).await;
    let http = reqwest::Client::new();

    // txlist: every transaction the busy account sent, from the blocks and their receipts;
    // and every one its recipient received.
    let recipient = a[21];
    let mut received = Vec::new();
    let mut txs = Vec::new();
    for n in 0..=head {
        let block = node_client.call("eth_getBlockByNumber", json!([format!("{n:#x}"), true])).await;
        let receipts = node_client.call("eth_getBlockReceipts", json!([format!("{n:#x}")])).await;
        let receipts = receipts.as_array().expect("receipts").clone();
        let time = number(&block["timestamp"]).to_string();
        for (t, r) in block["transactions"].as_array().expect("transactions").iter().zip(receipts) {
            if lower(&t["to"]) == format!("{recipient:#x}") {
                received.push(t["hash"].clone());
            }
            let who = format!("{busy:#x}");
            if ![lower(&t["from"]), lower(&t["to"]), lower(&r["contractAddress"])].contains(&who) {
                continue;
            }
            let ok = r["status"] == "0x1";
            txs.push(json!({
                "blockNumber": n.to_string(), "timeStamp": time, "hash": t["hash"],
                "nonce": number(&t["nonce"]).to_string(), "from": lower(&t["from"]), "to": lower(&t["to"]),
                "value": wei(&t["value"]).to_string(), "contractAddress": lower(&r["contractAddress"]),
                "isError": if ok { "0" } else { "1" }, "txreceipt_status": if ok { "1" } else { "0" },
                "gasUsed": number(&r["gasUsed"]).to_string(),
            }));
        }
    }
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
    ];
    // How long a page past row 10,000 takes the first time (every transaction before it from
    // the node) and again (the groups counted the first time skipped), beside page 1 — figures
    // printed for docs/etherscan.md, not asserted.
    let timed = |page: u64| {
        let (http, base) = (http.clone(), client.url.clone());
        async move {
            let asked = format!("module=account&action=txlist&address={busy}&page={page}&offset=10&sort=asc");
            let started = std::time::Instant::now();
            let got = get(&http, &base, &asked).await;
            assert_eq!(got["result"].as_array().map(Vec::len), Some(10), "{asked}");
            started.elapsed().as_secs_f64() * 1e3
        }
    };
    let first_time = timed(1_001).await;
    let mut again = Vec::new();
    let mut first_page = Vec::new();
    for _ in 0..5 {
        again.push(timed(1_001).await);
        first_page.push(timed(1).await);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    eprintln!(
        "txlist rows 10,000-10,009: first {first_time:.1} ms, again {:.2} ms (median of 5); page 1 {:.2} ms",
        median(&mut again),
        median(&mut first_page)
    );
    check_deep_pages(
        &http,
        &client.url,
        &format!("module=account&action=txlist&address={busy}"),
        &txs,
        &tx_fields,
    )
    .await;

    // tokentx: one row per Transfer log, by the account and by the token.
    let transfer = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
    let logs = node_client
        .call(
            "eth_getLogs",
            json!([{"address": token, "fromBlock": "0x0", "toBlock": "latest", "topics": [transfer]}]),
        )
        .await;
    let transfers: Vec<Value> = logs
        .as_array()
        .expect("logs")
        .iter()
        .map(|l| {
            let topic = |i: usize| format!("0x{}", &l["topics"][i].as_str().expect("topic")[26..]);
            json!({
                "blockNumber": number(&l["blockNumber"]).to_string(), "hash": l["transactionHash"],
                "from": topic(1), "to": topic(2), "value": wei(&l["data"]).to_string(),
                "contractAddress": format!("{token:#x}"), "tokenName": "Busy Token", "tokenSymbol": "BSY",
                "tokenDecimal": "18",
            })
        })
        .collect();
    assert_eq!(transfers.len(), 1 + BATCHES * PER_BATCH + COLLECTED, "the mint and every transfer");
    let token_fields = [
        "blockNumber",
        "hash",
        "from",
        "to",
        "value",
        "contractAddress",
        "tokenName",
        "tokenSymbol",
        "tokenDecimal",
    ];
    for filter in [format!("address={busy}"), format!("contractaddress={token}")] {
        check_deep_pages(
            &http,
            &client.url,
            &format!("module=account&action=tokentx&{filter}"),
            &transfers,
            &token_fields,
        )
        .await;
    }

    // A restart: the recipient's first deep page after it (before the reorg window: blocks of
    // hundreds of transactions) asks the node only for the page's transactions, whether the
    // counts of its groups were kept in the file or not (the index marks the transactions it
    // received); in a database upgraded from format 10, whose lists lack those marks, it asks
    // for every transaction before the page when the counts were not kept.
    let deep = format!("module=account&action=txlist&address={recipient}&page=800&offset=10&sort=asc");
    let rows = |answer: &Value| -> Vec<Value> {
        answer["result"].as_array().expect("rows").iter().map(|r| r["hash"].clone()).collect()
    };
    assert!(received.len() >= 9_900, "{} received", received.len());
    let want = received[7_990..8_000].to_vec();
    assert_eq!(rows(&get(&http, &client.url, &deep).await), want, "{deep}");
    server.stop().expect("stop");
    server.stopped().await;
    assert!(marks.save().expect("save marks"), "the walks counted groups");
    assert_eq!(MarksFile::open(&marks_path, chain).marks().usage(), marks.marks().usage(), "read back whole");
    drop(marks);
    let mut in_process = Vec::new();

    // The same through the binary: `serve` writes the file as it stops on SIGTERM, and the next
    // `serve` reads it.
    std::fs::remove_file(&marks_path).expect("remove the marks file");
    let first = Serve::start(dir.path(), &anvil.url);
    first.wait_ready(&http).await;
    assert_eq!(rows(&get(&http, &first.url, &deep).await), want, "{deep} from serve");
    first.stop();
    assert!(marks_path.exists(), "serve wrote its marks as it stopped");

    // Upgraded from format 10 at the tip (no received marks), or half way to the page (marks on
    // the block of the account's row 4,000 on: the walk counts those rows from the index and asks
    // the node below them).
    let half_way = {
        let tx = node_client.call("eth_getTransactionByHash", json!([received[4_000].clone()])).await;
        number(&tx["blockNumber"])
    };
    let tip = state::read_tip(&db.begin_read().expect("read")).expect("tip").expect("indexed");
    for (kept, marked_from) in [(true, None), (false, None), (false, Some(tip + 1)), (false, Some(half_way))]
    {
        let upgraded = marked_from.is_some();
        if let Some(block) = marked_from {
            let txn = db.begin_write().expect("write");
            state::set_received_marks_from(&txn, ots_indexer::txid::TxId::first_of_block(block).0)
                .expect("mark");
            txn.commit().expect("commit");
        }
        let proxy = FaultProxy::start(&anvil.url).await;
        let (url, stop) = if kept {
            let serve = Serve::start(dir.path(), &proxy.url);
            serve.wait_ready(&http).await;
            (serve.url.clone(), Some(serve))
        } else {
            let node = NodeClient::connect(&proxy.url, Duration::from_secs(30)).expect("node");
            let (client, server) = serve_with(&db, node, None).await;
            in_process.push(server);
            (client.url, None)
        };
        let before = proxy.requests.load(Ordering::SeqCst);
        let started = std::time::Instant::now();
        assert_eq!(rows(&get(&http, &url, &deep).await), want, "{deep} after a restart");
        let took = started.elapsed().as_secs_f64();
        let asked = proxy.requests.load(Ordering::SeqCst) - before;
        let at_once = proxy.most_at_once.load(Ordering::SeqCst);
        eprintln!(
            "after a restart, txlist rows 7,990-7,999 of a received-only account: {asked} node requests, at most {at_once} at once, {took:.2} s (counts kept: {kept}, received marks from block {})",
            marked_from.unwrap_or(0)
        );
        if kept {
            assert!(asked <= 10, "the kept counts skip the 7,990 rows before the page: {asked} requests");
        } else if !upgraded {
            assert!(asked <= 10, "the received marks count the 7,990 rows before the page: {asked} requests");
        } else if marked_from == Some(half_way) {
            assert!(
                (10..50).contains(&asked),
                "the node is asked for the half without marks alone: {asked} requests"
            );
        } else {
            assert!(asked >= 50, "without them the walk reads every transaction before: {asked} requests");
            // ... but only the transactions: the rows before the page are counted, not made
            // (a batch of 100 transactions a group, no receipts nor headers).
            assert!(asked < 160, "rows before the page need no receipts: {asked} requests");
            // The walk reads the groups ahead of its steps while the page is still ahead.
            assert!(
                at_once >= 3,
                "the walk asks for groups ahead at once: at most {at_once} requests at a time"
            );
        }
        if let Some(serve) = stop {
            serve.stop();
        }
    }

    // A token list's first deep page, no counts kept: the collector's rows 200-209 either way.
    // The settled groups before the page are counted by the index (the transfer index and the
    // transfer rows index); in a database upgraded from format 12, whose rows index starts at
    // its tip, from the node's logs. Either way no receipt of a transaction before the page is
    // read: only the page's group is (50 or 100 transactions; every one of the 250 without).
    let collected: Vec<Value> = transfers
        .iter()
        .filter(|t| t["to"] == json!(format!("{collector:#x}")))
        .map(|t| t["hash"].clone())
        .collect();
    assert_eq!(collected.len(), COLLECTED);
    let proxy = FaultProxy::start(&anvil.url).await;
    // The busy account's first group makes 10,575 rows (the mint, the 25 batches of 420 and 74
    // transfers to the collector): a first page past it passes the group by the index's count
    // of the rows beyond one a transaction, and reads the next group only.
    {
        let node = NodeClient::connect(&proxy.url, Duration::from_secs(30)).expect("node");
        let (fresh, server) = serve_with(&db, node, None).await;
        in_process.push(server);
        let deep = format!("module=account&action=tokentx&address={busy}&page=1061&offset=10&sort=asc");
        let (before, logs_before) =
            (proxy.calls_of("eth_getTransactionReceipt"), proxy.calls_of("eth_getLogs"));
        let got = get(&http, &fresh.url, &deep).await;
        assert_eq!(shown(&got["result"], &token_fields), transfers[10_600..10_610], "{deep}");
        let receipts = proxy.calls_of("eth_getTransactionReceipt") - before;
        let logs = proxy.calls_of("eth_getLogs") - logs_before;
        eprintln!("tokentx rows 10,600-10,609 of the busy account: {receipts} receipts and {logs} eth_getLogs asked");
        assert_eq!(logs, 0, "the first group's 10,575 rows are counted by the index");
        assert!(receipts <= 100, "only the page's group is read: {receipts} receipts");
    }
    // The token's own list (`contractaddress` alone) walks the transactions that move it, whose
    // first 100 make the same 10,575 rows: the token transfers index counts them. In a database
    // upgraded from format 13 (that index from its tip on) the walk reads the token's
    // appearances and counts them from the node's logs, as before.
    for upgraded in [false, true] {
        if upgraded {
            let txn = db.begin_write().expect("write");
            state::set_token_transfers_from(&txn, ots_indexer::txid::TxId::first_of_block(tip + 1).0)
                .expect("upgraded");
            txn.commit().expect("commit");
        }
        let node = NodeClient::connect(&proxy.url, Duration::from_secs(30)).expect("node");
        let (fresh, server) = serve_with(&db, node, None).await;
        in_process.push(server);
        let deep = format!("module=account&action=tokentx&contractaddress={token}&page=1061&offset=10");
        let (before, logs_before) =
            (proxy.calls_of("eth_getTransactionReceipt"), proxy.calls_of("eth_getLogs"));
        let started = std::time::Instant::now();
        let got = get(&http, &fresh.url, &deep).await;
        let took = started.elapsed().as_secs_f64() * 1e3;
        assert_eq!(shown(&got["result"], &token_fields), transfers[10_600..10_610], "{deep} ({upgraded})");
        let receipts = proxy.calls_of("eth_getTransactionReceipt") - before;
        let logs = proxy.calls_of("eth_getLogs") - logs_before;
        eprintln!(
            "tokentx rows 10,600-10,609 of the token (upgraded from format 13: {upgraded}): {receipts} receipts and {logs} eth_getLogs asked, {took:.1} ms"
        );
        if upgraded {
            assert!(logs > 0, "below the index's start the groups are counted from logs");
        } else {
            assert_eq!(logs, 0, "the token's first group's 10,575 rows are counted by the index");
        }
        assert!(receipts <= 100, "only the page's group is read: {receipts} receipts");
    }
    let mut fresh_url = String::new();
    for (upgraded, sort) in [(false, "asc"), (false, "desc"), (true, "asc"), (true, "desc")] {
        if upgraded && sort == "asc" {
            let txn = db.begin_write().expect("write");
            state::set_transfer_rows_from(&txn, ots_indexer::txid::TxId::first_of_block(tip + 1).0)
                .expect("upgraded");
            txn.commit().expect("commit");
        }
        // A server of its own for each pass: no counted groups kept.
        let node = NodeClient::connect(&proxy.url, Duration::from_secs(30)).expect("node");
        let (fresh, server) = serve_with(&db, node, None).await;
        in_process.push(server);
        fresh_url.clone_from(&fresh.url);
        let deep = format!("module=account&action=tokentx&address={collector}&page=21&offset=10&sort={sort}");
        let want: Vec<Value> = if sort == "asc" {
            collected[200..210].to_vec()
        } else {
            collected.iter().rev().skip(200).take(10).cloned().collect()
        };
        let (before, logs_before) =
            (proxy.calls_of("eth_getTransactionReceipt"), proxy.calls_of("eth_getLogs"));
        let started = std::time::Instant::now();
        assert_eq!(rows(&get(&http, &fresh.url, &deep).await), want, "{deep}");
        let took = started.elapsed().as_secs_f64() * 1e3;
        let receipts = proxy.calls_of("eth_getTransactionReceipt") - before;
        let logs = proxy.calls_of("eth_getLogs") - logs_before;
        let counted = if upgraded { "upgraded from format 12" } else { "counted by the index" };
        eprintln!(
            "tokentx rows 200-209 of the collector ({sort}, {counted}), nothing counted before: {receipts} receipts and {logs} eth_getLogs asked, {took:.1} ms"
        );
        assert!(receipts <= 100, "the rows before the page are counted, not read: {receipts} receipts");
        // Counted by the index, the settled groups need no node at all: descending, only the 50
        // newest (not a whole group) are counted from one batch of logs (the collector as sender,
        // as receiver) over their own blocks, and the page's group, which the index says reaches
        // the page, is read without counting it first. Upgraded, ascending, the two groups before the page are counted
        // from one batch over their blocks (the collector as sender, as receiver), not one a
        // group; descending as before, but the second group counted from the first batch's logs.
        let want = match (upgraded, sort) {
            (false, "asc") => 0,
            (false, _) => 2,
            (true, "asc") => 2,
            (true, _) => 4,
        };
        assert_eq!(logs, want, "eth_getLogs calls for the steps before the page ({sort}, {counted})");
    }
    // The busy account's list of the token alone (`address` and `contractaddress`) walks the
    // transactions in which it moved the token, whose first 100 make the same 10,575 rows: the
    // party-token index counts them. In a database upgraded from format 14 (that index from its
    // tip on) the walk reads the account's transfer index and counts it from the node's logs.
    for upgraded in [false, true] {
        if upgraded {
            let txn = db.begin_write().expect("write");
            state::set_party_token_from(&txn, ots_indexer::txid::TxId::first_of_block(tip + 1).0)
                .expect("upgraded");
            txn.commit().expect("commit");
        }
        let node = NodeClient::connect(&proxy.url, Duration::from_secs(30)).expect("node");
        let (fresh, server) = serve_with(&db, node, None).await;
        in_process.push(server);
        for sort in ["asc", "desc"] {
            let deep = format!(
                "module=account&action=tokentx&address={busy}&contractaddress={token}&page=1061&offset=10&sort={sort}"
            );
            let want: Vec<Value> = if sort == "asc" {
                transfers[10_600..10_610].to_vec()
            } else {
                transfers.iter().rev().skip(10_600).take(10).cloned().collect()
            };
            let (before, logs_before) =
                (proxy.calls_of("eth_getTransactionReceipt"), proxy.calls_of("eth_getLogs"));
            let started = std::time::Instant::now();
            let got = get(&http, &fresh.url, &deep).await;
            let took = started.elapsed().as_secs_f64() * 1e3;
            assert_eq!(shown(&got["result"], &token_fields), want, "{deep} ({upgraded})");
            let receipts = proxy.calls_of("eth_getTransactionReceipt") - before;
            let logs = proxy.calls_of("eth_getLogs") - logs_before;
            eprintln!(
                "tokentx rows 10,600-10,609 of the busy account's list of the token ({sort}, upgraded from format 14: {upgraded}): {receipts} receipts and {logs} eth_getLogs asked, {took:.1} ms"
            );
            if upgraded {
                assert!(logs > 0, "below the index's start the groups are counted from logs");
            } else if sort == "asc" {
                assert_eq!(
                    logs, 0,
                    "the account's first group's 10,575 rows of the token are counted by the index"
                );
            }
            assert!(receipts <= 200, "only the page's groups are read: {receipts} receipts");
        }
    }
    // A node that refuses the query over two groups' blocks (more logs than it answers at once)
    // is asked for each step's blocks instead: still counted, not read whole. (The list of the
    // collector's transfers of this token, in the database upgraded from format 14 above: a list
    // no walk counted yet.)
    proxy.set(Fault::LogsOverLimit);
    let (before, logs_before) = (proxy.calls_of("eth_getTransactionReceipt"), proxy.calls_of("eth_getLogs"));
    let deep = format!(
        "module=account&action=tokentx&address={collector}&contractaddress={token}&page=21&offset=10"
    );
    assert_eq!(rows(&get(&http, &fresh_url, &deep).await), collected[200..210].to_vec(), "{deep}");
    let receipts = proxy.calls_of("eth_getTransactionReceipt") - before;
    let logs = proxy.calls_of("eth_getLogs") - logs_before;
    eprintln!(
        "tokentx rows 200-209 with the node's log limit: {receipts} receipts and {logs} eth_getLogs asked"
    );
    // The page's own group was read by the walks above (the transaction cache has it); the
    // groups before it, read whole, would ask for 100 receipts more.
    assert!(receipts < 100, "the steps before the page counted from their own logs: {receipts} receipts");
    // The refused wide batch once (a refusal for its size is not a rate limit to wait out,
    // though Infura's code for it, -32005, says "limit exceeded"), then each step's own.
    assert_eq!(logs, 6, "the wide query refused once, the two steps asked alone");
    proxy.set(Fault::Healthy);
    for server in in_process {
        server.stop().expect("stop");
        server.stopped().await;
    }
}

/// An `ots-indexer serve` process over a datadir, killed if the test ends before it stops.
struct Serve {
    child: Option<std::process::Child>,
    url: String,
}

impl Serve {
    fn start(datadir: &std::path::Path, node: &str) -> Self {
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_ots-indexer"))
            .args(["serve", "--datadir"])
            .arg(datadir)
            .args(["--rpc-url", node, "--http-addr", &format!("127.0.0.1:{port}")])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn serve");
        Self { child: Some(child), url: format!("http://127.0.0.1:{port}") }
    }

    async fn wait_ready(&self, http: &reqwest::Client) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while http
            .get(format!("{}/api?module=block&action=getblockcountdown&blockno=1", self.url))
            .send()
            .await
            .is_err()
        {
            assert!(std::time::Instant::now() < deadline, "serve did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, and a clean exit.
    fn stop(mut self) {
        let mut child = self.child.take().expect("running");
        let status = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        assert!(status.expect("kill").success());
        let exit = child.wait().expect("wait");
        assert!(exit.success(), "serve exited with {exit}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The server over `db`, keeping its walks' counts in `marks` when given.
async fn serve_with(db: &Db, node: NodeClient, marks: Option<Arc<MarksFile>>) -> (Client, ServerHandle) {
    let options = ServerOptions { walk_marks: marks, ..Default::default() };
    let (addr, server) =
        rpc::serve("127.0.0.1:0".parse().expect("addr"), RpcContext::new(db.clone(), node), &options)
            .await
            .expect("serve");
    (Client::new(&format!("http://{addr}")), server)
}
