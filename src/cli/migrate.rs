//! `ots-indexer migrate`: upgrades a database of an older format in place.
//!
//! A command, not a start-up flag: an upgrade changes the tables under every reader, so it
//! needs the database to itself (it opens it exclusively, as `compact` does), and an operator
//! chooses when it runs — after a backup, between a stop and a start of the new release —
//! instead of a restart doing it unasked. It is one transaction: a crash or kill leaves the old
//! format whole, and running it again starts over.

use anyhow::Context;
use clap::Args;

use super::args::DbArgs;
use crate::{
    db::{state::FORMAT_VERSION, AccessMode, Db},
    index::upgrade::{upgrade, Upgraded},
};

/// Flags of `migrate`.
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,
}

/// Upgrades the database in `--datadir` to this build's format; every other process using it
/// must be stopped.
pub fn migrate(args: &MigrateArgs) -> anyhow::Result<()> {
    let db = Db::open(&args.db.datadir, AccessMode::Exclusive)?;
    match upgrade(&db).context("cannot upgrade the database; it is unchanged")? {
        Upgraded::AlreadyCurrent => {
            println!("nothing to do: the database is already format version {FORMAT_VERSION}");
        }
        Upgraded::From { version, renamed, seconds } => {
            for (old, table, entries) in renamed {
                println!("{old:<28} -> {:<30} {entries:>10} entries", table.name());
            }
            println!("upgraded format version {version} -> {FORMAT_VERSION} in {seconds:.2} s");
        }
    }
    Ok(())
}
