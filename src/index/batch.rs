//! Writes one batch of classified blocks in one MDBX transaction: decode each block's token
//! logs once, let each family of the roster collect and write, then the undo journal and the
//! checkpoint.
//!
//! Families whose tables are keyed by block (matches, contract info, labels, probes) write as
//! each block comes; the address-keyed ones (address indexes, holdings, balances) gather the
//! whole batch in memory and write each key once, in key order: MDBX pays per dirtied page, so
//! one sorted pass beats log-by-log writes (docs/benchmarks-history.md).

use alloy_primitives::Address;
use ots_classifiers::{BlockData, Fact};
use tracing::debug;

pub use super::error::WriteError;
use super::{
    activity::IndexedBlock,
    gather::{BlockRows, Buffering, Gathering},
    matches,
    rows::Rows,
    transfers::Touch,
    undo::UndoLog,
    window::WindowStart,
};
use crate::{
    db::{
        page_heap::trim_heap,
        state::{self, Checkpoint},
        Db, WriteTxn,
    },
    decode::token_logs,
    txid::TxId,
};

/// A batch with at least this many transfer logs gives its freed heap back to the kernel when it
/// commits (glibc keeps it otherwise: ~270 MiB after a 500 k-log batch). Trimming took 8–26 ms
/// after such a batch (docs/benchmarks-history.md); small batches free too little to be worth it.
const TRIM_AFTER_LOGS: u64 = 10_000;

/// A block with what the classifiers found in it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ClassifiedBlock {
    /// The block.
    pub block: BlockData,
    /// The classifiers' facts.
    pub facts: Vec<Fact>,
    /// Transfer emitters re-probed at this block that are still no token.
    pub probe_misses: Vec<Address>,
}

/// How a batch is written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchOptions {
    /// Undo records are kept for the newest `window` blocks (the reorg window).
    pub window: u64,
    /// How fast the batch was gathered, stored for `status`.
    pub blocks_per_second: Option<f64>,
    /// Whether to report each block's activity (for live subscribers).
    pub activity: bool,
    /// Whether to write the appearance family. Always true in the indexer; false only where a
    /// benchmark measures what the family costs (a database written without it answers the
    /// `ots_` address searches wrongly).
    pub appearances: bool,
}

impl BatchOptions {
    /// A reorg window of `window` blocks, no rate, no activity.
    pub const fn window(window: u64) -> Self {
        Self { window, blocks_per_second: None, activity: false, appearances: true }
    }
}

/// What a batch wrote, and (when asked) each block's activity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WrittenBatch {
    /// Counts.
    pub stats: BatchStats,
    /// Each block as indexed, oldest first; empty unless [`BatchOptions::activity`].
    pub blocks: Vec<IndexedBlock>,
}

/// What a batch wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Blocks written.
    pub blocks: u64,
    /// Transactions in them.
    pub transactions: u64,
    /// Contracts found.
    pub contracts: u64,
    /// Classifier matches.
    pub matches: u64,
    /// Transfer logs of classified tokens.
    pub transfer_logs: u64,
    /// (address, transaction) ids added to the transfer indexes.
    pub transfer_ids: u64,
    /// (address, transaction) pairs added to the appearance index.
    pub appearances: u64,
}

impl BatchStats {
    fn add_block(&mut self, transactions: u64, contracts: u64, matches: u64, transfer_logs: u64) {
        self.blocks += 1;
        self.transactions += transactions;
        self.contracts += contracts;
        self.matches += matches;
        self.transfer_logs += transfer_logs;
    }

    /// Adds another batch's figures to these.
    pub fn add(&mut self, other: &Self) {
        self.blocks += other.blocks;
        self.transactions += other.transactions;
        self.contracts += other.contracts;
        self.matches += other.matches;
        self.transfer_logs += other.transfer_logs;
        self.transfer_ids += other.transfer_ids;
        self.appearances += other.appearances;
    }
}

/// The checkpoint after `block`, if it continues the one at `tip`.
fn continues(tip: Option<Checkpoint>, block: &BlockData) -> Result<Checkpoint, WriteError> {
    if tip.is_some_and(|t| t.number + 1 != block.number || t.hash != block.parent_hash) {
        return Err(WriteError::NotContiguous {
            number: block.number,
            hash: block.hash,
            parent: block.parent_hash,
            checkpoint: tip,
        });
    }
    Ok(Checkpoint { number: block.number, hash: block.hash })
}

/// Moves the state's `internal_txs_from` over `blocks`: the internal-transaction index learns
/// of a block's internal transactions from its frames alone, so it holds them all only from the
/// first block of the latest run of blocks with frames. Written only where a run starts or ends
/// (a node without a tracer writes it once, not every batch).
fn note_internal_txs_from(txn: &WriteTxn, blocks: &[ClassifiedBlock]) -> Result<(), WriteError> {
    let stored = state::read_internal_txs_from(txn)?;
    let mut from = stored;
    for ClassifiedBlock { block, .. } in blocks {
        match (&block.frames, from == state::INTERNAL_TXS_NOWHERE) {
            (None, false) => from = state::INTERNAL_TXS_NOWHERE,
            (Some(_), true) => from = TxId::first_of_block(block.number).0,
            _ => {}
        }
    }
    if from != stored {
        state::set_internal_txs_from(txn, from)?;
    }
    Ok(())
}

/// Gives `blocks` (consecutive, continuing `tip`, which follows them) to every family: the
/// matches first (they decide which logs are token transfers), then each family in `rows`
/// writes the block or gathers its rows. The part of a write both paths share.
pub(super) fn write_blocks(
    txn: &WriteTxn,
    blocks: &[ClassifiedBlock],
    tip: &mut Option<Checkpoint>,
    rows: &mut Rows,
    undo: &mut UndoLog,
    activity: bool,
    out: &mut WrittenBatch,
) -> Result<(), WriteError> {
    let with = blocks.iter().any(|b| b.block.frames.is_some());
    let without = blocks.iter().any(|b| b.block.frames.is_none());
    state::note_call_frames(txn, with, without)?;
    note_internal_txs_from(txn, blocks)?;
    for ClassifiedBlock { block, facts, probe_misses } in blocks {
        *tip = Some(continues(*tip, block)?);
        undo.begin_block(block.number, block.hash);
        let (contracts, matched) =
            matches::write_block(txn, block, facts, |address, kind| rows.kinds.set(address, kind))?;
        let logs = token_logs(block, |token| rows.kinds.of(txn, token))?;
        let touches: Vec<Touch> = logs.iter().flat_map(|(tx, log)| Touch::of(*tx, log)).collect();
        rows.collect(&BlockRows { txn, block, facts, probe_misses, logs: &logs, touches: &touches }, undo)?;
        if activity {
            out.blocks.push(IndexedBlock::new(block, contracts, logs.len() as u64, touches.into_iter()));
        }
        out.stats.add_block(block.transactions.len() as u64, contracts, matched, logs.len() as u64);
    }
    Ok(())
}

/// Writes `blocks` (consecutive, continuing the index) and moves the checkpoint to the last one,
/// all in one transaction: the incremental write path.
pub fn write_batch(
    db: &Db,
    blocks: &[ClassifiedBlock],
    options: BatchOptions,
) -> Result<WrittenBatch, WriteError> {
    let Some(last) = blocks.last() else { return Ok(WrittenBatch::default()) };
    // Blocks older than this leave the reorg window when the batch commits: what would undo them
    // is never written (catching up, most of a batch).
    let window = WindowStart::newest(options.window, last.block.number);
    let txn = db.begin_write()?;
    let mut tip = state::read_state(&txn)?.checkpoint;
    let mut out = WrittenBatch::default();
    let mut undo = UndoLog::keeping(window);
    let party_tokens = state::party_token_kept(&txn)?;
    let mut rows = Rows::new(&Gathering {
        buffering: Buffering::InMemory,
        appearances: options.appearances,
        party_tokens,
    });
    write_blocks(&txn, blocks, &mut tip, &mut rows, &mut undo, options.activity, &mut out)?;
    let written = rows.write(db, &txn, window, undo)?;
    (out.stats.transfer_ids, out.stats.appearances) = (written.transfer_ids, written.appearances);
    state::set_checkpoint(&txn, Checkpoint { number: last.block.number, hash: last.block.hash })?;
    if let Some(rate) = options.blocks_per_second {
        state::set_sync_rate(&txn, rate)?;
    }
    txn.commit()?;
    // What the batch read through the map and freed on the heap would otherwise stay counted in
    // the process's resident memory while it follows the head.
    db.release_mapped_pages();
    if out.stats.transfer_logs >= TRIM_AFTER_LOGS {
        trim_heap();
    }
    debug!(target: "ots::index", first = blocks[0].block.number, last = last.block.number, stats = ?out.stats, "batch committed");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::AccessMode;

    /// The index holds every internal transaction from the first block of the newest run of
    /// blocks with call frames: none while the newest came without, and the state is written
    /// only where a run starts or ends.
    #[test]
    fn internal_transactions_are_held_from_the_latest_run_of_blocks_with_frames() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), AccessMode::ReadWrite).expect("open");
        let blocks = |numbers: std::ops::Range<u64>, frames: bool| -> Vec<ClassifiedBlock> {
            numbers
                .map(|number| ClassifiedBlock {
                    block: BlockData { number, frames: frames.then(Vec::new), ..Default::default() },
                    facts: Vec::new(),
                    probe_misses: Vec::new(),
                })
                .collect()
        };
        let from = |batches: &[Vec<ClassifiedBlock>]| {
            let txn = db.begin_write().expect("write");
            for batch in batches {
                note_internal_txs_from(&txn, batch).expect("note");
            }
            // Dropped without a commit: each case starts from an empty state.
            state::read_internal_txs_from(&txn).expect("read")
        };
        let first = |block| TxId::first_of_block(block).0;
        assert_eq!(from(&[blocks(0..5, true)]), 0, "every block with frames: all of them");
        assert_eq!(from(&[blocks(0..5, true), blocks(5..7, false)]), state::INTERNAL_TXS_NOWHERE);
        assert_eq!(from(&[blocks(0..5, false)]), state::INTERNAL_TXS_NOWHERE);
        assert_eq!(from(&[blocks(0..5, false), blocks(5..9, true)]), first(5));
        let mut mixed = blocks(0..3, true);
        mixed.extend(blocks(3..4, false));
        mixed.extend(blocks(4..6, true));
        assert_eq!(from(&[mixed]), first(4), "within one batch too");
        assert_eq!(
            from(&[blocks(0..2, false), blocks(2..4, true), blocks(4..5, false), blocks(5..6, true)]),
            first(5)
        );
    }
}
