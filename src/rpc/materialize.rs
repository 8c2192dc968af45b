//! Fetching from the node what a result page shows but the index does not hold.

use std::collections::BTreeMap;

use alloy_primitives::{Address, Bytes, U256, U64};
use futures::future::try_join_all;
use jsonrpsee::types::ErrorObjectOwned;
use ots_classifiers::{decode_uint256, selector};
use serde::Serialize;
use serde_json::{value::RawValue, Value};

use super::errors::{node_error, server_error};
use crate::{source::NodeClient, txid::TxId};

/// `{blockNumber, timestamp}` of a block shown in a page.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BlockSummary {
    /// Hex block number.
    pub block_number: U64,
    /// Unix seconds, as a JSON number.
    pub timestamp: u64,
}

fn hex(n: u64) -> String {
    format!("{n:#x}")
}

fn hex_field(v: &Value, field: &str) -> Option<u64> {
    let s = v.get(field)?.as_str()?;
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// Summaries of `blocks`, keyed by hex block number as ots2 does.
pub async fn block_summaries(
    node: &NodeClient,
    blocks: impl IntoIterator<Item = u64>,
) -> Result<BTreeMap<String, BlockSummary>, ErrorObjectOwned> {
    let mut distinct: Vec<u64> = blocks.into_iter().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let headers = try_join_all(distinct.iter().map(|&n| async move {
        let header: Option<Value> =
            node.raw("eth_getBlockByNumber", (hex(n), false)).await.map_err(|e| node_error(&e))?;
        let header = header.ok_or_else(|| server_error(format!("the node has no block {n}")))?;
        let timestamp = hex_field(&header, "timestamp")
            .ok_or_else(|| server_error(format!("the node's block {n} has no valid timestamp")))?;
        Ok::<_, ErrorObjectOwned>((hex(n), BlockSummary { block_number: U64::from(n), timestamp }))
    }))
    .await?;
    Ok(headers.into_iter().collect())
}

/// `{hash, transaction, receipt}` of one indexed transaction, as the node gives them.
#[derive(Debug, Clone, Serialize)]
pub struct TransactionWithReceipt {
    /// Transaction hash.
    pub hash: Value,
    /// `eth_getTransactionByBlockNumberAndIndex`.
    pub transaction: Value,
    /// `eth_getTransactionReceipt`.
    pub receipt: Value,
}

/// Transactions and receipts of `ids`, in order.
pub async fn transactions(
    node: &NodeClient,
    ids: &[TxId],
) -> Result<Vec<TransactionWithReceipt>, ErrorObjectOwned> {
    try_join_all(ids.iter().map(|&id| async move {
        let tx: Option<Value> = node
            .raw("eth_getTransactionByBlockNumberAndIndex", (hex(id.block()), hex(id.index())))
            .await
            .map_err(|e| node_error(&e))?;
        let tx = tx.ok_or_else(|| {
            server_error(format!(
                "the node has no transaction {} in block {}: is it serving the indexed chain?",
                id.index(),
                id.block()
            ))
        })?;
        let hash = tx.get("hash").cloned().unwrap_or(Value::Null);
        let receipt: Option<Value> =
            node.raw("eth_getTransactionReceipt", [hash.clone()]).await.map_err(|e| node_error(&e))?;
        let receipt = receipt.ok_or_else(|| server_error(format!("the node has no receipt for {hash}")))?;
        Ok(TransactionWithReceipt { hash, transaction: tx, receipt })
    }))
    .await
}

/// A vault's `totalAssets()` at the latest block as a JSON number of any size (ots2 writes a Go
/// big.Int); `None` when the call fails or does not return a uint256.
pub async fn total_assets(node: &NodeClient, vault: Address) -> Option<Box<RawValue>> {
    let request =
        serde_json::json!({ "to": vault, "data": Bytes::copy_from_slice(&selector("totalAssets()")) });
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

/// Reward summaries of `blocks`, keyed by hex block number.
pub async fn reward_summaries(
    node: &NodeClient,
    blocks: impl IntoIterator<Item = u64>,
) -> Result<BTreeMap<String, RewardSummary>, ErrorObjectOwned> {
    let summaries = block_summaries(node, blocks).await?;
    let with_fees = try_join_all(summaries.into_iter().map(|(key, summary)| async move {
        let n = summary.block_number.to::<u64>();
        let receipts: Option<Vec<Value>> =
            node.raw("eth_getBlockReceipts", [hex(n)]).await.map_err(|e| node_error(&e))?;
        let receipts =
            receipts.ok_or_else(|| server_error(format!("the node has no receipts of block {n}")))?;
        let mut total_fees = U256::ZERO;
        for r in &receipts {
            let field = |name: &str| {
                r.get(name)
                    .and_then(Value::as_str)
                    .and_then(|s| U256::from_str_radix(s.trim_start_matches("0x"), 16).ok())
                    .ok_or_else(|| server_error(format!("a receipt of block {n} has no valid {name}")))
            };
            total_fees += field("gasUsed")? * field("effectiveGasPrice")?;
        }
        let summary =
            RewardSummary { block_number: summary.block_number, timestamp: summary.timestamp, total_fees };
        Ok::<_, ErrorObjectOwned>((key, summary))
    }))
    .await?;
    Ok(with_fees.into_iter().collect())
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

/// The withdrawals `(index, block)`, in order, read from their blocks.
pub async fn withdrawal_rows(
    node: &NodeClient,
    wanted: &[(u64, u64)],
) -> Result<Vec<WithdrawalRow>, ErrorObjectOwned> {
    let mut blocks: Vec<u64> = wanted.iter().map(|&(_, b)| b).collect();
    blocks.sort_unstable();
    blocks.dedup();
    let bodies = try_join_all(blocks.iter().map(|&n| async move {
        let block: Option<Value> =
            node.raw("eth_getBlockByNumber", (hex(n), false)).await.map_err(|e| node_error(&e))?;
        let block = block.ok_or_else(|| server_error(format!("the node has no block {n}")))?;
        let list = block.get("withdrawals").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok::<_, ErrorObjectOwned>((n, list))
    }))
    .await?;
    wanted
        .iter()
        .map(|&(index, block)| {
            let list =
                bodies.iter().find(|(n, _)| *n == block).map(|(_, l)| l.as_slice()).unwrap_or_default();
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
        .collect()
}
