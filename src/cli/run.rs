//! `ots-indexer run`: index, follow the head and serve, until Ctrl-C or SIGTERM.

use clap::Args;
use tracing::info;

use super::{
    args::{DbArgs, NodeArgs, ServeArgs, SyncArgs},
    start_indexer, stop_channel,
};
use crate::rpc::{self, RpcContext};

/// Flags of `run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// How to reach the node.
    #[command(flatten)]
    pub node: NodeArgs,
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,
    /// How to index.
    #[command(flatten)]
    pub sync: SyncArgs,
    /// How to serve the API.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Runs until stopped.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let stop = stop_channel();
    let Some(indexer) = start_indexer(&args.node, &args.db, &args.sync, &stop).await? else { return Ok(()) };
    let node = args.node.connect().await?;
    let db = indexer.db().clone();
    let ctx = RpcContext {
        db: db.clone(),
        node: node.clone(),
        max_page_size: args.serve.max_page_size,
        max_search_page: args.serve.max_search_page_size,
        progress: Some(indexer.progress()),
        events: Some(indexer.events()),
        pending: args.serve.pending(&node, &db).await,
        tx_cache: args.serve.tx_cache(),
        window_holders: rpc::window_holders::WindowHoldersCache::default(),
        tx_frames: crate::rpc::TxFrames::Auto,
    };
    let mut options = args.serve.options();
    options.walk_marks = super::walk_marks(&args.db.datadir, &db);
    let (addr, server) = rpc::serve(args.serve.http_addr, ctx, &options).await?;
    info!(target: "ots::cli", %addr, datadir = %args.db.datadir.display(), node = %args.node.rpc_url, "ots-indexer running");

    let result = indexer.follow(stop).await;
    let _ = server.stop();
    server.stopped().await;
    super::save_walk_marks(options.walk_marks.as_deref());
    super::close_after(indexer, result).await?;
    info!(target: "ots::cli", "stopped cleanly");
    Ok(())
}
