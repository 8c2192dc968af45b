//! What a family gathers over a write and how it writes it: the interface both write paths
//! drive every family through (`rows.rs`), so that neither path names a family.
//!
//! A write collects block by block ([`Gatherer::collect`]) and writes once at its end
//! ([`Gatherer::write`]). Families keyed by block write as each block comes and have nothing
//! left at the end; families keyed by address gather their rows (in memory for a batch,
//! spilling sorted runs for a stage) and write each key once, in key order.

use std::sync::Arc;

use alloy_primitives::Address;
use ots_classifiers::{BlockData, Fact};

use super::{error::WriteError, recent::WindowRows, transfers::Touch, undo::UndoLog, window::WindowStart};
use crate::{
    db::{Db, WriteTxn},
    decode::TokenLog,
    etl::{Buffer, RunDir},
    txid::TxId,
};

/// Where gathered rows wait until the write's end.
#[derive(Debug, Clone)]
pub enum Buffering {
    /// In memory: one batch of the incremental path.
    InMemory,
    /// In buffers of `each` bytes that spill sorted runs under `runs`: a bulk stage.
    Spilling {
        /// The stage's run directory.
        runs: Arc<RunDir>,
        /// Bytes one buffer holds before the stage may spill it.
        each: usize,
    },
}

/// How a write gathers.
#[derive(Debug, Clone)]
pub struct Gathering {
    /// Where rows wait.
    pub buffering: Buffering,
    /// Whether the appearance family is written (see [`super::BatchOptions::appearances`]).
    pub appearances: bool,
    /// Whether the party–token index is kept (the database's choice, in its state).
    pub party_tokens: bool,
}

/// One block as the families see it: the block, the classifiers' facts, and its token logs
/// decoded once for all.
#[derive(Debug)]
pub struct BlockRows<'a, 'l> {
    /// The write transaction.
    pub txn: &'a WriteTxn,
    /// The block.
    pub block: &'a BlockData,
    /// What the classifiers found in it.
    pub facts: &'a [Fact],
    /// Transfer emitters re-probed at this block that are still no token.
    pub probe_misses: &'a [Address],
    /// Its transfer logs of classified tokens, in log order.
    pub logs: &'a [(TxId, TokenLog<'l>)],
    /// Those logs' touches, in log order.
    pub touches: &'a [Touch],
}

/// What the end of a write gives each family, and what the families report back.
#[derive(Debug)]
pub struct Writing<'a> {
    /// The database (for snapshots of the state the write started from).
    pub db: &'a Db,
    /// The write transaction.
    pub txn: &'a WriteTxn,
    /// Where the reorg window starts once the write commits.
    pub window: WindowStart,
    /// What the blocks leaving the window held in its shared list rows; each family takes out
    /// its own.
    pub leaving: WindowRows,
    /// The write's undo records.
    pub undo: UndoLog,
    /// Ids added to the transfer indexes.
    pub transfer_ids: u64,
    /// (address, transaction) pairs added to the appearance index.
    pub appearances: u64,
}

/// A family's part of one write.
pub trait Gatherer: Send + std::fmt::Debug {
    /// Collects (or writes) what `block` gives the family; blocks come in chain order.
    fn collect(&mut self, block: &BlockRows<'_, '_>, undo: &mut UndoLog) -> Result<(), WriteError>;

    /// The buffers its rows wait in, which a stage spills when they outgrow its budget.
    fn buffers(&mut self) -> Vec<&mut dyn Buffer> {
        Vec::new()
    }

    /// Whether [`Self::resolve`] has work: reads of the state the write started from that run
    /// on a second core while the other families write.
    fn resolves_beside(&self) -> bool {
        false
    }

    /// Resolves what was gathered against a snapshot of `db` (the state the write started
    /// from), off the writing thread; where no snapshot can be had, leaves it to
    /// [`Self::write`]. `window` is where the reorg window starts once the write commits.
    fn resolve(&mut self, db: &Db, window: WindowStart) -> Result<(), WriteError> {
        let _ = (db, window);
        Ok(())
    }

    /// Writes what was gathered.
    fn write(self: Box<Self>, writing: &mut Writing<'_>) -> Result<(), WriteError>;
}
