//! Upgrading a database of an older format in place (`ots-indexer migrate`): a mainnet index is
//! days of work, an upgrade minutes at most.
//!
//! * Format 8 → 9 changes only the reorg window's tables: three per-block balance tables and the
//!   totals' window table take names that say what they hold (their bytes stay), and the window
//!   gains its holder counts and ranking by token, computed from its balances.
//! * Format 9 → 10 adds `OtsBlockTimes`, every indexed block's timestamp. The index never kept
//!   them, so they are read from the chain's source (the node's headers, a thousand a request,
//!   or a recording), which must be of the database's chain.
//! * Format 10 → 11 marks, in the appearance lists, the transactions each address received
//!   (top-level recipient or created contract). The blocks already indexed keep their lists as
//!   they are (reading every transaction again would be most of a re-index): the state records
//!   the first TxId past them, from which the marks hold, and readers ask the node below it.
//! * Format 11 → 12 adds the internal-transaction index (`OtsInternalTxIndex`, empty). As with
//!   the received marks, the blocks already indexed stay as they are: the state records the
//!   first TxId past them, from which the index holds every internal transaction, and
//!   `txlistinternal` walks an address's appearances (tracing each) where it reaches below it.
//! * Format 12 → 13 adds the transfer rows index (`OtsTransferRowsIndex`, empty): the rows of a
//!   token list the transfer indexes do not count. The blocks already indexed stay as they are
//!   again: the state records the first TxId past them, and a deep page of a token list counts
//!   the rows below it with the node's help, as before.
//! * Format 13 → 14 adds the token transfers index (`OtsTokenTransfersIndex`, empty): each
//!   token's transactions that move it, with their rows, for its own token lists; and the
//!   internal rows index (`OtsInternalRowsIndex`, empty): the `txlistinternal` rows the
//!   internal-transaction index does not count. The blocks already indexed stay as they are once
//!   more: the state records the first TxId past them for both, a token's own list walks its
//!   appearances below it, and `txlistinternal` counts the rows there by tracing, as before.
//! * Format 14 → 15 adds the party–token index (`OtsPartyTokenIndex`, empty): each party's
//!   transactions that move one token, with their rows, for an address's token list of that
//!   token alone. As in a new database it is not kept until the operator asks for it (`run` or
//!   `sync` with `--party-token-index on`, from the next block on); such a list walks the party's
//!   transfer index, as before.
//! * Format 15 → 16 adds the address indexes' young levels (`OtsERC20TransferIndexYoung`, …,
//!   empty): where a catch-up's bulk stages append their ids until they are folded into the
//!   main tables. Nothing else changes; an older build must not read a database whose young
//!   levels hold ids it would not see.
//! * Format 16 → 17 adds the appearance lists' young level (`OtsAppearancesYoung`, empty), for
//!   the same reason.
//! * Format 17 → 18 lets a catch-up's bulk stages defer a token's holder ranking
//!   (`OtsTokenHolderRanks` without the token while the state holds `rankings_deferred`): no
//!   table changes, as a format-17 database has every ranking whole; an older build must not
//!   read a database whose rankings it would find missing.
//! * Format 18 → 19 adds the address totals' staged segments (`OtsStagedTotals`, empty): what a
//!   catch-up's later stages added to the totals until its end sums them in. Nothing else
//!   changes; an older build must not read a database whose segments it would not add.
//! * Format 19 → 20 adds the address indexes' staged segments (`OtsERC20TransferIndexStaged`,
//!   …, empty): where a catch-up's later stages append their ids until its end folds them in,
//!   instead of the young levels. A young level a format-19 catch-up left is read and folded
//!   as before; an older build must not read a database whose segments it would not see.
//! * Format 20 → 21 adds the appearance lists' staged segments (`OtsAppearancesStaged`, empty)
//!   and their senders' nonce runs (`OtsNonceRunsStaged`, empty), where a catch-up's later
//!   stages append instead of the young level `OtsAppearancesYoung`, which a format-20 catch-up
//!   may have left and which is read and folded as before.
//! * Format 21 → 22 adds the holdings' staged segments (`OtsHoldingsStaged`, empty), where a
//!   catch-up's later stages append the pairs they touch until its end folds them in; an older
//!   build must not read a database whose segments it would not see.
//! * Format 22 → 23 adds the ERC721 owners' staged segments (`OtsOwnersStaged`, empty), where a
//!   catch-up's later stages append the owners they set until its end folds them in; an older
//!   build must not read a database whose segments it would not see.
//! * Format 23 → 24 keys the chunks of the address indexes' staged segments by their ordinal
//!   within the segment's list of the address instead of by their largest id, so that a count,
//!   a page or a rank seeks an address's chunk in a segment instead of reading them all. A
//!   catch-up stopped midway has its segments copied, rekeyed, in key order; other databases
//!   have none.
//!
//! The large tables are not touched. What the source gives is read before anything is written;
//! then everything happens in one write transaction: a crash before its commit leaves the old
//! database as it was (and the next `migrate` starts again), after it the new one whole.

use std::time::Instant;

use tracing::info;

use crate::db::{
    codec::{BlockNumber, Timestamp},
    state::{self, ChainIdentity, FORMAT_VERSION, UPGRADABLE_FORMATS},
    tables::{OtsBlockTimes, TableId},
    Db, DbError, ReadTxn, WriteTxn,
};
use crate::source::{BlockSource, SourceError};
use crate::txid::TxId;

use super::{
    address_index::{staged, ID_LISTS},
    balances::rebuild_window_holders,
};

/// Blocks whose times one step of the reading asks the source for (a progress line each).
const TIMES_STEP: u64 = 100_000;

/// Tables format 9 renamed: (the name format 8 gave it, the table now).
const RENAMED_IN_9: &[(&str, TableId)] = &[
    ("OtsBalanceUndo", TableId::OtsRecentBalancesByBlock),
    ("OtsOwnerUndo", TableId::OtsRecentOwnersByBlock),
    ("OtsERC1155BalanceUndo", TableId::OtsRecentMultiBalancesByBlock),
    ("OtsTotalsUndo", TableId::OtsRecentTotals),
];

/// Why a database was not upgraded.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// Storage failed; nothing was changed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The state could not be read.
    #[error(transparent)]
    State(#[from] state::StateError),
    /// The database was never written by an indexer.
    #[error("the database has not been initialised: there is nothing to upgrade")]
    NotInitialised,
    /// The upgrade needs the chain's block times and no source was given.
    #[error("format {found} -> {FORMAT_VERSION} adds every indexed block's timestamp, which only the chain's node knows: give --rpc-url of a node of this chain (or --source of the recording the database was indexed from)")]
    NeedsSource {
        /// Its format version.
        found: u64,
    },
    /// The source is of another chain.
    #[error("the source is of {source_chain}, the database indexes {database}: give a node of the database's chain")]
    OtherChain {
        /// The database's chain.
        database: ChainIdentity,
        /// The source's.
        source_chain: ChainIdentity,
    },
    /// The source failed or lacks blocks the database indexed.
    #[error("reading the indexed blocks' times from the source: {0}")]
    Source(#[from] SourceError),
    /// The source has fewer blocks than the database indexed.
    #[error("the source's head is block {head}, the database indexed up to block {tip}: wait for the node to catch up")]
    SourceBehind {
        /// The source's newest block.
        head: u64,
        /// The database's tip.
        tip: u64,
    },
    /// A format this build cannot upgrade from.
    #[error("the database uses format version {found}; this build upgrades versions {UPGRADABLE_FORMATS:?} to {FORMAT_VERSION}: re-index into a new --datadir (or use a matching ots-indexer release)")]
    Unsupported {
        /// Its format version.
        found: u64,
    },
}

/// What an upgrade did.
#[derive(Debug, Clone, PartialEq)]
pub enum Upgraded {
    /// The database was already of this build's format.
    AlreadyCurrent,
    /// It was upgraded.
    From {
        /// Its format before.
        version: u64,
        /// Entries moved to each renamed table.
        renamed: Vec<(&'static str, TableId, u64)>,
        /// Block times written.
        block_times: u64,
        /// The first TxId whose received marks the lists hold (0: all of them).
        received_marks_from: u64,
        /// The first TxId from which the internal-transaction index holds every internal
        /// transaction (0: all of them).
        internal_txs_from: u64,
        /// The first TxId from which the transfer rows index holds every transaction's rows (0:
        /// all of them).
        transfer_rows_from: u64,
        /// The first TxId from which the token transfers index holds every transaction that moves
        /// a token, and the internal rows index every transaction's rows (0: all of them).
        token_transfers_from: u64,
        /// The first TxId from which the party–token index holds every transaction in which a
        /// party moved a token (`state::PARTY_TOKEN_NOT_KEPT`: it is not kept).
        party_token_from: u64,
        /// Seconds the upgrade took, commit included.
        seconds: f64,
    },
}

/// Upgrades the database to this build's format. The caller holds it exclusively: no reader
/// may see the tables change format under it. `source` (the node, or the recording the database
/// was indexed from) gives the block times format 10 adds; an upgrade from an older format
/// without one is refused before anything is read or written.
pub async fn upgrade(db: &Db, source: Option<&dyn BlockSource>) -> Result<Upgraded, UpgradeError> {
    let started = Instant::now();
    let current = state::read_state(&db.begin_read()?)?;
    let version = match current.format_version {
        None if current.chain.is_none() => return Err(UpgradeError::NotInitialised),
        Some(FORMAT_VERSION) => return Ok(Upgraded::AlreadyCurrent),
        Some(found) if UPGRADABLE_FORMATS.contains(&found) => found,
        other => return Err(UpgradeError::Unsupported { found: other.unwrap_or(0) }),
    };
    let tip = current.checkpoint.map(|c| c.number);
    let times = match tip {
        Some(tip) if version < 10 => {
            let source = source.ok_or(UpgradeError::NeedsSource { found: version })?;
            read_times(source, current.chain, tip).await?
        }
        _ => Vec::new(),
    };

    // The state the write below starts from, for the tables it copies.
    let before = db.begin_read()?;
    let txn = db.begin_write()?;
    // The caller holds the database alone: what was read above still stands.
    let renamed = if version < 9 { to_9(&txn)? } else { Vec::new() };
    let block_times = if version < 10 { to_10(&txn, &times)? } else { 0 };
    let received_marks_from =
        if version < 11 { to_11(&txn, tip)? } else { state::read_received_marks_from(&txn)? };
    let internal_txs_from =
        if version < 12 { to_12(&txn, tip)? } else { state::read_internal_txs_from(&txn)? };
    let transfer_rows_from =
        if version < 13 { to_13(&txn, tip)? } else { state::read_transfer_rows_from(&txn)? };
    let token_transfers_from =
        if version < 14 { to_14(&txn, tip)? } else { state::read_token_transfers_from(&txn)? };
    let party_token_from = if version < 15 { to_15(&txn)? } else { state::read_party_token_from(&txn)? };
    let staged_chunks_keyed = if version < 24 { to_24(&txn, &before)? } else { 0 };
    drop(before);
    state::set_format_version(&txn)?;
    txn.commit()?;
    let seconds = started.elapsed().as_secs_f64();
    info!(target: "ots::index", from = version, to = FORMAT_VERSION, seconds, block_times, staged_chunks_keyed, received_marks_from, internal_txs_from, transfer_rows_from, token_transfers_from, party_token_from, "database upgraded");
    Ok(Upgraded::From {
        version,
        renamed,
        block_times,
        received_marks_from,
        internal_txs_from,
        transfer_rows_from,
        token_transfers_from,
        party_token_from,
        seconds,
    })
}

/// The times of blocks `0..=tip` from `source`, after checking that it is the database's chain
/// and has those blocks.
async fn read_times(
    source: &dyn BlockSource,
    chain: Option<ChainIdentity>,
    tip: u64,
) -> Result<Vec<u64>, UpgradeError> {
    let source_chain = source.chain_identity().await?;
    if let Some(database) = chain.filter(|c| *c != source_chain) {
        return Err(UpgradeError::OtherChain { database, source_chain });
    }
    let head = source.head().await?;
    if head < tip {
        return Err(UpgradeError::SourceBehind { head, tip });
    }
    let mut times = Vec::with_capacity(usize::try_from(tip + 1).unwrap_or(0));
    let mut from = 0;
    while from <= tip {
        let to = tip.min(from + TIMES_STEP - 1);
        times.extend(source.block_times(from, to).await?);
        info!(target: "ots::index", read = to + 1, of = tip + 1, "reading the indexed blocks' times");
        from = to + 1;
    }
    Ok(times)
}

/// Format 9 → 10: the block times, `times[n]` being block `n`'s.
fn to_10(txn: &WriteTxn, times: &[u64]) -> Result<u64, DbError> {
    txn.clear::<OtsBlockTimes>()?;
    let mut cursor = txn.cursor::<OtsBlockTimes>()?;
    for (block, &time) in (0u64..).zip(times) {
        cursor.append(&BlockNumber(block), &Timestamp(time))?;
    }
    Ok(times.len() as u64)
}

/// The first TxId past `tip` (0 for a database that holds no block): where what an upgrade adds
/// starts to hold, the blocks indexed before it being left as they are.
fn first_past(tip: Option<u64>) -> u64 {
    tip.map_or(0, |tip| TxId::first_of_block(tip + 1).0)
}

/// Format 10 → 11: the received marks hold from the first transaction past `tip` (the reorg
/// window's rows included: they were written without them). Returns that TxId.
fn to_11(txn: &WriteTxn, tip: Option<u64>) -> Result<u64, DbError> {
    let from = first_past(tip);
    if from > 0 {
        state::set_received_marks_from(txn, from)?;
    }
    Ok(from)
}

/// Format 11 → 12: the internal-transaction index (its tables new and empty) holds the
/// transactions past `tip`. Returns the first TxId it holds them from.
fn to_12(txn: &WriteTxn, tip: Option<u64>) -> Result<u64, DbError> {
    state::raise_internal_txs_from(txn, first_past(tip))?;
    state::read_internal_txs_from(txn)
}

/// Format 12 → 13: the transfer rows index (its tables new and empty) holds the transactions
/// past `tip`. Returns the first TxId it holds them from.
fn to_13(txn: &WriteTxn, tip: Option<u64>) -> Result<u64, DbError> {
    let from = first_past(tip);
    if from > 0 {
        state::set_transfer_rows_from(txn, from)?;
    }
    Ok(from)
}

/// Format 13 → 14: the token transfers and internal rows indexes (their tables new and empty)
/// hold the transactions past `tip`. Returns the first TxId they hold them from.
fn to_14(txn: &WriteTxn, tip: Option<u64>) -> Result<u64, DbError> {
    let from = first_past(tip);
    if from > 0 {
        state::set_token_transfers_from(txn, from)?;
        state::set_internal_rows_from(txn, from)?;
    }
    Ok(from)
}

/// Format 14 → 15: the party–token index (its tables new and empty) is not kept, as in a new
/// database (`--party-token-index on` keeps it from the next block on). Returns
/// [`state::PARTY_TOKEN_NOT_KEPT`].
fn to_15(txn: &WriteTxn) -> Result<u64, DbError> {
    state::set_party_token_from(txn, state::PARTY_TOKEN_NOT_KEPT)?;
    Ok(state::PARTY_TOKEN_NOT_KEPT)
}

/// Format 23 → 24: the address indexes' staged segments key their chunks by ordinal. Returns
/// the chunks keyed anew (none but where a catch-up of formats 20 to 23 stopped before its end).
fn to_24(txn: &WriteTxn, before: &ReadTxn) -> Result<u64, DbError> {
    let mut keyed = 0;
    for list in ID_LISTS {
        keyed += staged::key_by_ordinal(txn, before, list)?;
    }
    Ok(keyed)
}

/// Format 8 → 9.
fn to_9(txn: &WriteTxn) -> Result<Vec<(&'static str, TableId, u64)>, DbError> {
    let mut renamed = Vec::new();
    for &(old, table) in RENAMED_IN_9 {
        renamed.push((old, table, txn.adopt_table(old, table)?));
    }
    rebuild_window_holders(txn)?;
    Ok(renamed)
}
