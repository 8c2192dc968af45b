//! The node's `eth_` answers put into alloy's Otterscan types, so that our `ots_` answers have
//! the shapes Otterscan's other backends give (docs/api.md). Headers and transactions stay the
//! node's own JSON objects (the types' generic parameters), so fields a chain adds pass through.
//!
//! A receipt that alloy's `OtsTransactionReceipt` cannot hold — one from before Byzantium, which
//! has `root` in place of `status` — is passed on as the node gave it, with the same edits.

use alloy::rpc::types::{
    trace::otterscan::{BlockDetails, InternalIssuance, OtsBlock, OtsReceipt, OtsTransactionReceipt},
    Block, TransactionReceipt,
};
use alloy_primitives::U256;
use jsonrpsee::types::ErrorObjectOwned;
use serde_json::{json, Map, Value};

use crate::rpc::errors::server_error;

/// A node's header (or block without its transactions) as a JSON object.
pub(super) type NodeHeader = Map<String, Value>;
/// A node's block with its transactions as JSON objects.
pub(super) type NodeBlock = Block<Value, NodeHeader>;

/// The node's block answer as a [`NodeBlock`]; `None` for null (no such block).
pub(super) fn node_block(answer: Value) -> Result<Option<NodeBlock>, ErrorObjectOwned> {
    if answer.is_null() {
        return Ok(None);
    }
    serde_json::from_value(answer)
        .map(Some)
        .map_err(|e| server_error(format!("the node gave a malformed block: {e}")))
}

/// What a page does to each receipt beyond adding its block's timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReceiptLogs {
    /// Kept (address search pages).
    Kept,
    /// `logs` and `logsBloom` null (block transaction pages, as Erigon gives them).
    Dropped,
}

/// One receipt as alloy's Otterscan receipt with `timestamp`, and every field of the node's
/// that type has no place for (an OP Stack receipt's `l1Fee`, `depositNonce`, …) as the node
/// gave it.
fn typed_receipt(raw: &Value, timestamp: Option<u64>, logs: ReceiptLogs) -> Result<Value, serde_json::Error> {
    let mut normalized = raw.clone();
    if let Some(fields) = normalized.as_object_mut() {
        // Every transaction before Berlin is a legacy one, whose receipts some nodes give untyped.
        fields.entry("type").or_insert_with(|| json!("0x0"));
    }
    let mut receipt: TransactionReceipt<OtsReceipt> = serde_json::from_value(normalized)?;
    if logs == ReceiptLogs::Dropped {
        receipt.inner.logs = None;
        receipt.inner.logs_bloom = None;
    }
    let mut typed = serde_json::to_value(OtsTransactionReceipt { receipt, timestamp })?;
    if let (Some(typed), Some(raw)) = (typed.as_object_mut(), raw.as_object()) {
        for (key, value) in raw {
            if key != "blockTimestamp" && !typed.contains_key(key) {
                typed.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(typed)
}

/// The node's receipt with the same edits as [`typed_receipt`], for one that type cannot hold.
fn raw_receipt(mut raw: Value, timestamp: Option<u64>, logs: ReceiptLogs) -> Value {
    if let Some(fields) = raw.as_object_mut() {
        fields.remove("blockTimestamp");
        fields.insert("timestamp".into(), timestamp.map_or(Value::Null, |t| json!(format!("{t:#x}"))));
        if logs == ReceiptLogs::Dropped {
            fields.insert("logs".into(), Value::Null);
            fields.insert("logsBloom".into(), Value::Null);
        }
    }
    raw
}

/// A page's receipts: alloy's Otterscan receipts with the node's other fields, or (when one of
/// them does not fit that type) the node's own with the same edits.
pub(super) struct Receipts(Vec<Value>);

impl Receipts {
    /// `raw` (the node's receipts) with `timestamps` (one per receipt).
    pub(super) fn new(raw: Vec<Value>, timestamps: &[Option<u64>], logs: ReceiptLogs) -> Self {
        let typed: Result<Vec<_>, _> =
            raw.iter().zip(timestamps).map(|(r, &t)| typed_receipt(r, t, logs)).collect();
        match typed {
            Ok(typed) => Self(typed),
            Err(e) => {
                tracing::debug!(target: "ots_indexer::rpc", error = %e, "receipts passed on as the node gave them");
                Self(raw.into_iter().zip(timestamps).map(|(r, &t)| raw_receipt(r, t, logs)).collect())
            }
        }
    }
}

fn to_value(shape: &impl serde::Serialize) -> Result<Value, ErrorObjectOwned> {
    serde_json::to_value(shape).map_err(|e| server_error(format!("cannot write the answer: {e}")))
}

/// `ots_searchTransactions*`'s page: the shape of alloy's `TransactionsWithReceipts`.
pub(super) fn search_page(
    txs: Vec<Value>,
    receipts: Receipts,
    first_page: bool,
    last_page: bool,
) -> Result<Value, ErrorObjectOwned> {
    let mut page = Map::new();
    page.insert("txs".into(), Value::Array(txs));
    page.insert("receipts".into(), Value::Array(receipts.0));
    page.insert("firstPage".into(), Value::Bool(first_page));
    page.insert("lastPage".into(), Value::Bool(last_page));
    Ok(Value::Object(page))
}

/// `ots_getBlockTransactions`'s page: the shape of alloy's `OtsBlockTransactions`, whose block
/// lists the page's transactions with their input cut to the selector and counts all of the
/// block's.
pub(super) fn block_transactions_page(
    block: NodeBlock,
    transaction_count: usize,
    receipts: Receipts,
) -> Result<Value, ErrorObjectOwned> {
    let fullblock = OtsBlock { block, transaction_count };
    let mut page = Map::new();
    page.insert("fullblock".into(), to_value(&fullblock)?);
    page.insert("receipts".into(), Value::Array(receipts.0));
    Ok(Value::Object(page))
}

/// `ots_getBlockDetails`'s answer: alloy's `BlockDetails`.
pub(super) fn block_details(
    block: NodeBlock,
    issuance: InternalIssuance,
    total_fees: U256,
) -> Result<Value, ErrorObjectOwned> {
    to_value(&BlockDetails::new(block, issuance, total_fees))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt(status: Option<&str>) -> Value {
        let mut r = json!({
            "transactionHash": "0xd3cead022cbb5d6d18091f8b375e3a3896ec139e986144b9448290d55837275a",
            "transactionIndex": "0x0", "blockHash": "0xf05aa8b73b005314684595adcff8e6149917b3239b6316247ce5e88eba9fd3f5",
            "blockNumber": "0x5", "from": "0x793abeea78d94c14b884a56788f549836a35db65",
            "to": "0x06450dee7fd2fb8e39061434babcfc05599a6fb8", "contractAddress": null,
            "cumulativeGasUsed": "0x5208", "gasUsed": "0x5208", "effectiveGasPrice": "0x1",
            "logs": [], "logsBloom": format!("0x{}", "00".repeat(256)), "blockTimestamp": "0x10",
        });
        match status {
            Some(s) => r["status"] = json!(s),
            None => r["root"] = json!(format!("0x{}", "11".repeat(32))),
        }
        r
    }

    #[test]
    fn an_untyped_receipt_is_a_legacy_one_with_the_blocks_timestamp() {
        let Receipts(typed) = Receipts::new(vec![receipt(Some("0x1"))], &[Some(16)], ReceiptLogs::Dropped);
        let v = typed[0].clone();
        assert_eq!(v["type"], json!("0x0"));
        assert_eq!(v["timestamp"], json!("0x10"));
        assert_eq!(v["status"], json!("0x1"));
        assert_eq!((v["logs"].clone(), v["logsBloom"].clone()), (Value::Null, Value::Null));
        assert!(v.get("blockTimestamp").is_none());
    }

    #[test]
    fn a_receipt_from_before_byzantium_is_passed_on_with_the_same_edits() {
        let Receipts(raw) = Receipts::new(vec![receipt(None)], &[Some(16)], ReceiptLogs::Kept);
        assert_eq!(raw[0]["timestamp"], json!("0x10"));
        assert_eq!(raw[0]["root"], json!(format!("0x{}", "11".repeat(32))));
        assert_eq!(raw[0]["logs"], json!([]));
        assert!(raw[0].get("blockTimestamp").is_none());
    }

    #[test]
    fn an_op_stack_receipt_keeps_its_own_fields() {
        let mut r = receipt(Some("0x1"));
        r["type"] = json!("0x7E");
        r["depositNonce"] = json!("0x1");
        r["depositReceiptVersion"] = json!("0x1");
        r["l1Fee"] = json!("0x64");
        let Receipts(typed) = Receipts::new(vec![r], &[Some(16)], ReceiptLogs::Kept);
        let v = &typed[0];
        assert_eq!(v["depositNonce"], json!("0x1"));
        assert_eq!(v["depositReceiptVersion"], json!("0x1"));
        assert_eq!(v["l1Fee"], json!("0x64"));
        assert_eq!(v["timestamp"], json!("0x10"));
        assert!(v.get("blockTimestamp").is_none());
    }
}
