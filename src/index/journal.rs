//! The undo journal's other half: dropping what left the reorg window, and unwinding the index
//! to an earlier block (reorgs and `ots-indexer unwind`) by asking each family to undo what the
//! journal says its blocks wrote.
//!
//! Ids grow with the chain, so undoing blocks `> to` is: drop match rows keyed above `to`, drop
//! the reorg window's rows of those blocks (address and appearance lists, totals), and cut what
//! the undo journal names back to ids below the first id of block `to + 1`
//! (docs/architecture.md, "Invariants").

use std::{collections::BTreeSet, time::Instant};

use tracing::debug;

use super::{
    family::{Family, ForEachFamily, Unwinding},
    recent::{self, WindowRows},
    roster::each_family,
    window::WindowStart,
};
use crate::db::{
    codec::BlockNumber,
    state::{self, Checkpoint, StateError},
    tables::*,
    DbError, DbResult, WriteTxn,
};

/// Unwinding is not possible as asked.
#[derive(Debug, thiserror::Error)]
pub enum UnwindError {
    /// The journal does not reach back that far.
    #[error("cannot unwind to block {to}: the undo journal only covers blocks {oldest} and later (the reorg window); re-index into a new --datadir to go further back")]
    BeyondWindow {
        /// The requested block.
        to: u64,
        /// The oldest block the journal covers.
        oldest: u64,
    },
    /// Nothing is indexed.
    #[error("the database holds no indexed block")]
    Empty,
    /// Storage failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// State could not be read.
    #[error(transparent)]
    State(#[from] StateError),
}

/// Drops the rows of a per-block table of the blocks that left the window as it starts at
/// `window`.
pub(super) fn prune_blocks<T: Table<Key = BlockNumber>>(txn: &WriteTxn, window: WindowStart) -> DbResult<()> {
    loop {
        let first = txn.cursor::<T>()?.first()?;
        match first {
            Some((BlockNumber(b), _)) if !window.keeps(b) => {
                txn.delete::<T>(&BlockNumber(b), None)?;
            }
            _ => return Ok(()),
        }
    }
}

/// Drops the journal records and every family's per-block window rows of the blocks that left
/// the window as it starts at `window` (their rows settled as they left).
pub fn prune(txn: &WriteTxn, window: WindowStart) -> DbResult<()> {
    struct Prune<'a>(&'a WriteTxn, WindowStart);
    impl ForEachFamily for Prune<'_> {
        type Error = DbError;
        fn family<F: Family>(&mut self) -> DbResult<()> {
            F::prune(self.0, self.1)
        }
    }
    prune_blocks::<OtsUndoJournal>(txn, window)?;
    each_family(&mut Prune(txn, window))
}

/// Settles the rows the window keeps apart of the blocks that leave it as it starts at `window`
/// into the large tables, family by family (the journal stays).
pub fn fold(txn: &WriteTxn, window: WindowStart) -> DbResult<()> {
    struct Fold<'a>(&'a WriteTxn, WindowStart, WindowRows);
    impl ForEachFamily for Fold<'_> {
        type Error = DbError;
        fn family<F: Family>(&mut self) -> DbResult<()> {
            F::fold(self.0, self.1, &mut self.2)
        }
    }
    let leaving = recent::take_leaving(txn, window)?;
    each_family(&mut Fold(txn, window, leaving))
}

/// Moves every row the reorg window keeps apart into the large tables, as if each of its blocks
/// had left it (the journal stays): how a database reads when compared with another whose
/// window starts elsewhere (`check --hash`), in a transaction that is then dropped.
pub fn fold_window(txn: &WriteTxn) -> DbResult<()> {
    fold(txn, WindowStart::Closed)
}

/// Every block leaves the reorg window: its rows move into the large tables and the journal
/// that could unwind it is dropped.
pub fn close_window(txn: &WriteTxn) -> DbResult<()> {
    fold_window(txn)?;
    prune(txn, WindowStart::Closed)
}

/// The oldest block the undo journal covers, if any.
pub fn journal_start(txn: &WriteTxn) -> DbResult<Option<u64>> {
    Ok(txn.cursor::<OtsUndoJournal>()?.first()?.map(|(BlockNumber(b), _)| b))
}

/// Unwinds everything written for blocks above `to` and moves the checkpoint to `to`, inside
/// `txn`. Returns the new checkpoint.
pub fn unwind_to(txn: &WriteTxn, to: u64) -> Result<Checkpoint, UnwindError> {
    let tip = state::read_state(txn)?.checkpoint.ok_or(UnwindError::Empty)?;
    if to >= tip.number {
        return Ok(tip);
    }
    let oldest = journal_start(txn)?.unwrap_or(tip.number);
    let Some(target) = txn.get::<OtsUndoJournal>(&BlockNumber(to))? else {
        return Err(UnwindError::BeyondWindow { to, oldest });
    };
    let mut unwinding = Unwinding { to, tip: tip.number, touched: BTreeSet::new() };
    for block in to + 1..=tip.number {
        let record = txn
            .get::<OtsUndoJournal>(&BlockNumber(block))?
            .ok_or(UnwindError::BeyondWindow { to, oldest })?;
        unwinding.touched.extend(record.touched);
        txn.delete::<OtsUndoJournal>(&BlockNumber(block), None)?;
    }
    let started = Instant::now();
    recent::unwind(txn, to)?;
    debug!(target: "ots::index", seconds = started.elapsed().as_secs_f64(), "window lists unwound");
    let mut each = Unwind { txn, unwinding: &unwinding, slowest: ("", 0.0) };
    each_family(&mut each)?;
    let (slowest_family, slowest_seconds) = each.slowest;
    // Where an unwind's time goes (docs/benchmarks-history.md reads these): the rest is the commit.
    debug!(
        target: "ots::index",
        blocks = tip.number - to,
        rows = unwinding.touched.len(),
        slowest_family,
        slowest_seconds,
        seconds = started.elapsed().as_secs_f64(),
        "unwound in the transaction"
    );
    let checkpoint = Checkpoint { number: to, hash: target.hash };
    state::set_checkpoint(txn, checkpoint)?;
    Ok(checkpoint)
}

/// Unwinds each family in turn, timing the slowest.
struct Unwind<'a> {
    txn: &'a WriteTxn,
    unwinding: &'a Unwinding,
    slowest: (&'static str, f64),
}

impl ForEachFamily for Unwind<'_> {
    type Error = DbError;
    fn family<F: Family>(&mut self) -> DbResult<()> {
        let started = Instant::now();
        F::unwind(self.txn, self.unwinding)?;
        let seconds = started.elapsed().as_secs_f64();
        debug!(target: "ots::index", family = F::NAME, seconds, "family unwound");
        if seconds >= self.slowest.1 {
            self.slowest = (F::NAME, seconds);
        }
        Ok(())
    }
}
