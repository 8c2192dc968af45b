//! Blocks rewarded (coinbase → block) on a real node, and consensus-layer withdrawals on a
//! generated chain (Anvil makes none): counts, pages, `OtsWithdrawalIdx2Block`, exact unwind.

use crate::common;

use std::{collections::BTreeMap, time::Duration};

use alloy::primitives::{keccak256, Address, B256};
use common::{anvil::Anvil, workload::Chain};
use ots_classifiers::{BlockData, Withdrawal};
use ots_indexer::{
    db::{codec::Count, state::ChainIdentity, tables::*, AccessMode, Db},
    index::{
        address_index::{count, page, IdList},
        check::{check, dump},
        journal::unwind_to,
    },
    source::{
        fixture::{write_recording, Fixture},
        NodeClient,
    },
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

fn hex_u64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex string").trim_start_matches("0x"), 16).expect("hex")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_rewarded_follow_the_coinbase() {
    let anvil = Anvil::start(&[]);
    let mut chain = Chain::connect(&anvil.url);
    let accounts = chain.accounts().await;
    chain.deploy_token(accounts[0], "Fee Token", "FEE").await;
    chain.mine().await;
    chain.mine().await; // an empty block
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(30)).expect("node");
    let head = node.head().await.expect("head");

    let mut expected: BTreeMap<Address, Vec<u64>> = BTreeMap::new();
    let mut with_txs = Vec::new();
    for n in 0..=head {
        let block = chain.call("eth_getBlockByNumber", json!([format!("{n:#x}"), false])).await;
        let miner: Address = serde_json::from_value(block["miner"].clone()).expect("miner");
        expected.entry(miner).or_default().push(n);
        if !block["transactions"].as_array().expect("txs").is_empty() {
            with_txs.push(n);
        }
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("db");
    let classifiers = ots_classifiers::Registry::builtin().resolve(&["erc20"]).expect("erc20");
    let indexer =
        Indexer::open(db.clone(), node.clone(), classifiers, SyncConfig::default()).await.expect("open");
    indexer.sync_to(head).await.expect("sync");
    let (client, server) = common::serve(&db, node).await;

    for (miner, blocks) in &expected {
        assert_eq!(client.call("ots2_getBlocksRewardedCount", json!([miner])).await, json!(blocks.len()));
        let page = client.call("ots2_getBlocksRewardedList", json!([miner, 0, 1000])).await;
        let listed: Vec<u64> =
            page["results"].as_array().expect("results").iter().map(|r| hex_u64(&r["blockNumber"])).collect();
        assert_eq!(&listed, blocks, "{miner}");
        for n in blocks {
            let summary = &page["blocksSummary"][format!("{n:#x}")];
            let fees = hex_u64(&summary["totalFees"]);
            assert_eq!(fees > 0, with_txs.contains(n), "fees of block {n}: {summary}");
            assert!(summary["timestamp"].as_u64().is_some());
        }
    }
    assert_eq!(client.call("ots2_getBlocksRewardedCount", json!([Address::repeat_byte(9)])).await, json!(0));
    server.stop().ok();
}

const BLOCKS: u64 = 40;

fn hash_of(n: u64) -> B256 {
    keccak256(n.to_be_bytes())
}

/// A chain whose blocks pay withdrawals to three addresses (none in every third block) and
/// alternate between two fee recipients.
fn generated_chain() -> (Vec<BlockData>, [Address; 3]) {
    let recipients = [Address::repeat_byte(0xa1), Address::repeat_byte(0xb2), Address::repeat_byte(0xc3)];
    let mut next_index = 0u64;
    let blocks = (0..BLOCKS)
        .map(|n| {
            let count = if n % 3 == 0 { 0 } else { n % 4 + 1 };
            let withdrawals = (0..count)
                .map(|k| {
                    let w = Withdrawal {
                        index: next_index,
                        validator_index: 1000 + k,
                        address: recipients[((n + k) % 3) as usize],
                        amount_gwei: 32_000 + n,
                    };
                    next_index += 1;
                    w
                })
                .collect();
            BlockData {
                number: n,
                hash: hash_of(n),
                parent_hash: if n == 0 { B256::ZERO } else { hash_of(n - 1) },
                timestamp: 1_700_000_000 + 12 * n,
                coinbase: if n % 2 == 0 { recipients[0] } else { Address::repeat_byte(0xfe) },
                gas_limit: 30_000_000,
                transactions: vec![],
                receipts: vec![],
                frames: None,
                withdrawals,
                code_removed: Vec::new(),
            }
        })
        .collect();
    (blocks, recipients)
}

fn expected_withdrawals(blocks: &[BlockData], upto: u64) -> BTreeMap<Address, Vec<u64>> {
    let mut out: BTreeMap<Address, Vec<u64>> = BTreeMap::new();
    for b in blocks.iter().filter(|b| b.number <= upto) {
        for w in &b.withdrawals {
            out.entry(w.address).or_default().push(w.index);
        }
    }
    out
}

fn assert_withdrawals(db: &Db, blocks: &[BlockData], upto: u64) {
    let txn = db.begin_read().expect("read");
    for (address, want) in expected_withdrawals(blocks, upto) {
        assert_eq!(count(&txn, IdList::Withdrawals, &address).expect("count"), want.len() as u64);
        let got = page(&txn, IdList::Withdrawals, &address, 0, 1000).expect("page");
        assert_eq!(got, want, "{address} up to block {upto}");
        // Every withdrawal finds its block through OtsWithdrawalIdx2Block (docs/format.md).
        let mut idx2block = txn.cursor::<OtsWithdrawalIdx2Block>().expect("cursor");
        for index in want {
            let (_, block) = idx2block.seek(&Count(index)).expect("seek").expect("a block holds it");
            let holder =
                blocks.iter().find(|b| b.withdrawals.iter().any(|w| w.index == index)).expect("holder");
            assert_eq!(block.0, holder.number, "withdrawal {index}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn withdrawals_index_and_unwind_on_a_generated_chain() {
    let (blocks, recipients) = generated_chain();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("withdrawals.jsonl.gz");
    let chain = ChainIdentity { chain_id: 31_337, genesis_hash: hash_of(0) };
    write_recording(&file, chain, &blocks).expect("record");

    let db = Db::open(&dir.path().join("db"), AccessMode::ReadWrite).expect("db");
    let config = SyncConfig { batch_blocks: 7, ..SyncConfig::default() };
    let indexer = Indexer::open(db.clone(), Fixture::load(&file).expect("load"), vec![], config.clone())
        .await
        .expect("open");
    indexer.sync_to(BLOCKS - 1).await.expect("sync");
    check(&db.begin_read().expect("read")).expect("check");
    assert_withdrawals(&db, &blocks, BLOCKS - 1);
    {
        let txn = db.begin_read().expect("read");
        let even: Vec<u64> = (0..BLOCKS).filter(|n| n % 2 == 0).collect();
        let got = page(&txn, IdList::BlocksRewarded, &recipients[0], 0, 100).expect("rewarded");
        assert_eq!(got, even);
    }
    let clean = dump(&db).expect("dump");

    // Unwind into the middle of a batch, then re-index: the same database.
    for to in [25, 9, 33] {
        let txn = db.begin_write().expect("write");
        unwind_to(&txn, to).expect("unwind");
        txn.commit().expect("commit");
        check(&db.begin_read().expect("read")).expect("check after unwind");
        assert_withdrawals(&db, &blocks, to);
        indexer.sync_to(BLOCKS - 1).await.expect("re-index");
        assert!(dump(&db).expect("dump") == clean, "re-index after unwind to {to}");
    }

    // Counts come from the database; lists need the node's blocks, and say so when it is down.
    let dead = NodeClient::connect("http://127.0.0.1:9", Duration::from_secs(2)).expect("url");
    let (client, server) = common::serve(&db, dead).await;
    let want = expected_withdrawals(&blocks, BLOCKS - 1);
    for (address, indexes) in &want {
        assert_eq!(client.call("ots2_getWithdrawalsCount", json!([address])).await, json!(indexes.len()));
    }
    let err =
        client.try_call("ots2_getWithdrawalsList", json!([recipients[1], 0, 5])).await.expect_err("no node");
    assert!(err.1.to_lowercase().contains("node"), "{err:?}");
    server.stop().ok();
}
