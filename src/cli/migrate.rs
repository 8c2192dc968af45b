//! `ots-indexer migrate`: upgrades a database of an older format in place.
//!
//! A command, not a start-up flag: an upgrade changes the tables under every reader, so it
//! needs the database to itself (it opens it exclusively, as `compact` does), and an operator
//! chooses when it runs — after a backup, between a stop and a start of the new release —
//! instead of a restart doing it unasked. It is one transaction: a crash or kill leaves the old
//! format whole, and running it again starts over.

use std::{path::PathBuf, time::Duration};

use anyhow::Context;
use clap::Args;

use super::args::DbArgs;
use crate::{
    db::{
        state::{self, FORMAT_VERSION},
        AccessMode, Db,
    },
    index::upgrade::{upgrade, Upgraded},
    source::{fixture::Fixture, BlockSource, NodeClient},
    txid::TxId,
};

/// Flags of `migrate`.
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,

    /// JSON-RPC URL of a node of the database's chain: an upgrade from format 9 or older reads
    /// the indexed blocks' timestamps from its headers (no archive node needed); from format 10
    /// none is needed.
    #[arg(long, env = "OTS_RPC_URL", conflicts_with = "source")]
    pub rpc_url: Option<String>,

    /// Seconds before a node request is abandoned.
    #[arg(long, env = "OTS_RPC_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub rpc_timeout_secs: u64,

    /// The recording the database was indexed from (`sync --source`), instead of a node.
    #[arg(long, env = "OTS_SOURCE")]
    pub source: Option<PathBuf>,
}

/// Upgrades the database in `--datadir` to this build's format; every other process using it
/// must be stopped.
pub async fn migrate(args: &MigrateArgs) -> anyhow::Result<()> {
    let db = Db::open(&args.db.datadir, AccessMode::Exclusive)?;
    let source: Option<Box<dyn BlockSource>> = match (&args.rpc_url, &args.source) {
        (Some(url), _) => Some(Box::new(
            NodeClient::open(url, Duration::from_secs(args.rpc_timeout_secs))
                .await
                .with_context(|| format!("cannot reach the node at {url}; the database is unchanged"))?,
        )),
        (None, Some(path)) => Some(Box::new(
            Fixture::load(path)
                .with_context(|| format!("cannot read {}; the database is unchanged", path.display()))?,
        )),
        (None, None) => None,
    };
    match upgrade(&db, source.as_deref()).await.context("cannot upgrade the database; it is unchanged")? {
        Upgraded::AlreadyCurrent => {
            println!("nothing to do: the database is already format version {FORMAT_VERSION}");
        }
        Upgraded::From {
            version,
            renamed,
            block_times,
            received_marks_from,
            internal_txs_from,
            transfer_rows_from,
            token_transfers_from,
            party_token_from,
            seconds,
        } => {
            for (old, table, entries) in renamed {
                println!("{old:<28} -> {:<30} {entries:>10} entries", table.name());
            }
            if version < 10 {
                println!("{:<28} -> {:<30} {block_times:>10} entries", "block times", "OtsBlockTimes");
            }
            if version < 11 && received_marks_from > 0 {
                let from = TxId(received_marks_from).block();
                println!(
                    "received marks from block {from}: `txlist` counts older blocks' rows with the node's help"
                );
            }
            if version < 12 && internal_txs_from > 0 {
                let from = TxId(internal_txs_from).block();
                println!(
                    "internal transactions indexed from block {from}: `txlistinternal` of an address reaching older blocks traces each of its transactions"
                );
            }
            if version < 13 && transfer_rows_from > 0 {
                let from = TxId(transfer_rows_from).block();
                println!(
                    "token-list rows counted by the index from block {from}: a deep page of `tokentx`, `tokennfttx` or `token1155tx` counts older rows with the node's help"
                );
            }
            if version < 14 && token_transfers_from > 0 {
                let from = TxId(token_transfers_from).block();
                println!(
                    "token transfers indexed from block {from}: a token's own `tokentx`, `tokennfttx` or `token1155tx` walks its appearances below it, counting them with the node's help"
                );
                println!(
                    "internal rows counted by the index from block {from}: a deep page of `txlistinternal` traces older transactions to count their rows"
                );
            }
            if version < 15 && party_token_from == state::PARTY_TOKEN_NOT_KEPT {
                println!(
                    "party-token index not kept: `run` or `sync` with `--party-token-index on` keeps it from the next block on"
                );
            }
            println!("upgraded format version {version} -> {FORMAT_VERSION} in {seconds:.2} s");
        }
    }
    Ok(())
}
