//! `ots-indexer status`: where the index stands.

use clap::Args;

use super::args::{DbArgs, NodeArgs};
use crate::{
    db::{AccessMode, Db},
    status::read_status,
};

/// Flags of `status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// How to reach the node.
    #[command(flatten)]
    pub node: NodeArgs,
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
    let node = args.node.connect().await.ok();
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
        head.map_or_else(|| format!("unreachable ({})", args.node.rpc_url), |h| h.to_string())
    );
    println!("lag           {}", opt(s.lag));
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
        println!("bulk stage    {} run files", human_bytes(stage.run_bytes));
    }
    println!();
    println!("{:<28} {:>14} {:>12}", "table", "entries", "size");
    for t in &s.tables {
        println!("{:<28} {:>14} {:>12}", t.name, t.entries, human_bytes(t.bytes));
    }
    Ok(())
}
