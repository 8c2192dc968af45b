//! `ots-indexer compact`: rewrites the database with full pages, in place.
//!
//! The copy is written beside the database (`<datadir>/compacting/`, same file system) while the
//! original stays untouched and locked against other processes; one rename then puts the copy
//! in its place. A crash or a full disk before the rename leaves the original as it was (the next
//! `compact` clears the half-made copy); after it, the copy is complete and durable.

use std::{fs, path::Path};

use anyhow::{bail, Context};
use clap::Args;
use tracing::info;

use super::args::DbArgs;
use crate::db::{
    compact::{compact_into, TableCopy},
    AccessMode, DATA_FILE,
};

/// Where the copy is made, inside the datadir.
const SCRATCH_DIR: &str = "compacting";

/// Flags of `compact`.
#[derive(Debug, Clone, Args)]
pub struct CompactArgs {
    /// Where the database is.
    #[command(flatten)]
    pub db: DbArgs,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot flush directory {}", dir.display()))
}

/// Compacts the database in `--datadir`; every other process using it must be stopped.
pub fn compact(args: &CompactArgs) -> anyhow::Result<()> {
    let dir = &args.db.datadir;
    let data = dir.join(DATA_FILE);
    if !data.is_file() {
        bail!("{} holds no database ({DATA_FILE} is missing)", dir.display());
    }
    let scratch = dir.join(SCRATCH_DIR);
    if scratch.exists() {
        info!(target: "ots::cli", path = %scratch.display(), "removing the copy an interrupted compact left");
        fs::remove_dir_all(&scratch).with_context(|| format!("cannot remove {}", scratch.display()))?;
    }
    let file_before = fs::metadata(&data)?.len();
    // Exclusive: no `run`, `sync` or `serve` can open the database until the copy replaced it.
    // A database of another format is refused: the copy holds only this build's tables, and an
    // older format's tables of other names would be lost (`migrate` first).
    let db = super::open_usable(dir, AccessMode::Exclusive)?;
    let copies = match compact_into(&db, &scratch) {
        Ok(copies) => copies,
        Err(error) => {
            let _ = fs::remove_dir_all(&scratch);
            return Err(error).context("compacting copy failed; the database is unchanged");
        }
    };
    // Every commit of the copy was durable; the rename swaps whole files, never half of one.
    fs::rename(scratch.join(DATA_FILE), &data)
        .with_context(|| format!("cannot move the compacted copy over {}", data.display()))?;
    sync_dir(dir)?;
    drop(db);
    fs::remove_dir_all(&scratch).with_context(|| format!("cannot remove {}", scratch.display()))?;
    let file_after = fs::metadata(&data)?.len();
    print_report(&copies, file_before, file_after);
    Ok(())
}

fn print_report(copies: &[TableCopy], file_before: u64, file_after: u64) {
    let (mut before, mut after) = (0, 0);
    for c in copies.iter().filter(|c| c.bytes_before > 0) {
        println!(
            "{:<28} {:>12} entries {:>10.1} MiB -> {:>10.1} MiB",
            c.table.name(),
            c.entries,
            mib(c.bytes_before),
            mib(c.bytes_after)
        );
        before += c.bytes_before;
        after += c.bytes_after;
    }
    println!(
        "tables {:.1} MiB -> {:.1} MiB ({:.0}% smaller); file {:.1} MiB -> {:.1} MiB",
        mib(before),
        mib(after),
        100.0 * (1.0 - after as f64 / before.max(1) as f64),
        mib(file_before),
        mib(file_after)
    );
}
