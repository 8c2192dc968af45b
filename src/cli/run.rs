//! `ots-indexer run`: index, follow the head and serve, until Ctrl-C or SIGTERM.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use anyhow::{bail, Context};
use clap::Args;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::{
    db::{state, AccessMode, Db},
    rpc::{self, RpcContext},
    source::NodeClient,
    sync::{Indexer, SyncConfig},
};

/// Flags of `run`; each can also come from the environment variable named in `--help`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// JSON-RPC URL of the Ethereum node (needs eth_getBlockReceipts, and historical state
    /// for eth_call at old blocks, i.e. an archive node, to classify old contracts).
    #[arg(long, env = "OTS_RPC_URL", default_value = "http://127.0.0.1:8545")]
    pub rpc_url: String,

    /// Directory of the index database (created if missing).
    #[arg(long, env = "OTS_DATADIR", default_value = "ots-data")]
    pub datadir: PathBuf,

    /// Address the JSON-RPC server listens on.
    #[arg(long, env = "OTS_HTTP_ADDR", default_value = "127.0.0.1:8546")]
    pub http_addr: SocketAddr,

    /// Classifiers to run, comma-separated (built-in: erc20). Fixed for the life of a
    /// database.
    #[arg(long, env = "OTS_CLASSIFIERS", value_delimiter = ',', default_value = "erc20")]
    pub classifiers: Vec<String>,

    /// Most blocks written in one database transaction.
    #[arg(long, env = "OTS_BATCH_BLOCKS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_blocks: u64,

    /// Blocks fetched from the node at the same time.
    #[arg(long, env = "OTS_FETCH_CONCURRENCY", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub fetch_concurrency: u64,

    /// Milliseconds between head polls once caught up.
    #[arg(long, env = "OTS_POLL_INTERVAL_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    pub poll_interval_ms: u64,

    /// Seconds before a node request is abandoned (and retried).
    #[arg(long, env = "OTS_RPC_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub rpc_timeout_secs: u64,

    /// Largest `count` accepted by address lists such as ots2_getERC20TransferList.
    #[arg(long, env = "OTS_MAX_PAGE_SIZE", default_value_t = rpc::DEFAULT_MAX_PAGE_SIZE)]
    pub max_page_size: u64,
}

/// Resolves when Ctrl-C or SIGTERM arrives.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                warn!(target: "ots::cli", error = %e, "cannot listen for SIGTERM; only Ctrl-C stops");
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// Runs until stopped.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut classifiers = Vec::new();
    for name in &args.classifiers {
        match ots_classifiers::builtin(name) {
            Some(c) => classifiers.push(c),
            None => bail!(
                "unknown classifier {name:?}; built-in classifiers are: {}",
                ots_classifiers::BUILTIN_NAMES.join(", ")
            ),
        }
    }

    let db = Db::open(&args.datadir, AccessMode::ReadWrite)?;
    {
        let txn = db.begin_read()?;
        state::check_usable(&state::read_state(&txn)?)?;
    }
    let node = NodeClient::connect(&args.rpc_url, Duration::from_secs(args.rpc_timeout_secs))?;
    let config = SyncConfig {
        batch_blocks: args.batch_blocks,
        concurrency: usize::try_from(args.fetch_concurrency).unwrap_or(16),
        poll_interval: Duration::from_millis(args.poll_interval_ms),
    };

    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        info!(target: "ots::cli", "stop requested; finishing the current batch");
        let _ = stop_tx.send(true);
    });

    let indexer = loop {
        match Indexer::open(db.clone(), node.clone(), std::mem::take(&mut classifiers), config.clone()).await
        {
            Ok(i) => break i,
            Err(e) if e.is_transient() => {
                warn!(target: "ots::cli", error = %e, url = %args.rpc_url, "cannot reach the node; retrying in 2 s");
                classifiers = rebuild(&args.classifiers);
                let mut stop = stop_rx.clone();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    _ = stop.changed() => return Ok(()),
                }
            }
            Err(e) => return Err(e).context("cannot start indexing"),
        }
    };

    let ctx = RpcContext { db: db.clone(), node: node.clone(), max_page_size: args.max_page_size };
    let (addr, server) = rpc::serve(args.http_addr, ctx).await?;
    info!(target: "ots::cli", %addr, datadir = %args.datadir.display(), node = %args.rpc_url, "ots-indexer running");

    let result = indexer.follow(stop_rx).await;
    let _ = server.stop();
    server.stopped().await;
    indexer.close().await.context("marking the database closed")?;
    result.context("indexing stopped")?;
    info!(target: "ots::cli", "stopped cleanly");
    Ok(())
}

fn rebuild(names: &[String]) -> Vec<Box<dyn ots_classifiers::Classifier>> {
    names.iter().filter_map(|n| ots_classifiers::builtin(n)).collect()
}
