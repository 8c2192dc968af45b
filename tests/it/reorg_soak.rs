//! Random reorgs while following, with the server's caches warm: each round adds blocks of
//! transfers, reads the pages of the parties they touched (so the server caches what the reorg
//! takes away), reorganises the last 1–64 blocks with other transactions, waits for the indexer
//! to follow, and compares those pages with the node's chain. On Anvil (`anvil_reorg`) and on
//! geth (`debug_setHead` and a new fork sealed on top), each over HTTP and over ws://. CI runs a
//! few rounds; `scripts/reorg-soak.sh` runs many (`OTS_SOAK_ROUNDS`) and prints the follow time
//! after each reorg (median and max).

use crate::common;

use std::time::{Duration, Instant};

use alloy::{
    primitives::{Address, Bytes, B256, U256},
    sol,
    sol_types::{SolCall, SolValue},
};
use common::{
    anvil::Anvil,
    follower::Follower,
    geth::{Dev, Geth},
    workload::{self, Chain},
    Client,
};
use jsonrpsee::server::ServerHandle;
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{state, AccessMode, Db},
    index::check::check,
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};
use serde_json::{json, Value};

sol! {
    function transfer(address to, uint256 value) returns (bool);
}

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
async fn followed(db: &Db, node: &NodeClient, follower: &mut Follower) -> Duration {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    loop {
        let head = node.head().await.expect("head");
        let hash = node.block_hash(head).await.expect("hash").expect("head block");
        let tip = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
        if tip.map(|t| (t.number, t.hash)) == Some((head, hash)) {
            return started.elapsed();
        }
        if let Some(why) = follower.ended_with().await {
            panic!("the follower ended at {tip:?} (head {head}): {why}");
        }
        assert!(Instant::now() < deadline, "the follower did not reach head {head} (at {tip:?})");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// An index in a temporary directory following the node at `url` (over ws:// when `ws`), at
/// the node's head, and our API serving it.
async fn following(
    url: &str,
    ws: bool,
) -> (tempfile::TempDir, Db, NodeClient, Follower, (Client, ServerHandle)) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
    let url = if ws { url.replace("http://", "ws://") } else { url.to_owned() };
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
    let mut follower = Follower::start(indexer);
    followed(&db, &node, &mut follower).await;
    let api = common::serve(&db, node.clone()).await;
    (dir, db, node, follower, api)
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

async fn anvil_soak(ws: bool, rounds: u64, seed: u64) {
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

    let (_dir, db, node, mut follower, (ours, server)) = following(&anvil.url, ws).await;
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
        followed(&db, &node, &mut follower).await;
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
        follow_times.push(followed(&db, &node, &mut follower).await);
        parties.extend([a, b]);
        for who in &parties {
            pages_are_the_nodes(&ours, &theirs, *who, &format!("round {round} after a reorg of {depth}"))
                .await;
        }
        eprintln!(
            "reorg-soak anvil {} round {round}: depth {depth}, followed in {:.1} ms",
            transport(ws),
            follow_times[follow_times.len() - 1].as_secs_f64() * 1e3
        );
    }
    let _ = server.stop();
    follower.stop().await;
    check(&db.begin_read().expect("read")).expect("check after the soak");

    summary("anvil", ws, follow_times);
}

fn transport(ws: bool) -> &'static str {
    if ws {
        "ws"
    } else {
        "http"
    }
}

/// Prints the follow times' median and max.
fn summary(node: &str, ws: bool, mut follow_times: Vec<Duration>) {
    follow_times.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "reorg-soak {node} {} summary: {} rounds, no difference; follow time median {:.1} ms, max {:.1} ms",
        transport(ws),
        follow_times.len(),
        ms(follow_times[follow_times.len() / 2]),
        ms(follow_times[follow_times.len() - 1]),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_reorgs_on_anvil_over_http_leave_every_page_the_nodes() {
    anvil_soak(false, rounds(), 0x5eed_0001).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_reorgs_on_anvil_over_websocket_leave_every_page_the_nodes() {
    anvil_soak(true, rounds(), 0x5eed_0002).await;
}

/// What the test knows of one transaction of the node's chain: the dev account's ether payment
/// to `paid`, or its token transfer to `credited`.
#[derive(Debug, Clone, Copy)]
struct Mirrored {
    hash: B256,
    paid: Option<Address>,
    credited: Option<Address>,
}

/// The node's canonical chain as the test read it, block by block: what a page of ours must
/// equal. geth has no `ots_` namespace to compare with, so the expected pages come from here.
#[derive(Debug, Default, Clone)]
struct Mirror {
    blocks: Vec<(B256, Vec<Mirrored>)>,
}

impl Mirror {
    /// Reads the blocks that changed since the last call: back from the head to the first block
    /// whose hash the mirror already has, then forward.
    async fn catch_up(&mut self, node: &Client, token: Address) {
        let head = hex_u64(&node.call("eth_blockNumber", json!([])).await);
        self.blocks.truncate(head as usize + 1);
        while let Some((hash, _)) = self.blocks.last() {
            let n = self.blocks.len() - 1;
            let now = node.call("eth_getBlockByNumber", json!([format!("{n:#x}"), false])).await;
            if now["hash"] == json!(hash) {
                break;
            }
            self.blocks.pop();
        }
        for n in self.blocks.len() as u64..=head {
            let block = node.call("eth_getBlockByNumber", json!([format!("{n:#x}"), true])).await;
            let txs = block["transactions"]
                .as_array()
                .expect("transactions")
                .iter()
                .map(|tx| {
                    let to: Option<Address> = serde_json::from_value(tx["to"].clone()).expect("to");
                    let input: Bytes = serde_json::from_value(tx["input"].clone()).expect("input");
                    let credited = (to == Some(token))
                        .then(|| transferCall::abi_decode(&input).ok().map(|c| c.to))
                        .flatten();
                    Mirrored {
                        hash: serde_json::from_value(tx["hash"].clone()).expect("hash"),
                        paid: to.filter(|_| tx["value"] != json!("0x0")),
                        credited,
                    }
                })
                .collect();
            self.blocks.push((serde_json::from_value(block["hash"].clone()).expect("hash"), txs));
        }
    }

    /// The hashes of the transactions `select` picks, oldest first.
    fn picked(&self, select: impl Fn(&Mirrored) -> bool) -> Vec<B256> {
        self.blocks.iter().flat_map(|(_, txs)| txs.iter().filter(|t| select(t)).map(|t| t.hash)).collect()
    }
}

/// Waits until the index's tip is the node's head and the mirror has read up to it: geth may
/// seal another block between the two; the time the first wait took.
async fn settle(
    (db, node, follower): (&Db, &NodeClient, &mut Follower),
    mirror: &mut Mirror,
    geth: &Client,
    token: Address,
) -> Duration {
    let took = followed(db, node, follower).await;
    let mut busy_since = Instant::now();
    loop {
        mirror.catch_up(geth, token).await;
        let tip = state::read_state(&db.begin_read().expect("read")).expect("state").checkpoint;
        // Nothing left in geth's pool (what it took back from dropped blocks is mined when it
        // pleases), and the same head a moment later: the chain stands still for the checks.
        let status = geth.call("txpool_status", json!([])).await;
        let idle = status["pending"] == json!("0x0") && status["queued"] == json!("0x0");
        if idle && tip.map(|t| t.hash) == mirror.blocks.last().map(|(hash, _)| *hash) {
            tokio::time::sleep(Duration::from_millis(30)).await;
            let head = hex_u64(&geth.call("eth_blockNumber", json!([])).await);
            if head + 1 == mirror.blocks.len() as u64 {
                return took;
            }
        }
        if idle {
            busy_since = Instant::now();
        } else if busy_since.elapsed() > Duration::from_secs(2) {
            // geth's dev mode sometimes fails to seal right after `debug_setHead` ("BAD BLOCK:
            // unknown ancestor", its own log) and then waits for the next transaction; and its
            // pool may have handed out the dropped chain's nonces, leaving transactions queued
            // behind a gap for ever. A transaction with the chain's next nonce, to an address
            // no page is read of, answers both (a refusal means that nonce is taken: fine).
            let from = geth_dev(geth).await;
            let nonce = geth.call("eth_getTransactionCount", json!([from, "latest"])).await;
            let tx = json!({"from": from, "to": Address::repeat_byte(0xde), "value": "0x1", "nonce": nonce});
            let _ = geth.try_call("eth_sendTransaction", json!([tx])).await;
            busy_since = Instant::now() - Duration::from_millis(1800);
        }
        followed(db, node, follower).await;
    }
}

/// geth's dev account.
async fn geth_dev(geth: &Client) -> Address {
    serde_json::from_value(geth.call("eth_accounts", json!([])).await[0].clone()).expect("dev account")
}

/// Waits (two seconds at most) until geth's pool has taken in a `debug_setHead` and mined what
/// it took back of the dropped blocks: an empty pool whose next nonce is the chain's, three
/// looks in a row.
async fn pool_reset(dev: &Dev) {
    let mut quiet = 0;
    for _ in 0..100 {
        let nonce = |tag: &'static str| dev.node.call("eth_getTransactionCount", json!([dev.from, tag]));
        let status = dev.node.call("txpool_status", json!([])).await;
        let empty = status["pending"] == json!("0x0") && status["queued"] == json!("0x0");
        quiet = if empty && nonce("pending").await == nonce("latest").await { quiet + 1 } else { 0 };
        if quiet == 3 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn hex_u64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().expect("hex").trim_start_matches("0x"), 16).expect("hex number")
}

/// What differs between `party`'s pages and the node's chain as `mirror` holds it, if anything:
/// its newest page must hold the newest payments to it, its ERC20 transfer count and last ten
/// transfers the token credits to it.
async fn mirror_differences(ours: &Client, node: &Client, mirror: &Mirror, party: Address) -> Option<String> {
    let mut paid = mirror.picked(|t| t.paid == Some(party));
    paid.reverse();
    let page: Vec<B256> = hashes(&ours.call("ots_searchTransactionsBefore", json!([party, 0, 25])).await)
        .into_iter()
        .map(|h| serde_json::from_value(h).expect("hash"))
        .collect();
    if page.len() < paid.len().min(25) || page.len() > paid.len() || page != paid[..page.len()] {
        return Some(format!(
            "the page of {party} holds {page:?}, the node's chain {paid:?}; the node has them at {:#?}",
            where_the_node_has(node, &page).await
        ));
    }
    let credited = mirror.picked(|t| t.credited == Some(party));
    let count = ours.call("ots2_getERC20TransferCount", json!([party])).await;
    let from = credited.len().saturating_sub(10);
    let list = ours.call("ots2_getERC20TransferList", json!([party, from, 10])).await;
    let listed: Vec<B256> = list["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| serde_json::from_value(r["hash"].clone()).expect("hash"))
        .collect();
    if count != json!(credited.len()) || listed != credited[from..] {
        let all = ours.call("ots2_getERC20TransferList", json!([party, 0, 1000])).await;
        let ours: Vec<B256> = all["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| serde_json::from_value(r["hash"].clone()).expect("hash"))
            .collect();
        return Some(format!(
            "{party} has {count} transfers, the node's chain {credited:?}; ours are at {:#?}",
            where_the_node_has(node, &ours).await
        ));
    }
    None
}

/// Where the node has each of `hashes`: block number and hash, or null.
async fn where_the_node_has(node: &Client, hashes: &[B256]) -> Vec<String> {
    let mut out = Vec::new();
    for hash in hashes {
        let tx = node.call("eth_getTransactionByHash", json!([hash])).await;
        out.push(format!("{hash}: block {} {}", tx["blockNumber"], tx["blockHash"]));
    }
    out
}

/// Waits until the index and the mirror stand at geth's head, then compares the pages of
/// `parties` with the mirror. geth may still mine, later, transactions its pool took back from
/// dropped blocks: a difference found while the chain moved on is looked at again once it
/// stands still; one found on a chain that did not move fails the test.
async fn pages_are_the_chains(
    following: (&Db, &NodeClient, &mut Follower),
    (ours, mirror, geth, token): (&Client, &mut Mirror, &Client, Address),
    parties: &[Address],
    what: &str,
) -> Duration {
    let (db, node, follower) = following;
    let took = settle((db, node, &mut *follower), mirror, geth, token).await;
    for _ in 0..5 {
        let head = mirror.blocks.last().map(|(hash, _)| *hash);
        let mut differences = Vec::new();
        for who in parties {
            differences.extend(mirror_differences(ours, geth, mirror, *who).await);
        }
        if differences.is_empty() {
            return took;
        }
        let mut now = Mirror { blocks: mirror.blocks.clone() };
        now.catch_up(geth, token).await;
        assert_ne!(now.blocks.last().map(|(hash, _)| *hash), head, "{what}: {differences:#?}");
        settle((db, node, &mut *follower), mirror, geth, token).await;
    }
    panic!("{what}: the chain kept moving");
}

async fn geth_soak(ws: bool, rounds: u64, seed: u64) {
    // `OTS_TEST_LOG=ots=info` shows what the follower did.
    if std::env::var_os("OTS_TEST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(tracing_subscriber::EnvFilter::from_env("OTS_TEST_LOG"))
            .try_init();
    }
    let geth = Geth::start();
    let dev = Dev::of(&geth).await;
    let supply = U256::from(10u64).pow(U256::from(24));
    let token = dev
        .deploy("DemoToken", ("Soak Token".to_owned(), "SOAK".to_owned(), supply).abi_encode_params())
        .await;
    let parties: Vec<Address> = (0..10u8).map(|i| Address::repeat_byte(0x20 + i)).collect();
    let mut rng = Rng(seed | 1);
    let pay = |to: Address, value: u64| {
        let dev = dev.clone();
        async move { dev.send(Some(to), value, Bytes::new()).await }
    };
    let credit = |to: Address, amount: u64| {
        let dev = dev.clone();
        let data = transferCall { to, value: U256::from(amount) }.abi_encode();
        async move { dev.send(Some(token), 0, data.into()).await }
    };
    // geth seals a block per transaction: enough blocks under the head for a reorg of 64.
    for i in 0..66 {
        let to = parties[i % 10];
        if i % 2 == 0 {
            pay(to, 1 + i as u64).await;
        } else {
            credit(to, 1 + i as u64).await;
        }
    }

    let (_dir, db, node, mut follower, (ours, server)) = following(&geth.url, ws).await;
    let mut mirror = Mirror::default();
    mirror.catch_up(&dev.node, token).await;

    let mut highest = hex_u64(&dev.node.call("eth_blockNumber", json!([])).await);
    let mut follow_times = Vec::new();
    for round in 0..rounds {
        let depth = 1 + rng.below(64);
        // Activity the reorg may take away.
        let mut touched = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let (a, b) = (parties[rng.below(10) as usize], parties[rng.below(10) as usize]);
            pay(a, 1 + rng.below(1000)).await;
            credit(b, 1 + rng.below(1000)).await;
            touched.extend([a, b]);
        }
        touched.sort_unstable();
        touched.dedup();
        pages_are_the_chains(
            (&db, &node, &mut follower),
            (&ours, &mut mirror, &dev.node, token),
            &touched,
            &format!("geth round {round} before"),
        )
        .await;
        // The reorg: the head set back `depth` blocks (geth drops their transactions) and a new
        // fork of one or two blocks sealed on top, shorter or longer than the old chain.
        let head = hex_u64(&dev.node.call("eth_blockNumber", json!([])).await);
        highest = highest.max(head);
        let _: Value = dev.node.call("debug_setHead", json!([format!("{:#x}", head - depth)])).await;
        pool_reset(&dev).await;
        let (a, b) = (parties[rng.below(10) as usize], parties[rng.below(10) as usize]);
        pay(a, 7).await;
        if rng.below(2) == 0 {
            credit(b, 3).await;
        }
        follow_times.push(
            pages_are_the_chains(
                (&db, &node, &mut follower),
                (&ours, &mut mirror, &dev.node, token),
                &parties,
                &format!("geth round {round} after a reorg of {depth}"),
            )
            .await,
        );
        eprintln!(
            "reorg-soak geth {} round {round}: depth {depth}, followed in {:.1} ms",
            transport(ws),
            follow_times[follow_times.len() - 1].as_secs_f64() * 1e3
        );
        // Blocks again for the next reorg of up to 64, whose fork point stays inside the reorg
        // window of the highest block indexed (geth mines the transactions it takes back from
        // dropped blocks when it pleases, so the chain may grow; a real chain does not shrink
        // round after round below its window).
        let mut head = hex_u64(&dev.node.call("eth_blockNumber", json!([])).await);
        highest = highest.max(head);
        let floor = 66.max(highest.saturating_sub(60));
        while head < floor {
            // Sent together, mined in as many blocks as geth pleases.
            let mut last = None;
            for _ in head..floor {
                last = Some(dev.submit(Some(parties[rng.below(10) as usize]), 1, Bytes::new()).await);
            }
            if let Some(hash) = last {
                dev.mined(hash).await;
            }
            head = hex_u64(&dev.node.call("eth_blockNumber", json!([])).await);
        }
        highest = highest.max(head);
    }
    let _ = server.stop();
    follower.stop().await;
    check(&db.begin_read().expect("read")).expect("check after the soak");
    summary("geth", ws, follow_times);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_reorgs_on_geth_over_http_leave_every_page_the_nodes() {
    geth_soak(false, rounds(), 0x5eed_0003).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_reorgs_on_geth_over_websocket_leave_every_page_the_nodes() {
    geth_soak(true, rounds(), 0x5eed_0004).await;
}
