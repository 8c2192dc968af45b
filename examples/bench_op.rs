//! The OP Stack's busiest addresses (issue "Every EVM chain"): on an OP chain every block begins
//! with the L1 attributes deposit, from the L1 attributes depositor to the L1Block predeploy, so
//! those two addresses appear in every block. This builds such a chain on `anvil --optimism`
//! (chain id 10): each block a deposit to `0x4200…0015` first, then transfers from 28 senders to
//! 3,000 addresses, a quarter of them to one hub; indexes it, serves it, and times over HTTP the
//! pages, counts and summary (and a sender's transaction by nonce) of the depositor, the
//! predeploy, the hub and a busy sender (ordinary addresses about as busy) and an address seen
//! once near genesis. Anvil's own `ots_searchTransactionsBefore` checks each first page.
//!
//! Anvil gives an impersonated sender's deposits one hash in blocks and another in receipts, so
//! the depositor here is one of Anvil's dev accounts, not `0xdeaddead…0001`: which address sends
//! the deposits does not matter to the index, only that one does in every block.
//!
//! `scripts/bench-op.sh` runs it in release mode.
//! Usage: bench_op [BLOCKS] [TXS_PER_BLOCK] [ROUNDS]

use std::time::Instant;

use alloy_primitives::{address, keccak256, Address, B256};
use ots_indexer::index::check::check;
use serde_json::{json, Value};

#[path = "common/node_bench.rs"]
mod node_bench;

use node_bench::{index_to, serve, start_anvil, time, time_each};

/// The L1Block predeploy every L1 attributes deposit calls.
const L1_BLOCK: Address = address!("4200000000000000000000000000000000000015");

fn arg(n: usize, default: u64) -> u64 {
    std::env::args().nth(n).and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let blocks = arg(1, 20_000).max(2);
    let per_block = arg(2, 5).max(1);
    let rounds = arg(3, 21).max(1);

    let (_anvil, url, node) = start_anvil(&["--optimism", "--chain-id", "10"]).await;
    let accounts: Vec<Address> = node.raw("eth_accounts", json!([])).await.expect("accounts");
    let depositor = accounts[29];
    let lonely_sender = accounts[28];
    let lonely = Address::repeat_byte(0x10);
    let hub = Address::repeat_byte(0x4b);
    let recipients: Vec<Address> =
        (0u64..3000).map(|i| Address::from_slice(&keccak256(i.to_be_bytes())[12..])).collect();
    // What an Ecotone L1 attributes deposit carries: a selector and 160 bytes of L1 block values.
    let attributes = format!("0x440a5e20{}", "00".repeat(160));

    let built = Instant::now();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut nonces = [0u64; 30];
    for number in 1..=blocks {
        // The deposit first: `--order fifo` keeps it at index 0.
        let source = B256::from(keccak256(number.to_be_bytes()));
        let deposit = json!({
            "from": depositor, "to": L1_BLOCK, "value": "0x0", "gas": "0xf4240", "data": attributes,
            "sourceHash": source, "mint": "0x0", "isSystemTx": false,
        });
        let _: Value = node.raw("eth_sendTransaction", json!([deposit])).await.expect("deposit");
        let calls: Vec<(&'static str, Value)> = (0..per_block - 1)
            .map(|_| {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                let sender = ((state >> 20) % 28) as usize;
                let (from, to) = if number == 1 {
                    (lonely_sender, lonely)
                } else if state >> 62 == 0 {
                    (accounts[sender], hub)
                } else {
                    (accounts[sender], recipients[((state >> 33) % 3000) as usize])
                };
                let slot = if from == lonely_sender { 28 } else { sender };
                let nonce = nonces[slot];
                nonces[slot] += 1;
                let tx = json!({"from": from, "to": to, "value": "0x1", "gas": "0x5208", "nonce": format!("{nonce:#x}")});
                ("eth_sendTransaction", json!([tx]))
            })
            .take(if number == 1 { 1 } else { usize::MAX })
            .collect();
        if !calls.is_empty() {
            node.batch(&calls).await.expect("send batch");
        }
        let _: Value = node.raw("evm_mine", json!([])).await.expect("mine");
    }
    let head = node.head().await.expect("head");
    println!(
        "chain: {head} blocks, a deposit first in each, built in {:.1} s",
        built.elapsed().as_secs_f64()
    );

    let (_dir, db, source) = index_to(&url, head).await;
    check(&db.begin_read().expect("read")).expect("check");

    let (ours, server) = serve(db, source).await;

    let hex = |v: &Value| {
        u64::from_str_radix(v.as_str().unwrap_or("0x0").trim_start_matches("0x"), 16).unwrap_or(0)
    };
    println!(
        "{:<34} {:>12} {:>11} {:>11} {:>11} {:>11} {:>13}   (ms over HTTP, median of {rounds})",
        "address", "appearances", "first page", "new pages", "oldest page", "summary", "sender+nonce"
    );
    for (name, who, sends) in [
        ("L1 attributes depositor", depositor, true),
        ("L1Block predeploy 0x4200…0015", L1_BLOCK, false),
        ("hub (busy ordinary recipient)", hub, false),
        ("busy ordinary sender", accounts[0], true),
        ("near-genesis address", lonely, false),
    ] {
        let (first_ms, first) =
            time(&ours, "ots_searchTransactionsBefore", json!([who, 0, 25]), rounds).await;
        let theirs: Value =
            node.raw("ots_searchTransactionsBefore", json!([who, 0, 25])).await.expect("anvil's page");
        let theirs_txs = theirs["txs"].as_array().cloned().unwrap_or_default();
        let ours_txs = first["txs"].as_array().cloned().unwrap_or_default();
        let mut notes = String::new();
        if ours_txs.is_empty()
            || ours_txs.len() > theirs_txs.len()
            || ours_txs.iter().zip(&theirs_txs).any(|(a, b)| a["hash"] != b["hash"])
        {
            notes.push_str("   (first page differs from Anvil's!)");
        }
        let pages: Vec<Value> = (0..rounds).map(|i| json!([who, head - i, 25])).collect();
        let (new_ms, _) = time_each(&ours, "ots_searchTransactionsBefore", &pages).await;
        let (oldest_ms, _) = time(&ours, "ots_searchTransactionsAfter", json!([who, 0, 25]), rounds).await;
        let (summary_ms, summary) = time(&ours, "ots2_getAddressSummary", json!([who]), rounds).await;
        let appearances = hex(&summary["transactions"]["all"]);
        let nonce_ms = if sends {
            let mid = hex(&summary["transactions"]["sent"]) / 2;
            let (ms, found) =
                time(&ours, "ots_getTransactionBySenderAndNonce", json!([who, mid]), rounds).await;
            // The depositor's k-th deposit opens block k + 1.
            if who == depositor {
                let block: Value = node
                    .raw("eth_getBlockByNumber", json!([format!("{:#x}", mid + 1), false]))
                    .await
                    .expect("block");
                if found != block["transactions"][0] {
                    notes.push_str("   (sender+nonce is not the deposit of its block!)");
                }
            }
            format!("{ms:.3}")
        } else {
            "-".to_owned()
        };
        println!(
            "{name:<34} {appearances:>12} {first_ms:>11.3} {new_ms:>11.3} {oldest_ms:>11.3} {summary_ms:>11.3} {nonce_ms:>13}{notes}"
        );
    }
    let _ = server.stop();
}
