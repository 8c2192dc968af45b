//! Writes one batch of classified blocks in one MDBX transaction.
//!
//! Address-index updates are gathered in memory for the whole batch and written once per
//! address, in address order: MDBX pays per dirtied page, so one sorted pass beats log-by-log
//! writes (deps-and-limits.md §3b).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use alloy_primitives::{Address, B256};
use ots_classifiers::{BlockData, Fact, Flag, Metadata, Standard};
use tracing::{debug, warn};

use super::{
    activity::IndexedBlock,
    address_index::{rewrite_with_appends, AddressCounter, AddressIndex, IdAppender},
    attributes::{add_attribute, attributes},
    balance_book::{BalanceBook, Resolved},
    balances::BalanceMove,
    matches::append_matches,
    rewrite::{rewrite_pays, MappedPages},
    transfers::Touch,
};
use crate::{
    db::{
        codec::{
            AttributeBit, BlockNumber, ContractInfo, Count, Holding, IndexKind, Label, UndoRecord,
            ValueCodec, MAX_LABEL_BYTES,
        },
        residency::trim_heap,
        state::{self, Checkpoint},
        tables::*,
        Db, DbError, ReadTxn, WriteTxn,
    },
    decode::{token_logs, TokenKind, TokenKinds},
    txid::{TxId, TxIdOverflow},
};

/// A batch with at least this many transfer logs gives its freed heap back to the kernel when it
/// commits (glibc keeps it otherwise: ~270 MiB after a 500 k-log batch). Trimming took 8–26 ms
/// after such a batch (docs/benchmarks.md); small batches free too little to be worth it.
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
    /// A classifier gave a label that is empty or longer than 64 bytes.
    #[error("a classifier labelled something in block {block} with {label:?}: labels must be 1 to 64 bytes")]
    BadLabel {
        /// The label.
        label: String,
        /// The block.
        block: u64,
    },
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
}

impl BatchOptions {
    /// A reorg window of `window` blocks, no rate, no activity.
    pub const fn window(window: u64) -> Self {
        Self { window, blocks_per_second: None, activity: false }
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
    /// Contracts found.
    pub contracts: u64,
    /// Classifier matches.
    pub matches: u64,
    /// Transfer logs of classified tokens.
    pub transfer_logs: u64,
    /// (address, transaction) ids added to the transfer indexes.
    pub transfer_ids: u64,
}

fn bit_of(standard: Standard) -> AttributeBit {
    match standard {
        Standard::Erc20 => AttributeBit::Erc20,
        Standard::Erc165 => AttributeBit::Erc165,
        Standard::Erc721 => AttributeBit::Erc721,
        Standard::Erc1155 => AttributeBit::Erc1155,
        Standard::Erc1167 => AttributeBit::Erc1167,
        Standard::Erc4626 => AttributeBit::Erc4626,
    }
}

fn append_standard(
    txn: &WriteTxn,
    standard: Standard,
    block: u64,
    addresses: &[Address],
) -> Result<(), DbError> {
    match standard {
        Standard::Erc20 => append_matches::<OtsERC20, OtsERC20Counter>(txn, block, addresses),
        Standard::Erc165 => append_matches::<OtsERC165, OtsERC165Counter>(txn, block, addresses),
        Standard::Erc721 => append_matches::<OtsERC721, OtsERC721Counter>(txn, block, addresses),
        Standard::Erc1155 => append_matches::<OtsERC1155, OtsERC1155Counter>(txn, block, addresses),
        Standard::Erc1167 => append_matches::<OtsERC1167, OtsERC1167Counter>(txn, block, addresses),
        Standard::Erc4626 => append_matches::<OtsERC4626, OtsERC4626Counter>(txn, block, addresses),
    }
}

fn contract_info(block: u64, metadata: Metadata) -> ContractInfo {
    let Metadata { name, symbol, decimals, asset, implementation } = metadata;
    ContractInfo { block, name, symbol, decimals, asset, implementation }
}

/// How `token`'s logs are indexed, from the batch's cache or its attributes.
fn lookup_kinds(
    kinds: &mut HashMap<Address, TokenKinds>,
    txn: &WriteTxn,
    token: &Address,
) -> Result<TokenKinds, WriteError> {
    if let Some(kind) = kinds.get(token) {
        return Ok(*kind);
    }
    let kind = TokenKinds::of(&attributes(txn, token)?);
    kinds.insert(*token, kind);
    Ok(kind)
}

/// A block's undo record while its batch is written: number, hash, what it touched.
type PendingRecord = (u64, B256, Vec<(IndexKind, Address)>);

/// How a batch's balances were resolved.
enum Resolving {
    /// The batch moved no balance.
    Nothing,
    /// From a read snapshot, on the second core.
    Done(Box<Resolved>),
    /// Still to be done in the write transaction: no snapshot could be had.
    Serially(BalanceBook),
}

/// Drops the rows of a per-block undo table below `keep_from`: they left the reorg window.
fn prune_below<T: Table<Key = BlockNumber>>(txn: &WriteTxn, keep_from: u64) -> Result<(), DbError> {
    loop {
        let first = txn.cursor::<T>()?.first()?;
        match first {
            Some((BlockNumber(b), _)) if b < keep_from => {
                txn.delete::<T>(&BlockNumber(b), None)?;
            }
            _ => return Ok(()),
        }
    }
}

/// The (address, id) pairs of one address index, gathered over a batch and sorted once: a
/// flat list sorts faster than a map grows.
#[derive(Debug, Default)]
struct IdCollector(Vec<(Address, u64)>);

impl IdCollector {
    fn touch(&mut self, address: Address, id: u64) {
        self.0.push((address, id));
    }

    /// Appends every address's ids, addresses in key order; returns how many ids were new.
    /// With `before` (a snapshot of the state `txn` started from) the index and its counter are
    /// rewritten whole when the batch appends to a large share of the index's chunks
    /// (`rewrite_pays`; the index has at least one chunk per address).
    fn write<I: AddressIndex, C: AddressCounter>(
        mut self,
        txn: &WriteTxn,
        before: Option<&ReadTxn>,
    ) -> Result<u64, DbError> {
        if self.0.is_empty() {
            // Nothing to append: not even an empty table is worth clearing.
            return Ok(0);
        }
        self.0.sort_unstable();
        self.0.dedup();
        let mut runs: Vec<(Address, &[u64])> = Vec::new();
        let ids: Vec<u64> = self.0.iter().map(|&(_, id)| id).collect();
        let mut rest = ids.as_slice();
        for run in self.0.chunk_by(|a, b| a.0 == b.0) {
            let (head, tail) = rest.split_at(run.len());
            runs.push((run[0].0, head));
            rest = tail;
        }
        match before {
            Some(before) if rewrite_pays(txn.stats::<I>()?.entries, runs.len() as u64) => {
                rewrite_with_appends::<I, C, _>(txn, before, runs)?;
            }
            _ => {
                let mut appender = IdAppender::<I, C>::new(txn)?;
                for (address, ids) in runs {
                    appender.append(&address, ids)?;
                }
            }
        }
        Ok(self.0.len() as u64)
    }
}

/// The (holder, token) pairs of one holdings table met in a batch, with the transaction.
#[derive(Debug, Default)]
struct HoldingCollector(Vec<(Address, Address, TxId)>);

impl HoldingCollector {
    /// Adds a dup for every pair without one, with its first transaction of the batch; calls
    /// `added` with each added pair's holder and first transaction.
    fn write<H: Table<Key = Address, Value = Holding>>(
        mut self,
        txn: &WriteTxn,
        mut added: impl FnMut(Address, TxId),
    ) -> Result<(), DbError> {
        self.0.sort_unstable();
        let mut cursor = txn.cursor::<H>()?;
        let mut mapped = MappedPages::default();
        for run in self.0.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
            mapped.tick(txn);
            let (holder, token, first) = run[0];
            // A DupFixed table only takes a whole-size value to seek with: token ‖ the smallest id.
            let lowest = Holding { token, first: TxId(0) }.encode_value();
            // Forward sync only ever finds earlier appearances stored.
            if cursor.seek_dup_at_least(&holder, &lowest)?.is_some_and(|h| h.token == token) {
                continue;
            }
            cursor.put(&holder, &Holding { token, first })?;
            added(holder, first);
        }
        Ok(())
    }
}

/// Writes `blocks` (consecutive, continuing the index) and moves the checkpoint to the last one,
/// all in one transaction.
pub fn write_batch(
    db: &Db,
    blocks: &[ClassifiedBlock],
    options: BatchOptions,
) -> Result<WrittenBatch, WriteError> {
    let BatchOptions { window, blocks_per_second, activity } = options;
    let mut stats = BatchStats::default();
    let mut indexed = Vec::with_capacity(if activity { blocks.len() } else { 0 });
    let Some(last) = blocks.last() else { return Ok(WrittenBatch::default()) };
    // Blocks below this leave the reorg window when the batch commits: what would undo them is
    // never written (catching up, most of a batch).
    let keep_from = last.block.number.saturating_sub(window.max(1) - 1);
    let txn = db.begin_write()?;
    let mut tip = state::read_state(&txn)?.checkpoint;

    let mut kinds: HashMap<Address, TokenKinds> = HashMap::new();
    let mut book = BalanceBook::default();
    let mut erc20 = IdCollector::default();
    let mut erc721 = IdCollector::default();
    let mut erc1155 = IdCollector::default();
    let mut rewarded = IdCollector::default();
    let mut withdrawals = IdCollector::default();
    let mut erc20_holdings = HoldingCollector::default();
    let mut erc721_holdings = HoldingCollector::default();
    let mut erc1155_holdings = HoldingCollector::default();
    let mut records: Vec<PendingRecord> = Vec::with_capacity(blocks.len());

    for ClassifiedBlock { block, facts, probe_misses } in blocks {
        let continues = match tip {
            None => true,
            Some(t) => t.number + 1 == block.number && t.hash == block.parent_hash,
        };
        if !continues {
            return Err(WriteError::NotContiguous {
                number: block.number,
                hash: block.hash,
                parent: block.parent_hash,
                checkpoint: tip,
            });
        }
        tip = Some(Checkpoint { number: block.number, hash: block.hash });

        let created = block.created_contracts();
        let created_count = created.len() as u64;
        let created: BTreeSet<Address> = created.into_iter().collect();
        let created: Vec<Address> = created.into_iter().collect();
        append_matches::<OtsAllContracts, OtsAllContractsCounter>(&txn, block.number, &created)?;
        stats.contracts += created.len() as u64;

        let mut by_standard: BTreeMap<Standard, BTreeSet<Address>> = BTreeMap::new();
        let mut flagged: BTreeSet<(Address, Flag)> = BTreeSet::new();
        let mut described: BTreeMap<Address, Metadata> = BTreeMap::new();
        let mut labels: BTreeSet<(Address, &str)> = BTreeSet::new();
        for fact in facts {
            match fact {
                Fact::Matched { standard, address } => {
                    by_standard.entry(*standard).or_default().insert(*address);
                }
                Fact::Flagged { flag, address } => {
                    flagged.insert((*address, *flag));
                }
                Fact::Described { address, metadata } => {
                    described.entry(*address).or_default().merge(metadata.clone());
                }
                Fact::Labeled { label, address } => {
                    if label.is_empty() || label.len() > MAX_LABEL_BYTES {
                        return Err(WriteError::BadLabel { label: label.clone(), block: block.number });
                    }
                    labels.insert((*address, label));
                }
            }
        }
        for (standard, addresses) in by_standard {
            let addresses: Vec<Address> = addresses.into_iter().collect();
            append_standard(&txn, standard, block.number, &addresses)?;
            for address in &addresses {
                let attrs = add_attribute(&txn, address, bit_of(standard))?;
                kinds.insert(*address, TokenKinds::of(&attrs));
            }
            stats.matches += addresses.len() as u64;
        }
        for (address, Flag::Erc721Metadata) in flagged {
            add_attribute(&txn, &address, AttributeBit::Erc721Metadata)?;
        }
        let mut undo: Vec<(IndexKind, Address)> = Vec::new();
        for (address, metadata) in described {
            txn.put::<OtsContractInfo>(&address, &contract_info(block.number, metadata))?;
            undo.push((IndexKind::ContractInfo, address));
        }
        for (address, label) in labels {
            txn.put::<OtsLabels>(&address, &Label { block: block.number, label: label.to_owned() })?;
            undo.push((IndexKind::Label, address));
        }
        for address in probe_misses {
            txn.put::<OtsTransferProbes>(address, &BlockNumber(block.number))?;
            undo.push((IndexKind::TransferProbe, *address));
        }

        let logs = token_logs(block, |token| lookup_kinds(&mut kinds, &txn, token))?;
        stats.transfer_logs += logs.len() as u64;
        for (tx, log) in &logs {
            for m in BalanceMove::of(log) {
                book.push(block.number, m);
            }
            for touch in Touch::of(*tx, log) {
                let (collector, holdings, kind) = match touch.kind {
                    TokenKind::Erc20 => (&mut erc20, &mut erc20_holdings, IndexKind::Erc20Transfers),
                    TokenKind::Erc721 => (&mut erc721, &mut erc721_holdings, IndexKind::Erc721Transfers),
                    TokenKind::Erc1155 => (&mut erc1155, &mut erc1155_holdings, IndexKind::Erc1155Transfers),
                };
                collector.touch(touch.address, touch.tx.0);
                holdings.0.push((touch.address, touch.token, touch.tx));
                undo.push((kind, touch.address));
            }
        }
        if activity {
            let touches = logs.iter().flat_map(|(tx, log)| Touch::of(*tx, log));
            indexed.push(IndexedBlock::new(block, created_count, logs.len() as u64, touches));
        }
        rewarded.touch(block.coinbase, block.number);
        undo.push((IndexKind::BlocksRewarded, block.coinbase));
        for w in &block.withdrawals {
            withdrawals.touch(w.address, w.index);
            undo.push((IndexKind::Withdrawals, w.address));
        }
        if let Some(last_withdrawal) = block.withdrawals.iter().map(|w| w.index).max() {
            txn.put::<OtsWithdrawalIdx2Block>(&Count(last_withdrawal), &BlockNumber(block.number))?;
        }
        records.push((block.number, block.hash, undo));
        stats.blocks += 1;
    }
    // Balances are resolved on the second core from a read snapshot while this thread writes
    // the holdings and address indexes. The snapshot is the state this transaction started
    // from: this transaction holds the writer lock, so nothing commits in between, and nothing
    // here writes a balance table before the resolved values are written below.
    let resolved = std::thread::scope(|scope| {
        // The book moves to that thread, which frees it once resolved.
        let resolving = scope.spawn(move || -> Result<Resolving, DbError> {
            if book.is_empty() {
                return Ok(Resolving::Nothing);
            }
            match db.begin_read() {
                Ok(snapshot) => Ok(Resolving::Done(Box::new(book.resolve(&snapshot, keep_from)?))),
                Err(error) => {
                    // E.g. every reader slot taken by API clients: resolve in the write
                    // transaction instead, after this thread's part.
                    warn!(target: "ots::index", %error, "no read snapshot for balances; resolving them serially");
                    Ok(Resolving::Serially(book))
                }
            }
        });
        let written = (|| -> Result<(), WriteError> {
            let first_block = blocks[0].block.number;
            // A new holding is journalled with the block of its first transaction.
            let journal =
                |records: &mut Vec<PendingRecord>, kind: IndexKind, holder: Address, first: TxId| {
                    let at = usize::try_from(first.block() - first_block).unwrap_or(usize::MAX);
                    if let Some((_, _, undo)) = records.get_mut(at) {
                        undo.push((kind, holder));
                    }
                };
            erc20_holdings.write::<OtsERC20Holdings>(&txn, |h, f| {
                journal(&mut records, IndexKind::Erc20Holdings, h, f)
            })?;
            erc721_holdings.write::<OtsERC721Holdings>(&txn, |h, f| {
                journal(&mut records, IndexKind::Erc721Holdings, h, f)
            })?;
            erc1155_holdings.write::<OtsERC1155Holdings>(&txn, |h, f| {
                journal(&mut records, IndexKind::Erc1155Holdings, h, f)
            })?;
            for (number, hash, mut touched) in records {
                if number < keep_from {
                    continue;
                }
                touched.sort_unstable();
                touched.dedup();
                txn.put::<OtsUndoJournal>(&BlockNumber(number), &UndoRecord { hash, touched })?;
            }
            // The state this transaction started from, as for the balances: the address
            // indexes are still untouched here. Without it every index is written in place.
            let before = db.begin_read().ok();
            let before = before.as_ref();
            stats.transfer_ids +=
                erc20.write::<OtsERC20TransferIndex, OtsERC20TransferCounter>(&txn, before)?;
            stats.transfer_ids +=
                erc721.write::<OtsERC721TransferIndex, OtsERC721TransferCounter>(&txn, before)?;
            stats.transfer_ids +=
                erc1155.write::<OtsERC1155TransferIndex, OtsERC1155TransferCounter>(&txn, before)?;
            rewarded.write::<OtsBlocksRewardedIndex, OtsBlocksRewardedCounter>(&txn, before)?;
            // Withdrawal indexes grow with the chain; a block may list them in any order, which
            // the collector's sort puts right.
            withdrawals.write::<OtsWithdrawalsIndex, OtsWithdrawalsCounter>(&txn, before)?;
            Ok(())
        })();
        let resolved = resolving.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        written.and(resolved.map_err(WriteError::from))
    })?;
    match resolved {
        Resolving::Nothing => {}
        Resolving::Done(resolved) => {
            // Still the state this transaction started from: no balance table is written yet.
            let before = db.begin_read().ok();
            resolved.write(&txn, before.as_ref())?;
        }
        Resolving::Serially(book) => book.resolve(&txn, keep_from)?.write(&txn, None)?,
    }
    prune_below::<OtsUndoJournal>(&txn, keep_from)?;
    prune_below::<OtsBalanceUndo>(&txn, keep_from)?;
    prune_below::<OtsOwnerUndo>(&txn, keep_from)?;
    prune_below::<OtsERC1155BalanceUndo>(&txn, keep_from)?;
    state::set_checkpoint(&txn, Checkpoint { number: last.block.number, hash: last.block.hash })?;
    if let Some(rate) = blocks_per_second {
        state::set_sync_rate(&txn, rate)?;
    }
    txn.commit()?;
    // What the batch read through the map and freed on the heap would otherwise stay counted in
    // the process's resident memory while it follows the head.
    db.release_mapped_pages();
    if stats.transfer_logs >= TRIM_AFTER_LOGS {
        trim_heap();
    }
    debug!(target: "ots::index", first = blocks[0].block.number, last = last.block.number, ?stats, "batch committed");
    Ok(WrittenBatch { stats, blocks: indexed })
}
