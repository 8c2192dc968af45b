//! `ots-indexer check`: the integrity checker.

use anyhow::Context;
use clap::Args;

use super::args::DbArgs;
use crate::{
    db::AccessMode,
    index::check::{check as check_db, dump_hash},
};

/// Flags of `check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,
    /// Also print a hash of every table's entries (all but the indexer's state and undo
    /// journal, with the reorg window's rows read as moved into their tables): two indexes of
    /// the same chain, however they were written or unwound, print the same one. Hashing opens
    /// a write transaction that it never commits, so a running indexer waits for it.
    #[arg(long)]
    pub hash: bool,
}

/// Checks the database (read-only unless hashing: a writer may keep running); fails on the
/// first broken key.
pub fn check(args: &CheckArgs) -> anyhow::Result<()> {
    let mode = if args.hash { AccessMode::ReadWrite } else { AccessMode::ReadOnly };
    let db = super::open_usable(&args.db.datadir, mode)?;
    let report = check_db(&db.begin_read()?).context("integrity check failed")?;
    println!(
        "ok: {} matches, {} address lists holding {} ids; every counter and chunk agrees",
        report.matches, report.addresses, report.ids
    );
    if args.hash {
        println!("tables hash {}", dump_hash(&db).context("hashing the tables")?);
    }
    Ok(())
}
