//! `ots-indexer check`: the integrity checker.

use anyhow::Context;
use clap::Args;

use super::args::DbArgs;
use crate::{
    db::{AccessMode, Db},
    index::check::{check as check_db, dump_hash},
};

/// Flags of `check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,
    /// Also print a hash of every table's entries (all but the indexer's state and undo
    /// journal): two indexes of the same chain, however they were written, print the same one.
    #[arg(long)]
    pub hash: bool,
}

/// Checks the database read-only (a writer may keep running); fails on the first broken key.
pub fn check(args: &CheckArgs) -> anyhow::Result<()> {
    let db = Db::open(&args.db.datadir, AccessMode::ReadOnly)?;
    let report = check_db(&db.begin_read()?).context("integrity check failed")?;
    println!(
        "ok: {} matches, {} address lists holding {} ids; every counter and chunk agrees",
        report.matches, report.addresses, report.ids
    );
    if args.hash {
        println!("tables hash {}", dump_hash(&db.begin_read()?).context("hashing the tables")?);
    }
    Ok(())
}
