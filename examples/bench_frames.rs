//! What call frames cost a catch-up: on a generated chain (the standard workload plus blocks of
//! ERC20 transfers), indexes from genesis with each frame source named on the command line
//! (`none`, `parity`, `geth`, `structlog`), the runs interleaved, and prints each one's median
//! seconds, blocks/s and transactions/s and its time over the first one's.
//!
//! `scripts/bench-frames.sh` starts Hardhat's node (no call tracer: struct logs or nothing)
//! and runs this in release mode.
//! Usage: bench_frames URL BLOCKS TXS_PER_BLOCK RUNS SOURCE...

// The tests' workload, shared: its `pub` items are for whoever includes it.
#[allow(unreachable_pub)]
#[path = "../tests/common/workload.rs"]
mod workload;

use std::time::{Duration, Instant};

use anyhow::Context;
use ots_classifiers::Erc20Classifier;
use ots_indexer::{
    db::{AccessMode, Db},
    source::{NodeClient, TraceChoice},
    sync::{Indexer, SyncConfig},
};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn choice(name: &str) -> anyhow::Result<TraceChoice> {
    Ok(match name {
        "none" => TraceChoice::None,
        "parity" => TraceChoice::Parity,
        "geth" => TraceChoice::Geth,
        "structlog" => TraceChoice::StructLog,
        other => anyhow::bail!("unknown frame source {other:?}: none, parity, geth or structlog"),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args.next().context("usage: bench_frames URL BLOCKS TXS_PER_BLOCK RUNS SOURCE...")?;
    let number = |v: Option<String>, default: u64| v.and_then(|v| v.parse().ok()).unwrap_or(default);
    let (blocks, per_block, runs) =
        (number(args.next(), 20), number(args.next(), 50), number(args.next(), 3));
    let sources: Vec<String> = args.collect();
    anyhow::ensure!(!sources.is_empty(), "name at least one frame source");
    let choices = sources.iter().map(|s| choice(s)).collect::<anyhow::Result<Vec<_>>>()?;

    eprintln!("generating the workload and {blocks} blocks of {per_block} ERC20 transfers on {url}…");
    workload::run_with_transfer_blocks(&url, blocks, per_block).await;
    let plain = NodeClient::connect(&url, Duration::from_secs(120))?;
    let head = plain.head().await?;
    let mut txs = 0usize;
    for n in 0..=head {
        txs += plain.block(n).await?.transactions.len();
    }

    let mut seconds = vec![Vec::new(); choices.len()];
    for _ in 0..runs {
        for (i, c) in choices.iter().enumerate() {
            let node = NodeClient::connect(&url, Duration::from_secs(120))?.with_traces(*c).await?;
            let dir = tempfile::tempdir()?;
            let db = Db::open(dir.path(), AccessMode::ReadWrite)?;
            let t = Instant::now();
            let indexer =
                Indexer::open(db, node, vec![Box::new(Erc20Classifier)], SyncConfig::default()).await?;
            indexer.sync_to(head).await?;
            indexer.close().await?;
            seconds[i].push(t.elapsed().as_secs_f64());
        }
    }
    println!("chain: {} blocks, {txs} transactions; median of {runs} interleaved runs", head + 1);
    let first = median(seconds[0].clone());
    for (name, s) in sources.iter().zip(seconds) {
        let m = median(s);
        println!(
            "frames {name:<10} {m:>8.3} s  {:>8.1} blocks/s  {:>9.1} transactions/s  {:>6.2}x the first",
            (head + 1) as f64 / m,
            txs as f64 / m,
            m / first
        );
    }
    Ok(())
}
