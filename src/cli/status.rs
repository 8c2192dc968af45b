//! `ots-indexer status`: where the index stands.

use std::time::Duration;

use clap::Args;

use super::args::DbArgs;
use crate::{
    db::{AccessMode, Db},
    source::NodeClient,
    status::read_status,
};

/// Flags of `status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// JSON-RPC URL of the node, to compare the index with the node's head and name its source
    /// of pending transactions. Without it the node is not asked: the database alone does not
    /// say where its node is.
    #[arg(long, env = "OTS_RPC_URL")]
    pub rpc_url: Option<String>,
    /// Seconds before a node request is abandoned.
    #[arg(long, env = "OTS_RPC_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub rpc_timeout_secs: u64,
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,
    /// Print JSON (the shape of ots2_getIndexerStatus) instead of text.
    #[arg(long)]
    pub json: bool,
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Prints the status; the node part is left out when the node does not answer.
pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let db = Db::open(&args.db.datadir, AccessMode::ReadOnly)?;
    let node = match &args.rpc_url {
        Some(url) => NodeClient::open(url, Duration::from_secs(args.rpc_timeout_secs)).await.ok(),
        None => None,
    };
    let head = match &node {
        Some(node) => node.head().await.ok(),
        None => None,
    };
    let mut s = read_status(&db, head, None)?;
    if let (Some(node), Some(_)) = (&node, head) {
        s.pending = Some(crate::pending::probe(node).await);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    println!("database      {}", args.db.datadir.display());
    println!("chain id      {}", opt(s.chain_id));
    println!("state         {}", s.db_state.as_deref().unwrap_or("-"));
    println!("indexed block {}", opt(s.indexed_block));
    println!(
        "node head     {}",
        match (head, &args.rpc_url) {
            (Some(h), _) => h.to_string(),
            (None, Some(url)) => format!("- (the node cannot be reached at {url})"),
            (None, None) => "- (no node given: --rpc-url or OTS_RPC_URL)".to_owned(),
        }
    );
    println!("lag           {}", opt(s.lag));
    if let Some(block) = s.received_marks_from_block {
        println!(
            "received marks from block {block} (upgraded from format 10: txlist counts older rows with the node's help)"
        );
    }
    if let Some(block) = s.internal_txs_from_block {
        println!(
            "internal transactions indexed from block {block} (txlistinternal traces older transactions one by one)"
        );
    }
    if let Some(block) = s.transfer_rows_from_block {
        println!(
            "token-list rows counted by the index from block {block} (upgraded from format 12: older rows counted with the node's help)"
        );
    }
    if let Some(block) = s.token_transfers_from_block {
        println!(
            "token transfers indexed from block {block} (upgraded from format 13: a token's own list walks older appearances)"
        );
    }
    if let Some(block) = s.party_token_from_block {
        println!(
            "party-token transfers indexed from block {block} (turned on then: an address's list of one token walks its transfer index below it)"
        );
    }
    if let Some(block) = s.internal_rows_from_block {
        println!(
            "internal rows counted by the index from block {block} (upgraded from format 13: txlistinternal traces older transactions to count them)"
        );
    }
    if let Some(why) = &s.notices.stopped {
        println!("STOPPED       {why}");
    }
    if s.notices.refused_probes > 0 {
        println!(
            "refused probes {} (the node answered a classifier's eth_call with an error twice; taken as no)",
            s.notices.refused_probes
        );
        for p in s.notices.recent_refused_probes.iter().rev().take(5) {
            println!("              {} at block {}: {}", p.address, p.block, p.message);
        }
    }
    println!(
        "speed         {}",
        s.blocks_per_second.map_or_else(|| "-".to_owned(), |r| format!("{r:.0} blocks/s (last batch)"))
    );
    println!("file size     {} ({} in use)", human_bytes(s.file_bytes), human_bytes(s.used_bytes));
    if let Some(pending) = &s.pending {
        println!(
            "pending txs   {}",
            pending.source.as_deref().unwrap_or("none: the node offers no pending transactions")
        );
    }
    if let Some(stage) = &s.stage {
        println!(
            "bulk stage    {} run files, {} journal",
            human_bytes(stage.run_bytes),
            human_bytes(stage.journal_bytes)
        );
    }
    println!();
    println!("{:<28} {:>14} {:>12}", "table", "entries", "size");
    for t in &s.tables {
        println!("{:<28} {:>14} {:>12}", t.name, t.entries, human_bytes(t.bytes));
    }
    Ok(())
}
