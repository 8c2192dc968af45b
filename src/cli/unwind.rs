//! `ots-indexer unwind --to N`: undo every block above N, as a reorg would.

use anyhow::Context;
use clap::Args;

use super::args::DbArgs;
use crate::{
    db::{prefault_page_heap, prefault_size, state, AccessMode},
    index::journal::unwind_to,
};

/// Flags of `unwind`.
#[derive(Debug, Clone, Args)]
pub struct UnwindArgs {
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,
    /// The block to keep as the newest indexed one.
    #[arg(long)]
    pub to: u64,
}

/// Pages an unwound block changes, about (a block of 150 transactions and 360 transfer logs: 28
/// MiB of page copies for 64 blocks).
const PAGES_PER_BLOCK: u64 = 32;

/// Unwinds in one transaction (stop `run`/`sync` first: MDBX allows one writer at a time).
pub fn unwind(args: &UnwindArgs) -> anyhow::Result<()> {
    let db = super::open_usable(&args.db.datadir, AccessMode::ReadWrite)?;
    let txn = db.begin_write()?;
    let Some(tip) = state::read_state(&txn)?.checkpoint else {
        anyhow::bail!(
            "nothing to unwind: the database at {} holds no indexed block",
            args.db.datadir.display()
        );
    };
    if args.to >= tip.number {
        println!(
            "nothing to unwind: the newest indexed block is {} ({}), not above --to {}",
            tip.number, tip.hash, args.to
        );
        return Ok(());
    }
    // The unwind's page copies (about 30 MiB for 64 blocks of a mainnet-sized chain, measured
    // in docs/benchmarks.md) are faulted in on the other core while the transaction starts.
    prefault_page_heap(prefault_size((tip.number - args.to).saturating_mul(PAGES_PER_BLOCK)));
    let checkpoint = unwind_to(&txn, args.to).context("cannot unwind")?;
    txn.commit()?;
    println!("unwound: the newest indexed block is now {} ({})", checkpoint.number, checkpoint.hash);
    Ok(())
}
