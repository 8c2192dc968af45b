//! Writes one batch of classified blocks in one MDBX transaction: decode each block's token
//! logs once, let each family collect and write, then the undo journal and the checkpoint.
//!
//! Families whose tables are keyed by block (matches, contract info, labels, probes) write as
//! each block comes; the address-keyed ones (address indexes, holdings, balances) gather the
//! whole batch in memory and write each key once, in key order: MDBX pays per dirtied page, so
//! one sorted pass beats log-by-log writes (docs/benchmarks-history.md).

use alloy_primitives::Address;
use ots_classifiers::{BlockData, Fact};
use tracing::debug;

use super::{
    activity::IndexedBlock,
    address_index::IdLists,
    appearances::{Appearances, CollectError},
    attributes::attributes,
    balances::{Balances, BulkBalances},
    contract_info,
    holdings::Holdings,
    journal,
    labels::{self, BadLabel, LabelError},
    lifetimes, matches, probes, recent,
    totals::Totals,
    transfers::Touch,
    undo::UndoLog,
    window::WindowStart,
};
use crate::{
    db::{
        residency::trim_heap,
        state::{self, Checkpoint},
        Db, DbError, DbResult, WriteTxn,
    },
    decode::{token_logs, TokenKinds, TokenLog},
    etl::spill_over,
    txid::{TxId, TxIdOverflow},
};

/// A batch with at least this many transfer logs gives its freed heap back to the kernel when it
/// commits (glibc keeps it otherwise: ~270 MiB after a 500 k-log batch). Trimming took 8–26 ms
/// after such a batch (docs/benchmarks-history.md); small batches free too little to be worth it.
const TRIM_AFTER_LOGS: u64 = 10_000;

/// A block with what the classifiers found in it.
#[derive(Debug, Clone)]
pub struct ClassifiedBlock {
    /// The block.
    pub block: BlockData,
    /// The classifiers' facts.
    pub facts: Vec<Fact>,
    /// Transfer emitters re-probed at this block that are still no token.
    pub probe_misses: Vec<Address>,
}

/// Writing a batch failed; nothing of it was committed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Storage failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// State could not be read or written.
    #[error(transparent)]
    State(#[from] state::StateError),
    /// A block holds more transactions than a TxId can number.
    #[error(transparent)]
    TxId(#[from] TxIdOverflow),
    /// A classifier gave a label that cannot be stored.
    #[error(transparent)]
    BadLabel(#[from] BadLabel),
    /// The batch does not continue the indexed chain.
    #[error("block {number} ({hash}) does not continue the index at {checkpoint:?}: its parent is {parent}")]
    NotContiguous {
        /// First block of the batch.
        number: u64,
        /// Its hash.
        hash: alloy_primitives::B256,
        /// Its parent hash.
        parent: alloy_primitives::B256,
        /// The indexed tip.
        checkpoint: Option<Checkpoint>,
    },
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

impl From<CollectError> for WriteError {
    fn from(e: CollectError) -> Self {
        match e {
            CollectError::TxId(overflow) => Self::TxId(overflow),
            CollectError::Db(db) => Self::Db(db),
        }
    }
}

impl From<LabelError> for WriteError {
    fn from(e: LabelError) -> Self {
        match e {
            LabelError::Bad(bad) => Self::BadLabel(bad),
            LabelError::Db(db) => Self::Db(db),
        }
    }
}

/// How each token's logs are indexed, as the writes go: from its attributes, updated by the
/// matches written meanwhile (inside a write transaction only matches change the bits a
/// `TokenKinds` reads). A batch of the incremental path starts with none; a bulk stage keeps
/// them (in its [`Rows`]) across its batches, which would otherwise read the same busy tokens'
/// attributes again every 250 blocks.
#[derive(Debug, Default)]
pub(super) struct Kinds {
    all: foldhash::HashMap<Address, TokenKinds>,
    /// The last token seen in each slot (by its address's last bits), in front of `all`: a
    /// stage looks a token up for each of its transfer logs (51 M on the 21 M chain) and most
    /// are of a few busy tokens, found here in a table that stays in the core's cache, where
    /// the map's look-up missed it (docs/benchmarks-history.md).
    recent: Vec<Option<(Address, TokenKinds)>>,
}

impl Kinds {
    /// Tokens remembered at most; past that all are forgotten (a mainnet stage sees millions of
    /// log emitters, most of them once).
    const MOST: usize = 1 << 20;
    /// 65,536 slots, under 2 MiB: with 4,096 the stage writer took 1.5 s more CPU on the 21 M
    /// chain (docs/benchmarks-history.md).
    const RECENT_BITS: u32 = 16;

    fn slot(token: &Address) -> usize {
        usize::from(u16::from_le_bytes([token.0[18], token.0[19]])) & ((1 << Self::RECENT_BITS) - 1)
    }

    fn of(&mut self, txn: &WriteTxn, token: &Address) -> Result<TokenKinds, WriteError> {
        if self.recent.is_empty() {
            self.recent = vec![None; 1 << Self::RECENT_BITS];
        }
        let slot = Self::slot(token);
        if let Some((address, kind)) = self.recent[slot] {
            if address == *token {
                return Ok(kind);
            }
        }
        let kind = match self.all.get(token) {
            Some(kind) => *kind,
            None => {
                if self.all.len() >= Self::MOST {
                    self.all.clear();
                }
                let kind = TokenKinds::of(&attributes(txn, token)?);
                self.all.insert(*token, kind);
                kind
            }
        };
        self.recent[slot] = Some((*token, kind));
        Ok(kind)
    }

    /// `address` is now indexed as `kind` (a match written).
    fn set(&mut self, address: Address, kind: TokenKinds) {
        self.all.insert(address, kind);
        if let Some(Some((cached, known))) = self.recent.get_mut(Self::slot(&address)) {
            if *cached == address {
                *known = kind;
            }
        }
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

/// What the address-keyed families gather from blocks before they write: in memory for one
/// batch of the incremental path, spilling into sorted runs over a bulk stage.
#[derive(Debug, Default)]
pub(super) struct Rows<B> {
    pub(super) lists: IdLists,
    pub(super) held: Holdings,
    pub(super) seen: Appearances,
    pub(super) totals: Totals,
    pub(super) balances: B,
    /// How each token's logs are indexed: not rows, but kept for as long as the rows are.
    pub(super) kinds: Kinds,
}

impl Rows<BulkBalances> {
    /// Spills the largest buffers until the rows held in memory fit in `budget` bytes.
    pub(super) fn spill_over(&mut self, budget: usize) -> DbResult<()> {
        let Self { lists, held, seen, totals, balances, .. } = self;
        let buffers = lists
            .buffers()
            .chain(held.buffers())
            .chain(seen.buffers())
            .chain([totals.buffer(), balances.buffer()]);
        Ok(spill_over(buffers.collect(), budget)?)
    }
}

/// Where a block's balance moves go.
pub(super) trait CollectBalances {
    /// Collects the moves of `block`'s token logs.
    fn collect_moves(&mut self, block: u64, logs: &[(TxId, TokenLog<'_>)]) -> DbResult<()>;
}

impl CollectBalances for Balances {
    fn collect_moves(&mut self, block: u64, logs: &[(TxId, TokenLog<'_>)]) -> DbResult<()> {
        self.collect(block, logs);
        Ok(())
    }
}

impl CollectBalances for BulkBalances {
    fn collect_moves(&mut self, block: u64, logs: &[(TxId, TokenLog<'_>)]) -> DbResult<()> {
        self.collect(block, logs)
    }
}

/// What a write reports and gathers beyond the rows every write gathers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Gather {
    /// Each block's activity (see [`BatchOptions::activity`]).
    pub(super) activity: bool,
    /// The appearance family (see [`BatchOptions::appearances`]).
    pub(super) appearances: bool,
}

/// Writes the block-keyed families of `blocks` (consecutive, continuing `tip`, which follows
/// them) and gathers the address-keyed families' rows: the part of a batch both write paths
/// share.
pub(super) fn write_blocks<B: CollectBalances>(
    txn: &WriteTxn,
    blocks: &[ClassifiedBlock],
    tip: &mut Option<Checkpoint>,
    rows: &mut Rows<B>,
    undo: &mut UndoLog,
    gather: Gather,
    out: &mut WrittenBatch,
) -> Result<(), WriteError> {
    let with = blocks.iter().any(|b| b.block.frames.is_some());
    let without = blocks.iter().any(|b| b.block.frames.is_none());
    state::note_call_frames(txn, with, without)?;
    for ClassifiedBlock { block, facts, probe_misses } in blocks {
        *tip = Some(continues(*tip, block)?);
        undo.begin_block(block.number, block.hash);
        let (contracts, matched) =
            matches::write_block(txn, block, facts, |address, kind| rows.kinds.set(address, kind))?;
        contract_info::write_block(txn, block.number, facts, undo)?;
        labels::write_block(txn, block.number, facts, undo)?;
        probes::write_block(txn, block.number, probe_misses, undo)?;
        lifetimes::write_block(txn, block, undo)?;
        let logs = token_logs(block, |token| rows.kinds.of(txn, token))?;
        rows.balances.collect_moves(block.number, &logs)?;
        let touches = logs.iter().flat_map(|(tx, log)| Touch::of(*tx, log));
        for touch in touches.clone() {
            rows.lists.touch(&touch)?;
            rows.held.touch(&touch)?;
        }
        rows.lists.collect_block(txn, block)?;
        if gather.appearances {
            rows.seen.collect_block(block, undo)?;
        }
        rows.totals.collect_block(block)?;
        if gather.activity {
            out.blocks.push(IndexedBlock::new(block, contracts, logs.len() as u64, touches));
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
    let mut rows = Rows::<Balances>::default();
    let gather = Gather { activity: options.activity, appearances: options.appearances };
    write_blocks(&txn, blocks, &mut tip, &mut rows, &mut undo, gather, &mut out)?;
    let Rows { lists, held, seen, totals, balances, .. } = rows;
    // Balances resolve on the second core while this thread writes holdings, the journal and
    // the address indexes from the state the transaction started from.
    (out.stats.transfer_ids, out.stats.appearances) =
        balances.write_beside(db, &txn, window, || -> Result<(u64, u64), WriteError> {
            held.write(&txn, &mut undo)?;
            let mut leaving = recent::take_leaving(&txn, window)?;
            let appearances = seen.write(&txn, window, &mut leaving)?.appearances;
            totals.write(&txn, window)?;
            undo.write(&txn)?;
            let before = db.begin_read().ok();
            Ok((lists.write(&txn, before.as_ref(), window, &mut leaving)?, appearances))
        })?;
    journal::prune(&txn, window)?;
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
    use crate::decode::TokenKind;

    #[test]
    fn a_match_written_reaches_the_recent_token_in_front_of_the_map() {
        let erc20 = TokenKinds { transfer: Some(TokenKind::Erc20), multi: false };
        let erc721 = TokenKinds { transfer: Some(TokenKind::Erc721), multi: false };
        let token = Address::repeat_byte(0x11);
        // Another address in the same slot: the slot is the address's last bits.
        let mut rival = Address::repeat_byte(0x22);
        rival.0[18..].copy_from_slice(&token.0[18..]);
        let mut kinds = Kinds { recent: vec![None; 1 << Kinds::RECENT_BITS], ..Kinds::default() };
        kinds.recent[Kinds::slot(&token)] = Some((token, TokenKinds::default()));
        kinds.set(token, erc20);
        assert_eq!(kinds.recent[Kinds::slot(&token)], Some((token, erc20)));
        assert_eq!(kinds.all.get(&token), Some(&erc20));
        // A match of another address leaves the slot's token as it is.
        kinds.set(rival, erc721);
        assert_eq!(kinds.recent[Kinds::slot(&rival)], Some((token, erc20)));
        assert_eq!(kinds.all.get(&rival), Some(&erc721));
    }
}
