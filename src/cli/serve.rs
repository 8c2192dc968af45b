//! `ots-indexer serve`: the API over an existing database, read-only.

use anyhow::Context;
use clap::Args;
use tracing::info;

use super::{
    args::{DbArgs, NodeArgs, ServeArgs},
    shutdown_signal,
};
use crate::{
    db::{state, AccessMode, Db},
    rpc::{self, RpcContext},
};

/// Flags of `serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeCmdArgs {
    /// How to reach the node.
    #[command(flatten)]
    pub node: NodeArgs,
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,
    /// How to serve the API.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Serves until Ctrl-C or SIGTERM.
pub async fn serve(args: ServeCmdArgs) -> anyhow::Result<()> {
    let db = Db::open(&args.db.datadir, AccessMode::ReadOnly)?;
    {
        let s = state::read_state(&db.begin_read()?)?;
        state::check_usable(&s)?;
        if s.chain.is_none() {
            return Err(state::StateError::NotInitialised.into());
        }
    }
    let node = args.node.connect().await?;
    let ctx = RpcContext {
        db: db.clone(),
        node: node.clone(),
        max_page_size: args.serve.max_page_size,
        max_search_page: args.serve.max_search_page_size,
        progress: None,
        events: None,
        pending: args.serve.pending(&node, &db).await,
        tx_cache: args.serve.tx_cache(),
        window_holders: rpc::window_holders::WindowHoldersCache::default(),
        tx_frames: crate::rpc::TxFrames::Auto,
    };
    let mut options = args.serve.options();
    options.walk_marks = super::walk_marks(&args.db.datadir, &db);
    let (addr, server) =
        rpc::serve(args.serve.http_addr, ctx, &options).await.context("starting the server")?;
    info!(target: "ots::cli", %addr, datadir = %args.db.datadir.display(), "serving read-only");
    shutdown_signal().await;
    let _ = server.stop();
    server.stopped().await;
    super::save_walk_marks(options.walk_marks.as_deref());
    info!(target: "ots::cli", "stopped cleanly");
    Ok(())
}
