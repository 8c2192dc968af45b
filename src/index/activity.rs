//! What a committed block added to the address indexes, as the writer saw it: the live events'
//! content, reported by the writer so that nothing decodes a block twice.

use std::collections::HashSet;

use alloy_primitives::{Address, B256};
use ots_classifiers::BlockData;
use serde::Serialize;

use super::transfers::Touch;
use crate::decode::TokenKind;

/// Which index an activity went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ActivityKind {
    /// `OtsERC20TransferIndex`.
    Erc20Transfer,
    /// `OtsERC721TransferIndex`.
    Erc721Transfer,
    /// `OtsERC1155TransferIndex`.
    Erc1155Transfer,
    /// `OtsBlocksRewardedIndex`: the address is the block's fee recipient.
    BlockRewarded,
    /// `OtsWithdrawalsIndex`.
    Withdrawal,
}

/// One new id under one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Activity {
    /// The address the id was added under.
    pub address: Address,
    /// The index.
    pub kind: ActivityKind,
    /// Transaction index in the block (transfers), or withdrawal index (withdrawals).
    pub index: Option<u64>,
}

/// A block as it was committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedBlock {
    /// Its number.
    pub number: u64,
    /// Its hash.
    pub hash: B256,
    /// Contracts created in it.
    pub contracts: u64,
    /// Transfer logs of classified tokens in it.
    pub transfer_logs: u64,
    /// Every id added to an address index, in log order, one per (address, kind, index).
    pub activity: Vec<Activity>,
}

impl ActivityKind {
    /// The transfer index of `kind`.
    pub const fn of_transfers(kind: TokenKind) -> Self {
        match kind {
            TokenKind::Erc20 => Self::Erc20Transfer,
            TokenKind::Erc721 => Self::Erc721Transfer,
            TokenKind::Erc1155 => Self::Erc1155Transfer,
        }
    }
}

impl IndexedBlock {
    /// `block` as the writer indexed it: `contracts` created in it, `transfer_logs` token logs
    /// whose `touches` came in log order; then its fee recipient and its withdrawals.
    pub(crate) fn new(
        block: &BlockData,
        contracts: u64,
        transfer_logs: u64,
        touches: impl Iterator<Item = Touch>,
    ) -> Self {
        let mut activity: Vec<Activity> = Vec::new();
        let mut seen: HashSet<Activity> = HashSet::new();
        for touch in touches {
            let kind = ActivityKind::of_transfers(touch.kind);
            let a = Activity { address: touch.address, kind, index: Some(touch.tx.index()) };
            if seen.insert(a) {
                activity.push(a);
            }
        }
        activity.push(Activity { address: block.coinbase, kind: ActivityKind::BlockRewarded, index: None });
        activity.extend(block.withdrawals.iter().map(|w| Activity {
            address: w.address,
            kind: ActivityKind::Withdrawal,
            index: Some(w.index),
        }));
        Self { number: block.number, hash: block.hash, contracts, transfer_logs, activity }
    }
}
