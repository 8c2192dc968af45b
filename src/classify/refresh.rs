//! Refreshing stored token metadata from the node (`ots-indexer refresh-metadata`).
//!
//! Lists serve the name, symbol and decimals read when a token was classified; a token that
//! renamed itself since keeps its old name until refreshed. A refresh reads them again on the
//! state after the indexed tip and stores what changed as an `OtsContractInfo` dup of the tip
//! block, named in the tip's undo record, so that an unwind below the tip drops it as it drops
//! anything else that block wrote.

use std::collections::BTreeSet;

use alloy_primitives::Address;
use futures::{stream, StreamExt, TryStreamExt};
use ots_classifiers::{read_token_metadata, ChainError, ChainView, Metadata};

use crate::db::{
    codec::{BlockNumber, ContractInfo, IndexKind},
    state::{self, StateError},
    tables::{OtsContractInfo, OtsUndoJournal},
    Db, DbError,
};
use crate::index::contract_info::contract_info;

/// Probes in flight at once.
const CONCURRENCY: usize = 16;

/// A refresh failed; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// Storage failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// State could not be read.
    #[error(transparent)]
    State(#[from] StateError),
    /// The node could not answer.
    #[error("reading metadata failed: {0}")]
    Chain(#[from] ChainError),
    /// Nothing is indexed yet.
    #[error("the database holds no indexed block")]
    Empty,
    /// The tip has no undo record, so a refresh could not be unwound.
    #[error("block {block} has no undo record; run `check`")]
    NoJournal {
        /// The tip.
        block: u64,
    },
    /// The indexer moved the tip while the refresh read the node.
    #[error("the indexed tip moved from block {was} to {now} during the refresh; run it again")]
    Moved {
        /// The tip the metadata was read at.
        was: u64,
        /// The tip now.
        now: u64,
    },
}

/// What a refresh did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefreshStats {
    /// The block the metadata was read at (the indexed tip).
    pub block: u64,
    /// Contracts read.
    pub checked: usize,
    /// Contracts whose stored metadata changed.
    pub changed: usize,
}

/// The fields of `fresh` that differ from `stored` (only fields the node answered).
fn changes(stored: &ContractInfo, fresh: Metadata) -> Option<Metadata> {
    let diff = Metadata {
        name: fresh.name.filter(|n| stored.name.as_ref() != Some(n)),
        symbol: fresh.symbol.filter(|s| stored.symbol.as_ref() != Some(s)),
        decimals: fresh.decimals.filter(|d| stored.decimals != Some(*d)),
        ..Metadata::default()
    };
    (diff != Metadata::default()).then_some(diff)
}

/// Refreshes `only` if given, else every contract with a stored name, symbol or decimals.
pub async fn refresh_metadata(
    db: &Db,
    chain: &dyn ChainView,
    only: &[Address],
) -> Result<RefreshStats, RefreshError> {
    let (tip, targets) = {
        let txn = db.begin_read()?;
        let tip = state::read_state(&txn)?.checkpoint.ok_or(RefreshError::Empty)?.number;
        let mut targets = Vec::new();
        if only.is_empty() {
            let mut cursor = txn.cursor::<OtsContractInfo>()?;
            let mut next = cursor.first()?;
            while let Some((address, _)) = next {
                let info = contract_info(&txn, &address)?.unwrap_or_default();
                if info.name.is_some() || info.symbol.is_some() || info.decimals.is_some() {
                    targets.push((address, info));
                }
                next = cursor.next_key()?;
            }
        } else {
            for address in only {
                targets.push((*address, contract_info(&txn, address)?.unwrap_or_default()));
            }
        }
        (tip, targets)
    };
    let checked = targets.len();
    let updates: Vec<(Address, Metadata)> = stream::iter(targets)
        .map(|(address, stored)| async move {
            let fresh = read_token_metadata(chain, address, tip).await?;
            Ok::<_, ChainError>(changes(&stored, fresh).map(|m| (address, m)))
        })
        .buffered(CONCURRENCY)
        .try_filter_map(|u| async move { Ok(u) })
        .try_collect()
        .await?;

    let txn = db.begin_write()?;
    let now = state::read_state(&txn)?.checkpoint.ok_or(RefreshError::Empty)?.number;
    if now != tip {
        return Err(RefreshError::Moved { was: tip, now });
    }
    let mut record =
        txn.get::<OtsUndoJournal>(&BlockNumber(tip))?.ok_or(RefreshError::NoJournal { block: tip })?;
    let mut touched: BTreeSet<(IndexKind, Address)> = record.touched.iter().copied().collect();
    for (address, metadata) in &updates {
        // One dup per block: fold into a dup the tip's own classification wrote, if any.
        let mut dup = ContractInfo { block: tip, ..ContractInfo::default() };
        for existing in txn.cursor::<OtsContractInfo>()?.dups(address)? {
            if existing.block == tip {
                txn.delete::<OtsContractInfo>(address, Some(&existing))?;
                dup = existing;
            }
        }
        let Metadata { name, symbol, decimals, .. } = metadata.clone();
        dup.name = name.or(dup.name);
        dup.symbol = symbol.or(dup.symbol);
        dup.decimals = decimals.or(dup.decimals);
        txn.put::<OtsContractInfo>(address, &dup)?;
        touched.insert((IndexKind::ContractInfo, *address));
    }
    record.touched = touched.into_iter().collect();
    txn.put::<OtsUndoJournal>(&BlockNumber(tip), &record)?;
    txn.commit()?;
    Ok(RefreshStats { block: tip, checked, changed: updates.len() })
}
