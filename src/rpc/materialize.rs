//! Fetching from the node what a result page shows but the index does not hold.

use std::collections::BTreeMap;

use alloy_primitives::{Address, Bytes, U64};
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
