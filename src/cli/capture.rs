//! `ots-indexer capture`: record a range of the node's chain for node-less replay.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::args::{NodeArgs, SyncArgs};
use crate::classify::capture::capture as record;

/// Flags of `capture`.
#[derive(Debug, Clone, Args)]
pub struct CaptureArgs {
    /// How to reach the node.
    #[command(flatten)]
    pub node: NodeArgs,
    /// How to index.
    #[command(flatten)]
    pub sync: SyncArgs,
    /// First block to record.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// Last block to record (default: the node's head).
    #[arg(long)]
    pub to: Option<u64>,
    /// The recording to write: zstd-compressed, or gzip if the name ends in `.gz`; replay it with
    /// `sync --source`.
    #[arg(long)]
    pub out: PathBuf,
}

/// Records the range; the probes of the chosen classifiers are recorded with it.
pub async fn capture(args: CaptureArgs) -> anyhow::Result<()> {
    let node = args.node.connect().await?.with_traces(args.node.trace_choice()).await?;
    let to = match args.to {
        Some(to) => to,
        None => node.head().await.context("reading the node's head")?,
    };
    anyhow::ensure!(args.from <= to, "--from {} is after --to {to}", args.from);
    let stats = record(&node, &args.sync.classifiers()?, (args.from, to), &args.out).await?;
    println!(
        "recorded blocks {}..={to} ({} blocks, {} probe answers) to {} ({} bytes)",
        args.from,
        stats.blocks,
        stats.probes,
        args.out.display(),
        stats.bytes
    );
    Ok(())
}
