//! Random reorgs while following, with the server's caches warm: each round adds blocks of
//! transfers, reads the pages of the parties they touched (so the server caches what the reorg
//! takes away), reorganises the last 1–64 blocks with other transactions, waits for the indexer
//! to follow, and compares those pages with the node's chain. On Anvil (`anvil_reorg`), over HTTP
//! and over ws://. CI runs a few rounds; `scripts/reorg-soak.sh` runs many
//! (`OTS_SOAK_ROUNDS`) and prints the follow time after each reorg (median and max).

mod common;

use std::time::{Duration, Instant};

use alloy::primitives::Address;
use common::{
    anvil::Anvil,
    follower::Follower,
    workload::{self, Chain},
    Client,
};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{state, AccessMode, Db},
    index::check::check,
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

/// A small deterministic generator (xorshift64*), so that a failing round can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

fn rounds() -> u64 {
    std::env::var("OTS_SOAK_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(6)
}

/// Waits until the index's tip is the node's head block; the time it took.
async fn followed(db: &Db, node: &NodeClient) -> Duration {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    loop {
        let head = node.head().await.expect("head");
        let hash = node.block_hash(head).await.expect("hash").expect("head block");
        let tip = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
        if tip.map(|t| (t.number, t.hash)) == Some((head, hash)) {
            return started.elapsed();
        }
        assert!(Instant::now() < deadline, "the follower did not reach head {head} (at {tip:?})");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn hashes(page: &Value) -> Vec<Value> {
    page["txs"].as_array().expect("txs").iter().map(|t| t["hash"].clone()).collect()
}

/// `address`'s newest page and ERC20 transfer list are the node's chain: the page opens Anvil's
/// own history of it, and every listed transfer is the node's transaction in the node's block.
async fn pages_are_the_nodes(ours: &Client, node: &Client, address: Address, what: &str) {
    let page = hashes(&ours.call("ots_searchTransactionsBefore", json!([address, 0, 25])).await);
    // Anvil's own page holds whole blocks: at least as many transactions as asked for, when
    // there are that many.
    let all = hashes(&node.call("ots_searchTransactionsBefore", json!([address, 0, 25])).await);
    assert!(page.len() <= all.len(), "{what}: {address}");
    assert_eq!(page, all[..page.len()], "{what}: our page of {address} is not the node's chain");
    let list = ours.call("ots2_getERC20TransferList", json!([address, 0, 10])).await;
    for r in list["results"].as_array().expect("results") {
        let theirs = node.call("eth_getTransactionByHash", json!([r["hash"]])).await;
        assert_eq!(
            theirs["blockHash"], r["transaction"]["blockHash"],
            "{what}: transfer {} of {address} is not in the node's chain",
            r["hash"]
        );
    }
}

async fn soak(ws: bool, rounds: u64, seed: u64) {
    let anvil = Anvil::start(&[]);
    let work = workload::run(&anvil.url).await;
    let acc = work.accounts.clone();
    let token = work.tokens[0].address;
    let mut chain = Chain::connect(&anvil.url);
    // Enough blocks under the head for a reorg of 64.
    for i in 0..66 {
        chain.transfer(token, acc[0], acc[10 + i % 10], 1).await;
        chain.mine().await;
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let url = if ws { anvil.url.replace("http://", "ws://") } else { anvil.url.clone() };
    let node = NodeClient::open(&url, Duration::from_secs(10)).await.expect("node");
    let config = SyncConfig {
        batch_blocks: 16,
        concurrency: 4,
        poll_interval: Duration::from_millis(20),
        ..Default::default()
    };
    let indexer = Indexer::open(db.clone(), node.clone(), vec![Box::new(Erc20Classifier)], config)
        .await
        .expect("indexer");
    let follower = Follower::start(indexer);
    followed(&db, &node).await;
    let (ours, server) = common::serve(&db, node.clone()).await;
    let theirs = Client::new(&anvil.url);

    let mut rng = Rng(seed | 1);
    let mut follow_times = Vec::new();
    for round in 0..rounds {
        let depth = 1 + rng.below(64);
        // Activity the reorg may take away, among parties 20..30.
        let mut parties = vec![acc[0]];
        for _ in 0..1 + rng.below(3) {
            let (from, to) = (acc[20 + rng.below(10) as usize], acc[20 + rng.below(10) as usize]);
            chain.transfer(token, acc[0], from, 5).await;
            chain.transfer(token, from, to, 1).await;
            chain.mine().await;
            parties.extend([from, to]);
        }
        parties.sort_unstable();
        parties.dedup();
        followed(&db, &node).await;
        for who in &parties {
            pages_are_the_nodes(&ours, &theirs, *who, &format!("round {round} before")).await;
        }
        let (a, b) = (acc[20 + rng.below(10) as usize], acc[20 + rng.below(10) as usize]);
        let replacement = json!([
            [Chain::transfer_request(token, acc[0], a, 3), 0],
            [Chain::transfer_request(token, acc[0], b, 2), depth - 1]
        ]);
        chain.reset_nonces();
        theirs.call("anvil_reorg", json!([depth, replacement])).await;
        follow_times.push(followed(&db, &node).await);
        parties.extend([a, b]);
        for who in &parties {
            pages_are_the_nodes(&ours, &theirs, *who, &format!("round {round} after a reorg of {depth}"))
                .await;
        }
        eprintln!(
            "reorg-soak {} round {round}: depth {depth}, followed in {:.1} ms",
            if ws { "ws" } else { "http" },
            follow_times[follow_times.len() - 1].as_secs_f64() * 1e3
        );
    }
    let _ = server.stop();
    follower.stop().await;
    check(&db.begin_read().expect("read")).expect("check after the soak");

    follow_times.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "reorg-soak {} summary: {rounds} rounds, no difference; follow time median {:.1} ms, max {:.1} ms",
        if ws { "ws" } else { "http" },
        ms(follow_times[follow_times.len() / 2]),
        ms(follow_times[follow_times.len() - 1]),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_reorgs_over_http_leave_every_page_the_nodes() {
    soak(false, rounds(), 0x5eed_0001).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_reorgs_over_websocket_leave_every_page_the_nodes() {
    soak(true, rounds(), 0x5eed_0002).await;
}
