//! Reorgs on a real node while the indexer follows: after `anvil_reorg` at depths 1, 2, 7 and 64
//! and an `anvil_rollback`, every ots2 table equals a clean index of the final chain, and our
//! address pages (whose transactions the server caches) show the final chain's transactions.

use crate::common;

use std::time::{Duration, Instant};

use alloy::primitives::{Address, B256};
use common::{
    anvil::Anvil,
    workload::{self, Chain},
};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{state, AccessMode, Db},
    index::check::{check, dump},
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

fn config() -> SyncConfig {
    SyncConfig {
        batch_blocks: 16,
        concurrency: 4,
        poll_interval: Duration::from_millis(20),
        reorg_window: 128,
        ..Default::default()
    }
}

async fn clean_index(url: &str, head: u64) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(url, Duration::from_secs(10)).expect("node");
    let indexer =
        Indexer::open(db.clone(), node, vec![Box::new(Erc20Classifier)], config()).await.expect("indexer");
    indexer.sync_to(head).await.expect("clean sync");
    (dir, db)
}

/// Waits until the follower's tip is the node's head block.
async fn wait_for_head(db: &Db, node: &NodeClient) -> (u64, B256) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let head = node.head().await.expect("head");
        let hash = node.block_hash(head).await.expect("hash").expect("head block");
        let tip = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
        if tip.map(|t| (t.number, t.hash)) == Some((head, hash)) {
            return (head, hash);
        }
        assert!(Instant::now() < deadline, "the follower did not reach head {head} (at {tip:?})");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Our newest page of `address`'s transactions, as hashes, must open Anvil's whole history of it.
async fn assert_page_is_the_nodes(
    ours: &common::Client,
    anvil: &common::Client,
    address: Address,
    what: &str,
) {
    let hashes = |page: &Value| -> Vec<Value> {
        page["txs"].as_array().expect("txs").iter().map(|t| t["hash"].clone()).collect()
    };
    let page = hashes(&ours.call("ots_searchTransactionsBefore", json!([address, 0, 25])).await);
    let all = hashes(&anvil.call("ots_searchTransactionsBefore", json!([address, 0, 100_000])).await);
    assert!(!page.is_empty() && page.len() <= all.len(), "{what}: {address} page of {}", page.len());
    assert_eq!(page, all[..page.len()], "{what}: our page of {address} is not the node's chain");
}

/// Every transaction of our ots2 transfer list of `address` (whose bodies the server caches) is
/// the node's: known to it by hash, in the same block.
async fn assert_transfer_list_is_the_nodes(
    ours: &common::Client,
    anvil: &common::Client,
    address: Address,
    what: &str,
) {
    let page = ours.call("ots2_getERC20TransferList", json!([address, 0, 1000])).await;
    let results = page["results"].as_array().expect("results");
    assert!(!results.is_empty(), "{what}: {address} has transfers");
    for r in results {
        let theirs = anvil.call("eth_getTransactionByHash", json!([r["hash"]])).await;
        assert_eq!(
            (theirs["blockHash"].clone(), theirs["hash"].clone()),
            (r["transaction"]["blockHash"].clone(), r["transaction"]["hash"].clone()),
            "{what}: transfer {} of {address} is not the node's",
            r["hash"]
        );
    }
}

async fn assert_equals_clean_index(url: &str, db: &Db, node: &NodeClient, what: &str) {
    let (head, _) = wait_for_head(db, node).await;
    let (_dir, clean) = clean_index(url, head).await;
    let followed = dump(db).expect("dump");
    let fresh = dump(&clean).expect("dump");
    assert!(!fresh.is_empty());
    assert!(
        followed == fresh,
        "{what}: the followed index differs from a clean index of the final chain ({} vs {} entries)",
        followed.len(),
        fresh.len()
    );
    check(&db.begin_read().expect("read")).unwrap_or_else(|e| panic!("{what}: check failed: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reorgs_unwind_to_exactly_the_clean_index() {
    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;
    let acc = work.accounts.clone();
    let demo = work.tokens[0].address;
    let mut chain = Chain::connect(&anvil.url);
    for i in 0..70 {
        chain.transfer(demo, acc[5 + i % 10], acc[6 + i % 10], 1).await;
        chain.transfer(demo, acc[0], acc[26], 1).await;
        chain.mine().await;
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let node = NodeClient::connect(&anvil.url, Duration::from_secs(10)).expect("node");
    let indexer = Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], config())
        .await
        .expect("indexer");
    let follower = common::follower::Follower::start(indexer);
    assert_equals_clean_index(&anvil.url, &db, &node, "before any reorg").await;
    let (ours, server) = common::serve(&db, node.clone()).await;
    let theirs = common::Client::new(&anvil.url);

    for (round, depth) in [1u64, 2, 7, 64].into_iter().enumerate() {
        // Activity that the reorg will take away: a new token, transfers of it and of DEMO.
        chain.reset_nonces();
        chain.deploy_token(acc[27], &format!("Doomed {round}"), "DOOM").await;
        chain.transfer(demo, acc[0], acc[28], 1).await;
        chain.mine().await;
        chain.transfer(demo, acc[28], acc[29], 1).await;
        chain.mine().await;
        wait_for_head(&db, &node).await;
        for who in [acc[0], acc[28]] {
            // Fills the server's cache with the transactions the reorg takes away.
            assert_page_is_the_nodes(&ours, &theirs, who, &format!("before reorg {depth}")).await;
            assert_transfer_list_is_the_nodes(&ours, &theirs, who, &format!("before reorg {depth}")).await;
        }

        let replacement = json!([
            [Chain::transfer_request(demo, acc[0], acc[27], 7), 0],
            [Chain::transfer_request(demo, acc[27], acc[5], 1), depth - 1]
        ]);
        chain.call("anvil_reorg", json!([depth, replacement])).await;
        assert_equals_clean_index(&anvil.url, &db, &node, &format!("reorg depth {depth}")).await;
        for who in [acc[0], acc[27]] {
            assert_page_is_the_nodes(&ours, &theirs, who, &format!("after reorg {depth}")).await;
            assert_transfer_list_is_the_nodes(&ours, &theirs, who, &format!("after reorg {depth}")).await;
        }
    }

    chain.call("anvil_rollback", json!([3])).await;
    assert_equals_clean_index(&anvil.url, &db, &node, "rollback of 3").await;
    assert_page_is_the_nodes(&ours, &theirs, acc[0], "after the rollback").await;
    let _ = server.stop();

    follower.stop().await;
}
