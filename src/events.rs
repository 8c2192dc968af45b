//! What the sync loop tells live subscribers once a batch is committed or blocks are unwound.
//! Events are only built when someone listens, so an indexer without subscribers pays nothing.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use alloy_primitives::{Address, B256};
use serde::Serialize;
use tokio::sync::broadcast;

use crate::{
    db::{Db, DbError},
    index::{
        attributes::attributes,
        transfers::{touches, TokenKind, TokenKinds},
        ClassifiedBlock,
    },
    txid::TxIdOverflow,
};

/// Events buffered per subscriber before it counts as too slow and is dropped.
pub const EVENT_BUFFER: usize = 1024;

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

/// An event of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexEvent {
    /// Blocks committed, oldest first.
    Indexed(Vec<IndexedBlock>),
    /// Blocks unwound by a reorg, newest first: `(number, hash)`.
    Removed(Vec<(u64, B256)>),
}

/// The channel from the sync loop to subscribers.
#[derive(Debug, Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<IndexEvent>>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self { sender: broadcast::channel(EVENT_BUFFER).0 }
    }
}

impl EventBus {
    /// A new receiver of every later event.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<IndexEvent>> {
        self.sender.subscribe()
    }

    /// Whether anyone listens (events are only built then).
    pub fn has_subscribers(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Sends `event` to every subscriber.
    pub fn publish(&self, event: IndexEvent) {
        // No receiver is not an error: nobody listens.
        let _ = self.sender.send(Arc::new(event));
    }
}

/// Building the events of a committed batch failed.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The index could not be read.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A block holds more transactions than a TxId can name.
    #[error(transparent)]
    TxId(#[from] TxIdOverflow),
}

/// What `blocks` (just committed) added, read with the attributes as committed.
pub fn indexed_blocks(db: &Db, blocks: &[ClassifiedBlock]) -> Result<Vec<IndexedBlock>, EventError> {
    let txn = db.begin_read()?;
    let mut kinds: HashMap<Address, TokenKinds> = HashMap::new();
    let mut out = Vec::with_capacity(blocks.len());
    for ClassifiedBlock { block, .. } in blocks {
        let found = touches(block, |token| -> Result<TokenKinds, EventError> {
            if let Some(k) = kinds.get(token) {
                return Ok(*k);
            }
            let k = TokenKinds::of(&attributes(&txn, token)?);
            kinds.insert(*token, k);
            Ok(k)
        })?;
        let transfer_logs = (found.len() / 2) as u64;
        let mut activity: Vec<Activity> = Vec::new();
        let mut seen: HashSet<Activity> = HashSet::new();
        for t in found {
            let kind = match t.kind {
                TokenKind::Erc20 => ActivityKind::Erc20Transfer,
                TokenKind::Erc721 => ActivityKind::Erc721Transfer,
                TokenKind::Erc1155 => ActivityKind::Erc1155Transfer,
            };
            let a = Activity { address: t.address, kind, index: Some(t.tx.index()) };
            if seen.insert(a) {
                activity.push(a);
            }
        }
        activity.push(Activity { address: block.coinbase, kind: ActivityKind::BlockRewarded, index: None });
        for w in &block.withdrawals {
            activity.push(Activity {
                address: w.address,
                kind: ActivityKind::Withdrawal,
                index: Some(w.index),
            });
        }
        out.push(IndexedBlock {
            number: block.number,
            hash: block.hash,
            contracts: block.created_contracts().len() as u64,
            transfer_logs,
            activity,
        });
    }
    Ok(out)
}
