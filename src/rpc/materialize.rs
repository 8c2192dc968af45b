//! Fetching from the node what a result page shows but the index does not hold: one JSON-RPC
//! batch per step of a page, a bounded cache of block timestamps, and the server's cache of
//! transactions and receipts.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use alloy_primitives::{Address, Bytes, U256, U64};
use jsonrpsee::types::ErrorObjectOwned;
use ots_classifiers::{decode_uint256, selector};
use serde::Serialize;
use serde_json::{json, value::RawValue, Value};

use super::{
    errors::{node_error, server_error},
    transfer_detail::TransferDetail,
    tx_cache::{CachedTx, IndexedBlock, TxCache},
};
use crate::{source::NodeClient, txid::TxId};

/// Blocks this far below the indexed tip are taken as final: their summaries are cached. Newer
/// ones may still be replaced by a reorg and are always asked for.
pub const FINAL_DEPTH: u64 = 128;
/// Block summaries the cache holds (16 bytes each).
pub(super) const SUMMARY_CACHE_ENTRIES: usize = 100_000;

/// `{blockNumber, timestamp}` of a block shown in a page.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BlockSummary {
    /// Hex block number.
    pub block_number: U64,
    /// Unix seconds, as a JSON number.
    pub timestamp: u64,
}

/// `{hash, transaction, receipt, transfers}` of one indexed transaction.
#[derive(Debug, Clone, Serialize)]
pub struct TransactionWithReceipt {
    /// Transaction hash.
    pub hash: Value,
    /// `eth_getTransactionByBlockNumberAndIndex`, as the node gave it.
    pub transaction: Value,
    /// `eth_getTransactionReceipt`, as the node gave it.
    pub receipt: Value,
    /// The movements of the listed kind that involve the queried address (ours; see docs/api.md).
    pub transfers: Vec<TransferDetail>,
}

/// Timestamps of final blocks, first in first out.
#[derive(Debug, Default)]
struct SummaryCache {
    entries: HashMap<u64, u64>,
    order: VecDeque<u64>,
}

impl SummaryCache {
    fn insert(&mut self, block: u64, timestamp: u64) {
        if self.entries.insert(block, timestamp).is_none() {
            self.order.push_back(block);
            while self.order.len() > SUMMARY_CACHE_ENTRIES {
                if let Some(old) = self.order.pop_front() {
                    self.entries.remove(&old);
                }
            }
        }
    }
}

/// `n` as a hex quantity.
pub(super) fn hex(n: u64) -> String {
    format!("{n:#x}")
}

/// The hex quantity `field` of `v`.
pub(super) fn hex_field(v: &Value, field: &str) -> Option<u64> {
    let s = v.get(field)?.as_str()?;
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

fn distinct(blocks: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut d: Vec<u64> = blocks.into_iter().collect();
    d.sort_unstable();
    d.dedup();
    d
}

fn header_call(n: u64) -> (&'static str, Value) {
    ("eth_getBlockByNumber", json!([hex(n), false]))
}

fn timestamp_of(n: u64, header: &Value) -> Result<u64, ErrorObjectOwned> {
    if header.is_null() {
        return Err(server_error(format!("the node has no block {n}: is it serving the indexed chain?")));
    }
    hex_field(header, "timestamp")
        .ok_or_else(|| server_error(format!("the node's block {n} has no valid timestamp")))
}

/// The node answered no transaction where the index holds `id`.
fn no_transaction(id: TxId) -> ErrorObjectOwned {
    server_error(format!(
        "the node has no transaction {} in block {}: is it serving the indexed chain?",
        id.index(),
        id.block()
    ))
}

/// Node access for result pages.
#[derive(Debug, Clone)]
pub struct Materializer {
    node: NodeClient,
    cache: Arc<Mutex<SummaryCache>>,
    txs: TxCache,
}

impl Materializer {
    /// Pages from `node`, with an empty summary cache and the server's transaction cache.
    pub fn new(node: NodeClient, txs: TxCache) -> Self {
        Self { node, cache: Arc::default(), txs }
    }

    /// The server's transaction cache.
    pub fn transaction_cache(&self) -> &TxCache {
        &self.txs
    }

    /// Each transaction's recipient (`None`: it creates a contract), from the node's
    /// transactions alone — no receipts, no headers: what counting an account's `txlist` rows
    /// needs of the transactions it did not send.
    pub async fn recipients(&self, ids: &[TxId]) -> Result<Vec<Option<Address>>, ErrorObjectOwned> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let calls: Vec<_> = ids
            .iter()
            .map(|id| ("eth_getTransactionByBlockNumberAndIndex", json!([hex(id.block()), hex(id.index())])))
            .collect();
        let answers = self.batch(&calls).await?;
        if answers.len() != ids.len() {
            return Err(server_error("the node answered fewer transactions than asked"));
        }
        ids.iter()
            .zip(answers)
            .map(|(id, tx)| {
                if !tx.get("hash").is_some_and(Value::is_string) {
                    return Err(no_transaction(*id));
                }
                match tx.get("to") {
                    None | Some(Value::Null) => Ok(None),
                    Some(to) => serde_json::from_value::<Address>(to.clone()).map(Some).map_err(|_| {
                        server_error(format!(
                            "the node's transaction {} of block {} has no readable recipient",
                            id.index(),
                            id.block()
                        ))
                    }),
                }
            })
            .collect()
    }

    /// The logs the node has for each of `filters` (`eth_getLogs` filter objects), in one batch,
    /// one list per filter.
    pub async fn logs(&self, filters: &[Value]) -> Result<Vec<Vec<Value>>, ErrorObjectOwned> {
        let calls: Vec<_> = filters.iter().map(|f| ("eth_getLogs", json!([f]))).collect();
        let answers = self.batch(&calls).await?;
        if answers.len() != filters.len() {
            return Err(server_error("the node answered fewer log queries than asked"));
        }
        answers
            .into_iter()
            .map(|answer| match answer {
                Value::Array(logs) => Ok(logs),
                _ => Err(server_error("the node answered a log query with no list of logs")),
            })
            .collect()
    }

    fn cached(&self, block: u64) -> Option<u64> {
        self.cache.lock().ok()?.entries.get(&block).copied()
    }

    fn remember(&self, block: u64, timestamp: u64, tip: Option<u64>) {
        if tip.is_some_and(|t| block.saturating_add(FINAL_DEPTH) <= t) {
            if let Ok(mut cache) = self.cache.lock() {
                cache.insert(block, timestamp);
            }
        }
    }

    async fn batch(&self, calls: &[(&'static str, Value)]) -> Result<Vec<Value>, ErrorObjectOwned> {
        self.node.batch(calls).await.map_err(|e| node_error(&e))
    }

    /// The blocks among `blocks` the cache lacks.
    fn missing(&self, blocks: &[u64]) -> Vec<u64> {
        blocks.iter().copied().filter(|&b| self.cached(b).is_none()).collect()
    }

    fn summaries_from(
        &self,
        blocks: &[u64],
        fetched: &[u64],
        headers: &[Value],
        tip: Option<u64>,
        mut fresh: HashMap<u64, u64>,
    ) -> Result<BTreeMap<String, BlockSummary>, ErrorObjectOwned> {
        for (&n, header) in fetched.iter().zip(headers) {
            let ts = timestamp_of(n, header)?;
            self.remember(n, ts, tip);
            fresh.insert(n, ts);
        }
        blocks
            .iter()
            .map(|&n| {
                let timestamp = fresh
                    .get(&n)
                    .copied()
                    .or_else(|| self.cached(n))
                    .ok_or_else(|| server_error(format!("no summary of block {n}")))?;
                Ok((hex(n), BlockSummary { block_number: U64::from(n), timestamp }))
            })
            .collect()
    }

    /// Summaries of `blocks`, keyed by hex block number as ots2 does: one batch for those the
    /// cache lacks. `tip` is the indexed tip (blocks well below it are cached).
    pub async fn summaries(
        &self,
        blocks: impl IntoIterator<Item = u64>,
        tip: Option<u64>,
    ) -> Result<BTreeMap<String, BlockSummary>, ErrorObjectOwned> {
        let blocks = distinct(blocks);
        let missing = self.missing(&blocks);
        let calls: Vec<_> = missing.iter().map(|&n| header_call(n)).collect();
        let headers = self.batch(&calls).await?;
        self.summaries_from(&blocks, &missing, &headers, tip, HashMap::new())
    }

    /// Transactions and receipts of `ids`, in order, with the summaries of their blocks: those
    /// the transaction cache holds for the indexed block (`standings`, one per id), the rest
    /// in one batch for the transactions and the uncached headers and one for the receipts
    /// (which a node gives by hash only). `transfers` is left empty for the caller.
    pub async fn transactions(
        &self,
        ids: &[TxId],
        standings: &[IndexedBlock],
        tip: Option<u64>,
    ) -> Result<(BTreeMap<String, BlockSummary>, Vec<TransactionWithReceipt>), ErrorObjectOwned> {
        let mut found = self.txs.lookup(ids, standings);
        let mut known = HashMap::new();
        for (id, tx) in ids.iter().zip(&found) {
            if let Some(timestamp) = tx.as_ref().and_then(|tx| tx.timestamp) {
                known.insert(id.block(), timestamp);
            }
        }
        let wanted: Vec<TxId> =
            ids.iter().zip(&found).filter(|(_, f)| f.is_none()).map(|(&id, _)| id).collect();
        let blocks = distinct(ids.iter().map(|id| id.block()));
        let missing: Vec<u64> =
            self.missing(&blocks).into_iter().filter(|b| !known.contains_key(b)).collect();
        let mut calls: Vec<_> = wanted
            .iter()
            .map(|id| ("eth_getTransactionByBlockNumberAndIndex", json!([hex(id.block()), hex(id.index())])))
            .collect();
        calls.extend(missing.iter().map(|&n| header_call(n)));
        let mut answers = if calls.is_empty() { Vec::new() } else { self.batch(&calls).await? };
        let headers = answers.split_off(wanted.len());
        let summaries = self.summaries_from(&blocks, &missing, &headers, tip, known)?;
        let mut hashes = Vec::with_capacity(wanted.len());
        for (id, tx) in wanted.iter().zip(&answers) {
            let hash =
                tx.get("hash").filter(|h| h.is_string()).cloned().ok_or_else(|| no_transaction(*id))?;
            hashes.push(hash);
        }
        let receipt_calls: Vec<_> =
            hashes.iter().map(|h| ("eth_getTransactionReceipt", json!([h]))).collect();
        let receipts = if receipt_calls.is_empty() { Vec::new() } else { self.batch(&receipt_calls).await? };
        let mut fetched = Vec::with_capacity(wanted.len());
        for ((id, tx), (hash, receipt)) in wanted.iter().zip(answers).zip(hashes.iter().zip(receipts)) {
            if receipt.is_null() {
                return Err(server_error(format!("the node has no receipt for {hash}")));
            }
            let timestamp = summaries.get(&hex(id.block())).map(|s| s.timestamp);
            fetched.push(CachedTx { tx, receipt, timestamp });
        }
        if !self.txs.fill(&mut found, ids, standings, fetched) {
            return Err(server_error("the node answered fewer transactions than asked"));
        }
        let results = found
            .into_iter()
            .flatten()
            .map(|entry| {
                let CachedTx { tx, receipt, .. } = Arc::unwrap_or_clone(entry);
                let hash = tx.get("hash").cloned().unwrap_or(Value::Null);
                TransactionWithReceipt { hash, transaction: tx, receipt, transfers: Vec::new() }
            })
            .collect();
        Ok((summaries, results))
    }

    /// Reward summaries of `blocks`, keyed by hex block number: headers and receipts in one batch.
    pub async fn reward_summaries(
        &self,
        blocks: impl IntoIterator<Item = u64>,
        tip: Option<u64>,
    ) -> Result<BTreeMap<String, RewardSummary>, ErrorObjectOwned> {
        let blocks = distinct(blocks);
        let calls: Vec<_> = blocks.iter().map(|&n| header_call(n)).collect();
        let headers = self.batch(&calls).await?;
        if let Some((n, _)) = blocks.iter().zip(&headers).find(|(_, h)| h.is_null()) {
            return Err(server_error(format!("the node has no block {n}: is it serving the indexed chain?")));
        }
        let receipts = self.node.receipts_of_blocks(&blocks, &headers).await.map_err(|e| node_error(&e))?;
        let summaries = self.summaries_from(&blocks, &blocks, &headers, tip, HashMap::new())?;
        blocks
            .iter()
            .zip(receipts)
            .map(|(&n, receipts)| {
                let mut total_fees = U256::ZERO;
                for r in &receipts {
                    let field = |name: &str| {
                        r.get(name)
                            .and_then(Value::as_str)
                            .and_then(|s| U256::from_str_radix(s.trim_start_matches("0x"), 16).ok())
                            .ok_or_else(|| {
                                server_error(format!("a receipt of block {n} has no valid {name}"))
                            })
                    };
                    total_fees += field("gasUsed")? * field("effectiveGasPrice")?;
                }
                let summary = &summaries[&hex(n)];
                Ok((
                    hex(n),
                    RewardSummary {
                        block_number: summary.block_number,
                        timestamp: summary.timestamp,
                        total_fees,
                    },
                ))
            })
            .collect()
    }

    /// The withdrawals `(index, block)`, in order, read from their blocks, with the blocks'
    /// summaries: one batch.
    pub async fn withdrawal_rows(
        &self,
        wanted: &[(u64, u64)],
        tip: Option<u64>,
    ) -> Result<(BTreeMap<String, BlockSummary>, Vec<WithdrawalRow>), ErrorObjectOwned> {
        let blocks = distinct(wanted.iter().map(|&(_, b)| b));
        let calls: Vec<_> = blocks.iter().map(|&n| header_call(n)).collect();
        let bodies = self.batch(&calls).await?;
        let summaries = self.summaries_from(&blocks, &blocks, &bodies, tip, HashMap::new())?;
        let rows = wanted
            .iter()
            .map(|&(index, block)| {
                let list = blocks
                    .iter()
                    .position(|&b| b == block)
                    .and_then(|i| bodies[i].get("withdrawals"))
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let w = list.iter().find(|w| hex_field(w, "index") == Some(index)).ok_or_else(|| {
                    server_error(format!(
                        "the node's block {block} lacks withdrawal {index}: is it serving the indexed chain?"
                    ))
                })?;
                let field = |name: &str| {
                    hex_field(w, name)
                        .ok_or_else(|| server_error(format!("withdrawal {index} has no valid {name}")))
                };
                Ok(WithdrawalRow {
                    index: U64::from(index),
                    block_number: U64::from(block),
                    validator_index: U64::from(field("validatorIndex")?),
                    amount: U64::from(field("amount")?),
                })
            })
            .collect::<Result<Vec<_>, ErrorObjectOwned>>()?;
        Ok((summaries, rows))
    }
}

/// A vault's `totalAssets()` at the latest block as a JSON number of any size (ots2 writes a Go
/// big.Int); `None` when the call fails or does not return a uint256.
pub(super) async fn total_assets(node: &NodeClient, vault: Address) -> Option<Box<RawValue>> {
    let request = json!({ "to": vault, "data": Bytes::copy_from_slice(&selector("totalAssets()")) });
    let answer = node.raw::<_, Bytes>("eth_call", (request, "latest")).await.ok()?;
    RawValue::from_string(decode_uint256(&answer)?.to_string()).ok()
}

/// A block of ots2's blocks-rewarded list (`BlockSummary2`): the summary plus what its
/// transactions paid, `Σ gasUsed × effectiveGasPrice` over its receipts. Block and uncle rewards
/// and issuance are left out (none since the merge; see docs/api.md).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RewardSummary {
    /// Hex block number.
    pub block_number: U64,
    /// Unix seconds, as a JSON number.
    pub timestamp: u64,
    /// Fees paid in the block, hex wei.
    pub total_fees: U256,
}

/// One withdrawal of `getWithdrawalsList`, all fields hex; the amount is in Gwei.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WithdrawalRow {
    /// Global withdrawal index.
    pub index: U64,
    /// The block that holds it.
    pub block_number: U64,
    /// The validator.
    pub validator_index: U64,
    /// Gwei.
    pub amount: U64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_bounded_and_forgets_oldest_first() {
        let mut cache = SummaryCache::default();
        for n in 0..(SUMMARY_CACHE_ENTRIES as u64 + 10) {
            cache.insert(n, n * 12);
        }
        cache.insert(20, 240);
        assert_eq!(cache.entries.len(), SUMMARY_CACHE_ENTRIES);
        assert_eq!(cache.order.len(), SUMMARY_CACHE_ENTRIES);
        assert_eq!(cache.entries.get(&5), None);
        assert_eq!(cache.entries.get(&20), Some(&240));
    }
}
