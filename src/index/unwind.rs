//! Unwinding the index to an earlier block (reorgs and `ots-indexer unwind`).
//!
//! Ids grow with the chain, so undoing blocks `> to` is: drop match rows keyed above `to`, and
//! cut every address list the undo journal names back to ids below the first id of block
//! `to + 1` (DESIGN.md decision 4).

use std::collections::BTreeSet;

use alloy_primitives::Address;

use super::{
    address_index::{AddressCounter, AddressIndex},
    attributes::remove_attribute,
    balances::undo_block,
    matches::{MatchCounter, MatchTable},
};
use crate::{
    db::{
        codec::{
            AttributeBit, BlockNumber, ChunkKey, Count, CounterDup, Holding, IdChunk, IndexKind, LAST_CHUNK,
            MAX_UNIQUE_CHUNK_COUNT,
        },
        state::{self, Checkpoint, StateError},
        tables::*,
        DbError, WriteTxn,
    },
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

/// Cuts `address`'s list back to the ids below `cut`, re-forming its last chunk and counter as
/// if the removed ids had never been appended.
pub fn truncate_ids<I: AddressIndex, C: AddressCounter>(
    txn: &WriteTxn,
    address: &Address,
    cut: u64,
) -> Result<(), DbError> {
    let dups = txn.cursor::<C>()?.dups(address)?;
    let Some(p) = dups.iter().position(|d| d.chunk() >= cut) else { return Ok(()) };
    let chunk_key = ChunkKey { address: *address, chunk: dups[p].chunk() };
    let ids = txn.get::<I>(&chunk_key)?.map(|c| c.0).unwrap_or_default();
    let stored = ids.len();
    let kept: Vec<u64> = ids.into_iter().filter(|&id| id < cut).collect();
    // A non-last chunk is keyed by its largest id, so it always holds one at or above `cut`.
    if p + 1 == dups.len() && kept.len() == stored {
        return Ok(());
    }
    for dup in &dups[p..] {
        txn.delete::<I>(&ChunkKey { address: *address, chunk: dup.chunk() }, None)?;
    }
    txn.delete::<C>(address, None)?;

    // The chunks that stay untouched, as (chunk id, cumulative count).
    let mut chunks: Vec<(u64, u64)> = dups[..p].iter().map(|d| (d.chunk(), d.cumulative())).collect();
    let base = chunks.last().map_or(0, |&(_, c)| c);
    if kept.is_empty() {
        // The previous chunk, if any, becomes the last one.
        if let Some((chunk, _)) = chunks.last_mut() {
            let moved = txn.get::<I>(&ChunkKey { address: *address, chunk: *chunk })?.unwrap_or_default();
            txn.delete::<I>(&ChunkKey { address: *address, chunk: *chunk }, None)?;
            txn.put::<I>(&ChunkKey::last(*address), &moved)?;
            *chunk = LAST_CHUNK;
        }
    } else {
        txn.put::<I>(&ChunkKey::last(*address), &IdChunk(kept.clone()))?;
        chunks.push((LAST_CHUNK, base + kept.len() as u64));
    }
    match chunks.as_slice() {
        [] => Ok(()),
        [(_, total)] if *total <= MAX_UNIQUE_CHUNK_COUNT => {
            txn.put::<C>(address, &CounterDup::Unique { total: *total })
        }
        _ => {
            for (chunk, cumulative) in chunks {
                txn.put::<C>(address, &CounterDup::Regular { cumulative, chunk })?;
            }
            Ok(())
        }
    }
}

/// Removes the matches of blocks above `to`; returns the removed addresses.
pub fn unwind_matches<M: MatchTable, C: MatchCounter>(
    txn: &WriteTxn,
    to: u64,
) -> Result<Vec<Address>, DbError> {
    let mut removed = Vec::new();
    loop {
        let last = txn.cursor::<M>()?.last()?;
        match last {
            Some((BlockNumber(block), _)) if block > to => {
                removed.extend(txn.cursor::<M>()?.dups(&BlockNumber(block))?);
                txn.delete::<M>(&BlockNumber(block), None)?;
            }
            _ => break,
        }
    }
    loop {
        let last = txn.cursor::<C>()?.last()?;
        match last {
            Some((count, BlockNumber(block))) if block > to => {
                txn.delete::<C>(&count, None)?;
            }
            _ => break,
        }
    }
    Ok(removed)
}

fn unwind_standard<M: MatchTable, C: MatchCounter>(
    txn: &WriteTxn,
    to: u64,
    bit: AttributeBit,
) -> Result<(), DbError> {
    for address in unwind_matches::<M, C>(txn, to)? {
        remove_attribute(txn, &address, bit)?;
    }
    Ok(())
}

/// Drops the `OtsWithdrawalIdx2Block` rows of blocks above `to`; returns the first withdrawal
/// index those blocks held (every withdrawal index at or above it is unwound).
fn unwind_withdrawal_blocks(txn: &WriteTxn, to: u64) -> Result<u64, DbError> {
    loop {
        let last = txn.cursor::<OtsWithdrawalIdx2Block>()?.last()?;
        match last {
            Some((count, BlockNumber(block))) if block > to => {
                txn.delete::<OtsWithdrawalIdx2Block>(&count, None)?;
            }
            Some((Count(last_kept), _)) => return Ok(last_kept + 1),
            None => return Ok(0),
        }
    }
}

/// Deletes `holder`'s holdings first seen at or after id `cut`.
fn drop_holdings_from<H: Table<Key = Address, Value = Holding>>(
    txn: &WriteTxn,
    holder: &Address,
    cut: u64,
) -> Result<(), DbError> {
    for holding in txn.cursor::<H>()?.dups(holder)? {
        if holding.first.0 >= cut {
            txn.delete::<H>(holder, Some(&holding))?;
        }
    }
    Ok(())
}

/// The oldest block the undo journal covers, if any.
pub fn journal_start(txn: &WriteTxn) -> Result<Option<u64>, DbError> {
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
    let mut touched: BTreeSet<(IndexKind, Address)> = BTreeSet::new();
    for block in to + 1..=tip.number {
        let record = txn
            .get::<OtsUndoJournal>(&BlockNumber(block))?
            .ok_or(UnwindError::BeyondWindow { to, oldest })?;
        touched.extend(record.touched);
        txn.delete::<OtsUndoJournal>(&BlockNumber(block), None)?;
    }
    let cut = TxId::first_of_block(to + 1).0;
    for block in (to + 1..=tip.number).rev() {
        undo_block(txn, block)?;
    }
    let withdrawal_cut = unwind_withdrawal_blocks(txn, to)?;
    for (kind, address) in &touched {
        match kind {
            IndexKind::Erc20Transfers => {
                truncate_ids::<OtsERC20TransferIndex, OtsERC20TransferCounter>(txn, address, cut)?
            }
            IndexKind::Erc721Transfers => {
                truncate_ids::<OtsERC721TransferIndex, OtsERC721TransferCounter>(txn, address, cut)?
            }
            IndexKind::ContractInfo => {
                for info in txn.cursor::<OtsContractInfo>()?.dups(address)? {
                    if info.block > to {
                        txn.delete::<OtsContractInfo>(address, Some(&info))?;
                    }
                }
            }
            IndexKind::BlocksRewarded => {
                truncate_ids::<OtsBlocksRewardedIndex, OtsBlocksRewardedCounter>(txn, address, to + 1)?
            }
            IndexKind::Withdrawals => {
                truncate_ids::<OtsWithdrawalsIndex, OtsWithdrawalsCounter>(txn, address, withdrawal_cut)?
            }
            IndexKind::Erc1155Transfers => {
                truncate_ids::<OtsERC1155TransferIndex, OtsERC1155TransferCounter>(txn, address, cut)?
            }
            IndexKind::Erc1155Holdings => drop_holdings_from::<OtsERC1155Holdings>(txn, address, cut)?,
            IndexKind::Erc20Holdings => drop_holdings_from::<OtsERC20Holdings>(txn, address, cut)?,
            IndexKind::Erc721Holdings => drop_holdings_from::<OtsERC721Holdings>(txn, address, cut)?,
            IndexKind::Label => {
                for label in txn.cursor::<OtsLabels>()?.dups(address)? {
                    if label.block > to {
                        txn.delete::<OtsLabels>(address, Some(&label))?;
                    }
                }
            }
            IndexKind::TransferProbe => {
                if txn.get::<OtsTransferProbes>(address)?.is_some_and(|BlockNumber(b)| b > to) {
                    txn.delete::<OtsTransferProbes>(address, None)?;
                }
            }
        }
    }
    unwind_matches::<OtsAllContracts, OtsAllContractsCounter>(txn, to)?;
    unwind_standard::<OtsERC20, OtsERC20Counter>(txn, to, AttributeBit::Erc20)?;
    unwind_standard::<OtsERC165, OtsERC165Counter>(txn, to, AttributeBit::Erc165)?;
    // The metadata flag is only ever set with the ERC721 match of the same block.
    for address in unwind_matches::<OtsERC721, OtsERC721Counter>(txn, to)? {
        remove_attribute(txn, &address, AttributeBit::Erc721)?;
        remove_attribute(txn, &address, AttributeBit::Erc721Metadata)?;
    }
    unwind_standard::<OtsERC1155, OtsERC1155Counter>(txn, to, AttributeBit::Erc1155)?;
    unwind_standard::<OtsERC1167, OtsERC1167Counter>(txn, to, AttributeBit::Erc1167)?;
    unwind_standard::<OtsERC4626, OtsERC4626Counter>(txn, to, AttributeBit::Erc4626)?;
    let checkpoint = Checkpoint { number: to, hash: target.hash };
    state::set_checkpoint(txn, checkpoint)?;
    Ok(checkpoint)
}
