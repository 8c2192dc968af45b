//! `ots_` address-page benchmark (issue "Otterscan on any node"): builds a generated chain on a
//! local Anvil, indexes it, serves it, and times over HTTP, in the same run, our
//! `ots_getTransactionBySenderAndNonce` and `ots_searchTransactionsBefore` against Anvil's own
//! (which scans its chain per call) — for an address whose only appearance is near genesis and
//! for the busiest one (the same page again, which our cache answers, and a new page each
//! call, which it cannot), with the node's own cost of the calls such a page needs — then
//! prints the appearance index's bytes per appearance.
//!
//! `scripts/bench-ots.sh` runs it in release mode.
//! Usage: bench_ots [TRANSACTIONS] [TXS_PER_BLOCK] [ANVIL_ROUNDS] [OUR_ROUNDS]

use std::time::Instant;

use alloy_primitives::{keccak256, Address};
use ots_indexer::{
    db::tables::{OtsAppearances, OtsContractCreators, OtsNonceAnchors},
    index::check::check,
};
use serde_json::{json, Value};

#[path = "common/node_bench.rs"]
mod node_bench;

use node_bench::{index_to, serve, start_anvil, time, time_each};

fn arg(n: usize, default: u64) -> u64 {
    std::env::args().nth(n).and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let transactions = arg(1, 100_000);
    let per_block = arg(2, 200).max(1);
    let anvil_rounds = arg(3, 3);
    let our_rounds = arg(4, 21);

    let (_anvil, url, node) = start_anvil(&[]).await;
    let accounts: Vec<Address> = node.raw("eth_accounts", json!([])).await.expect("accounts");

    // Block 1: the lonely sender's only transaction, to an address that never appears again.
    let lonely_sender = accounts[29];
    let lonely = Address::repeat_byte(0x10);
    let _: Value = node
        .raw(
            "eth_sendTransaction",
            json!([{"from": lonely_sender, "to": lonely, "value": "0x1", "gas": "0x5208"}]),
        )
        .await
        .expect("send");
    let _: Value = node.raw("evm_mine", json!([])).await.expect("mine");
    // Then `transactions` transfers from 29 senders to 3,000 addresses, a quarter of them to the hub.
    let hub = Address::repeat_byte(0x4b);
    let recipients: Vec<Address> =
        (0u64..3000).map(|i| Address::from_slice(&keccak256(i.to_be_bytes())[12..])).collect();
    let built = Instant::now();
    let mut sent = 0u64;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    // Nonces are ours to give: Anvil answers a batch's entries at once and would repeat them.
    let mut nonces = [0u64; 29];
    while sent < transactions {
        let n = per_block.min(transactions - sent);
        let calls: Vec<(&'static str, Value)> = (0..n)
            .map(|i| {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                let sender = ((sent + i) % 29) as usize;
                let nonce = nonces[sender];
                nonces[sender] += 1;
                let to = if state >> 62 == 0 { hub } else { recipients[((state >> 33) % 3000) as usize] };
                let tx = json!({"from": accounts[sender], "to": to, "value": "0x1", "gas": "0x5208", "nonce": format!("{nonce:#x}")});
                ("eth_sendTransaction", json!([tx]))
            })
            .collect();
        node.batch(&calls).await.expect("send batch");
        let _: Value = node.raw("evm_mine", json!([])).await.expect("mine");
        sent += n;
    }
    let head = node.head().await.expect("head");
    println!(
        "chain: {} transactions in {head} blocks, built in {:.1} s",
        transactions + 1,
        built.elapsed().as_secs_f64()
    );

    let (_dir, db, source) = index_to(&url, head).await;

    let txn = db.begin_read().expect("read");
    let report = check(&txn).expect("check");
    let bytes = |s: ots_indexer::db::TableStats| s.bytes;
    let appearances = bytes(txn.stats::<OtsAppearances>().expect("stats"));
    let family = appearances
        + bytes(txn.stats::<OtsNonceAnchors>().expect("stats"))
        + bytes(txn.stats::<OtsContractCreators>().expect("stats"));
    let per = |b: u64| b as f64 / report.appearances.max(1) as f64;
    println!(
        "appearance index: {} appearances of {} addresses; OtsAppearances {} bytes = {:.2} B/appearance; with anchors and creators {} bytes = {:.2} B/appearance",
        report.appearances,
        report.appearance_addresses,
        appearances,
        per(appearances),
        family,
        per(family)
    );
    drop(txn);

    let (ours, server) = serve(db, source).await;
    let busiest_sender = accounts[0];
    let busiest_nonce: Value =
        node.raw("eth_getTransactionCount", json!([busiest_sender, "latest"])).await.expect("n");
    let mid = u64::from_str_radix(busiest_nonce.as_str().unwrap_or("0x2").trim_start_matches("0x"), 16)
        .unwrap_or(2)
        / 2;
    let cases: [(&str, &'static str, Value); 4] = [
        (
            "sender+nonce, near-genesis sender",
            "ots_getTransactionBySenderAndNonce",
            json!([lonely_sender, 0]),
        ),
        ("searchBefore, near-genesis address", "ots_searchTransactionsBefore", json!([lonely, 0, 25])),
        (
            "sender+nonce, busiest sender (mid nonce)",
            "ots_getTransactionBySenderAndNonce",
            json!([busiest_sender, mid]),
        ),
        ("searchBefore, busiest address, same page", "ots_searchTransactionsBefore", json!([hub, 0, 25])),
    ];
    println!("{:<42} {:>12} {:>12} {:>10}", "median over HTTP", "Anvil ms", "ours ms", "ratio");
    for (name, method, params) in cases {
        let (theirs_ms, theirs) = time(&node, method, params.clone(), anvil_rounds).await;
        let (ours_ms, got) = time(&ours, method, params, our_rounds).await;
        let same = match method {
            "ots_searchTransactionsBefore" => theirs["txs"] == got["txs"],
            _ => theirs == got,
        };
        println!(
            "{name:<42} {theirs_ms:>12.2} {ours_ms:>12.3} {:>9.2}x{}",
            theirs_ms / ours_ms,
            if same { "" } else { "  (answers differ!)" }
        );
    }
    // Every call a page not asked for before (so none is in our cache): the busiest address's
    // history before each of the newest blocks in turn.
    let pages: Vec<Value> = (0..our_rounds.max(1)).map(|i| json!([hub, head - i, 25])).collect();
    let (theirs_ms, theirs) = time_each(&node, "ots_searchTransactionsBefore", &pages).await;
    let (ours_ms, got) = time_each(&ours, "ots_searchTransactionsBefore", &pages).await;
    println!(
        "{:<42} {theirs_ms:>12.2} {ours_ms:>12.3} {:>9.2}x{}",
        "searchBefore, busiest address, new pages",
        theirs_ms / ours_ms,
        if theirs["txs"] == got["txs"] { "" } else { "  (answers differ!)" }
    );
    // What such a page costs at the node alone: the calls it needs, each kind in one batch.
    let txs = theirs["txs"].as_array().cloned().unwrap_or_default();
    let bodies: Vec<(&'static str, Value)> = txs
        .iter()
        .map(|t| {
            ("eth_getTransactionByBlockNumberAndIndex", json!([t["blockNumber"], t["transactionIndex"]]))
        })
        .collect();
    let receipts: Vec<(&'static str, Value)> =
        txs.iter().map(|t| ("eth_getTransactionReceipt", json!([t["hash"]]))).collect();
    let mut floor = [Vec::new(), Vec::new()];
    for _ in 0..5 {
        for (i, calls) in [&bodies, &receipts].into_iter().enumerate() {
            let started = Instant::now();
            node.batch(calls).await.expect("node batch");
            floor[i].push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    for f in &mut floor {
        f.sort_by(f64::total_cmp);
    }
    println!(
        "node's part of one such page ({} transactions), one batch each, median of 5: bodies by block and index {:.2} ms, receipts by hash {:.2} ms",
        txs.len(),
        floor[0][2],
        floor[1][2]
    );
    let _ = server.stop();
}
