//! `ots-indexer refresh-metadata`: read token names, symbols and decimals again.

use alloy_primitives::Address;
use anyhow::Context;
use clap::Args;

use super::args::{DbArgs, NodeArgs};
use crate::{classify::refresh::refresh_metadata, db::AccessMode};

/// Flags of `refresh-metadata`.
#[derive(Debug, Clone, Args)]
pub struct RefreshArgs {
    /// How to reach the node.
    #[command(flatten)]
    pub node: NodeArgs,
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,
    /// Only these contracts (repeat, or comma-separate); default: every contract with stored
    /// token metadata.
    #[arg(long = "address", value_delimiter = ',')]
    pub addresses: Vec<Address>,
}

/// Reads the metadata at the indexed tip and stores what changed (may run beside `sync`: it
/// waits for the writer's turn, and asks to be run again if the tip moved meanwhile).
pub async fn refresh(args: RefreshArgs) -> anyhow::Result<()> {
    let db = super::open_usable(&args.db.datadir, AccessMode::ReadWrite)?;
    let node = args.node.connect().await?;
    let stats = refresh_metadata(&db, &node, &args.addresses).await.context("cannot refresh metadata")?;
    println!(
        "read the metadata of {} contracts at block {}: {} changed",
        stats.checked, stats.block, stats.changed
    );
    Ok(())
}
