//! The undo journal's other half: dropping what left the reorg window, and unwinding the index
//! to an earlier block (reorgs and `ots-indexer unwind`) by asking each family to undo what the
//! journal says its blocks wrote.
//!
//! Ids grow with the chain, so undoing blocks `> to` is: drop match rows keyed above `to`, drop
//! the reorg window's rows of those blocks (address and appearance lists, totals), and cut what
//! the undo journal names back to ids below the first id of block `to + 1`
//! (docs/architecture.md, "Invariants").

use std::{collections::BTreeSet, time::Instant};

use alloy_primitives::Address;
use tracing::debug;

use super::{
    address_index, appearances, balances, contract_info, holdings, labels, lifetimes, matches, probes,
    recent, totals,
};
use crate::{
    db::{
        codec::{BlockNumber, IndexKind},
        state::{self, Checkpoint, StateError},
        tables::*,
        DbError, DbResult, WriteTxn,
    },
    decode::TokenKind,
    txid::TxId,
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

/// Drops the rows of a per-block undo table below `keep_from`.
fn prune_below<T: Table<Key = BlockNumber>>(txn: &WriteTxn, keep_from: u64) -> DbResult<()> {
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

/// Drops every per-block undo row of blocks below `keep_from`: they left the reorg window. (The
/// totals' window deltas are not undo rows: `totals::fold` moves them into the totals; the
/// balances' window values settle with the batch that prunes their blocks' rows.)
pub fn prune(txn: &WriteTxn, keep_from: u64) -> DbResult<()> {
    prune_below::<OtsUndoJournal>(txn, keep_from)?;
    prune_below::<OtsBalanceUndo>(txn, keep_from)?;
    prune_below::<OtsOwnerUndo>(txn, keep_from)?;
    prune_below::<OtsERC1155BalanceUndo>(txn, keep_from)
}

/// Moves every row the reorg window keeps apart into the large tables, as if each of its blocks
/// had left it (the journal stays): how a database reads when compared with another whose
/// window starts elsewhere (`check --hash`), in a transaction that is then dropped.
pub fn fold_window(txn: &WriteTxn) -> DbResult<()> {
    let mut leaving = recent::take_below(txn, u64::MAX)?;
    address_index::IdLists::default().write(txn, None, address_index::Window::closed(&mut leaving))?;
    appearances::Appearances::default().write(txn, appearances::Window::closed(&mut leaving))?;
    totals::fold(txn, u64::MAX)?;
    balances::fold(txn, u64::MAX)
}

/// Every block leaves the reorg window: its rows move into the large tables and the journal
/// that could unwind it is dropped.
pub fn close_window(txn: &WriteTxn) -> DbResult<()> {
    fold_window(txn)?;
    prune(txn, u64::MAX)
}

/// The oldest block the undo journal covers, if any.
pub fn journal_start(txn: &WriteTxn) -> DbResult<Option<u64>> {
    Ok(txn.cursor::<OtsUndoJournal>()?.first()?.map(|(BlockNumber(b), _)| b))
}

/// Undoes the row of `kind` under `address` that an unwound block wrote: the one place a
/// journal kind is tied to its family.
fn unwind_row(txn: &WriteTxn, kind: IndexKind, address: &Address, to: u64, tx_cut: u64) -> DbResult<()> {
    let held = |kind| holdings::unwind_holder(txn, kind, address, tx_cut);
    match kind {
        // Kept in the reorg window's own tables, which `recent::unwind` cuts back by block; the
        // journal names none of these.
        IndexKind::Erc20Transfers
        | IndexKind::Erc721Transfers
        | IndexKind::Erc1155Transfers
        | IndexKind::BlocksRewarded
        | IndexKind::Withdrawals
        | IndexKind::Appearances
        | IndexKind::SentTxs => Ok(()),
        IndexKind::Erc20Holdings => held(TokenKind::Erc20),
        IndexKind::Erc721Holdings => held(TokenKind::Erc721),
        IndexKind::Erc1155Holdings => held(TokenKind::Erc1155),
        IndexKind::ContractInfo => contract_info::unwind_address(txn, address, to),
        IndexKind::Label => labels::unwind_address(txn, address, to),
        IndexKind::TransferProbe => probes::unwind_address(txn, address, to),
        IndexKind::ContractCreator => appearances::unwind_creator(txn, address, tx_cut),
        IndexKind::CodeRemoval => lifetimes::unwind_contract(txn, address, tx_cut),
    }
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
    let mut touched: BTreeSet<(IndexKind, Address)> = BTreeSet::new();
    for block in to + 1..=tip.number {
        let record = txn
            .get::<OtsUndoJournal>(&BlockNumber(block))?
            .ok_or(UnwindError::BeyondWindow { to, oldest })?;
        touched.extend(record.touched);
        txn.delete::<OtsUndoJournal>(&BlockNumber(block), None)?;
    }
    let started = Instant::now();
    balances::unwind(txn, to, tip.number)?;
    let balance_seconds = started.elapsed().as_secs_f64();
    totals::unwind(txn, to, tip.number)?;
    recent::unwind(txn, to)?;
    address_index::unwind_withdrawal_blocks(txn, to)?;
    let tx_cut = TxId::first_of_block(to + 1).0;
    for (kind, address) in &touched {
        unwind_row(txn, *kind, address, to, tx_cut)?;
    }
    matches::unwind(txn, to)?;
    // Where an unwind's time goes (docs/benchmarks.md reads these): the rest is the commit.
    debug!(
        target: "ots::index",
        blocks = tip.number - to,
        rows = touched.len(),
        balance_seconds,
        seconds = started.elapsed().as_secs_f64(),
        "unwound in the transaction"
    );
    let checkpoint = Checkpoint { number: to, hash: target.hash };
    state::set_checkpoint(txn, checkpoint)?;
    Ok(checkpoint)
}
