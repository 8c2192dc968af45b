//! Sync benchmark (issue "sync engine"): on a generated Anvil chain, prints
//! * the speed of merely fetching every block (block + receipts + call frames, batched),
//! * the speed of indexing the same blocks from the node with the same concurrency, and the ratio,
//! * blocks/s and logs/s of indexing a captured recording of the chain (no node).
//!
//! `scripts/bench-sync.sh` starts the node and runs this in release mode.
//! Usage: bench_sync URL [BLOCKS] [TXS_PER_BLOCK] [CONCURRENCY] [RUNS]; with `BENCH_NODE=geth`
//! the node is `geth --dev`: the workload signs with its own keys, and geth packs the
//! transfers into blocks as they arrive.

// The tests' workload, shared: its `pub` items are for whoever includes it.
#[allow(unreachable_pub)]
#[path = "../tests/common/workload.rs"]
mod workload;

use std::time::{Duration, Instant};

use futures::{stream, StreamExt, TryStreamExt};
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    classify::capture::capture,
    db::{AccessMode, Db},
    source::{fixture::Fixture, BlockSource, NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};
use workload::Faucet;

/// `geth --dev`'s chain id.
const GETH_DEV_CHAIN_ID: u64 = 1337;

fn arg(n: usize, default: u64) -> u64 {
    std::env::args().nth(n).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::args().nth(1).unwrap_or_else(|| "http://127.0.0.1:8545".to_owned());
    let (blocks, per_block, concurrency, runs) =
        (arg(2, 200), arg(3, 50), arg(4, 16) as usize, arg(5, 3) as usize);

    eprintln!("generating {blocks} blocks of {per_block} ERC20 transfers on {url}…");
    if std::env::var("BENCH_NODE").is_ok_and(|n| n == "geth") {
        let accounts = workload::Chain::connect(&url).call("eth_accounts", serde_json::json!([])).await;
        let dev = serde_json::from_value(accounts[0].clone())?;
        let work = workload::run_with_local_keys(&url, GETH_DEV_CHAIN_ID, true, Faucet::Unlocked(dev)).await;
        let chain =
            workload::Chain::with_local_keys(&url, GETH_DEV_CHAIN_ID, workload::workload_keys(), true);
        workload::add_transfer_blocks(chain, &work, blocks, per_block).await;
    } else {
        workload::run_with_transfer_blocks(&url, blocks, per_block).await;
    }

    let node = NodeClient::connect(&url, Duration::from_secs(60))?.with_traces(TraceChoice::Auto).await?;
    let head = node.head().await?;
    let config = SyncConfig { concurrency, ..Default::default() };

    // Fetch-only and indexing runs alternate, so that both see the node in the same state.
    let mut fetch = Vec::new();
    let mut index = Vec::new();
    let mut logs = 0usize;
    for _ in 0..runs {
        let t = Instant::now();
        let all: Vec<_> =
            stream::iter(0..=head).map(|n| node.block(n)).buffered(concurrency).try_collect().await?;
        fetch.push(t.elapsed().as_secs_f64());
        logs = all.iter().flat_map(|b| &b.receipts).map(|r| r.logs.len()).sum();
        drop(all);

        let dir = tempfile::tempdir()?;
        let db = Db::open(dir.path(), AccessMode::ReadWrite)?;
        let t = Instant::now();
        let indexer =
            Indexer::open(db, node.clone(), vec![Box::new(Erc20Classifier)], config.clone()).await?;
        indexer.sync_to(head).await?;
        index.push(t.elapsed().as_secs_f64());
    }

    let dir = tempfile::tempdir()?;
    let file = dir.path().join("chain.rec.zst");
    let t = Instant::now();
    let stats = capture(&node, &[Box::new(Erc20Classifier)], (0, head), &file).await?;
    let capture_secs = t.elapsed().as_secs_f64();
    let mut replay = Vec::new();
    for _ in 0..runs {
        let fixture = Fixture::load(&file)?;
        let db_dir = tempfile::tempdir()?;
        let db = Db::open(db_dir.path(), AccessMode::ReadWrite)?;
        let t = Instant::now();
        let indexer = Indexer::open(db, fixture, vec![Box::new(Erc20Classifier)], config.clone()).await?;
        indexer.sync_to(head).await?;
        replay.push(t.elapsed().as_secs_f64());
    }

    let n = (head + 1) as f64;
    let (f, i, r) = (median(fetch), median(index), median(replay));
    println!("chain: {} blocks, {logs} logs, tracer {}", head + 1, BlockSource::tracer(&node));
    println!("concurrency {concurrency}, median of {runs} runs");
    println!(
        "fetch only (node):     {:>8.3} s  {:>9.0} blocks/s  {:>10.0} logs/s",
        f,
        n / f,
        logs as f64 / f
    );
    println!(
        "index from node:       {:>8.3} s  {:>9.0} blocks/s  {:>10.0} logs/s",
        i,
        n / i,
        logs as f64 / i
    );
    println!("index/fetch speed ratio: {:.2}", f / i);
    println!("capture: {capture_secs:.3} s, {} bytes ({} probe answers)", stats.bytes, stats.probes);
    println!(
        "index from recording:  {:>8.3} s  {:>9.0} blocks/s  {:>10.0} logs/s",
        r,
        n / r,
        logs as f64 / r
    );
    Ok(())
}
