//! Transactions and receipts the node gave for indexed transactions, kept so that a page shown
//! again — the first page of a busy address, which every visitor of it opens — costs no round
//! trip to the node.
//!
//! An entry is only served for the block the index holds: while its block is inside the reorg
//! window, its hash must equal the one in the undo journal (an unwound or replaced block misses);
//! an entry fetched while its block was in the window is not trusted once the journal has
//! dropped that block (it could have been replaced unseen), and is fetched again then. Entries
//! fetched for final blocks stay until the byte budget pushes them out, oldest first.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use alloy_primitives::B256;
use serde_json::Value;

use crate::{
    db::{
        codec::{BlockNumber, UndoRecordHash},
        tables::OtsUndoJournal,
        DbResult, ReadTxn,
    },
    txid::TxId,
};

/// Default budget of the cache, in MiB (`--tx-cache-mib`).
pub const DEFAULT_TX_CACHE_MIB: u64 = 64;

/// Where a block stands for the index when a page is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexedBlock {
    /// Inside the reorg window, with the hash the index holds.
    Recent(B256),
    /// Older than the reorg window: it will not change.
    Final,
}

impl IndexedBlock {
    /// `block`'s standing in the index `txn` reads.
    pub fn of(txn: &ReadTxn, block: u64) -> DbResult<Self> {
        Ok(match txn.get_as::<OtsUndoJournal, UndoRecordHash>(&BlockNumber(block))? {
            Some(UndoRecordHash(hash)) => Self::Recent(hash),
            None => Self::Final,
        })
    }
}

/// The standing of each id's block, in the index `txn` reads (one read per run of one block).
pub fn standings(txn: &ReadTxn, ids: &[TxId]) -> DbResult<Vec<IndexedBlock>> {
    let mut out = Vec::with_capacity(ids.len());
    let mut last: Option<(u64, IndexedBlock)> = None;
    for id in ids {
        let standing = match last {
            Some((n, standing)) if n == id.block() => standing,
            _ => IndexedBlock::of(txn, id.block())?,
        };
        last = Some((id.block(), standing));
        out.push(standing);
    }
    Ok(out)
}

/// One transaction as the node gave it, with its receipt and its block's timestamp.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedTx {
    /// `eth_getTransactionByBlockNumberAndIndex`'s answer.
    pub tx: Value,
    /// `eth_getTransactionReceipt`'s answer.
    pub receipt: Value,
    /// The block's timestamp.
    pub timestamp: Option<u64>,
}

#[derive(Debug)]
struct Entry {
    tx: Arc<CachedTx>,
    /// The block's hash when fetched inside the reorg window; `None` when fetched final.
    recent_hash: Option<B256>,
    bytes: usize,
}

#[derive(Debug, Default)]
struct Entries {
    by_id: HashMap<u64, Entry>,
    order: VecDeque<u64>,
    bytes: usize,
}

/// A bounded cache of [`CachedTx`] by TxId, shared by the server's handlers.
#[derive(Debug, Clone)]
pub struct TxCache {
    entries: Arc<Mutex<Entries>>,
    budget: usize,
}

/// Roughly what a JSON value holds in memory: its text plus a word or two per node.
fn approx_bytes(v: &Value) -> usize {
    const NODE: usize = 32;
    match v {
        Value::String(s) => NODE + s.len(),
        Value::Array(items) => NODE + items.iter().map(approx_bytes).sum::<usize>(),
        Value::Object(fields) => {
            NODE + fields.iter().map(|(k, v)| NODE + k.len() + approx_bytes(v)).sum::<usize>()
        }
        _ => NODE,
    }
}

impl TxCache {
    /// A cache holding at most about `budget_bytes` (0 disables it).
    pub fn new(budget_bytes: usize) -> Self {
        Self { entries: Arc::default(), budget: budget_bytes }
    }

    /// The entry of `id` if it is the transaction the index holds at `block`.
    pub fn get(&self, id: TxId, block: IndexedBlock) -> Option<Arc<CachedTx>> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.by_id.get(&id.0)?;
        let valid = match (block, entry.recent_hash) {
            (_, None) => true,
            (IndexedBlock::Recent(indexed), Some(fetched)) => indexed == fetched,
            (IndexedBlock::Final, Some(_)) => false,
        };
        valid.then(|| Arc::clone(&entry.tx))
    }

    /// Each id's entry where the cache holds it for the block the index holds (`standings`, one
    /// per id); `None` where the node must be asked.
    pub fn lookup(&self, ids: &[TxId], standings: &[IndexedBlock]) -> Vec<Option<Arc<CachedTx>>> {
        ids.iter().zip(standings).map(|(&id, &standing)| self.get(id, standing)).collect()
    }

    /// Fills the gaps [`Self::lookup`] left in `found` with `fetched`, in order, keeping each
    /// in the cache; `false` if `fetched` ran short.
    pub fn fill(
        &self,
        found: &mut [Option<Arc<CachedTx>>],
        ids: &[TxId],
        standings: &[IndexedBlock],
        fetched: impl IntoIterator<Item = CachedTx>,
    ) -> bool {
        let mut fetched = fetched.into_iter();
        for ((slot, &id), &standing) in found.iter_mut().zip(ids).zip(standings) {
            if slot.is_none() {
                let Some(tx) = fetched.next() else { return false };
                let tx = Arc::new(tx);
                self.put(id, standing, Arc::clone(&tx));
                *slot = Some(tx);
            }
        }
        true
    }

    /// Keeps what the node gave for `id`, whose block stood as `block` when the page was read.
    /// A transaction whose block hash is not the indexed one is not kept, nor one without a
    /// receipt.
    pub fn put(&self, id: TxId, block: IndexedBlock, tx: Arc<CachedTx>) {
        if !tx.receipt.is_object() {
            return;
        }
        let recent_hash = match block {
            IndexedBlock::Final => None,
            IndexedBlock::Recent(indexed) => {
                let fetched =
                    tx.tx.get("blockHash").and_then(|h| serde_json::from_value::<B256>(h.clone()).ok());
                if fetched != Some(indexed) {
                    return;
                }
                Some(indexed)
            }
        };
        let bytes = approx_bytes(&tx.tx) + approx_bytes(&tx.receipt) + 64;
        if bytes > self.budget {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else { return };
        let entry = Entry { tx, recent_hash, bytes };
        match entries.by_id.insert(id.0, entry) {
            Some(old) => entries.bytes -= old.bytes,
            None => entries.order.push_back(id.0),
        }
        entries.bytes += bytes;
        while entries.bytes > self.budget {
            let Some(oldest) = entries.order.pop_front() else { break };
            if let Some(old) = entries.by_id.remove(&oldest) {
                entries.bytes -= old.bytes;
            }
        }
    }

    /// The most bytes the cache holds.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Entries held and their approximate bytes.
    pub fn usage(&self) -> (usize, usize) {
        self.entries.lock().map_or((0, 0), |e| (e.by_id.len(), e.bytes))
    }
}

impl Default for TxCache {
    fn default() -> Self {
        Self::new(usize::try_from(DEFAULT_TX_CACHE_MIB << 20).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tx(hash: B256, input_len: usize) -> Arc<CachedTx> {
        Arc::new(CachedTx {
            tx: json!({"blockHash": hash, "input": format!("0x{}", "ab".repeat(input_len))}),
            receipt: json!({"status": "0x1"}),
            timestamp: Some(1),
        })
    }

    #[test]
    fn a_recent_entry_is_served_only_for_the_indexed_hash_and_not_once_final() {
        let cache = TxCache::new(1 << 20);
        let (a, b) = (B256::repeat_byte(1), B256::repeat_byte(2));
        cache.put(TxId::first_of_block(5), IndexedBlock::Recent(a), tx(a, 1));
        assert!(cache.get(TxId::first_of_block(5), IndexedBlock::Recent(a)).is_some());
        assert!(cache.get(TxId::first_of_block(5), IndexedBlock::Recent(b)).is_none(), "block replaced");
        assert!(cache.get(TxId::first_of_block(5), IndexedBlock::Final).is_none(), "left the window unseen");
        cache.put(TxId::first_of_block(5), IndexedBlock::Final, tx(b, 1));
        assert!(cache.get(TxId::first_of_block(5), IndexedBlock::Final).is_some());
        assert!(
            cache.get(TxId::first_of_block(5), IndexedBlock::Recent(a)).is_some(),
            "final entries are trusted"
        );
    }

    #[test]
    fn a_transaction_of_another_block_than_the_indexed_one_is_not_kept() {
        let cache = TxCache::new(1 << 20);
        cache.put(
            TxId::first_of_block(5),
            IndexedBlock::Recent(B256::repeat_byte(1)),
            tx(B256::repeat_byte(2), 1),
        );
        assert_eq!(cache.usage().0, 0);
    }

    #[test]
    fn the_budget_pushes_out_the_oldest_entries() {
        let one = approx_bytes(&tx(B256::ZERO, 100).tx) + approx_bytes(&tx(B256::ZERO, 100).receipt) + 64;
        let cache = TxCache::new(one * 3);
        for i in 0..5 {
            cache.put(TxId::first_of_block(i), IndexedBlock::Final, tx(B256::ZERO, 100));
        }
        assert_eq!(cache.usage(), (3, one * 3));
        assert!(cache.get(TxId::first_of_block(1), IndexedBlock::Final).is_none());
        assert!(cache.get(TxId::first_of_block(4), IndexedBlock::Final).is_some());
        assert_eq!(TxCache::new(0).usage(), (0, 0));
    }
}
