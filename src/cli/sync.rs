//! `ots-indexer sync`: index and follow the head, without serving.

use anyhow::Context;
use clap::Args;
use tracing::info;

use super::{
    args::{DbArgs, NodeArgs, SyncArgs},
    start_indexer, stop_channel,
};

/// Flags of `sync`.
#[derive(Debug, Clone, Args)]
pub struct SyncCmdArgs {
    /// How to reach the node.
    #[command(flatten)]
    pub node: NodeArgs,
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,
    /// How to index.
    #[command(flatten)]
    pub sync: SyncArgs,
    /// Stop once the node's head at start-up is indexed, instead of following it.
    #[arg(long)]
    pub exit_at_head: bool,

    /// Stop once this block is indexed (the node's head at start-up, if that is lower), as if
    /// it were the head: blocks older than the reorg window before it may go in bulk stages.
    #[arg(long, value_name = "BLOCK", conflicts_with = "exit_at_head")]
    pub exit_at_block: Option<u64>,
}

/// Syncs until stopped (or, with `--exit-at-head`, until caught up).
pub async fn sync(args: SyncCmdArgs) -> anyhow::Result<()> {
    let stop = stop_channel();
    let Some(indexer) = start_indexer(&args.node, &args.db, &args.sync, &stop).await? else { return Ok(()) };
    let started = std::time::Instant::now();
    let progress = indexer.progress();
    let result = if args.exit_at_head || args.exit_at_block.is_some() {
        let head = indexer.head().await.context("reading the head")?;
        let head = args.exit_at_block.map_or(head, |block| block.min(head));
        // The loop looks at the stop request between batches, and a bulk stage commits what it
        // gathered.
        indexer.sync_to_retrying(head).await
    } else {
        indexer.follow(stop).await
    };
    super::close_after(indexer, result).await?;
    // What this run did, in one line: the figures a benchmark or an operator wants.
    let p = progress.get();
    let w = p.written;
    info!(
        target: "ots::cli",
        indexed_block = p.indexed,
        blocks = w.blocks,
        transactions = w.transactions,
        transfer_logs = w.transfer_logs,
        transfer_ids = w.transfer_ids,
        appearances = w.appearances,
        batches = p.batches,
        stages = p.stages,
        compressed_stages = p.compressed_stages,
        run_bytes_peak = p.run_bytes_peak,
        seconds = started.elapsed().as_secs_f64(),
        write_seconds = p.write_seconds_total,
        "run summary"
    );
    info!(target: "ots::cli", "stopped cleanly");
    Ok(())
}
